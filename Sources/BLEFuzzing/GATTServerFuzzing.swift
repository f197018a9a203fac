import BLEATT
import BLECore
import BLEGATT

extension FuzzTarget {
    /// ATT requests and commands from three clients into one `GATTServer` with a small database, between the
    /// links' own events (MTU exchanged, encryption, a client leaving and coming back, the database changing).
    /// The app answers every question at once. Every request gets exactly one answer, on its own connection,
    /// of the kind that answers it, within the ATT_MTU; a command gets none; an app answer given twice does
    /// nothing the second time.
    static let gattServer = FuzzTarget("gatt-server", "ATT requests from three clients into a GATTServer") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        var server = GATTServer(database: fuzzDatabase, maximumPrepareQueueLength: 8)
        let connections = (1...3).map { ConnectionHandle(UInt16($0)) }
        for connection in connections { server.connected(connection) }
        // The parts each client queued (each answered by its echo), for the queued-write checks.
        var queued: [ConnectionHandle: [(handle: AttributeHandle, offset: Int, value: [UInt8])]] = [:]
        while !reader.isEmpty {
            let connection = connections[reader.below(connections.count)]
            switch reader.below(24) {
            case 0: server.mtuChanged(connection, to: ATTBearer.defaultMTU + reader.uint16() % 495)
            case 1: server.encryptionChanged(connection, isEncrypted: reader.bool())
            case 2:
                server.disconnected(connection)
                server.connected(connection)
                queued[connection] = nil
            case 3: server.databaseChanged()
            case 4: server.serviceChangedConfirmed(by: connection, version: server.databaseVersion)
            default:
                let bytes = reader.chunk()
                // What a server bearer hands up: a request or command that decodes and fits the ATT_MTU (the
                // bearer answers anything longer itself).
                let mtu = server.mtu(of: connection)
                guard bytes.count <= Int(mtu), let request = try? ATTPDU(bytes: bytes),
                    request.opcode.kind == .request || request.opcode.kind == .command
                else { break }
                let before = server.database
                let answers = try playApp(&server, server.received(request, from: connection), &reader)
                try checkAnswers(answers, to: request, on: connection, mtu: mtu)
                switch (request, answers.first?.1) {
                case (.prepareWriteRequest(let part), .prepareWriteResponse?):
                    queued[connection, default: []].append((part.handle, Int(part.offset), part.partAttributeValue))
                case (.executeWriteRequest(let execute), let answer?):
                    let parts = queued[connection] ?? []
                    queued[connection] = nil
                    let applied = execute.flags == .write && answer.opcode == .executeWriteResponse
                    try checkQueuedWrites(parts, applied: applied, before: before, after: server.database)
                default:
                    break
                }
            }
        }
    }

    /// Plays the app: answers each question the server asks at once, from the input (a value, or an error), and
    /// returns the ATT responses the server produced.
    private static func playApp(_ server: inout GATTServer, _ actions: [GATTServer.Action], _ reader: inout FuzzInput)
        throws(Violation) -> [(ConnectionHandle, ATTPDU)]
    {
        var answers: [(ConnectionHandle, ATTPDU)] = []
        var work = actions[...]
        while let action = work.popFirst() {
            switch action {
            case .respond(let connection, let pdu):
                answers.append((connection, pdu))
            case .readRequest(let id, _, _, _):
                let result = reader.below(8) == 0 ? ATTErrorCode(rawValue: reader.byte()) : .success
                work += server.respond(to: id, result: result, value: reader.chunk())
                try expect(server.respond(to: id, result: .success).isEmpty, "the app's read answer counted twice")
            case .writeRequests(let id, _, let writes):
                try expect(!writes.isEmpty, "the app was asked to write nothing")
                guard let id else { break }
                work += server.respond(
                    to: id, result: reader.below(8) == 0 ? ATTErrorCode(rawValue: reader.byte()) : .success)
                try expect(server.respond(to: id, result: .success).isEmpty, "the app's write answer counted twice")
            case .subscriptionChanged, .valueWritten, .writeCommandRefused:
                break
            }
        }
        return answers
    }

    /// A queued write's effect on the values the server stores (Vol 3, Part F, 3.4.6): cancelled or refused, it
    /// changes none; executed, each attribute's last part sits at its offset, the octets before the parts are the
    /// old ones, and so are those after them unless the write started at offset 0.
    private static func checkQueuedWrites(
        _ parts: [(handle: AttributeHandle, offset: Int, value: [UInt8])], applied: Bool, before: GATTDatabase,
        after: GATTDatabase
    ) throws(Violation) {
        var handles: [AttributeHandle] = []
        for part in parts where !handles.contains(part.handle) { handles.append(part.handle) }
        for handle in handles {
            guard let old = before.attribute(at: handle), let oldValue = old.value,
                handle != before.clientSupportedFeaturesHandle
            else { continue }
            if case .clientConfiguration = old.role { continue }
            let new = after.attribute(at: handle)?.value ?? []
            guard applied else {
                try expect(new == oldValue, "a cancelled or refused queued write changed \(handle)")
                continue
            }
            let mine = parts.filter { $0.handle == handle }
            let last = mine[mine.count - 1]
            try expect(
                new.count >= last.offset + last.value.count
                    && Array(new[last.offset..<last.offset + last.value.count]) == last.value,
                "\(handle)'s last queued part is not at its offset \(last.offset)")
            let head = min(mine.map(\.offset).min() ?? 0, oldValue.count)
            try expect(
                Array(new.prefix(head)) == Array(oldValue.prefix(head)),
                "\(handle)'s octets before the first queued offset changed")
            // A write from offset 0 is the whole value, ending with its farthest part; one further in keeps the
            // octets past its farthest part.
            let end = mine.map { $0.offset + $0.value.count }.max() ?? 0
            if mine[0].offset == 0 {
                try expect(new.count == end, "\(handle) is \(new.count) octets after a whole write of \(end)")
            } else {
                try expect(
                    new.count == max(end, oldValue.count)
                        && Array(new.dropFirst(end)) == Array(oldValue.dropFirst(end)),
                    "\(handle)'s octets past the queued parts changed")
            }
        }
    }

    /// Exactly one answer to a request, none to a command (Vol 3, Part F, 3.3 and 3.4.9).
    private static func checkAnswers(
        _ answers: [(ConnectionHandle, ATTPDU)], to request: ATTPDU, on connection: ConnectionHandle, mtu: UInt16
    ) throws(Violation) {
        guard request.opcode.kind == .request else {
            try expect(answers.isEmpty, "the command \(request) was answered")
            return
        }
        try expect(answers.count == 1, "\(request) got \(answers.count) answers")
        for (to, answer) in answers {
            try expect(to == connection, "\(request) was answered on another connection")
            // A Prepare Write Response echoes its request, so it is as long as the request.
            if request.encodedLength <= Int(mtu) {
                try expect(answer.encodedLength <= Int(mtu), "\(answer) exceeds ATT_MTU \(mtu)")
            }
            try expect((try? ATTPDU(buffer: answer.encoded())) == answer, "\(answer) does not survive the wire")
            if case .errorResponse(let error) = answer {
                try expect(error.requestOpcode == request.opcode, "\(answer) names another request")
            } else {
                try expect(answer.opcode == request.opcode.responseOpcode, "\(answer) does not answer \(request)")
            }
        }
    }

    /// GAP and GATT (handles 1...13), Heart Rate, a secondary service, and a custom service that includes it, with
    /// a long value and a user description, a dynamic value and one that needs encryption.
    static let fuzzDatabase: GATTDatabase = {
        var database = GATTDatabase(deviceName: "swift-ble", appearance: 0x0340)
        let secondary: BluetoothUUID = "6E400010-B5A3-F393-E0A9-E50E24DCCA9E"
        do {
            try database.add(
                GATTServiceDefinition(
                    uuid: .heartRate,
                    characteristics: [
                        GATTCharacteristicDefinition(
                            uuid: .heartRateMeasurement, properties: [.notify], permissions: []),
                        GATTCharacteristicDefinition(
                            uuid: .bodySensorLocation, properties: [.read], permissions: [.readable], value: [0x01]),
                        GATTCharacteristicDefinition(
                            uuid: .heartRateControlPoint, properties: [.write], permissions: [.writeable]),
                    ]))
            try database.add(
                GATTServiceDefinition(
                    uuid: secondary, isPrimary: false,
                    characteristics: [
                        GATTCharacteristicDefinition(
                            uuid: .batteryLevel, properties: [.read], permissions: [.readable], value: [99])
                    ]))
            try database.add(
                GATTServiceDefinition(
                    uuid: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E", includedServices: [secondary],
                    characteristics: [
                        GATTCharacteristicDefinition(
                            uuid: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E", properties: [.read, .write, .indicate],
                            permissions: [.readable, .writeable],
                            value: (0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) },
                            descriptors: [
                                GATTDescriptorDefinition(
                                    uuid: .characteristicUserDescription, value: Array("long".utf8))
                            ]),
                        GATTCharacteristicDefinition(
                            uuid: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E",
                            properties: [.read, .write, .writeWithoutResponse, .notify],
                            permissions: [.readable, .writeable]),
                        GATTCharacteristicDefinition(
                            uuid: "6E400004-B5A3-F393-E0A9-E50E24DCCA9E", properties: [.read, .write],
                            permissions: [.readEncryptionRequired, .writeEncryptionRequired], value: [0x5E]),
                    ]))
        } catch {
            fatalError("the fuzz database is valid: \(error)")
        }
        return database
    }()
}
