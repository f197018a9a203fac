/// The connection parameters a peripheral asks for in a Connection Parameter Update Request, and a central
/// hands to its controller (HCI_LE_Connection_Update).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 4.20; Vol 6, Part B, 4.5.2 (supervision timeout rule).
public struct L2CAPConnectionParameters: Hashable, Sendable, CustomStringConvertible {
    /// Interval_Min, in units of 1.25 ms, 6...3200 (7.5 ms...4 s).
    public var minimumInterval: UInt16
    /// Interval_Max, in units of 1.25 ms, 6...3200; not below `minimumInterval`.
    public var maximumInterval: UInt16
    /// Latency: connection events the peripheral may skip, 0...499.
    public var peripheralLatency: UInt16
    /// Timeout: supervision timeout in units of 10 ms, 10...3200 (100 ms...32 s).
    public var supervisionTimeout: UInt16

    public static let intervalRange: ClosedRange<UInt16> = 6...3200
    public static let latencyRange: ClosedRange<UInt16> = 0...499
    public static let supervisionTimeoutRange: ClosedRange<UInt16> = 10...3200

    public init(minimumInterval: UInt16, maximumInterval: UInt16, peripheralLatency: UInt16, supervisionTimeout: UInt16)
    {
        self.minimumInterval = minimumInterval
        self.maximumInterval = maximumInterval
        self.peripheralLatency = peripheralLatency
        self.supervisionTimeout = supervisionTimeout
    }

    /// Throws `.invalidParameters` unless every field is in range, the minimum interval is not above the
    /// maximum, and the supervision timeout exceeds `(1 + latency) * maximumInterval * 2` (in milliseconds:
    /// `timeout * 10 > (1 + latency) * interval * 1.25 * 2`), so that a link is not dropped while the
    /// peripheral legitimately sleeps.
    public func validate() throws(L2CAPError) {
        guard Self.intervalRange.contains(minimumInterval), Self.intervalRange.contains(maximumInterval) else {
            throw .invalidParameters("interval \(minimumInterval)...\(maximumInterval) outside 6...3200")
        }
        guard minimumInterval <= maximumInterval else {
            throw .invalidParameters("minimum interval \(minimumInterval) above maximum \(maximumInterval)")
        }
        guard Self.latencyRange.contains(peripheralLatency) else {
            throw .invalidParameters("peripheral latency \(peripheralLatency) outside 0...499")
        }
        guard Self.supervisionTimeoutRange.contains(supervisionTimeout) else {
            throw .invalidParameters("supervision timeout \(supervisionTimeout) outside 10...3200")
        }
        // timeout*10 ms > (1+latency) * max*1.25 ms * 2  <=>  4*timeout > (1+latency) * max
        guard 4 * Int(supervisionTimeout) > (1 + Int(peripheralLatency)) * Int(maximumInterval) else {
            throw .invalidParameters(
                "supervision timeout \(supervisionTimeout)*10 ms not above (1+\(peripheralLatency))*\(maximumInterval)*2.5 ms"
            )
        }
    }

    /// Whether `validate()` passes.
    public var isValid: Bool {
        do {
            try validate()
            return true
        } catch { return false }
    }

    public var description: String {
        "interval \(minimumInterval)...\(maximumInterval) (x1.25 ms), latency \(peripheralLatency), timeout \(supervisionTimeout) (x10 ms)"
    }
}
