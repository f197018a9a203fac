import BLE
import Foundation
import Synchronization
import Testing

/// What code ported from CoreBluetooth relies on, checked where a port of Apple's sample found it missing.
@Suite struct FidelityTests {
    /// The values of every write without response the sensor received, in order.
    static func writesReceived(_ rig: Rig) -> [Data] {
        rig.sensor.recorder.events.flatMap { event -> [Data] in
            guard case .didReceiveWrite(let requests) = event else { return [] }
            return requests.compactMap(\.value)
        }
    }

    /// At ATT_MTU 517 a write without response carries 512 bytes, the longest attribute value, not 514: a 64 KiB
    /// transfer in chunks of `maximumWriteValueLength(for: .withoutResponse)`, paced by
    /// `canSendWriteWithoutResponse` as Apple's sample paces it, arrives whole and in order.
    @Test func sixtyFourKibibytesInChunksOfTheMaximumWriteLengthArriveWhole() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        #expect(peripheral.maximumWriteValueLength(for: .withoutResponse) == 512)
        #expect(peripheral.maximumWriteValueLength(for: .withResponse) == 512)
        rig.sensor.recorder.clear()

        let payload = Data((0..<65_536).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) })
        var offset = 0
        while offset < payload.count {
            while offset < payload.count, peripheral.canSendWriteWithoutResponse {
                let length = min(peripheral.maximumWriteValueLength(for: .withoutResponse), payload.count - offset)
                peripheral.writeValue(payload[offset..<offset + length], for: dynamic, type: .withoutResponse)
                offset += length
            }
            try await rig.run(until: { peripheral.canSendWriteWithoutResponse }, within: .seconds(1), "room to write")
        }
        try await rig.run(.seconds(1))
        let received = Self.writesReceived(rig)
        #expect(received.count == 128)
        #expect(received.allSatisfy { $0.count == 512 })
        #expect(Data(received.joined()) == payload)
    }

    /// A notification carries at most 512 bytes too: `maximumUpdateValueLength` at ATT_MTU 517 is 512.
    @Test func theLongestUpdateIsTheLongestAttributeValue() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        peripheral.setNotifyValue(true, for: notifier)
        try await rig.run(.seconds(1))
        let central = try #require(
            rig.sensor.recorder.subscribers.first)
        #expect(central.maximumUpdateValueLength == 512)
    }

    /// A write without response longer than `maximumWriteValueLength(for: .withoutResponse)` is not sent (and is
    /// logged), as CoreBluetooth drops it; a write with response longer than 512 bytes fails with Invalid
    /// Attribute Value Length.
    @Test func writesLongerThanAnAttributeAreRefusedAtTheCall() async throws {
        let (rig, peripheral) = try await Rig.connected()
        let dynamic = try rig.characteristic(Profile.dynamic, on: peripheral)
        rig.sensor.recorder.clear()
        rig.phone.clear()
        peripheral.writeValue(Data(count: 514), for: dynamic, type: .withoutResponse)
        peripheral.writeValue(Data(count: 513), for: dynamic, type: .withResponse)
        try await rig.run(.seconds(1))
        #expect(Self.writesReceived(rig).isEmpty)
        #expect(
            rig.phone.lines == [
                "didWriteValue \(Profile.dynamic.uuidString) error=att(\(ATTErrorCode.invalidAttributeValueLength))"
            ])
        // The link is still good for writes that fit.
        peripheral.writeValue(Data(count: 512), for: dynamic, type: .withoutResponse)
        try await rig.run(.seconds(1))
        #expect(Self.writesReceived(rig).map(\.count) == [512])
    }

    /// A phone whose controller holds one link fails the second connection with `.connectionLimitReached`, the
    /// controller's status kept.
    @Test func aConnectionBeyondTheControllersLimitFailsWithConnectionLimitReached() async throws {
        let radio = SimulatedRadio(seed: 8)
        let phone = BluetoothSystem.simulated(
            on: radio, name: "phone", configuration: .init(maximumConnections: 1))
        let sensors = (0..<2).map { i in
            BluetoothSystem.simulated(on: radio, name: "sensor\(i)", position: RadioPosition(x: 2, y: Double(i)))
        }
        let servers = sensors.map {
            PeripheralManager(delegate: nil, queue: DispatchQueue(label: "sensor"), options: nil, system: $0)
        }
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let outcome = Mutex<Result<BluetoothError?, any Error>?>(nil)
        let scenario = Task(executorPreference: radio) { () -> BluetoothError? in
            for (i, server) in servers.enumerated() {
                try await server.waitUntilPoweredOn(timeout: .seconds(1))
                try await server.startAdvertising(AdvertisementData(localName: "sensor\(i)"), timeout: nil)
            }
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            var found: [String: Peripheral] = [:]
            for try await discovery in central.scan(withServices: nil) {
                if let name = discovery.advertisementData.localName { found[name] = discovery.peripheral }
                if found.count == 2 { break }
            }
            try await central.connect(found["sensor0"]!, timeout: .seconds(5))
            do {
                try await central.connect(found["sensor1"]!, timeout: .seconds(5))
                return nil
            } catch let error as BluetoothError {
                return error
            }
        }
        Task(executorPreference: radio) {
            let result = await scenario.result
            outcome.withLock { $0 = result }
        }
        try await radio.run(for: .seconds(30))
        scenario.cancel()
        let result = try #require(outcome.withLock { $0 }, "the scenario did not finish")
        let error = try #require(try result.get(), "the second connection succeeded")
        #expect(error.code == .connectionLimitReached)
        #expect(error.hciStatus == .connectionLimitExceeded)
    }

    /// A delegate written with CoreBluetooth's `NSNumber` RSSI is called (the typed form comes first).
    @Test func theBridgedRSSIFormIsCalled() async throws {
        final class Bridged: PeripheralDelegate, @unchecked Sendable {
            let readings = Mutex<[Int]>([])
            // swift-format-ignore: AlwaysUseLowerCamelCase
            func peripheral(_ peripheral: Peripheral, didReadRSSI RSSI: NSNumber, error: (any Error)?) {
                readings.withLock { $0.append(RSSI.intValue) }
            }
        }
        let (rig, peripheral) = try await Rig.connected()
        let bridged = Bridged()
        peripheral.delegate = bridged
        peripheral.readRSSI()
        try await rig.run(.milliseconds(100))
        let readings = bridged.readings.withLock { $0 }
        #expect(readings.count == 1)
        #expect(readings.allSatisfy { (-90 ... -20).contains($0) })
    }

    /// Dictionary literals with CoreBluetooth's keys build the typed options; a key this library does not know
    /// is left out (and logged), not guessed at.
    @Test func dictionaryLiteralsWithCoreBluetoothsKeysBuildTheTypedOptions() {
        let scan: CentralManager.ScanOptions = [
            CentralManagerScanOptionAllowDuplicatesKey: true,
            CentralManagerScanOptionSolicitedServiceUUIDsKey: [BluetoothUUID.heartRate],
        ]
        #expect(scan == CentralManager.ScanOptions(allowDuplicates: true, solicitedServiceUUIDs: [.heartRate]))
        let connect: CentralManager.ConnectOptions = [
            ConnectPeripheralOptionNotifyOnDisconnectionKey: NSNumber(value: true), "kCBUnknownKey": 1,
        ]
        #expect(connect == CentralManager.ConnectOptions(notifyOnDisconnection: true))
        let advertisement: AdvertisementData = [
            AdvertisementDataLocalNameKey: "lamp", AdvertisementDataServiceUUIDsKey: [BluetoothUUID.battery],
            AdvertisementDataTxPowerLevelKey: "loud",
        ]
        #expect(advertisement == AdvertisementData(localName: "lamp", serviceUUIDs: [.battery]))
        let back = advertisement.dictionary
        #expect(back[AdvertisementDataLocalNameKey] as? String == "lamp")
        #expect(back[AdvertisementDataServiceUUIDsKey] as? [BluetoothUUID] == [.battery])
        #expect(back.count == 2)
        #expect(CentralManager.Options() == CentralManager.Options(showPowerAlert: nil, restoreIdentifier: nil))
    }
}
