import Foundation

/// Where a controller stands on the simulated radio's plane, in meters.
public struct RadioPosition: Sendable, Hashable, CustomStringConvertible {
    public var x: Double
    public var y: Double

    public init(x: Double, y: Double) {
        self.x = x
        self.y = y
    }

    public func distance(to other: RadioPosition) -> Double {
        squaredDistance(to: other).squareRoot()
    }

    func squaredDistance(to other: RadioPosition) -> Double {
        (x - other.x) * (x - other.x) + (y - other.y) * (y - other.y)
    }

    public var description: String { "(\(x) m, \(y) m)" }
}

/// The propagation model of the simulated radio: log-distance path loss.
///
/// Mean received power `P(d) = txPower + referenceLoss - 10 · exponent · log10(d / 1 m)` with
/// `referenceLoss = -40 dB` (received power at 1 m from a 0 dBm transmitter) and `exponent = 2.75`, an
/// indoor-ish value between free space (2) and cluttered buildings (3–4). A packet is received when the mean
/// power is at least `sensitivity = -95 dBm`, which at 0 dBm transmit power gives a range of 100 m (and
/// about 170 m at +8 dBm, 58 m at -8 dBm). Distances under 10 cm count as 10 cm.
///
/// Reception is decided on the mean power so that range is a sharp, predictable boundary; the RSSI a
/// controller *reports* (advertising reports, Read RSSI) adds a uniform jitter of ±2 dB drawn from the
/// radio's seeded generator, and optional packet loss (`SimulatedRadio.packetLossRate`) is independent of
/// distance.
public enum RadioPropagation {
    public static let referenceLossAt1m: Double = -40
    public static let pathLossExponent: Double = 2.75
    public static let sensitivity: Double = -95
    public static let reportedJitter: Double = 2

    /// Mean received power in dBm at `distance` meters from a transmitter at `txPower` dBm.
    public static func meanReceivedPower(txPower: Int8, distance: Double) -> Double {
        Double(txPower) + referenceLossAt1m - 10 * pathLossExponent * log10(max(distance, 0.1))
    }

    /// Whether a packet sent at `txPower` is received `distance` meters away.
    public static func inRange(txPower: Int8, distance: Double) -> Bool {
        meanReceivedPower(txPower: txPower, distance: distance) >= sensitivity
    }

    /// `inRange` for a squared distance, without a logarithm or a square root: every exchange of every link
    /// asks it, and the two logarithms were a few per cent of a long simulation. The mean power falls with
    /// distance, so being in range is being within the transmit power's range, worked out once per power.
    static func reaches(txPower: Int8, squaredDistance: Double) -> Bool {
        squaredDistance <= squaredRanges[Int(txPower) + 128]
    }

    /// For each transmit power from -128 to 127 dBm, the square of the farthest distance in range, or -1 when
    /// not even the model's 10 cm floor is (so that no distance is).
    private static let squaredRanges: [Double] = (-128...127).map { power in
        let range = pow(10, (Double(power) + referenceLossAt1m - sensitivity) / (10 * pathLossExponent))
        return range >= 0.1 ? range * range : -1
    }
}

/// The LE physical layers the virtual controller implements; the raw value is HCI's PHY number. LE Coded is
/// modelled with S=8 coding (125 kbit/s), the long-range one.
enum LEPhy: UInt8 {
    case le1M = 1
    case le2M = 2
    case leCoded = 3

    /// The PHY's bit in LL_PHY_REQ/RSP/UPDATE_IND and in HCI's PHY preference masks (Vol 6, Part B, 2.4.2.22).
    var bit: UInt8 {
        switch self {
        case .le1M: 1
        case .le2M: 2
        case .leCoded: 4
        }
    }

    init?(bit: UInt8) {
        switch bit {
        case 1: self = .le1M
        case 2: self = .le2M
        case 4: self = .leCoded
        default: return nil
        }
    }

    /// Air time in nanoseconds of a packet with `payload` bytes of PDU payload (after the 2-byte header).
    ///
    /// 1M: `8 · (1 + 4 + 2 + L + MIC + 3)` µs; 2M: `4 · (2 + 4 + 2 + L + MIC + 3)` µs (preamble, access
    /// address, header, payload, MIC, CRC). Coded S=8: 80 µs preamble, 256 µs access address, 16 µs CI and 24 µs
    /// TERM1, then `64 · (2 + L + MIC + 3)` µs and 24 µs TERM2.
    /// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 2.1 and 2.2 (Packet formats), Vol 6, Part A, 3.2 (symbol rates).
    func airTime(payload: Int, mic: Bool = false) -> Int64 {
        let micBytes = mic ? 4 : 0
        switch self {
        case .le1M: return Int64(8 * (1 + 4 + 2 + payload + micBytes + 3)) * VirtualTime.microsecond
        case .le2M: return Int64(4 * (2 + 4 + 2 + payload + micBytes + 3)) * VirtualTime.microsecond
        case .leCoded:
            return Int64(80 + 256 + 16 + 24 + 64 * (2 + payload + micBytes + 3) + 24) * VirtualTime.microsecond
        }
    }

    /// The `Max_TX_Time` / `Max_RX_Time` value (µs) for `octets` payload bytes on this PHY (counting a MIC,
    /// as the spec does: 27 octets on 1M is 328 µs, 251 octets 2120 µs).
    func maxTime(octets: Int) -> UInt16 {
        UInt16(airTime(payload: octets, mic: true) / VirtualTime.microsecond)
    }

    /// The most octets (up to 251) whose PDU takes at most `time` µs on this PHY, counted as `maxTime` counts.
    func octets(within time: Int) -> Int {
        var octets = 251
        while octets > 0 && Int(maxTime(octets: octets)) > time { octets -= 1 }
        return octets
    }
}

/// T_IFS, the inter-frame space between two packets of one exchange (150 µs).
/// - SeeAlso: Core Spec 5.4, Vol 6, Part B, 4.1.1.
let interFrameSpace: Int64 = 150 * VirtualTime.microsecond
