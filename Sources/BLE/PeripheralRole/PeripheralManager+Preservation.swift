import BLECore
import BLESystem
import Foundation
import Logging
import Synchronization

// A peripheral manager's preserved state in the store, and the work a restarted system carries on from it
// (`BluetoothSystem+Preservation.swift` says when records are written and forgotten).

/// What the store keeps of a peripheral manager: its published services, as the app defined them, and the
/// advertisement it asked for (JSON, with a version a later form can tell apart).
struct PreservedPeripheralRecord: Codable, Hashable, PreservedRecord {
    static let currentVersion = 1

    struct Descriptor: Codable, Hashable {
        var uuid: String
        var value: Data?
    }

    struct Characteristic: Codable, Hashable {
        var uuid: String
        var properties: UInt
        var permissions: UInt
        /// A static value (the stack answers reads of it); nil for a value the app gives on each read.
        var value: Data?
        var descriptors: [Descriptor]
    }

    struct Service: Codable, Hashable {
        var uuid: String
        var isPrimary: Bool
        /// The services it includes, by their place in `services` (always earlier: they were added first).
        var included: [Int]
        var characteristics: [Characteristic]
    }

    struct Advertisement: Codable, Hashable {
        var localName: String?
        var manufacturerData: Data?
        var serviceData: [String: Data]?
        var serviceUUIDs: [String]?
        var txPowerLevel: Int?
        var isConnectable: Bool?
        var solicitedServiceUUIDs: [String]?
    }

    var version = Self.currentVersion
    var services: [Service]
    var advertisement: Advertisement?

    var isEmpty: Bool { services.isEmpty && advertisement == nil }

    var encoded: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        // `try!` cannot trap: every field is a string, bytes, a number, a Bool or an array or map of them.
        return Array(try! encoder.encode(self))
    }

    init(services: [Service], advertisement: Advertisement?) {
        self.services = services
        self.advertisement = advertisement
    }

    /// The record in `bytes`, or nil when they are not one this version wrote (or name a UUID that is not one,
    /// or include a service that does not come before).
    init?(decoding bytes: [UInt8]) {
        guard let record = try? JSONDecoder().decode(Self.self, from: Data(bytes)),
            record.version == Self.currentVersion
        else { return nil }
        var uuids = record.services.flatMap { s in
            [s.uuid] + s.characteristics.flatMap { c in [c.uuid] + c.descriptors.map(\.uuid) }
        }
        if let a = record.advertisement {
            uuids += (a.serviceUUIDs ?? []) + (a.solicitedServiceUUIDs ?? []) + (a.serviceData ?? [:]).keys
        }
        guard uuids.allSatisfy({ BluetoothUUID(string: $0) != nil }),
            record.services.enumerated().allSatisfy({ i, s in s.included.allSatisfy { (0..<i).contains($0) } })
        else { return nil }
        self = record
    }

    /// The record of `published` services and the advertisement asked for. The services are kept in an order
    /// where each comes after those it includes (the order they can be published again in), whatever order they
    /// were published in: an included service removed and added again comes after its includer.
    init(published unordered: [MutableService], advertising: AdvertisementData?) {
        let published = Self.ordered(unordered)
        let services = published.enumerated().map { index, service in
            Service(
                uuid: service.uuid.uuidString, isPrimary: service.isPrimary,
                // Only those before it: an include loop (a service including itself, or one that includes it) is
                // not one a restart can publish again in order.
                included: (service.includedServices ?? []).compactMap { i in
                    published.firstIndex { $0 === i }.flatMap { $0 < index ? $0 : nil }
                },
                characteristics: (service.characteristics ?? []).compactMap { $0 as? MutableCharacteristic }.map { c in
                    Characteristic(
                        uuid: c.uuid.uuidString, properties: c.properties.rawValue,
                        permissions: c.permissions.rawValue, value: c.value,
                        descriptors: (c.descriptors ?? []).compactMap { $0 as? MutableDescriptor }.map {
                            Descriptor(uuid: $0.uuid.uuidString, value: $0.value)
                        })
                })
        }
        let advertisement = advertising.map { a in
            Advertisement(
                localName: a.localName, manufacturerData: a.manufacturerData,
                serviceData: a.serviceData.map {
                    Dictionary(uniqueKeysWithValues: $0.map { ($0.key.uuidString, $0.value) })
                },
                serviceUUIDs: a.serviceUUIDs?.map(\.uuidString), txPowerLevel: a.txPowerLevel,
                isConnectable: a.isConnectable, solicitedServiceUUIDs: a.solicitedServiceUUIDs?.map(\.uuidString))
        }
        self.init(services: services, advertisement: advertisement)
    }

    /// `unordered` in the order a record keeps them: each after those it includes.
    static func ordered(_ unordered: [MutableService]) -> [MutableService] {
        var published: [MutableService] = []
        func place(_ service: MutableService, _ path: [MutableService]) {
            guard !published.contains(where: { $0 === service }), !path.contains(where: { $0 === service }) else {
                return
            }
            for included in service.includedServices ?? [] {
                if let i = included as? MutableService, unordered.contains(where: { $0 === i }) {
                    place(i, path + [service])
                }
            }
            published.append(service)
        }
        for service in unordered { place(service, []) }
        return published
    }

    /// The services as new objects, in order, with their included services.
    func makeServices() -> [MutableService] {
        var made: [MutableService] = []
        for s in services {
            let service = MutableService(type: BluetoothUUID(string: s.uuid)!, primary: s.isPrimary)
            service.characteristics = s.characteristics.map { c in
                let characteristic = MutableCharacteristic(
                    type: BluetoothUUID(string: c.uuid)!, properties: CharacteristicProperties(rawValue: c.properties),
                    value: c.value, permissions: AttributePermissions(rawValue: c.permissions))
                if !c.descriptors.isEmpty {
                    characteristic.descriptors = c.descriptors.map {
                        MutableDescriptor(type: BluetoothUUID(string: $0.uuid)!, value: $0.value)
                    }
                }
                return characteristic
            }
            if !s.included.isEmpty { service.includedServices = s.included.map { made[$0] } }
            made.append(service)
        }
        return made
    }

    /// The advertisement asked for.
    func makeAdvertisement() -> AdvertisementData? {
        advertisement.map { a in
            AdvertisementData(
                localName: a.localName, manufacturerData: a.manufacturerData,
                serviceData: a.serviceData.map {
                    Dictionary(uniqueKeysWithValues: $0.map { (BluetoothUUID(string: $0.key)!, $0.value) })
                },
                serviceUUIDs: a.serviceUUIDs?.compactMap(BluetoothUUID.init(string:)), txPowerLevel: a.txPowerLevel,
                isConnectable: a.isConnectable,
                solicitedServiceUUIDs: a.solicitedServiceUUIDs?.compactMap(BluetoothUUID.init(string:)))
        }
    }
}

