/// The Supported_Commands bitmask of Read Local Supported Commands: 64 octets, one bit per command.
///
/// `supports(_:)` knows the octet and bit of every command this module defines; `bitPosition(of:)` exposes
/// that table, and `init(supporting:)` builds the mask a controller reports.
///
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 6.27 (Supported Commands) and 7.4.2.
public struct HCISupportedCommands: Sendable, Hashable, CustomStringConvertible {
    /// The mask's size in octets.
    public static let octetCount = 64

    /// The 64 octets as sent: octet 0 first, bit 0 the least significant.
    public private(set) var octets: [UInt8]

    /// From the octets as sent; shorter input is padded with zeros, longer input cut to 64 octets.
    public init(octets: [UInt8]) {
        var octets = Array(octets.prefix(Self.octetCount))
        octets.append(contentsOf: repeatElement(0, count: Self.octetCount - octets.count))
        self.octets = octets
    }

    /// A mask with no command set.
    public init() { self.octets = Array(repeating: 0, count: Self.octetCount) }

    /// A mask with the bits of `opcodes` set (opcodes the table does not know are skipped).
    public init(supporting opcodes: some Sequence<HCIOpcode>) {
        self.init()
        for opcode in opcodes { insert(opcode) }
    }

    /// Whether the mask claims `opcode`. Read Local Supported Commands has no bit (answering it is the
    /// proof) and is always supported; an opcode the table does not know is reported unsupported.
    public func supports(_ opcode: HCIOpcode) -> Bool {
        if opcode == .readLocalSupportedCommands { return true }
        guard let (octet, bit) = Self.bitPosition(of: opcode) else { return false }
        return octets[octet] & (1 << bit) != 0
    }

    /// Sets the bit of `opcode`; returns `false` if the table has no bit for it.
    @discardableResult
    public mutating func insert(_ opcode: HCIOpcode) -> Bool {
        guard let (octet, bit) = Self.bitPosition(of: opcode) else { return false }
        octets[octet] |= 1 << bit
        return true
    }

    /// The octet (0...63) and bit (0...7) of `opcode` in the mask, for the commands this module defines.
    public static func bitPosition(of opcode: HCIOpcode) -> (octet: Int, bit: Int)? {
        table[opcode]
    }

    /// Octet and bit per command, from the table of Vol 4, Part E, 6.27.
    private static let table: [HCIOpcode: (octet: Int, bit: Int)] = [
        .disconnect: (0, 5),
        .readRemoteVersionInformation: (2, 7),
        .setEventMask: (5, 6),
        .reset: (5, 7),
        .readLocalVersionInformation: (14, 3),
        .readLocalSupportedFeatures: (14, 5),
        .readBufferSize: (14, 7),
        .readBDADDR: (15, 1),
        .readRSSI: (15, 5),
        .setEventMaskPage2: (22, 2),
        .writeLEHostSupport: (24, 6),
        .leSetEventMask: (25, 0),
        .leReadBufferSize: (25, 1),
        .leReadLocalSupportedFeatures: (25, 2),
        .leSetRandomAddress: (25, 4),
        .leSetAdvertisingParameters: (25, 5),
        .leReadAdvertisingPhysicalChannelTxPower: (25, 6),
        .leSetAdvertisingData: (25, 7),
        .leSetScanResponseData: (26, 0),
        .leSetAdvertisingEnable: (26, 1),
        .leSetScanParameters: (26, 2),
        .leSetScanEnable: (26, 3),
        .leCreateConnection: (26, 4),
        .leCreateConnectionCancel: (26, 5),
        .leReadFilterAcceptListSize: (26, 6),
        .leClearFilterAcceptList: (26, 7),
        .leAddDeviceToFilterAcceptList: (27, 0),
        .leRemoveDeviceFromFilterAcceptList: (27, 1),
        .leConnectionUpdate: (27, 2),
        .leReadRemoteFeatures: (27, 5),
        .leEncrypt: (27, 6),
        .leRand: (27, 7),
        .leEnableEncryption: (28, 0),
        .leLongTermKeyRequestReply: (28, 1),
        .leLongTermKeyRequestNegativeReply: (28, 2),
        .leReadSupportedStates: (28, 3),
        .leRemoteConnectionParameterRequestReply: (33, 4),
        .leRemoteConnectionParameterRequestNegativeReply: (33, 5),
        .leSetDataLength: (33, 6),
        .leReadSuggestedDefaultDataLength: (33, 7),
        .leWriteSuggestedDefaultDataLength: (34, 0),
        .leReadMaximumDataLength: (35, 3),
        .leReadPHY: (35, 4),
        .leSetDefaultPHY: (35, 5),
        .leSetPHY: (35, 6),
        .leReadBufferSizeV2: (41, 5),
    ]

    /// The opcodes the table knows, in opcode order.
    public static var knownOpcodes: [HCIOpcode] { table.keys.sorted() }

    public static func == (a: Self, b: Self) -> Bool { a.octets == b.octets }
    public func hash(into hasher: inout Hasher) { hasher.combine(octets) }

    public var description: String {
        let known = Self.knownOpcodes.filter { supports($0) }.map { $0.name ?? "\($0)" }
        return "HCISupportedCommands(\(known.joined(separator: ", ")))"
    }
}
