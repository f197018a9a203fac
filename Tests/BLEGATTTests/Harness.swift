import BLEATT
import BLECore
import BLEGATT
import NIOCore

let heartRateUUID = BluetoothUUID.heartRate
let customServiceUUID: BluetoothUUID = "6E400001-B5A3-F393-E0A9-E50E24DCCA9E"
let longValueUUID: BluetoothUUID = "6E400002-B5A3-F393-E0A9-E50E24DCCA9E"
let dynamicUUID: BluetoothUUID = "6E400003-B5A3-F393-E0A9-E50E24DCCA9E"
let secretUUID: BluetoothUUID = "6E400004-B5A3-F393-E0A9-E50E24DCCA9E"
let secondaryUUID: BluetoothUUID = "6E400010-B5A3-F393-E0A9-E50E24DCCA9E"
let longValue: [UInt8] = (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }

/// GAP (1...5), GATT (6...9), Heart Rate (10...17), then a secondary service and a custom service.
func testDatabase() throws -> GATTDatabase {
    var database = GATTDatabase(deviceName: "swift-ble", appearance: 0x0340)
    try database.add(
        GATTServiceDefinition(
            uuid: heartRateUUID,
            characteristics: [
                GATTCharacteristicDefinition(uuid: .heartRateMeasurement, properties: [.notify], permissions: []),
                GATTCharacteristicDefinition(
                    uuid: .bodySensorLocation, properties: [.read], permissions: [.readable], value: [0x01]),
                GATTCharacteristicDefinition(
                    uuid: .heartRateControlPoint, properties: [.write], permissions: [.writeable]),
            ]))
    try database.add(
        GATTServiceDefinition(
            uuid: secondaryUUID, isPrimary: false,
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: .batteryLevel, properties: [.read], permissions: [.readable], value: [99])
            ]))
    try database.add(
        GATTServiceDefinition(
            uuid: customServiceUUID, includedServices: [secondaryUUID],
            characteristics: [
                GATTCharacteristicDefinition(
                    uuid: longValueUUID, properties: [.read, .write, .indicate],
                    permissions: [.readable, .writeable], value: longValue,
                    descriptors: [
                        GATTDescriptorDefinition(
                            uuid: .characteristicUserDescription,
                            value: Array("long".utf8))
                    ]),
                GATTCharacteristicDefinition(
                    uuid: dynamicUUID, properties: [.read, .write, .writeWithoutResponse],
                    permissions: [.readable, .writeable]),
                GATTCharacteristicDefinition(
                    uuid: secretUUID, properties: [.read, .write],
                    permissions: [.readEncryptionRequired, .writeEncryptionRequired], value: [0x5E]),
            ]))
    return database
}

/// One server and any number of client links to it, wired together with no host: every PDU goes through
/// both bearers' encoders and decoders.
struct World {
    struct Link {
        var clientBearer: ATTBearer
        var serverBearer: ATTBearer
        var client = GATTClient()
    }

    var server: GATTServer
    var links: [ConnectionHandle: Link] = [:]
    /// The app's values for dynamic attributes.
    var appValues: [AttributeHandle: [UInt8]] = [:]
    /// What the app was told (subscriptions, writes).
    var appEvents: [GATTServer.Action] = []
    var results: [GATTOperationID: Result<GATTResult, GATTError>] = [:]
    var notifications: [(ConnectionHandle, ATTPDU.HandleValueNotification)] = []
    var indications: [(ConnectionHandle, ATTPDU.HandleValueIndication)] = []
    var indicationResults: [ATTRequestID: ATTRequestFailure?] = [:]
    /// Every PDU a client sent.
    var clientPDUs: [ATTPDU] = []
    private var toServer: [(ConnectionHandle, ByteBuffer)] = []
    private var toClient: [(ConnectionHandle, ByteBuffer)] = []
    private var nextOperation: UInt64 = 1

    init(database: GATTDatabase) {
        server = GATTServer(database: database, maximumPrepareQueueLength: 32)
    }

    mutating func connect(_ connection: ConnectionHandle, clientRxMTU: UInt16 = 517, serverRxMTU: UInt16 = 517) {
        links[connection] = Link(
            clientBearer: ATTBearer(localRxMTU: clientRxMTU), serverBearer: ATTBearer(localRxMTU: serverRxMTU))
        server.connected(connection)
    }

    /// Runs one operation to its end and returns its result.
    mutating func run(_ operation: GATTOperation, on connection: ConnectionHandle = ConnectionHandle(1)) -> Result<
        GATTResult, GATTError
    > {
        let id = GATTOperationID(nextOperation)
        nextOperation += 1
        let actions = links[connection]!.client.start(operation, id: id)
        perform(client: actions, connection)
        pump()
        return results[id] ?? .failure(GATTError(.rejected, "did not finish"))
    }

