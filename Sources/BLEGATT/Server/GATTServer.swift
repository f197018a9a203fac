import BLEATT
import BLECore

/// Names one request the server handed to the app (a dynamic value to read or write), to be answered with
/// ``GATTServer/respond(to:result:value:attribute:)``.
public struct GATTServerRequestID: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }
    public var description: String { "#\(rawValue)" }
}

/// One write the app is asked to perform on a dynamic attribute: CoreBluetooth's `CBATTRequest` for a write.
public struct GATTWriteRequest: Sendable, Hashable {
    public var attribute: AttributeHandle
    /// Where `value` goes in the attribute's value (non-zero only for the parts of a long write).
    public var offset: Int
    public var value: [UInt8]
    public init(attribute: AttributeHandle, offset: Int, value: [UInt8]) {
        self.attribute = attribute
        self.offset = offset
        self.value = value
    }
}

/// The GATT server: answers the ATT requests of every connected client from a ``GATTDatabase``.
///
/// ### Overview
/// A pure state machine over all connections. The host hands it each request and command its bearers
/// deliver (``received(_:from:)``), and performs the returned ``Action``s: send a response on that
/// connection's bearer, ask the app for a dynamic value (answered later with ``respond(to:result:value:attribute:)``),
/// tell the app a client subscribed or wrote. It keeps per client the Client Characteristic Configuration
/// values, the prepare-write queue, the ATT_MTU and whether the link is encrypted.
///
/// ### Function
/// Reads check the attribute's permissions (Read Not Permitted, Insufficient Encryption), writes likewise
/// (Write Not Permitted, Insufficient Encryption, Invalid Attribute Value Length past 512 octets); a missing
/// handle is Invalid Handle; a search that finds nothing is Attribute Not Found naming the request's starting
/// handle. Write Commands that fail are dropped silently. A CCCD write that enables what the characteristic
/// cannot do is refused with 0xFD (CCCD Improperly Configured).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4 (Attribute Protocol PDUs) and 4 (Security considerations);
///   Vol 3, Part G, 4 (GATT feature requirements).
public struct GATTServer: Sendable {
    /// What the host must do, in order.
    public enum Action: Sendable, Hashable {
        /// Send this response (or Error Response) on the connection's bearer (`ATTBearer.sendResponse`).
        case respond(ConnectionHandle, ATTPDU)
        /// The app must supply a dynamic value, from `offset`. Answer with ``GATTServer/respond(to:result:value:attribute:)``.
        case readRequest(id: GATTServerRequestID, connection: ConnectionHandle, attribute: AttributeHandle, offset: Int)
        /// The app must write dynamic values. Answer with ``GATTServer/respond(to:result:value:attribute:)``, once for
        /// the whole list; `id` is `nil` for a Write Command, which is never answered.
        case writeRequests(id: GATTServerRequestID?, connection: ConnectionHandle, [GATTWriteRequest])
        /// A client changed its Client Characteristic Configuration for the characteristic whose value has
        /// this handle (empty configuration: unsubscribed).
        case subscriptionChanged(ConnectionHandle, characteristicValue: AttributeHandle, GATTClientConfiguration)
        /// A client wrote a stored (non-dynamic) value; the database already holds it.
        case valueWritten(ConnectionHandle, attribute: AttributeHandle, value: [UInt8])
        /// A Write Command was refused for this reason. ATT never answers a command, so the client does not
        /// learn it: the host should say so (log it) rather than drop it in silence.
        case writeCommandRefused(ConnectionHandle, attribute: AttributeHandle, ATTErrorCode)
    }

    struct Client: Sendable {
        var mtu: UInt16 = ATTBearer.defaultMTU
        var isEncrypted = false
        /// Whether this server's device holds a Long Term Key for the client (a bond): a value that needs
        /// encryption is then refused with Insufficient Encryption, else with Insufficient Authentication.
        var isBonded = false
        var configurations: [AttributeHandle: GATTClientConfiguration] = [:]
        var prepareQueue: [GATTWriteRequest] = []
        /// The Client Supported Features it wrote (the known bits only; empty until it writes).
        var supportedFeatures: [UInt8] = []
        /// Change-aware (Vol 3, Part G, 2.5.2.1): a client without a bond starts aware, and stops being aware
        /// when the database changes.
        var isChangeAware = true
        /// Database Out Of Sync was sent to it since it became unaware.
        var outOfSyncSent = false
        /// It read the Database Hash since it became unaware.
        var readHashWhileUnaware = false
    }

