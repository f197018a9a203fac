extension Duration {
    /// Whole nanoseconds for a timer: sub-nanosecond parts dropped, a negative duration is 0, and anything
    /// beyond `Int64.max / 2` (about 146 years) is `Int64.max / 2`. A delay that long never fires in practice,
    /// and adding it to a clock's reading cannot overflow; a caller's "forever" (`.seconds(Int64.max)`) is safe.
    public var clampedNanoseconds: Int64 {
        let limit = Int64.max / 2
        guard self > .zero else { return 0 }
        let (seconds, attoseconds) = components
        let whole = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !whole.overflow, whole.partialValue <= limit else { return limit }
        return min(limit, whole.partialValue + attoseconds / 1_000_000_000)
    }
}

extension Duration {
    /// The duration in seconds, as a `Double` (for rates, printing, and `CFAbsoluteTime`).
    public var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension Duration {
    /// The duration in whole `unit`s, rounded to the nearest, kept within `range`: a controller parameter in the
    /// units its command takes (0.625 ms for scanning and advertising, 1.25 ms for connection intervals, 10 ms
    /// for supervision timeouts). `range` must lie within 0...0xFFFF.
    public func units(of unit: Duration, within range: ClosedRange<Int64>) -> UInt16 {
        let count = (clampedNanoseconds + unit.clampedNanoseconds / 2) / unit.clampedNanoseconds
        return UInt16(min(max(count, range.lowerBound), range.upperBound))
    }
}