    mutating func perform(client actions: [GATTClient.Action], _ connection: ConnectionHandle) {
        for action in actions {
            switch action {
            case .sendRequest(let pdu, let id):
                clientPDUs.append(pdu)
                let bearerActions = links[connection]!.clientBearer.sendRequest(pdu, id: id)
                perform(clientBearer: bearerActions, connection)
            case .complete(let id, let result):
                results[id] = result
            }
        }
    }

    mutating func perform(clientBearer actions: [ATTBearer.Action], _ connection: ConnectionHandle) {
        for action in actions {
            switch action {
            case .send(let bytes): toServer.append((connection, bytes))
            case .complete(let id, let result):
                perform(client: links[connection]!.client.requestCompleted(id, result), connection)
            case .mtuChanged(let mtu): links[connection]!.client.mtuChanged(mtu)
            case .notification(let notification): notifications.append((connection, notification))
            case .indication(let indication): indications.append((connection, indication))
            case .startTimer, .cancelTimer, .request, .command, .indicationComplete, .closeBearer: break
            }
        }
    }

    mutating func perform(serverBearer actions: [ATTBearer.Action], _ connection: ConnectionHandle) {
        for action in actions {
            switch action {
            case .send(let bytes): toClient.append((connection, bytes))
            case .request(let pdu), .command(let pdu): perform(server: server.received(pdu, from: connection))
            case .mtuChanged(let mtu): server.mtuChanged(connection, to: mtu)
            case .indicationComplete(let id, let failure): indicationResults[id] = .some(failure)
            case .startTimer, .cancelTimer, .complete, .notification, .indication, .closeBearer: break
            }
        }
    }

    mutating func perform(server actions: [GATTServer.Action]) {
        for action in actions {
            switch action {
            case .respond(let connection, let pdu):
                perform(serverBearer: links[connection]!.serverBearer.sendResponse(pdu), connection)
            case .readRequest(let id, _, let attribute, let offset):
                let value = appValues[attribute] ?? []
                if offset > value.count {
                    perform(server: server.respond(to: id, result: .invalidOffset))
                } else {
                    perform(server: server.respond(to: id, result: .success, value: Array(value[offset...])))
                }
            case .writeRequests(let id, _, let writes):
                appEvents.append(action)
                for write in writes {
                    var value = appValues[write.attribute] ?? []
                    if write.offset == 0 { value = [] }
                    value = Array(value.prefix(write.offset)) + write.value
                    appValues[write.attribute] = value
                }
                if let id { perform(server: server.respond(to: id, result: .success)) }
            case .subscriptionChanged, .valueWritten, .writeCommandRefused:
                appEvents.append(action)
            }
        }
    }

    /// Moves PDUs until both directions are quiet.
    mutating func pump() {
        while !toServer.isEmpty || !toClient.isEmpty {
            if !toServer.isEmpty {
                let (connection, bytes) = toServer.removeFirst()
                perform(serverBearer: links[connection]!.serverBearer.received(bytes), connection)
            }
            if !toClient.isEmpty {
                let (connection, bytes) = toClient.removeFirst()
                perform(clientBearer: links[connection]!.clientBearer.received(bytes), connection)
            }
        }
    }

    /// Sends a notification the server produced over the server bearer.
    mutating func notify(_ notification: ATTPDU.HandleValueNotification, on connection: ConnectionHandle) throws {
        perform(
            serverBearer: [
                .send(try links[connection]!.serverBearer.sendUnacknowledged(.handleValueNotification(notification)))
            ],
            connection)
        pump()
    }

    mutating func indicate(
        _ indication: ATTPDU.HandleValueIndication, id: ATTRequestID, on connection: ConnectionHandle
    ) {
        perform(serverBearer: links[connection]!.serverBearer.sendIndication(indication, id: id), connection)
        pump()
    }
}

extension Result where Success == GATTResult, Failure == GATTError {
    var services: [GATTService]? {
        if case .success(.services(let s)) = self { return s }
        return nil
    }
    var included: [GATTService]? {
        if case .success(.includedServices(let s)) = self { return s }
        return nil
    }
    var characteristics: [GATTCharacteristic]? {
        if case .success(.characteristics(let c)) = self { return c }
        return nil
    }
    var descriptors: [GATTDescriptor]? {
        if case .success(.descriptors(let d)) = self { return d }
        return nil
    }
    var value: [UInt8]? {
        if case .success(.value(let v)) = self { return v }
        return nil
    }
    var error: GATTError? {
        if case .failure(let e) = self { return e }
        return nil
    }
}
