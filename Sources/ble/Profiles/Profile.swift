import BLE
import BLEProfiles
import Foundation

/// A GATT database and how a device advertises it: what `ble serve` publishes and what each connectable
/// device of the simulated world is.
struct Profile {
    /// The advertised local name (and GAP Device Name).
    var name: String
    var services: [ProfileService]
    /// The services listed in advertising (the primary ones when nil).
    var advertisedServices: [BluetoothUUID]?
    var manufacturerData: Data? = nil
    var serviceData: [BluetoothUUID: Data]? = nil
    /// The TX Power Level field advertised, in dBm.
    var txPowerLevel: Int? = nil
    /// Makes the device's behaviour: what it answers to reads, writes and subscriptions.
    var behaviour: @Sendable () -> ProfileBehaviour = { ProfileBehaviour() }
    /// False for a device that only advertises (non-connectable, or scannable when it has a scan response).
    var connectable = true
    /// The device's own name when it advertises none (names its simulated controller).
    var systemName: String? = nil
    /// The device's link: MTU, data length, buffers.
    var configuration = BluetoothSystem.Configuration()

    /// What names the device's `BluetoothSystem`.
    var deviceName: String { name.isEmpty ? (systemName ?? "device") : name }

    /// The services listed in advertising: those asked for (the primary ones by default), less the unreachable
    /// ones (a central would look for them in vain).
    var servicesToAdvertise: [BluetoothUUID] {
        let unreachable = Set(unreachableServices)
        return (advertisedServices ?? services.filter(\.primary).map(\.uuid)).filter { !unreachable.contains($0) }
    }

    /// Secondary services that no reachable service includes: primary service discovery never finds them, and
    /// only a service that includes one leads a central to it.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 2.5.1 (a secondary service is referenced by an include).
    var unreachableServices: [BluetoothUUID] {
        var reachable = Set(services.filter(\.primary).map(\.uuid))
        var grew = true
        while grew {
            grew = false
            for service in services where reachable.contains(service.uuid) {
                for included in service.includes where reachable.insert(included).inserted { grew = true }
            }
        }
        return services.filter { !$0.primary && !reachable.contains($0.uuid) }.map(\.uuid)
    }

    /// What a user serving this profile should know before it is advertised: secondary services no central can
    /// reach, and a name too long for both an advertisement and a scan response.
    var warnings: [String] {
        var lines = unreachableServices.map { uuid in
            "service \(uuid.labelled) is secondary and no primary service includes it: centrals cannot discover it"
                + ((advertisedServices ?? []).contains(uuid) ? "; not advertising it" : "")
        }
        // A name goes whole into the advertisement or the scan response (29 octets of name at most in either);
        // longer, centrals only see it shortened.
        let room = AdvertisingData.legacyMaximumLength - 2
        if name.utf8.count > room {
            let shortened =
                AdvertisingData.packed(localName: name, serviceUUIDs: servicesToAdvertise).shortenedLocalName ?? ""
            lines.append(
                "the name is \(name.utf8.count) bytes, longer than an advertisement or a scan response holds (\(room)): "
                    + "it is advertised shortened, as \"\(shortened)\" (a TARGET it begins finds the device)")
        }
        return lines
    }
}

/// A device's behaviour. The base class is a plain value store: reads answer the stored value, writes
/// replace it (and notify or indicate subscribers when the characteristic allows). Subclasses give the
/// built-in profiles the behaviour of the devices they name. Called on the device's queue only.
class ProfileBehaviour: @unchecked Sendable {
    // @unchecked: every field is touched only on the owning ServedDevice's queue.
    /// The device this behaviour runs, set before `started()`.
    weak var device: ServedDevice?
    var values: [BluetoothUUID: Data] = [:]

    init() {}

    /// Services are published and advertising has started.
    func started() {}

    /// The value a read at `offset` sees, or an ATT error.
    func read(_ uuid: BluetoothUUID) -> Result<Data, ATTRefusal> {
        .success(values[uuid] ?? Data())
    }

    /// A write (with or without response); the result answers a write request.
    func write(_ uuid: BluetoothUUID, value: Data) -> ATTErrorCode {
        values[uuid] = value
        device?.update(uuid, value)
        return .success
    }

    /// A write as it came: `command` for a Write Command (nothing is answered). `answer` answers a request, now or
    /// later; by default the write is `write(_:value:)`'s, answered at once.
    func write(_ uuid: BluetoothUUID, value: Data, command: Bool, answer: @escaping (ATTErrorCode) -> Void) {
        answer(write(uuid, value: value))
    }

    func subscribed(_ uuid: BluetoothUUID) {}
    func unsubscribed(_ uuid: BluetoothUUID) {}
}

/// An ATT error code a behaviour answers a read with.
struct ATTRefusal: Error {
    let code: ATTErrorCode
}
