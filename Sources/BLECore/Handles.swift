/// An HCI connection handle: 12 bits, 0x0000...0x0EFF.
///
/// A handle names one link for its lifetime; the controller may reuse it after the link closes, so a handle
/// is never compared across connections.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 5.4.2 (Connection_Handle).
public struct ConnectionHandle: RawRepresentable, Sendable, Hashable, Comparable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue & 0x0FFF }
    public init(_ value: UInt16) { self.init(rawValue: value) }
    public static let maximum: UInt16 = 0x0EFF
    public var description: String { "0x" + String(format4: rawValue) }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// An ATT attribute handle, 0x0001...0xFFFF (0x0000 is reserved and never names an attribute).
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.2.2 (Attribute handle).
public struct AttributeHandle: RawRepresentable, Sendable, Hashable, Comparable, Strideable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ value: UInt16) { self.rawValue = value }
    public static let min = AttributeHandle(0x0001)
    public static let max = AttributeHandle(0xFFFF)
    public var description: String { "0x" + String(format4: rawValue) }
    public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
    public func distance(to other: AttributeHandle) -> Int { Int(other.rawValue) - Int(rawValue) }
    public func advanced(by n: Int) -> AttributeHandle { AttributeHandle(UInt16(clamping: Int(rawValue) + n)) }
}

/// An L2CAP channel identifier. LE fixed channels: ATT 0x0004, LE signalling 0x0005, SMP 0x0006.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part A, 2.1 (Channel identifiers).
public struct L2CAPChannelID: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    public var rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public static let att = L2CAPChannelID(rawValue: 0x0004)
    public static let leSignaling = L2CAPChannelID(rawValue: 0x0005)
    public static let smp = L2CAPChannelID(rawValue: 0x0006)
    public var description: String { "0x" + String(format4: rawValue) }
}

extension String {
    /// Four upper-case hex digits.
    init(format4 value: UInt16) {
        let s = String(value, radix: 16, uppercase: true)
        self = String(repeating: "0", count: 4 - s.count) + s
    }
}
