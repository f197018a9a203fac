import BLEATT
import BLECore

// Robust caching, the server's half (Core Spec 5.4, Vol 3, Part G, 2.5.2.1, 7.2 and 7.3): the Client Supported
// Features each client wrote, and whether each client is change-aware.
//
// A client without a bond starts change-aware (bonds come with SMP; a bonded client's state will then outlive
// its link). A change to the database makes every connected client change-unaware. A client that enabled
// robust caching (bit 0 of its Client Supported Features) and is change-unaware then:
// - has its ATT commands ignored (the host logs them, as any refused Write Command);
// - gets one Error Response with Database Out Of Sync (0x12) for the first request that depends on the
//   database's handles (Read, Read Blob, Read Multiple, Read By Type, Write, Prepare Write, Execute Write); the
//   discovery requests (Find Information, Find By Type Value, Read By Group Type) and the read of the Database
//   Hash (Read By Type of 0x2B2A, over any range) are answered as usual (as Zephyr does);
// - becomes change-aware with its next request after that error, with its next request after reading the
//   Database Hash, or when it confirms a Service Changed indication sent since the last change (one sent before
//   a later change does not tell it about that change).
// A client that did not enable robust caching is never refused: it learns of changes through Service Changed.

extension GATTServer {
    /// The Client Supported Features bits this server knows (Vol 3, Part G, 7.2): robust caching, Enhanced ATT
    /// bearer, multiple handle value notifications. Other bits a client writes are not kept.
    public static let knownClientFeatures: UInt8 = 0x07

    /// Adds a service to the database; every connected client becomes change-unaware. Throws as
    /// ``GATTDatabase/add(_:)`` does (the database and the clients are left as they were).
    @discardableResult
    public mutating func addService(_ definition: GATTServiceDefinition) throws(GATTError) -> GATTServiceLayout {
        let layout = try database.add(definition)
        databaseChanged()
        return layout
    }

    /// Removes the service declared at `handle`; every connected client becomes change-unaware. Returns the
    /// removed service (nil, changing nothing, when there is none or it is the GAP or GATT service).
    @discardableResult
    public mutating func removeService(at handle: AttributeHandle) -> GATTService? {
        guard let removed = database.removeService(at: handle) else { return nil }
        databaseChanged()
        return removed
    }

    /// The database changed under the connected clients (a service came or went): each is change-unaware.
    public mutating func databaseChanged() {
        databaseVersion &+= 1
        for connection in clients.keys {
            clients[connection]?.isChangeAware = false
            clients[connection]?.outOfSyncSent = false
            clients[connection]?.readHashWhileUnaware = false
        }
    }

    /// The client on `connection` confirmed a Service Changed indication sent when the database was at `version`
    /// (``databaseVersion``): it is change-aware, unless the database changed again since.
    public mutating func serviceChangedConfirmed(by connection: ConnectionHandle, version: UInt64) {
        guard version == databaseVersion else { return }
        becomeAware(connection)
    }

    /// Whether the client on `connection` is change-aware (an unknown connection is: it starts so).
    public func isChangeAware(_ connection: ConnectionHandle) -> Bool {
        clients[connection]?.isChangeAware ?? true
    }

    /// The Client Supported Features the client on `connection` wrote, as its characteristic reads (one octet,
    /// zero until written).
    public func clientSupportedFeatures(of connection: ConnectionHandle) -> [UInt8] {
        let written = clients[connection]?.supportedFeatures ?? []
        return written.isEmpty ? [0x00] : written
    }

    /// Whether the client on `connection` enabled robust caching.
    public func hasRobustCaching(_ connection: ConnectionHandle) -> Bool {
        ((clients[connection]?.supportedFeatures.first ?? 0) & 0x01) != 0
    }

    // MARK: Internal (GATTServer.swift)

    /// A new Client Supported Features value is refused with Value Not Allowed when it clears a bit the client
    /// set before (Vol 3, Part G, 7.2); an empty value says nothing and is refused as too short.
    func checkClientSupportedFeatures(_ value: [UInt8], of connection: ConnectionHandle) -> ATTErrorCode? {
        guard let first = value.first else { return .invalidAttributeValueLength }
        let old = clients[connection]?.supportedFeatures.first ?? 0
        return (old & ~first) != 0 ? .valueNotAllowed : nil
    }

    mutating func setClientSupportedFeatures(_ value: [UInt8], of connection: ConnectionHandle) {
        let first = (value.first ?? 0) & Self.knownClientFeatures
        let old = clients[connection]?.supportedFeatures.first ?? 0
        clients[connection, default: Client()].supportedFeatures = [first | old]
    }

    /// What a change-unaware client with robust caching gets instead of an answer, or nil to answer as usual
    /// (updating its awareness on the way).
    mutating func checkChangeAwareness(_ pdu: ATTPDU, _ connection: ConnectionHandle) -> [Action]? {
        guard let client = clients[connection], !client.isChangeAware, hasRobustCaching(connection) else {
            return nil
        }
        switch pdu.opcode.kind {
        case .command:
            let handle: AttributeHandle
            switch pdu {
            case .writeCommand(let command): handle = command.handle
            case .signedWriteCommand(let command): handle = command.handle
            default: return []
            }
            return [.writeCommandRefused(connection, attribute: handle, .databaseOutOfSync)]
        case .request:
            if client.outOfSyncSent || client.readHashWhileUnaware {
                becomeAware(connection)
                return nil
            }
            if case .readByTypeRequest(let request) = pdu, request.attributeType == .databaseHash {
                clients[connection]?.readHashWhileUnaware = true
                return nil
            }
            guard let handle = Self.handleNamed(by: pdu) else { return nil }
            clients[connection]?.outOfSyncSent = true
            return [
                .respond(
                    connection,
                    .errorResponse(.init(requestOpcode: pdu.opcode, handle: handle, errorCode: .databaseOutOfSync)))
            ]
        default:
            return nil
        }
    }

    private mutating func becomeAware(_ connection: ConnectionHandle) {
        guard clients[connection] != nil else { return }
        clients[connection]?.isChangeAware = true
        clients[connection]?.outOfSyncSent = false
        clients[connection]?.readHashWhileUnaware = false
    }

    /// The handle a request depends on (the one its Error Response names), or nil for a request that names no
    /// handle of the database as it was.
    private static func handleNamed(by pdu: ATTPDU) -> AttributeHandle? {
        switch pdu {
        case .readRequest(let request): return request.handle
        case .readBlobRequest(let request): return request.handle
        case .readMultipleRequest(let request): return request.setOfHandles.first ?? AttributeHandle(0)
        case .readMultipleVariableRequest(let request): return request.setOfHandles.first ?? AttributeHandle(0)
        case .writeRequest(let request): return request.handle
        case .prepareWriteRequest(let request): return request.handle
        case .executeWriteRequest: return AttributeHandle(0)
        case .readByTypeRequest(let request): return request.startingHandle
        default: return nil
        }
    }
}
