import BLECore
import BLESMP
import BLESystem
import Foundation

/// What a pairing agreed with a peer. A swift-ble extension: iOS pairs out of the app's sight and tells it
/// nothing of the result.
public struct PairingResult: Sendable, Hashable {
    /// How the two devices authenticated each other (Core Spec 5.4, Vol 3, Part H, 2.3.5.1).
    public enum Method: Sendable, Hashable, CustomStringConvertible {
        /// No authentication: no protection against a man in the middle.
        case justWorks
        /// A six-digit passkey shown on one device and typed on the other (or typed on both).
        case passkeyEntry
        /// Both devices showed six digits and their users confirmed they match (Secure Connections only).
        case numericComparison

        public var description: String {
            switch self {
            case .justWorks: "Just Works"
            case .passkeyEntry: "Passkey Entry"
            case .numericComparison: "Numeric Comparison"
            }
        }

        init(_ method: PairingMethod) {
            switch method {
            case .justWorks: self = .justWorks
            case .passkeyEntry: self = .passkeyEntry
            case .numericComparison: self = .numericComparison
            }
        }
    }

    /// The identifier the system knows the peer by from now on: the bond's, which differs from the
    /// `Peripheral`'s when the peer told an identity address another identifier already had.
    public var peer: UUID
    public var method: Method
    /// LE Secure Connections (P-256 key agreement); false: LE legacy pairing.
    public var secureConnections: Bool
    /// The keys are authenticated: the method protected against a man in the middle.
    public var authenticated: Bool
    /// Both sides keep the keys: the next link is encrypted without pairing again.
    public var bonded: Bool
    /// The encryption key's size in octets, 7 to 16.
    public var keySize: Int

    public init(
        peer: UUID, method: Method, secureConnections: Bool, authenticated: Bool, bonded: Bool, keySize: Int
    ) {
        self.peer = peer
        self.method = method
        self.secureConnections = secureConnections
        self.authenticated = authenticated
        self.bonded = bonded
        self.keySize = keySize
    }
}

/// A bond this system keeps with a peer: the keys of a bonding pairing, so that the next link is encrypted
/// without pairing again. A swift-ble extension: iOS keeps its bonds out of the apps' reach (Settings lists and
/// forgets them); here `BluetoothSystem.bonds` lists them and `removeBond(for:)` forgets one.
public struct Bond: Sendable, Hashable {
    /// The identifier the system knows the peer by (a `Peripheral`'s, or a `Central`'s).
    public var identifier: UUID
    /// The peer's identity address: the one it gave in pairing (public or static random), else the address it
    /// paired from.
    public var identityAddress: BluetoothAddress
    /// The name the system last saw the peer advertise, if any.
    public var name: String?
    /// The peer gave an Identity Resolving Key: the system knows it under its resolvable private addresses too.
    public var resolvesPrivateAddresses: Bool
    /// The keys are authenticated (the pairing protected against a man in the middle).
    public var authenticated: Bool
    /// Made by LE Secure Connections; false: LE legacy pairing.
    public var secureConnections: Bool
    /// The encryption key's size in octets, 7 to 16.
    public var keySize: Int
    /// When the pairing made it (in a simulation: virtual time from 2026-01-01T00:00:00Z).
    public var created: Date

    init(_ bond: StoredBond, name: String?) {
        identifier = bond.identifier
        identityAddress = bond.identityAddress
        self.name = name
        resolvesPrivateAddresses = bond.resolvingKey.map { $0.contains { $0 != 0 } } ?? false
        authenticated = bond.authenticated
        secureConnections = bond.secureConnections
        keySize = Int(bond.keySize)
        created = Date(timeIntervalSince1970: TimeInterval(bond.created))
    }
}
