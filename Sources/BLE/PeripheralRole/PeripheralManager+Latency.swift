import BLECore
import BLEHCI
import BLEHost
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

    /// The parameters asked for. CoreBluetooth does not publish its own; these are ours, chosen to meet Apple's
    /// accessory rules for requested parameters (IOSRules.md 9.4: a minimum that is a multiple of 15 ms, a maximum
    /// at least 15 ms above it, no peripheral latency, a 6 s supervision timeout).
    var parameters: (intervalMin: UInt16, intervalMax: UInt16, latency: UInt16, timeout: UInt16) {
        switch self {
        case .low: (12, 24, 0, 600)
        case .medium: (24, 36, 0, 600)
        case .high: (72, 96, 0, 600)
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
        let p = latency.parameters
        let update = HCILEConnectionUpdate(
            handle: handle, connectionIntervalMin: p.intervalMin, connectionIntervalMax: p.intervalMax,
            maxLatency: p.latency, supervisionTimeout: p.timeout)
        system.core.host.send(update) { result in
            if case .failure(let error) = result {
                Self.latencyLogger.warning(
                    "the \(latency) connection latency for \(central) was not asked for: \(error)")
            }
        }
    }
}
