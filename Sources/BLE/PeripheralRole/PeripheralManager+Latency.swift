import BLECore
import BLESystem
import Foundation
import Logging
import Synchronization

/// How quickly a peripheral wants its central to talk to it (`CBPeripheralManagerConnectionLatency`): a
/// shorter connection interval answers sooner and costs more power.
public enum PeripheralManagerConnectionLatency: Int, Sendable, Hashable, CustomStringConvertible {
    /// Connection interval 15 to 30 ms.
    case low = 0
    /// Connection interval 30 to 45 ms.
    case medium
    /// Connection interval 90 to 120 ms.
    case high

    /// What the system asks the central for (`ConnectionLatencyWish`: the parameters are the system's).
    var wish: ConnectionLatencyWish {
        switch self {
        case .low: .low
        case .medium: .medium
        case .high: .high
        }
    }

    public var description: String {
        switch self {
        case .low: "low"
        case .medium: "medium"
        case .high: "high"
        }
    }
}

extension PeripheralManager {
    static let latencyLogger = Logger(label: "swift-ble.peripheral-manager")

    /// Asks `central` to use the connection interval of `latency` (`setDesiredConnectionLatency(_:for:)`): the
    /// host sends LE Connection Update, which the controller carries to the central as a Connection Parameters
    /// Request. As in CoreBluetooth nothing is reported back; the central may refuse or pick other values, and
    /// a refusal by our own controller (a link gone, another update under way) is logged.
    public func setDesiredConnectionLatency(_ latency: PeripheralManagerConnectionLatency, for central: Central) {
        let handle = ConnectionHandle(central.handle.withLock { $0 })
        // Only a central still connected to this manager: a handle outlives its link and may be reused.
        guard locked.withLock({ $0.centrals[handle] === central }) else {
            Self.latencyLogger.warning(
                "the \(latency) connection latency was not asked for: \(central) is not connected")
            return
        }
        system.core.requestConnectionLatency(latency.wish, on: handle) { result in
            if case .failure(let error) = result {
                Self.latencyLogger.warning(
                    "the \(latency) connection latency for \(central) was not asked for: \(error)")
            }
        }
    }
}
