import BLE
import Foundation
import Testing

/// Reads and writes of characteristics and descriptors, answered by the stack (cached values) or by the
/// peripheral app (`didReceiveRead`/`didReceiveWrite` and `respond(to:withResult:)`).
@Suite struct ReadWriteTests {
    @Test func readCachedValueIsAnsweredByTheStack() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let fixed = try rig.characteristic(Profile.fixed, on: peripheral)
        peripheral.readValue(for: fixed)
        try await rig.run(.seconds(1))
        #expect(fixed.value == Profile.fixedValue)
        #expect(rig.phone.valueUpdates.count == 1)
        #expect(rig.phone.valueUpdates.first?.value == Profile.fixedValue)
        #expect(rig.phone.valueUpdates.first?.error == nil)
        #expect(rig.sensor.recorder.events.isEmpty)
    }

    @Test func readDynamicValueIsAnsweredByTheApp() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder[Profile.dynamic] = Data("hello".utf8)
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        #expect(dynamic.value == Data("hello".utf8))
        let reads = rig.sensor.recorder.reads
        #expect(reads.count == 1)
        #expect(reads.first?.offset == 0)
        #expect(reads.first?.characteristic === rig.sensor.dynamic)
        #expect(rig.phone.lines == ["didUpdateValue \(Profile.dynamic.uuidString) 68656c6c6f"])
    }

    @Test(arguments: [
        ATTErrorCode.readNotPermitted, .insufficientAuthentication, .insufficientAuthorization,
        .unlikelyError, ATTErrorCode(rawValue: 0x80),
    ])
    func readRefusedWithAnATTError(code: ATTErrorCode) async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .fail(code)
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        let update = try #require(rig.phone.valueUpdates.first)
        #expect(rig.phone.valueUpdates.count == 1)
        #expect(update.error?.code == .att(code))
        #expect(update.error?.attErrorCode == code)
        #expect(dynamic.value == nil)
        #expect(peripheral.state == .connected)
    }

    @Test func readDescriptor() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let described = try rig.characteristic(Profile.described, on: peripheral)
        let descriptor = try #require(described.descriptors?.first)
        peripheral.readValue(for: descriptor)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didUpdateValue descriptor 2901 \(Profile.userDescription.utf8.count) bytes"])
        #expect(descriptor.stringValue == Profile.userDescription)
    }

    @Test func readClientCharacteristicConfiguration() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        let cccd = try #require(notifier.descriptors?.first { $0.uuid == .clientCharacteristicConfiguration })
        peripheral.readValue(for: cccd)
        try await rig.run(.seconds(1))
        #expect(cccd.uint16Value == 0)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        peripheral.readValue(for: cccd)
        try await rig.run(.seconds(1))
        #expect(cccd.uint16Value == 1)
    }

    @Test func writeWithResponse() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.writeValue(Data([1, 2, 3]), for: dynamic, type: .withResponse)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didWriteValue \(Profile.dynamic.uuidString)"])
        let batch = try #require(rig.sensor.recorder.writeBatches.first)
        #expect(rig.sensor.recorder.writeBatches.count == 1)
        #expect(batch.map(\.offset) == [0])
        #expect(batch.first?.value == Data([1, 2, 3]))
        #expect(batch.first?.characteristic === rig.sensor.dynamic)
        // A read then sees what was written.
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(1))
        #expect(dynamic.value == Data([1, 2, 3]))
    }

    @Test(arguments: [
        ATTErrorCode.writeNotPermitted, .invalidAttributeValueLength, .insufficientAuthorization,
        ATTErrorCode(rawValue: 0x80), ATTErrorCode(rawValue: 0xFD),
    ])
    func writeRefusedWithAnATTError(code: ATTErrorCode) async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder.answer = .fail(code)
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.writeValue(Data([9]), for: dynamic, type: .withResponse)
        try await rig.run(.seconds(1))
        #expect(rig.phone.writes.count == 1)
        #expect(rig.phone.writes.first?.error?.code == .att(code))
    }

    @Test func writeWithoutResponse() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        #expect(peripheral.canSendWriteWithoutResponse)
        peripheral.writeValue(Data([4, 5]), for: dynamic, type: .withoutResponse)
        try await rig.run(.seconds(1))
        #expect(rig.phone.events.isEmpty)  // no callback for a write without response
        let batch = try #require(rig.sensor.recorder.writeBatches.first)
        #expect(batch.count == 1)
        #expect(batch.first?.value == Data([4, 5]))
        #expect(rig.sensor.recorder[Profile.dynamic] == Data([4, 5]))
    }

    @Test func writeDescriptor() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let described = try rig.characteristic(Profile.described, on: peripheral)
        let descriptor = try #require(described.descriptors?.first)
        // Published descriptors are read-only, as CoreBluetooth's: the server refuses.
        peripheral.writeValue(Data("new".utf8), for: descriptor)
        try await rig.run(.seconds(1))
        #expect(rig.phone.events.count == 1)
        guard case .didWriteDescriptor(let d, let error) = rig.phone.events.first else {
            Issue.record("expected didWriteValueFor descriptor, got \(rig.phone.lines)")
            return
        }
        #expect(d === descriptor)
        #expect(error?.code == .att(.writeNotPermitted))

        // The Client Characteristic Configuration is written through setNotifyValue only.
        rig.phone.clear()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        let cccd = try #require(notifier.descriptors?.first)
        peripheral.writeValue(Data([1, 0]), for: cccd)
        try await rig.run(.seconds(1))
        guard case .didWriteDescriptor(_, let cccdError) = rig.phone.events.first else {
            Issue.record("expected didWriteValueFor descriptor, got \(rig.phone.lines)")
            return
        }
        #expect(cccdError?.code == .operationNotSupported)
        #expect(rig.sensor.recorder.events.isEmpty)
    }

    @Test func readRSSI() async throws {
        let (rig, peripheral) = try await Rig.connected()
        peripheral.readRSSI()
        try await rig.run(.seconds(1))
        guard case .didReadRSSI(let rssi, let error) = rig.phone.events.first else {
            Issue.record("expected didReadRSSI, got \(rig.phone.lines)")
            return
        }
        #expect(error == nil)
        #expect((-90 ... -20).contains(rssi))
    }

    /// ATT_MTU - 3, but never more than 512, the longest attribute value: at 517 that is 512, not 514.
    @Test(arguments: [(23, 20), (185, 182), (247, 244), (515, 512), (517, 512)])
    func maximumWriteValueLengthFollowsTheMTU(mtu: Int, expected: Int) async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: mtu))
        #expect(peripheral.maximumWriteValueLength(for: .withResponse) == 512)
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == expected)
        #expect(peripheral.attMTU == mtu)
        // The sensor sees the same ATT_MTU for this central.
        rig.sensor.recorder[Profile.dynamic] = Data([1])
        peripheral.readValue(for: try rig.characteristic(Profile.dynamic, on: peripheral))
        try await rig.run(.seconds(1))
        let central = try #require(rig.sensor.recorder.reads.first?.central)
        #expect(central.maximumUpdateValueLength == expected)
    }

    /// Named case: a 512-byte value read at ATT_MTU 23 (Read, then Read Blob requests), bytes intact.
    @Test func longReadAtMinimumMTU() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 23))
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == 20)
        let value = Data((0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) })
        rig.sensor.recorder[Profile.dynamic] = value
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(10))
        #expect(rig.phone.valueUpdates.count == 1)
        #expect(rig.phone.valueUpdates.first?.error == nil)
        #expect(dynamic.value == value)
        // The app saw one request per blob: offsets 0, 22, 44, ... (ATT_MTU - 1 bytes each).
        let offsets = rig.sensor.recorder.reads.map(\.offset)
        #expect(offsets == Array(stride(from: 0, through: 511, by: 22)))
    }

    /// Named case: a 300-byte write with response at ATT_MTU 23 uses the long-write procedure (Prepare Write
    /// requests, then Execute Write); the server app sees the whole value at once, as parts with offsets.
    @Test func longWriteAtMinimumMTU() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 23))
        let value = Data((0..<300).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 1) })
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.writeValue(value, for: dynamic, type: .withResponse)
        try await rig.run(.seconds(10))
        #expect(rig.phone.lines == ["didWriteValue \(Profile.dynamic.uuidString)"])
        let batches = rig.sensor.recorder.writeBatches
        #expect(batches.count == 1)
        let parts = try #require(batches.first)
        // Prepare Write carries ATT_MTU - 5 = 18 bytes per part.
        #expect(parts.map(\.offset) == Array(stride(from: 0, to: 300, by: 18)))
        #expect(parts.allSatisfy { $0.characteristic === rig.sensor.dynamic })
        #expect(parts.reduce(Data()) { $0 + ($1.value ?? Data()) } == value)
        #expect(rig.sensor.recorder[Profile.dynamic] == value)
    }

    @Test func longWriteRefusedByTheApp() async throws {
        let (rig, peripheral) = try await Rig.connected(phone: .init(preferredMTU: 23))
        rig.sensor.recorder.answer = .fail(.insufficientResources)
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        peripheral.writeValue(Data(count: 100), for: dynamic, type: .withResponse)
        try await rig.run(.seconds(5))
        #expect(rig.phone.writes.count == 1)
        #expect(rig.phone.writes.first?.error?.code == .att(.insufficientResources))
        #expect(peripheral.state == .connected)
    }

    @Test func operationsQueueAndCompleteInOrder() async throws {
        let (rig, peripheral) = try await Rig.connected()
        rig.sensor.recorder[Profile.dynamic] = Data([0xAA])
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        let fixed = try rig.characteristic(Profile.fixed, on: peripheral)
        peripheral.readValue(for: dynamic)
        peripheral.writeValue(Data([0xBB]), for: dynamic, type: .withResponse)
        peripheral.readValue(for: fixed)
        peripheral.readValue(for: dynamic)
        try await rig.run(.seconds(2))
        #expect(
            rig.phone.lines == [
                "didUpdateValue \(Profile.dynamic.uuidString) aa",
                "didWriteValue \(Profile.dynamic.uuidString)",
                "didUpdateValue \(Profile.fixed.uuidString) \(Profile.fixedValue.map { String(format: "%02x", $0) }.joined())",
                "didUpdateValue \(Profile.dynamic.uuidString) bb",
            ])
    }
}