    /// A request waiting for the app.
    private enum Pending: Sendable {
        case read(opcode: ATTOpcode, handle: AttributeHandle)
        case readByType(handle: AttributeHandle)
        case readMultiple(variable: Bool, handles: [AttributeHandle], values: [[UInt8]])
        case write(handle: AttributeHandle)
        /// The parts for stored values, written once the app accepts its own, and the attributes of the app's
        /// parts (in queue order), one of which an Error Response names.
        case executeWrite(stored: [QueuedParts], dynamic: [AttributeHandle])
    }

    public var database: GATTDatabase
    /// How many Prepare Write Requests one client may queue before Prepare Queue Full.
    public let maximumPrepareQueueLength: Int
    var clients: [ConnectionHandle: Client] = [:]
    /// Counts the database's changes (``GATTServer/databaseChanged()``): a Service Changed indication carries the
    /// version it was sent at.
    public internal(set) var databaseVersion: UInt64 = 0
    private var pending: [GATTServerRequestID: (ConnectionHandle, Pending)] = [:]
    private var nextRequestID: UInt64 = 1

    public init(database: GATTDatabase = GATTDatabase(), maximumPrepareQueueLength: Int = 64) {
        self.database = database
        self.maximumPrepareQueueLength = maximumPrepareQueueLength
    }

    // MARK: - Connections

    /// A client connected (a request from an unknown connection also starts its state, at ATT_MTU 23).
    public mutating func connected(_ connection: ConnectionHandle) {
        clients[connection] = Client()
    }

    /// A client's link is gone: its configurations, queue and pending app requests are dropped.
    public mutating func disconnected(_ connection: ConnectionHandle) {
        clients[connection] = nil
        pending = pending.filter { $0.value.0 != connection }
    }

    /// The connection's bearer reported a new ATT_MTU.
    /// An ATT_MTU below 23 is taken as 23, the least ATT allows (the responses' lengths count on it).
    public mutating func mtuChanged(_ connection: ConnectionHandle, to mtu: UInt16) {
        clients[connection, default: Client()].mtu = max(23, mtu)
    }

    /// The link's encryption changed.
    public mutating func encryptionChanged(_ connection: ConnectionHandle, isEncrypted: Bool) {
        clients[connection, default: Client()].isEncrypted = isEncrypted
    }

    /// Whether the device holds a bond (a Long Term Key) with the client on this connection.
    public mutating func bondChanged(_ connection: ConnectionHandle, isBonded: Bool) {
        clients[connection, default: Client()].isBonded = isBonded
    }

    /// Why a value that needs encryption is refused on a link that is not encrypted (Core Spec 5.4, Vol 3,
    /// Part C, 10.3.1, Table 10.2): with a key for the client, Insufficient Encryption (it only has to encrypt);
    /// without one, Insufficient Authentication (it has to pair first).
    private func encryptionRefusal(_ connection: ConnectionHandle) -> ATTErrorCode? {
        guard !(clients[connection]?.isEncrypted ?? false) else { return nil }
        return clients[connection]?.isBonded == true ? .insufficientEncryption : .insufficientAuthentication
    }

    /// The ATT_MTU in force on a connection.
    public func mtu(of connection: ConnectionHandle) -> UInt16 {
        clients[connection]?.mtu ?? ATTBearer.defaultMTU
    }

    /// A client's configuration for the characteristic whose value has this handle.
    public func configuration(of connection: ConnectionHandle, characteristicValue: AttributeHandle)
        -> GATTClientConfiguration
    {
        clients[connection]?.configurations[characteristicValue] ?? []
    }

    /// Every client with a non-empty configuration for this characteristic value, in connection order.
    public func subscribers(of characteristicValue: AttributeHandle) -> [(ConnectionHandle, GATTClientConfiguration)] {
        var subscribers: [(ConnectionHandle, GATTClientConfiguration)] = []
        subscribers.reserveCapacity(clients.count)
        for (connection, client) in clients {
            if let configuration = client.configurations[characteristicValue], !configuration.isEmpty {
                subscribers.append((connection, configuration))
            }
        }
        if subscribers.count > 1 { subscribers.sort { $0.0 < $1.0 } }
        return subscribers
    }

    // MARK: - Server-initiated updates

