import BLESystem

/// Whether the user allowed the app to use Bluetooth (`CBManagerAuthorization`).
///
/// iOS asks once, when the app first creates a manager; until the user answers, managers stay `.unknown`; a
/// denied or restricted app's managers are `.unauthorized`. Nothing asks a user here: a system on a real
/// controller is `.allowedAlways`, and a simulation sets ``BluetoothSystem/authorization`` to play the user, so
/// an app's permission flow can be tested (per app once a system hosts several apps).
public enum ManagerAuthorization: Sendable, Hashable, CustomStringConvertible {
    /// Not asked yet.
    case notDetermined
    /// Not allowed, and the user cannot change that (a device policy).
    case restricted
    /// The user said no.
    case denied
    /// Allowed, in the foreground and the background.
    case allowedAlways

    init(_ system: SystemAuthorization) {
        switch system {
        case .notDetermined: self = .notDetermined
        case .restricted: self = .restricted
        case .denied: self = .denied
        case .allowedAlways: self = .allowedAlways
        }
    }

    var system: SystemAuthorization {
        switch self {
        case .notDetermined: .notDetermined
        case .restricted: .restricted
        case .denied: .denied
        case .allowedAlways: .allowedAlways
        }
    }

    public var description: String {
        switch self {
        case .notDetermined: "notDetermined"
        case .restricted: "restricted"
        case .denied: "denied"
        case .allowedAlways: "allowedAlways"
        }
    }
}

extension BluetoothSystem {
    /// Whether the user allowed Bluetooth on this system. Setting it plays the user answering the prompt or
    /// changing the setting: every manager whose state changes (`.unknown` while `.notDetermined`,
    /// `.unauthorized` when denied or restricted, the controller's state when allowed) hears
    /// `didUpdateState` on its queue.
    public var authorization: ManagerAuthorization {
        get { ManagerAuthorization(core.authorization) }
        set { core.setAuthorization(newValue.system) }
    }
}

extension CentralManager {
    /// The app's authorization (`CBManager.authorization`): the process default system's, or `.allowedAlways`
    /// when no manager has made it yet (asking opens no transport).
    public static var authorization: ManagerAuthorization {
        BluetoothSystem.existingProcessDefault?.authorization ?? .allowedAlways
    }
    /// This manager's system's authorization (CoreBluetooth's deprecated instance property, kept for ports).
    public var authorization: ManagerAuthorization { system.authorization }
}

extension PeripheralManager {
    /// The app's authorization (`CBManager.authorization`): the process default system's, or `.allowedAlways`
    /// when no manager has made it yet (asking opens no transport).
    public static var authorization: ManagerAuthorization {
        BluetoothSystem.existingProcessDefault?.authorization ?? .allowedAlways
    }
    /// This manager's system's authorization (CoreBluetooth's deprecated instance property, kept for ports).
    public var authorization: ManagerAuthorization { system.authorization }
}
