import BLE
import Foundation
import Testing

/// `discoverServices`, `discoverIncludedServices`, `discoverCharacteristics`, `discoverDescriptors`.
@Suite struct DiscoveryTests {
    @Test func discoverAllServices() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        #expect(peripheral.services == nil)
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverServices"])
        let services = try #require(peripheral.services)
        // GAP and GATT (the stack's own), then the published primaries in handle order; the secondary service
        // is not a primary service and is only found through the service that includes it.
        #expect(services.map(\.uuid) == [.genericAccess, .genericAttribute, Profile.service, .battery])
        #expect(services.allSatisfy { $0.isPrimary && $0.peripheral === peripheral && $0.characteristics == nil })
    }

    @Test func discoverServicesFiltered() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices([Profile.service])
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverServices"])
        #expect(peripheral.services?.map(\.uuid) == [Profile.service])

        // A later discovery adds to what is known; objects found before are kept.
        let first = try rig.service(Profile.service, on: peripheral)
        peripheral.discoverServices([.battery, .heartRate])
        try await rig.run(.seconds(1))
        #expect(peripheral.services?.map(\.uuid) == [Profile.service, .battery])
        #expect(try rig.service(Profile.service, on: peripheral) === first)
    }

    @Test func discoverServicesThatAreAbsent() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices([.heartRate])
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverServices"])
        #expect(peripheral.services?.isEmpty == true)
    }

    @Test func discoverIncludedServices() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices([Profile.service])
        try await rig.run(.seconds(1))
        let service = try rig.service(Profile.service, on: peripheral)
        #expect(service.includedServices == nil)
        rig.phone.clear()

        peripheral.discoverIncludedServices(nil, for: service)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverIncludedServices \(Profile.service.uuidString)"])
        let included = try #require(service.includedServices?.first)
        #expect(service.includedServices?.count == 1)
        #expect(included.uuid == Profile.includedService)
        #expect(!included.isPrimary)

        // The included service is a full service: its characteristics can be discovered and read.
        peripheral.discoverCharacteristics(nil, for: included)
        try await rig.run(.seconds(1))
        let value = try #require(included.characteristics?.first)
        #expect(value.uuid == Profile.includedValue)
        peripheral.readValue(for: value)
        try await rig.run(.seconds(1))
        #expect(value.value == Data([7]))
    }

    @Test func discoverIncludedServicesFiltered() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        let service = try rig.service(Profile.service, on: peripheral)
        peripheral.discoverIncludedServices([.heartRate], for: service)
        try await rig.run(.seconds(1))
        #expect(service.includedServices?.isEmpty == true)
        peripheral.discoverIncludedServices([Profile.includedService], for: service)
        try await rig.run(.seconds(1))
        #expect(service.includedServices?.map(\.uuid) == [Profile.includedService])
        // Battery includes nothing.
        let battery = try rig.service(.battery, on: peripheral)
        peripheral.discoverIncludedServices(nil, for: battery)
        try await rig.run(.seconds(1))
        #expect(battery.includedServices?.isEmpty == true)
        #expect(
            rig.phone.events.count(where: { if case .didDiscoverIncludedServices(_, nil) = $0 { true } else { false } })
                == 3)
    }

    @Test func discoverAllCharacteristics() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        let service = try rig.service(Profile.service, on: peripheral)
        rig.phone.clear()
        peripheral.discoverCharacteristics(nil, for: service)
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == ["didDiscoverCharacteristics \(Profile.service.uuidString)"])
        let characteristics = try #require(service.characteristics)
        #expect(
            characteristics.map(\.uuid) == [
                Profile.dynamic, Profile.fixed, Profile.notifier, Profile.indicator, Profile.described,
            ])
        #expect(
            characteristics.map(\.properties) == [
                [.read, .write, .writeWithoutResponse], [.read], [.notify, .read], [.indicate], [.read],
            ])
        #expect(
            characteristics.allSatisfy {
                $0.service === service && $0.value == nil && !$0.isNotifying && $0.descriptors == nil
            })
    }

    @Test func discoverCharacteristicsFiltered() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices(nil)
        try await rig.run(.seconds(1))
        let service = try rig.service(Profile.service, on: peripheral)
        peripheral.discoverCharacteristics([Profile.notifier], for: service)
        try await rig.run(.seconds(1))
        #expect(service.characteristics?.map(\.uuid) == [Profile.notifier])

        peripheral.discoverCharacteristics([Profile.fixed, Profile.described, .batteryLevel], for: service)
        try await rig.run(.seconds(1))
        #expect(service.characteristics?.map(\.uuid) == [Profile.fixed, Profile.notifier, Profile.described])

        peripheral.discoverCharacteristics([.heartRateMeasurement], for: service)
        try await rig.run(.seconds(1))
        #expect(service.characteristics?.count == 3)
        #expect(
            rig.phone.events.count(where: { if case .didDiscoverCharacteristics(_, nil) = $0 { true } else { false } })
                == 3)
    }

    @Test func discoverDescriptors() async throws {
        let (rig, peripheral) = try await Rig.connected(discover: false)
        peripheral.discoverServices([Profile.service])
        try await rig.run(.seconds(1))
        let service = try rig.service(Profile.service, on: peripheral)
        peripheral.discoverCharacteristics(nil, for: service)
        try await rig.run(.seconds(1))
        rig.phone.clear()

        let described = try rig.characteristic(Profile.described, on: peripheral)
        let notifier = try rig.characteristic(Profile.notifier, on: peripheral)
        let fixed = try rig.characteristic(Profile.fixed, on: peripheral)
        for c in [described, notifier, fixed] { peripheral.discoverDescriptors(for: c) }
        try await rig.run(.seconds(1))
        #expect(rig.phone.lines == [described, notifier, fixed].map { "didDiscoverDescriptors \($0.uuid.uuidString)" })
        #expect(described.descriptors?.map(\.uuid) == [.characteristicUserDescription])
        #expect(described.descriptors?.first?.characteristic === described)
        #expect(notifier.descriptors?.map(\.uuid) == [.clientCharacteristicConfiguration])
        #expect(fixed.descriptors?.isEmpty == true)
    }
}