    /// The notification to send this client, when it enabled notifications for the characteristic; the
    /// value is cut to ATT_MTU-3. Send it with `ATTBearer.sendUnacknowledged`.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.10 (Characteristic Value Notification).
    public func notification(
        characteristicValue: AttributeHandle, value: [UInt8],
        to connection: ConnectionHandle
    ) -> ATTPDU.HandleValueNotification? {
        // One look-up of the client for both its configuration and its MTU (each one hashes the handle).
        guard let client = clients[connection],
            client.configurations[characteristicValue]?.contains(.notification) == true
        else { return nil }
        return .init(handle: characteristicValue, value: Self.cut(value, toMTU: client.mtu))
    }

    /// A value cut to ATT_MTU-3, copied only when it is longer.
    private static func cut(_ value: [UInt8], toMTU mtu: UInt16) -> [UInt8] {
        let limit = Int(mtu) - 3
        return value.count <= limit ? value : Array(value.prefix(limit))
    }

    /// The indication to send this client, when it enabled indications for the characteristic; the value is
    /// cut to ATT_MTU-3. Send it with `ATTBearer.sendIndication` (one outstanding per bearer).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.11 (Characteristic Value Indications).
    public func indication(
        characteristicValue: AttributeHandle, value: [UInt8],
        to connection: ConnectionHandle
    ) -> ATTPDU.HandleValueIndication? {
        guard configuration(of: connection, characteristicValue: characteristicValue).contains(.indication) else {
            return nil
        }
        return .init(handle: characteristicValue, value: Self.cut(value, toMTU: mtu(of: connection)))
    }

    /// The Service Changed indication for a handle range, for a client that enabled it.
    public func serviceChangedIndication(
        range: ClosedRange<AttributeHandle>,
        to connection: ConnectionHandle
    ) -> ATTPDU.HandleValueIndication? {
        let start = range.lowerBound.rawValue
        let end = range.upperBound.rawValue
        return indication(
            characteristicValue: database.serviceChangedHandle,
            value: [UInt8(start & 0xFF), UInt8(start >> 8), UInt8(end & 0xFF), UInt8(end >> 8)],
            to: connection)
    }

    // MARK: - Requests

    /// A request or command from a client, as the bearer handed it up.
    public mutating func received(_ pdu: ATTPDU, from connection: ConnectionHandle) -> [Action] {
        if clients[connection] == nil { clients[connection] = Client() }
        if let refused = checkChangeAwareness(pdu, connection) { return refused }
        switch pdu {
        case .readRequest(let request): return read(request.handle, offset: nil, connection)
        case .readBlobRequest(let request): return read(request.handle, offset: Int(request.offset), connection)
        case .readByTypeRequest(let request): return readByType(request, connection)
        case .readByGroupTypeRequest(let request): return readByGroupType(request, connection)
        case .findInformationRequest(let request): return findInformation(request, connection)
        case .findByTypeValueRequest(let request): return findByTypeValue(request, connection)
        case .readMultipleRequest(let request):
            return readMultiple(request.setOfHandles, variable: false, connection)
        case .readMultipleVariableRequest(let request):
            return readMultiple(request.setOfHandles, variable: true, connection)
        case .writeRequest(let request): return write(request.handle, request.value, connection, command: false)
        case .writeCommand(let command): return write(command.handle, command.value, connection, command: true)
        case .prepareWriteRequest(let request): return prepareWrite(request, connection)
        case .executeWriteRequest(let request): return executeWrite(request, connection)
        case .signedWriteCommand(let command):
            // Signatures are not verified by this stack, so a signed write is refused (and never answered).
            return [.writeCommandRefused(connection, attribute: command.handle, .requestNotSupported)]
        default:
            if pdu.opcode.kind == .request {
                return [error(pdu.opcode, AttributeHandle(0), .requestNotSupported, connection)]
            }
            return []
        }
    }

