import BLEHost
import Foundation
import Synchronization

/// A link's parameters as the LL procedures left them (not CoreBluetooth API, which hides them): for tests, tools
/// and anyone tuning a link. Read from `Peripheral.link` (central side) or `Central.link` (peripheral side).
public struct LinkParameters: Sendable, Hashable, CustomStringConvertible {
    /// The connection interval.
    public var interval: Duration
    /// Connection events the peripheral may skip.
    public var peripheralLatency: Int
    public var supervisionTimeout: Duration
    /// The PHYs this side transmits and receives on.
    public var txPHY: LinkPHY
    public var rxPHY: LinkPHY
    /// The LL payload each direction carries at most.
    public var maxTxOctets: Int
    public var maxRxOctets: Int
    /// The ATT_MTU.
    public var attMTU: Int
    /// Whether the link is encrypted (by a pairing, or with a bond's key).
    public var isEncrypted: Bool

    init(_ info: LinkInfo, mtu: Int) {
        interval = .microseconds(Int64(info.interval) * 1250)
        peripheralLatency = Int(info.latency)
        supervisionTimeout = .milliseconds(Int64(info.supervisionTimeout) * 10)
        txPHY = info.txPHY
        rxPHY = info.rxPHY
        maxTxOctets = info.maxTxOctets
        maxRxOctets = info.maxRxOctets
        attMTU = mtu
        isEncrypted = info.encrypted
    }

    public var description: String {
        "interval \(interval), latency \(peripheralLatency), timeout \(supervisionTimeout), "
            + "PHY \(txPHY)/\(rxPHY), LL payload \(maxTxOctets)/\(maxRxOctets), ATT_MTU \(attMTU), "
            + (isEncrypted ? "encrypted" : "not encrypted")
    }
}

extension Peripheral {
    /// The link's current parameters; nil when not connected.
    public var link: LinkParameters? {
        guard let handle = locked.withLock({ $0.state == .connected ? $0.handle : nil }), let host,
            let info = host.linkInfo(on: handle)
        else { return nil }
        return LinkParameters(info, mtu: host.mtu(on: handle))
    }
}