extension PeripheralManager {
    /// Where this manager's state is preserved: it has a restore identifier and its app `bluetooth-peripheral`.
    var preservationKey: PreservedManager.Key? {
        guard let id = restoreIdentifier, app.backgroundModes.contains(.bluetoothPeripheral) else { return nil }
        return PreservedManager.Key(app: app.id, role: .peripheral, restoreIdentifier: id)
    }

    /// What the system would carry on for this manager: its services and its advertisement, including those a
    /// restarted system has yet to publish.
    static func restorableRecord(of s: State) -> PreservedPeripheralRecord {
        if let resume = s.resumeAtPowerOn {
            // With what the app published and advertised itself meanwhile.
            return PreservedPeripheralRecord(
                published: s.published.map(\.service) + resume.kept, advertising: s.advertising ?? resume.advertisement)
        }
        return PreservedPeripheralRecord(published: s.published.map(\.service), advertising: s.advertising)
    }

    /// Writes what the system would carry on for this manager to the store, when it changed (or forgets it when
    /// nothing is left): after a service is added or removed, advertising started or stopped.
    func persistRestorableState() {
        // A manager of an ended app writes nothing (what the system keeps for it, a kept manager writes).
        guard let key = preservationKey, launch == app.core.generation || isPreserved else { return }
        system.preserve(key, owner: session, modes: app.backgroundModes) {
            let record = self.locked.withLock { Self.restorableRecord(of: $0) }
            return record.isEmpty ? nil : record.encoded
        }
    }

    /// A kept manager of a restarted system takes `record`'s work: the system publishes its services and starts
    /// its advertisement once the controller is on (the work returned, for `keepForRestoration`), and this manager
    /// hears it (`.resumedServicesPublished`). Kept for its app, which is not running.
    func resume(_ record: PreservedPeripheralRecord) -> RestorationTable.Resume {
        // Each with its definition (one that cannot be published again is logged and left out).
        let publishable = record.makeServices().compactMap { service in
            switch Self.definition(of: service) {
            case .success(let definition): return (service, definition)
            case .failure(let error):
                Self.latencyLogger.warning(
                    "a preserved service cannot be published again: \(error)", metadata: ["service": "\(service.uuid)"])
                return nil
            }
        }
        let services = publishable.map(\.0)
        let advertisement = record.makeAdvertisement()
        locked.withLock { s in
            s.preserved = true
            s.resumeAtPowerOn = ResumedWork(services: services, advertisement: advertisement)
        }
        persistRestorableState()
        return RestorationTable.Resume(
            services: publishable.map(\.1),
            advertisement: advertisement.map { system.core.resumedAdvertisement($0.content) })
    }
}

/// The work a restarted system carries on for a peripheral manager from its preserved record, as the manager
/// knows it until the system says it started it (`PeripheralManager.resumedServicesPublished`).
struct ResumedWork {
    /// The record's services, in its order: the system publishes them in it, and says their handles in it.
    var services: [MutableService]
    var advertisement: AdvertisementData?
    /// Those the app took out (`remove`, `removeAllServices`) before the system published them: taken out again
    /// once it has (the system may be publishing them already).
    private(set) var withdrawn: Set<ObjectIdentifier> = []

    init(services: [MutableService], advertisement: AdvertisementData?) {
        self.services = services
        self.advertisement = advertisement
    }

    /// The services the app still has.
    var kept: [MutableService] { services.filter { !isWithdrawn($0) } }

    func isWithdrawn(_ service: MutableService) -> Bool { withdrawn.contains(ObjectIdentifier(service)) }

    mutating func withdraw(_ service: MutableService) {
        guard services.contains(where: { $0 === service }) else { return }
        withdrawn.insert(ObjectIdentifier(service))
    }

    mutating func withdrawAll() {
        withdrawn = Set(services.map(ObjectIdentifier.init))
    }

    /// The same work with each service replaced by `renewed`'s object for it (one it has none for is left out).
    func renewed(_ renewed: [ObjectIdentifier: MutableService]) -> ResumedWork {
        var work = ResumedWork(
            services: services.compactMap { renewed[ObjectIdentifier($0)] }, advertisement: advertisement)
        for service in services where isWithdrawn(service) {
            if let new = renewed[ObjectIdentifier(service)] { work.withdraw(new) }
        }
        return work
    }
}