    /// The app's answer to a ``Action/readRequest(id:connection:attribute:offset:)`` (`value`: the value from
    /// the requested offset) or a ``Action/writeRequests(id:connection:_:)`` (`value` unused). A `result`
    /// other than `.success` becomes an Error Response. An unknown or already answered id does nothing.
    ///
    /// A queued write the app refuses is answered with the handle of the attribute that caused it (Vol 3, Part F,
    /// 3.4.6.3): `attribute`, when it is one of the queue's, else the first the app was asked to write.
    public mutating func respond(
        to id: GATTServerRequestID, result: ATTErrorCode, value: [UInt8]? = nil, attribute: AttributeHandle? = nil
    ) -> [Action] {
        guard let (connection, request) = pending.removeValue(forKey: id), clients[connection] != nil else { return [] }
        let mtu = Int(self.mtu(of: connection))
        switch request {
        case .read(let opcode, let handle):
            guard result == .success else { return [error(opcode, handle, result, connection)] }
            let part = Array((value ?? []).prefix(mtu - 1))
            let response: ATTPDU =
                opcode == .readRequest
                ? .readResponse(.init(value: part)) : .readBlobResponse(.init(partAttributeValue: part))
            return [.respond(connection, response)]

        case .readByType(let handle):
            guard result == .success else { return [error(.readByTypeRequest, handle, result, connection)] }
            let part = Array((value ?? []).prefix(min(mtu - 4, 253)))
            return [
                .respond(connection, .readByTypeResponse(.init(attributeData: [.init(handle: handle, value: part)])))
            ]

        case .readMultiple(let variable, let handles, var values):
            let opcode: ATTOpcode = variable ? .readMultipleVariableRequest : .readMultipleRequest
            // handles[values.count] exists: a pending Read Multiple is made only while values.count < handles.count.
            guard result == .success else { return [error(opcode, handles[values.count], result, connection)] }
            // An attribute value is at most 512 octets (Vol 3, Part F, 3.2.9); an app's longer answer is cut there.
            values.append(Array((value ?? []).prefix(GATTDatabase.maximumValueLength)))
            return continueReadMultiple(variable: variable, handles: handles, values: values, connection)

        case .write(let handle):
            guard result == .success else { return [error(.writeRequest, handle, result, connection)] }
            return [.respond(connection, .writeResponse(.init()))]

        case .executeWrite(let stored, let dynamic):
            guard result == .success else {
                let culprit =
                    attribute.flatMap { dynamic.contains($0) ? $0 : nil } ?? dynamic.first ?? AttributeHandle(0)
                return [error(.executeWriteRequest, culprit, result, connection)]
            }
            return executeStored(stored, connection)
        }
    }

    // MARK: - Private: reads

    private enum Readable {
        case stored([UInt8])
        case dynamic

        var storedValue: [UInt8] {
            if case .stored(let value) = self { return value }
            return []
        }
    }

    /// A characteristic value is read only when the characteristic has the Read property, whatever its
    /// permissions (Core Spec 5.4, Vol 3, Part G, 3.3.1.1): the same rule a client applies before asking.
    private func checkRead(_ attribute: GATTAttribute, _ connection: ConnectionHandle) -> ATTErrorCode? {
        if case .characteristicValue(let properties) = attribute.role, !properties.contains(.read) {
            return .readNotPermitted
        }
        guard attribute.permissions.allowsRead else { return .readNotPermitted }
        if attribute.permissions.contains(.readEncryptionRequired), let refusal = encryptionRefusal(connection) {
            return refusal
        }
        return nil
    }

    /// A characteristic value takes a Write Request (or Prepare Write) only with the Write property, and a Write
    /// Command only with Write Without Response (Core Spec 5.4, Vol 3, Part G, 3.3.1.1).
    private func checkWrite(_ attribute: GATTAttribute, _ connection: ConnectionHandle, command: Bool = false)
        -> ATTErrorCode?
    {
        if case .characteristicValue(let properties) = attribute.role,
            !properties.contains(command ? .writeWithoutResponse : .write)
        {
            return .writeNotPermitted
        }
        guard !attribute.isDeclaration, attribute.permissions.allowsWrite else { return .writeNotPermitted }
        if attribute.permissions.contains(.writeEncryptionRequired), let refusal = encryptionRefusal(connection) {
            return refusal
        }
        return nil
    }

    private func readable(_ attribute: GATTAttribute, _ connection: ConnectionHandle) -> Readable {
        if case .clientConfiguration(let valueHandle, _) = attribute.role {
            return .stored(configuration(of: connection, characteristicValue: valueHandle).bytes)
        }
        if attribute.handle == database.databaseHashHandle { return .stored(database.databaseHash) }
        if attribute.handle == database.clientSupportedFeaturesHandle {
            return .stored(clientSupportedFeatures(of: connection))
        }
        guard let value = attribute.value else { return .dynamic }
        return .stored(value)
    }

    private mutating func ask(_ request: Pending, _ connection: ConnectionHandle) -> GATTServerRequestID {
        let id = GATTServerRequestID(rawValue: nextRequestID)
        nextRequestID += 1
        pending[id] = (connection, request)
        return id
    }

    private func error(
        _ opcode: ATTOpcode, _ handle: AttributeHandle, _ code: ATTErrorCode,
        _ connection: ConnectionHandle
    ) -> Action {
        .respond(connection, .errorResponse(.init(requestOpcode: opcode, handle: handle, errorCode: code)))
    }

