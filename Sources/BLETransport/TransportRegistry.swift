import Synchronization

/// Where the transports this process can open are registered, by spec kind.
///
/// The public `BLE` module must not depend on the POSIX transports (they do I/O the library does not force on
/// its users), so it reaches them through this registry: a program that wants real controllers registers
/// openers at start-up (the `ble` tool calls `PosixTransports.register(in: .shared)` from BLETransportPosix),
/// and `BluetoothSystem.connect(transport:)` calls `TransportRegistry.shared.open(spec)` for every kind but
/// `virtual`.
///
/// Thread-safe: registration and lookup may happen from any thread; an opener runs outside the lock.
public final class TransportRegistry: Sendable {
    /// Opens the transport a spec names; throws (a `TransportError`, normally) when it cannot.
    public typealias Opener = @Sendable (TransportSpec) async throws -> any HCITransport

    /// The process-wide registry.
    public static let shared = TransportRegistry()

    private let openers = Mutex<[TransportSpec.Kind: Opener]>([:])

    /// An empty registry (tests use their own; programs use `shared`).
    public init() {}

    /// Registers the opener for `kind`, replacing any earlier one.
    public func register(_ kind: TransportSpec.Kind, opener: @escaping Opener) {
        openers.withLock { $0[kind] = opener }
    }

    /// The opener registered for `kind`, if any: a program that wraps every transport it opens (the `ble` tool's
    /// `--trace` decodes the packets) registers a wrapper around it.
    public func opener(for kind: TransportSpec.Kind) -> Opener? {
        openers.withLock { $0[kind] }
    }

    /// Removes the opener for `kind`, if any.
    public func unregister(_ kind: TransportSpec.Kind) {
        _ = openers.withLock { $0.removeValue(forKey: kind) }
    }

    /// The kinds that have an opener, sorted by name.
    public var registeredKinds: [TransportSpec.Kind] {
        openers.withLock { $0.keys.sorted { $0.rawValue < $1.rawValue } }
    }

    /// Whether `kind` has an opener.
    public func canOpen(_ kind: TransportSpec.Kind) -> Bool {
        openers.withLock { $0[kind] != nil }
    }

    /// Opens the transport `spec` names with the opener registered for its kind.
    ///
    /// - Throws: `TransportError` `.notRegistered` naming the kind when no opener is registered; otherwise
    ///   whatever the opener throws.
    public func open(_ spec: TransportSpec) async throws -> any HCITransport {
        guard let opener = openers.withLock({ $0[spec.kind] }) else {
            let known = registeredKinds.map(\.rawValue)
            let available =
                known.isEmpty ? "none is registered in this process" : "registered: " + known.joined(separator: ", ")
            throw TransportError(
                .notRegistered,
                "\(spec): the \(spec.kind) transport is not available in this program (\(available))")
        }
        return try await opener(spec)
    }

    /// Parses `spec` and opens it.
    ///
    /// - Throws: `TransportSpecError` for a malformed spec; otherwise as `open(_: TransportSpec)`.
    public func open(_ spec: String) async throws -> any HCITransport {
        try await open(try TransportSpec(parsing: spec))
    }
}
