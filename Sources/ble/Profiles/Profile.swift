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

    var servicesToAdvertise: [BluetoothUUID] {
        advertisedServices ?? services.filter(\.primary).map(\.uuid)
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