    /// Read (offset `nil`) or Read Blob.
    private mutating func read(_ handle: AttributeHandle, offset: Int?, _ connection: ConnectionHandle) -> [Action] {
        let opcode: ATTOpcode = offset == nil ? .readRequest : .readBlobRequest
        guard let attribute = database.attribute(at: handle) else {
            return [error(opcode, handle, .invalidHandle, connection)]
        }
        if let code = checkRead(attribute, connection) { return [error(opcode, handle, code, connection)] }
        let mtu = Int(self.mtu(of: connection))
        switch readable(attribute, connection) {
        case .dynamic:
            let id = ask(.read(opcode: opcode, handle: handle), connection)
            return [.readRequest(id: id, connection: connection, attribute: handle, offset: offset ?? 0)]
        case .stored(let value):
            guard let offset else {
                return [.respond(connection, .readResponse(.init(value: Array(value.prefix(mtu - 1)))))]
            }
            guard offset <= value.count else { return [error(opcode, handle, .invalidOffset, connection)] }
            let part = Array(value[offset...].prefix(mtu - 1))
            return [.respond(connection, .readBlobResponse(.init(partAttributeValue: part)))]
        }
    }

    /// Checks a request's handle range: Invalid Handle (naming the starting handle) when it is empty or starts
    /// at 0x0000.
    private func checkRange(_ start: AttributeHandle, _ end: AttributeHandle) -> Bool {
        start.rawValue != 0 && start <= end
    }

    private mutating func readByType(_ request: ATTPDU.ReadByTypeRequest, _ connection: ConnectionHandle) -> [Action] {
        let opcode = ATTOpcode.readByTypeRequest
        guard checkRange(request.startingHandle, request.endingHandle) else {
            return [error(opcode, request.startingHandle, .invalidHandle, connection)]
        }
        let matches = database.attributes(in: request.startingHandle...request.endingHandle)
            .filter { $0.type == request.attributeType }
        guard let first = matches.first else {
            return [error(opcode, request.startingHandle, .attributeNotFound, connection)]
        }
        if let code = checkRead(first, connection) { return [error(opcode, first.handle, code, connection)] }
        let mtu = Int(self.mtu(of: connection))
        let maximumValue = min(mtu - 4, 253)
        var entries: [ATTPDU.ReadByTypeResponse.AttributeData] = []
        var valueLength: Int?
        for attribute in matches {
            guard checkRead(attribute, connection) == nil else { break }
            guard case .stored(let full) = readable(attribute, connection) else {
                if entries.isEmpty {
                    let id = ask(.readByType(handle: attribute.handle), connection)
                    return [.readRequest(id: id, connection: connection, attribute: attribute.handle, offset: 0)]
                }
                break
            }
            let value = Array(full.prefix(maximumValue))
            if let valueLength, valueLength != value.count { break }
            if 2 + (entries.count + 1) * (2 + value.count) > mtu { break }
            valueLength = value.count
            entries.append(.init(handle: attribute.handle, value: value))
        }
        return [.respond(connection, .readByTypeResponse(.init(attributeData: entries)))]
    }

    private mutating func readByGroupType(
        _ request: ATTPDU.ReadByGroupTypeRequest,
        _ connection: ConnectionHandle
    ) -> [Action] {
        let opcode = ATTOpcode.readByGroupTypeRequest
        guard checkRange(request.startingHandle, request.endingHandle) else {
            return [error(opcode, request.startingHandle, .invalidHandle, connection)]
        }
        guard request.attributeGroupType == .primaryService || request.attributeGroupType == .secondaryService else {
            return [error(opcode, request.startingHandle, .unsupportedGroupType, connection)]
        }
        let isPrimary = request.attributeGroupType == .primaryService
        let groups = database.services.filter {
            $0.isPrimary == isPrimary
                && (request.startingHandle...request.endingHandle).contains($0.handleRange.lowerBound)
        }
        guard !groups.isEmpty else {
            return [error(opcode, request.startingHandle, .attributeNotFound, connection)]
        }
        let mtu = Int(self.mtu(of: connection))
        var entries: [ATTPDU.ReadByGroupTypeResponse.AttributeData] = []
        for group in groups {
            let value = Array(group.uuid.attWireBytes.prefix(min(mtu - 6, 251)))
            if let first = entries.first, first.value.count != value.count { break }
            if 2 + (entries.count + 1) * (4 + value.count) > mtu { break }
            entries.append(
                .init(
                    handle: group.handleRange.lowerBound, endGroupHandle: group.handleRange.upperBound,
                    value: value))
        }
        return [.respond(connection, .readByGroupTypeResponse(.init(attributeData: entries)))]
    }

