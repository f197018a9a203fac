import BLEATT

/// How the parts of a queued write (Prepare Write Requests, then Execute Write Request) change one attribute's
/// value: each part, in the order the client queued it, overwrites the value from its offset on, and extends it
/// when it reaches past the end.
///
/// - A part whose offset lies past the value as it stands when the part is applied fails the whole execute with
///   Invalid Offset (Vol 3, Part F, 3.4.6.1 and 3.4.6.3): the octets between would be undefined.
/// - A result longer than 512 octets, the longest attribute value (3.2.9), fails with Invalid Attribute Value
///   Length.
/// - When the first part starts at offset 0 the client is writing the whole value (Write Long Characteristic
///   Values and Reliable Writes, Vol 3, Part G, 4.9.4-4.9.5): the value ends where the farthest part ends, as
///   after a Write Request (octets between parts that it skipped keep their old values). Otherwise the client
///   rewrites part of the value and the rest is kept.
///
/// The GATT server applies it to the values it stores; an application that serves a value itself applies it to
/// the parts it is handed (`BLE`'s `ATTRequest.value(after:appliedTo:)`).
public enum GATTQueuedWrites {
    /// The value `parts` (one attribute's, in queue order) make of `current`, or the error that refuses them.
    public static func value(
        applying parts: some Sequence<(offset: Int, value: [UInt8])>, to current: [UInt8]
    ) -> Result<[UInt8], Refusal> {
        var value = current
        var wholeValue: Bool?
        var end = 0
        for part in parts {
            guard part.offset >= 0, part.offset <= value.count else { return .failure(Refusal(.invalidOffset)) }
            let partEnd = part.offset + part.value.count
            guard partEnd <= GATTDatabase.maximumValueLength else {
                return .failure(Refusal(.invalidAttributeValueLength))
            }
            if wholeValue == nil { wholeValue = part.offset == 0 }
            if partEnd > value.count { value += [UInt8](repeating: 0, count: partEnd - value.count) }
            value.replaceSubrange(part.offset..<partEnd, with: part.value)
            end = max(end, partEnd)
        }
        return .success(wholeValue == true ? Array(value.prefix(end)) : value)
    }

    /// The ATT error a queued write is refused with.
    public struct Refusal: Error, Sendable, Hashable {
        public var code: ATTErrorCode
        public init(_ code: ATTErrorCode) { self.code = code }
    }
}
