import NIOCore

/// Advertising or scan response data: the ordered list of AD structures an advertiser sends.
///
/// This type keeps the bytes: every structure, in the order received, whatever its type, so an unknown AD type
/// or an unusual order survives a decode/encode round trip. The meaning (flags, service UUIDs, local name,
/// manufacturer data...) is read through typed views (`flags`, `serviceUUIDs`, `localName`, ...) and written
/// through the `add...` builders; the public `AdvertisementData` of the `BLE` module is built from those views.
///
/// Wire format: a sequence of `[length][AD type][data]` structures, `length` counting the type octet and the
/// data. A zero length octet ends the significant part; what follows (usually zero padding to 31 octets) is
/// ignored.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part C, 11 (Advertising and scan response data format);
///   Core Specification Supplement v11, Part A, 1 (Data types definitions and formats).
public struct AdvertisingData: Sendable, Hashable, CustomStringConvertible {
    /// The AD structures, in wire order.
    public var structures: [ADStructure]

    /// The most octets legacy advertising PDUs carry (`AdvData` of ADV_IND and `ScanRspData`).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 2.3.1.1.
    public static let legacyMaximumLength = 31

    /// Data made of `structures`, in that order.
    public init(_ structures: [ADStructure] = []) {
        self.structures = structures
    }

    /// Decodes advertising or scan response data.
    ///
    /// Stops at a zero length octet or at the end of `bytes`. Throws `AdvertisingDataError.structureOverrun`
    /// when a length octet claims more octets than remain.
    public init(decoding bytes: some Collection<UInt8>) throws(AdvertisingDataError) {
        let octets = Array(bytes)
        var structures: [ADStructure] = []
        var index = 0
        while index < octets.count {
            let length = Int(octets[index])
            if length == 0 { break }  // early termination: the rest is not significant
            guard index + 1 + length <= octets.count else {
                throw .structureOverrun(
                    "AD structure at offset \(index) has length \(length), only \(octets.count - index - 1) octets follow"
                )
            }
            let type = ADType(rawValue: octets[index + 1])
            let data = Array(octets[(index + 2)..<(index + 1 + length)])
            structures.append(ADStructure(type: type, data: data))
            index += 1 + length
        }
        self.structures = structures
    }

    /// Decodes what can be decoded of `bytes`: every whole AD structure before a zero length octet or one that
    /// overruns the data (which real devices send). Never fails.
    public init(leniently bytes: some Collection<UInt8>) {
        let octets = Array(bytes)
        var structures: [ADStructure] = []
        var index = 0
        while index < octets.count {
            let length = Int(octets[index])
            if length == 0 || index + 1 + length > octets.count { break }
            structures.append(
                ADStructure(
                    type: ADType(rawValue: octets[index + 1]), data: Array(octets[(index + 2)..<(index + 1 + length)])))
            index += 1 + length
        }
        self.structures = structures
    }

    /// Decodes the readable bytes of `buffer` (without consuming them); see `init(decoding:)`.
    public init(buffer: ByteBuffer) throws(AdvertisingDataError) {
        try self.init(decoding: buffer.readableBytesView)
    }

    /// The encoded structures, without padding.
    public var bytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(count)
        for structure in structures {
            out.append(UInt8(1 + structure.data.count))
            out.append(structure.type.rawValue)
            out.append(contentsOf: structure.data)
        }
        return out
    }

    /// Appends the encoded structures to `buffer`; returns the number of octets written.
    @discardableResult
    public func encode(into buffer: inout ByteBuffer) -> Int {
        buffer.writeBytes(bytes)
    }

    /// The encoded length in octets (each structure's data plus its length and type octets).
    public var count: Int {
        structures.reduce(0) { $0 + $1.encodedLength }
    }

    /// Whether there is no structure at all.
    public var isEmpty: Bool { structures.isEmpty }

    /// Whether the encoding fits in a legacy advertising PDU (31 octets).
    public var fitsLegacyAdvertising: Bool { count <= Self.legacyMaximumLength }

    /// The structures of type `type`, in wire order.
    public func structures(ofType type: ADType) -> [ADStructure] {
        structures.filter { $0.type == type }
    }

    /// The data of the first structure of type `type`, if there is one.
    public subscript(type: ADType) -> [UInt8]? {
        structures.first(where: { $0.type == type })?.data
    }

    /// Appends a structure.
    public mutating func append(_ structure: ADStructure) {
        structures.append(structure)
    }

    /// Removes every structure of type `type`.
    public mutating func removeAll(ofType type: ADType) {
        structures.removeAll { $0.type == type }
    }

    public var description: String {
        "[" + structures.map(\.description).joined(separator: ", ") + "]"
    }
}

/// One AD structure: an AD type and its data.
///
/// On the wire the structure is preceded by a length octet (1 + `data.count`), so `data` holds at most 254
/// octets.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part C, 11.
public struct ADStructure: Sendable, Hashable, CustomStringConvertible {
    public var type: ADType
    /// The AD data, without the length and type octets.
    public private(set) var data: [UInt8]

    /// The most data octets one structure can carry (its length octet counts the type too).
    public static let maximumDataLength = 254

    /// A structure of `type` carrying `data`.
    ///
    /// - Precondition: `data.count <= 254`; a longer structure cannot be encoded (a programming error).
    public init(type: ADType, data: [UInt8]) {
        precondition(data.count <= Self.maximumDataLength, "an AD structure carries at most 254 data octets")
        self.type = type
        self.data = data
    }

    /// The encoded length: length octet, type octet and data.
    public var encodedLength: Int { 2 + data.count }

    public var description: String { "\(type): \(data.hexString)" }
}

/// Why advertising data could not be decoded.
///
/// Equality and hashing consider only `code`; the message is diagnostic.
public struct AdvertisingDataError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure.
    public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// A length octet claims more octets than the buffer holds.
        public static let structureOverrun = Code(rawValue: "structureOverrun")
        public var description: String { rawValue }
    }

    public let code: Code
    private let message: String

    public init(code: Code, message: String) {
        self.code = code
        self.message = message
    }

    /// A length octet claims more octets than the buffer holds.
    public static func structureOverrun(_ message: String) -> AdvertisingDataError {
        AdvertisingDataError(code: .structureOverrun, message: message)
    }

    public var description: String { "AdvertisingDataError.\(code): \(message)" }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