    private func findInformation(_ request: ATTPDU.FindInformationRequest, _ connection: ConnectionHandle) -> [Action] {
        let opcode = ATTOpcode.findInformationRequest
        guard checkRange(request.startingHandle, request.endingHandle) else {
            return [error(opcode, request.startingHandle, .invalidHandle, connection)]
        }
        let found = database.attributes(in: request.startingHandle...request.endingHandle)
        guard let first = found.first else {
            return [error(opcode, request.startingHandle, .attributeNotFound, connection)]
        }
        let isShort = first.type.uint16 != nil
        let entryLength = isShort ? 4 : 18
        let mtu = Int(self.mtu(of: connection))
        var information: [ATTPDU.FindInformationResponse.Information] = []
        for attribute in found {
            guard (attribute.type.uint16 != nil) == isShort, 2 + (information.count + 1) * entryLength <= mtu else {
                break
            }
            information.append(.init(handle: attribute.handle, type: attribute.type))
        }
        return [
            .respond(
                connection,
                .findInformationResponse(
                    .init(
                        format: isShort ? .uuid16 : .uuid128,
                        information: information)))
        ]
    }

    private func findByTypeValue(_ request: ATTPDU.FindByTypeValueRequest, _ connection: ConnectionHandle) -> [Action] {
        let opcode = ATTOpcode.findByTypeValueRequest
        guard checkRange(request.startingHandle, request.endingHandle) else {
            return [error(opcode, request.startingHandle, .invalidHandle, connection)]
        }
        let type = BluetoothUUID(request.attributeType)
        let isServiceType = type == .primaryService || type == .secondaryService
        let wantedUUID = BluetoothUUID(littleEndian: request.attributeValue)
        let mtu = Int(self.mtu(of: connection))
        var entries: [ATTPDU.FindByTypeValueResponse.HandlesInformation] = []
        for attribute in database.attributes(in: request.startingHandle...request.endingHandle)
        where attribute.type == type {
            guard checkRead(attribute, connection) == nil, case .stored(let value) = readable(attribute, connection)
            else {
                continue
            }
            let matches =
                isServiceType && wantedUUID != nil
                ? BluetoothUUID(littleEndian: value) == wantedUUID : value == request.attributeValue
            guard matches else { continue }
            guard 1 + (entries.count + 1) * 4 <= mtu else { break }
            let end =
                isServiceType
                ? (database.service(containing: attribute.handle)?.handleRange.upperBound ?? attribute.handle)
                : attribute.handle
            entries.append(.init(foundAttributeHandle: attribute.handle, groupEndHandle: end))
        }
        guard !entries.isEmpty else {
            return [error(opcode, request.startingHandle, .attributeNotFound, connection)]
        }
        return [.respond(connection, .findByTypeValueResponse(.init(handlesInformation: entries)))]
    }

    private mutating func readMultiple(
        _ handles: [AttributeHandle], variable: Bool,
        _ connection: ConnectionHandle
    ) -> [Action] {
        let opcode: ATTOpcode = variable ? .readMultipleVariableRequest : .readMultipleRequest
        for handle in handles {
            guard let attribute = database.attribute(at: handle) else {
                return [error(opcode, handle, .invalidHandle, connection)]
            }
            if let code = checkRead(attribute, connection) { return [error(opcode, handle, code, connection)] }
        }
        return continueReadMultiple(variable: variable, handles: handles, values: [], connection)
    }

    private mutating func continueReadMultiple(
        variable: Bool, handles: [AttributeHandle], values: [[UInt8]],
        _ connection: ConnectionHandle
    ) -> [Action] {
        var values = values
        while values.count < handles.count {
            let handle = handles[values.count]
            guard let attribute = database.attribute(at: handle) else {
                return [
                    error(
                        variable ? .readMultipleVariableRequest : .readMultipleRequest, handle, .invalidHandle,
                        connection)
                ]
            }
            switch readable(attribute, connection) {
            case .stored(let value): values.append(value)
            case .dynamic:
                let id = ask(.readMultiple(variable: variable, handles: handles, values: values), connection)
                return [.readRequest(id: id, connection: connection, attribute: handle, offset: 0)]
            }
        }
        let room = Int(mtu(of: connection)) - 1
        if !variable {
            return [
                .respond(connection, .readMultipleResponse(.init(setOfValues: Array(values.joined().prefix(room)))))
            ]
        }
        var tuples: [ATTPDU.ReadMultipleVariableResponse.LengthValue] = []
        var used = 0
        for value in values {
            guard room - used >= 2 else { break }
            let part = Array(value.prefix(room - used - 2))
            tuples.append(.init(valueLength: UInt16(clamping: value.count), value: part))
            used += 2 + part.count
        }
        return [.respond(connection, .readMultipleVariableResponse(.init(lengthValueTupleList: tuples)))]
    }

