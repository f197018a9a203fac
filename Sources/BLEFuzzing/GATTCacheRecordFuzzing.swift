import BLEGATT

extension FuzzTarget {
    /// A GATT cache record as a store file holds it, into `GATTCacheRecord(decoding:)`. What decodes encodes to
    /// bytes that decode to the same record, and those bytes are already canonical.
    static let gattCacheRecord = FuzzTarget("gatt-cache-record", "a stored GATT cache record into its decoder") {
        input throws(Violation) in
        guard let record = GATTCacheRecord(decoding: input) else { return }
        let encoded = record.encoded()
        try expect(GATTCacheRecord(decoding: encoded) == record, "the record does not survive its own encoding")
        try expect(GATTCacheRecord(decoding: encoded)?.encoded() == encoded, "the encoding is not canonical")
    }
}