    // MARK: - Private: writes

    /// Stores a value (stored attribute or CCCD) and reports it; the caller has checked permissions.
    private mutating func storeWrite(_ handle: AttributeHandle, _ value: [UInt8], _ connection: ConnectionHandle)
        -> [Action]
    {
        guard let attribute = database.attribute(at: handle) else { return [] }
        if handle == database.clientSupportedFeaturesHandle {
            setClientSupportedFeatures(value, of: connection)
            return []
        }
        if case .clientConfiguration(let valueHandle, _) = attribute.role {
            let configuration = GATTClientConfiguration(bytes: value) ?? []
            let old = clients[connection]?.configurations[valueHandle] ?? []
            clients[connection, default: Client()].configurations[valueHandle] =
                configuration.isEmpty ? nil : configuration
            return old == configuration
                ? [] : [.subscriptionChanged(connection, characteristicValue: valueHandle, configuration)]
        }
        database.setValue(value, at: handle)
        return [.valueWritten(connection, attribute: handle, value: value)]
    }

    /// Checks a whole new value for an attribute: length, and for a CCCD its bits.
    private func checkValue(_ attribute: GATTAttribute, _ value: [UInt8], _ connection: ConnectionHandle)
        -> ATTErrorCode?
    {
        guard value.count <= GATTDatabase.maximumValueLength else { return .invalidAttributeValueLength }
        if attribute.handle == database.clientSupportedFeaturesHandle {
            return checkClientSupportedFeatures(value, of: connection)
        }
        if case .clientConfiguration(_, let properties) = attribute.role {
            guard let configuration = GATTClientConfiguration(bytes: value) else { return .invalidAttributeValueLength }
            if configuration.contains(.notification) && !properties.contains(.notify) {
                return .cccdImproperlyConfigured
            }
            if configuration.contains(.indication) && !properties.contains(.indicate) {
                return .cccdImproperlyConfigured
            }
            if !configuration.isSubset(of: [.notification, .indication]) { return .cccdImproperlyConfigured }
        }
        return nil
    }

    private func isDynamic(_ attribute: GATTAttribute) -> Bool {
        if case .clientConfiguration = attribute.role { return false }
        return attribute.value == nil
    }

    private mutating func write(
        _ handle: AttributeHandle, _ value: [UInt8], _ connection: ConnectionHandle,
        command: Bool
    ) -> [Action] {
        let opcode = ATTOpcode.writeRequest
        guard let attribute = database.attribute(at: handle) else {
            return command
                ? [.writeCommandRefused(connection, attribute: handle, .invalidHandle)]
                : [error(opcode, handle, .invalidHandle, connection)]
        }
        if let code = checkWrite(attribute, connection, command: command) ?? checkValue(attribute, value, connection) {
            return command
                ? [.writeCommandRefused(connection, attribute: handle, code)]
                : [error(opcode, handle, code, connection)]
        }
        if isDynamic(attribute) {
            let writes = [GATTWriteRequest(attribute: handle, offset: 0, value: value)]
            if command { return [.writeRequests(id: nil, connection: connection, writes)] }
            let id = ask(.write(handle: handle), connection)
            return [.writeRequests(id: id, connection: connection, writes)]
        }
        let actions = storeWrite(handle, value, connection)
        return command ? actions : actions + [.respond(connection, .writeResponse(.init()))]
    }

    private mutating func prepareWrite(_ request: ATTPDU.PrepareWriteRequest, _ connection: ConnectionHandle)
        -> [Action]
    {
        let opcode = ATTOpcode.prepareWriteRequest
        guard let attribute = database.attribute(at: request.handle) else {
            return [error(opcode, request.handle, .invalidHandle, connection)]
        }
        if let code = checkWrite(attribute, connection) { return [error(opcode, request.handle, code, connection)] }
        guard clients[connection, default: Client()].prepareQueue.count < maximumPrepareQueueLength else {
            return [error(opcode, request.handle, .prepareQueueFull, connection)]
        }
        clients[connection, default: Client()].prepareQueue.append(
            GATTWriteRequest(attribute: request.handle, offset: Int(request.offset), value: request.partAttributeValue))
        return [
            .respond(
                connection,
                .prepareWriteResponse(
                    .init(
                        handle: request.handle, offset: request.offset,
                        partAttributeValue: request.partAttributeValue)))
        ]
    }

    private mutating func executeWrite(_ request: ATTPDU.ExecuteWriteRequest, _ connection: ConnectionHandle)
        -> [Action]
    {
        let opcode = ATTOpcode.executeWriteRequest
        let queue = clients[connection, default: Client()].prepareQueue
        clients[connection, default: Client()].prepareQueue = []
        switch request.flags {
        case .cancel: return [.respond(connection, .executeWriteResponse(.init()))]
        case .write: break
        default: return [error(opcode, AttributeHandle(0), .invalidPDU, connection)]
        }
        // Each stored attribute's new value: its parts, in the order they were queued, over its current value.
        var stored: [QueuedParts] = []
        var dynamicWrites: [GATTWriteRequest] = []
        for part in queue {
            guard let attribute = database.attribute(at: part.attribute) else {
                return [error(opcode, part.attribute, .invalidHandle, connection)]
            }
            if isDynamic(attribute) {
                // Vol 3, Part F, 3.4.6.3: a prepared value longer than the attribute can hold fails the whole
                // queue with Invalid Attribute Value Length. Its current value, and so whether an offset lies past
                // its end, is the application's to know.
                guard part.offset + part.value.count <= GATTDatabase.maximumValueLength else {
                    return [error(opcode, part.attribute, .invalidAttributeValueLength, connection)]
                }
                dynamicWrites.append(part)
                continue
            }
            if let index = stored.firstIndex(where: { $0.attribute == part.attribute }) {
                stored[index].parts.append((part.offset, part.value))
            } else {
                stored.append(QueuedParts(attribute: part.attribute, parts: [(part.offset, part.value)]))
            }
        }
        guard !dynamicWrites.isEmpty else { return executeStored(stored, connection) }
        // Checked now; put together again when the app answers, over the values then: another client's write
        // meanwhile is not lost.
        if case .failure(let refusal) = assemble(stored, connection) {
            return [error(opcode, refusal.handle, refusal.code, connection)]
        }
        let id = ask(.executeWrite(stored: stored, dynamic: dynamicWrites.map(\.attribute)), connection)
        return [.writeRequests(id: id, connection: connection, dynamicWrites)]
    }

    /// Writes the stored attributes' new values and answers the Execute Write, or answers with the refusal.
    private mutating func executeStored(_ stored: [QueuedParts], _ connection: ConnectionHandle) -> [Action] {
        switch assemble(stored, connection) {
        case .failure(let refusal):
            return [error(.executeWriteRequest, refusal.handle, refusal.code, connection)]
        case .success(let writes):
            var actions: [Action] = []
            for (handle, value) in writes { actions += storeWrite(handle, value, connection) }
            return actions + [.respond(connection, .executeWriteResponse(.init()))]
        }
    }

    /// One stored attribute's parts of a queued write, in queue order.
    struct QueuedParts: Sendable {
        var attribute: AttributeHandle
        var parts: [(offset: Int, value: [UInt8])]
    }

    /// The new values the parts make of the attributes' current values, each checked as a written value is; or
    /// the attribute that refuses and why.
    private func assemble(_ stored: [QueuedParts], _ connection: ConnectionHandle)
        -> Result<[(AttributeHandle, [UInt8])], QueuedRefusal>
    {
        var writes: [(AttributeHandle, [UInt8])] = []
        for queued in stored {
            guard let attribute = database.attribute(at: queued.attribute) else {
                return .failure(QueuedRefusal(handle: queued.attribute, code: .invalidHandle))
            }
            switch GATTQueuedWrites.value(applying: queued.parts, to: readable(attribute, connection).storedValue) {
            case .success(let value):
                if let code = checkValue(attribute, value, connection) {
                    return .failure(QueuedRefusal(handle: queued.attribute, code: code))
                }
                writes.append((queued.attribute, value))
            case .failure(let refusal):
                return .failure(QueuedRefusal(handle: queued.attribute, code: refusal.code))
            }
        }
        return .success(writes)
    }

    private struct QueuedRefusal: Error {
        var handle: AttributeHandle
        var code: ATTErrorCode
    }

}
