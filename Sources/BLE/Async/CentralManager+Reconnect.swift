import BLECore
import Foundation
import Synchronization

// CoreBluetooth's usual way back to a device, as one call: try the stored identifier, then the peripherals already
// connected to the system, then a scan, in an order, with time limits and in parallel as the app chooses.

/// The device an app wants back: what it stored after the first connection.
public struct ReconnectTarget: Sendable {
    /// The identifier the app stored (`Peripheral.identifier`); nil when it has none.
    public var identifier: UUID?
    /// Services the device offers: the connected peripherals asked for, and the scan's filter. Empty: the scan
    /// looks at every device, and the connected peripherals are not asked (iOS needs a service list).
    public var services: [BluetoothUUID]
    /// The local name the device advertises, for a device found by scanning whose identifier changed (a new
    /// random address gives a new identifier, <doc:IOSRules>).
    public var name: String?

    public init(identifier: UUID? = nil, services: [BluetoothUUID] = [], name: String? = nil) {
        self.identifier = identifier
        self.services = services
        self.name = name
    }

    /// Whether a peripheral (with what it advertised, when scanned) is this device: same identifier, or the
    /// same advertised name.
    func matches(_ peripheral: Peripheral, advertised: AdvertisementData?) -> Bool {
        if let identifier, peripheral.identifier == identifier { return true }
        guard let name else { return false }
        return advertised?.localName == name || (advertised == nil && peripheral.name == name)
    }
}

/// One way back to a device (the three CoreBluetooth's guide gives).
public enum ReconnectStep: Sendable, Hashable, CustomStringConvertible {
    /// `retrievePeripherals(withIdentifiers:)` with the stored identifier, then `connect`: succeeds while the
    /// device advertises from the address the system knows.
    case knownIdentifier
    /// `retrieveConnectedPeripherals(withServices:)`: the device is connected to the system by another app.
    case connectedPeripherals
    /// A scan for the target's services, then `connect` to the first discovery that matches.
    case scan

    public var description: String {
        switch self {
        case .knownIdentifier: "knownIdentifier"
        case .connectedPeripherals: "connectedPeripherals"
        case .scan: "scan"
        }
    }
}

/// How `reconnect(to:options:)` goes about it.
public struct ReconnectOptions: Sendable {
    /// The steps, in order; a step with nothing to try (no identifier, no connected match) is passed at once.
    public var steps: [ReconnectStep]
    /// Run every step at once (the first to connect wins and the others are called off) instead of one after
    /// the other.
    public var parallel: Bool
    /// How long one step may try before the next starts (one after the other only).
    public var stepTimeout: Duration
    /// The limit on the whole call.
    public var timeout: Duration
    /// The options of the connection made.
    public var connectOptions: CentralManager.ConnectOptions?

    public init(
        steps: [ReconnectStep] = [.knownIdentifier, .connectedPeripherals, .scan], parallel: Bool = false,
        stepTimeout: Duration = .seconds(5), timeout: Duration = .seconds(30),
        connectOptions: CentralManager.ConnectOptions? = nil
    ) {
        self.steps = steps
        self.parallel = parallel
        self.stepTimeout = stepTimeout
        self.timeout = timeout
        self.connectOptions = connectOptions
    }
}

extension CentralManager {
    /// Connects again to a device the app knew (the usual workflow): by the stored identifier, among the
    /// peripherals connected to the system, or by scanning, as `options` orders, and returns the connected
    /// peripheral. Waits for `.poweredOn` first (within the same overall timeout).
    ///
    /// - Throws: `BluetoothError` `.timeout` when `options.timeout` passes first (every attempt under way is
    ///   cancelled), `.invalidParameters` for a target with neither identifier nor name or no steps, the
    ///   power state's error when the manager is or becomes unusable; `CancellationError` when the task is
    ///   cancelled.
    public func reconnect(to target: ReconnectTarget, options: ReconnectOptions = ReconnectOptions()) async throws
        -> Peripheral
    {
        try Self.check(target, options)
        let system = self.system
        return try await withThrowingTaskGroup(of: Peripheral?.self) { group in
            group.addTask {
                try await system.sleep(for: options.timeout)
                throw BluetoothError(
                    .timeout, "reconnection to \(target) did not succeed within \(options.timeout)")
            }
            group.addTask {
                try await self.waitUntilPoweredOn(timeout: nil)
                return try await self.runReconnectSteps(target, options)
            }
            let first = await group.nextResult()
            group.cancelAll()
            // The steps may have connected just as the time ran out: nobody would receive that connection.
            await self.letGoOfTheRest(in: &group, keeping: nil)
            switch first {
            case .success(let peripheral?): return peripheral
            case .success(nil):
                throw BluetoothError(.unknownDevice, "no step (\(options.steps)) could reach \(target)")
            case .failure(let error): throw error
            case nil: throw CancellationError()
            }
        }
    }

    /// Refuses a target and options `reconnect` cannot work with.
    static func check(_ target: ReconnectTarget, _ options: ReconnectOptions) throws {
        guard target.identifier != nil || target.name != nil else {
            throw BluetoothError(.invalidParameters, "a reconnection target needs an identifier or a name")
        }
        guard !options.steps.isEmpty else {
            throw BluetoothError(.invalidParameters, "a reconnection needs at least one step")
        }
        guard options.timeout > .zero, options.stepTimeout > .zero else {
            throw BluetoothError(.invalidParameters, "reconnection timeouts must be positive")
        }
    }

    /// Waits for a cancelled group's remaining children and disconnects any peripheral they connected other than
    /// `winner`.
    private func letGoOfTheRest(
        in group: inout ThrowingTaskGroup<Peripheral?, any Error>, keeping winner: Peripheral?
    ) async {
        while let outcome = await group.nextResult() {
            if case .success(let other?) = outcome, other !== winner { cancelPeripheralConnection(other) }
        }
    }

    /// The steps as `options` says; nil when every step ended with nothing to connect to.
    private func runReconnectSteps(_ target: ReconnectTarget, _ options: ReconnectOptions) async throws
        -> Peripheral?
    {
        if options.parallel {
            return try await withThrowingTaskGroup(of: Peripheral?.self) { group in
                for step in options.steps {
                    group.addTask { try await self.attempt(step, target, options, limit: nil) }
                }
                defer { group.cancelAll() }
                var failure: (any Error)?
                while let outcome = await group.nextResult() {
                    switch outcome {
                    case .success(let peripheral?):
                        // Another step may have connected another device of the same name meanwhile.
                        group.cancelAll()
                        await letGoOfTheRest(in: &group, keeping: peripheral)
                        return peripheral
                    case .success(nil): continue
                    case .failure(let error as BluetoothError) where error.code == .timeout: continue
                    case .failure(let error): failure = failure ?? error
                    }
                }
                if let failure, !(failure is CancellationError) { throw failure }
                try Task.checkCancellation()
                return nil
            }
        }
        for step in options.steps {
            do {
                if let peripheral = try await attempt(step, target, options, limit: options.stepTimeout) {
                    return peripheral
                }
            } catch let error as BluetoothError
                where [.timeout, .connectionFailed, .invalidParameters].contains(error.code)
            {
                // `.invalidParameters`: the peripheral is still disconnecting from the previous step's end.
                // This way did not work in time: on to the next.
                continue
            }
        }
        return nil
    }

    /// One step: the connected peripheral, nil when the step has nothing to try. A `limit` bounds the step.
    private func attempt(
        _ step: ReconnectStep, _ target: ReconnectTarget, _ options: ReconnectOptions, limit: Duration?
    ) async throws -> Peripheral? {
        switch step {
        case .knownIdentifier:
            guard let id = target.identifier, let known = retrievePeripherals(withIdentifiers: [id]).first else {
                return nil
            }
            try await connect(known, options: options.connectOptions, timeout: limit)
            return known
        case .connectedPeripherals:
            guard !target.services.isEmpty else { return nil }
            guard
                let connected = retrieveConnectedPeripherals(withServices: target.services).first(where: {
                    target.matches($0, advertised: nil)
                })
            else { return nil }
            try await connect(connected, options: options.connectOptions, timeout: limit)
            return connected
        case .scan:
            let system = self.system
            let start = system.now
            let found: Peripheral? = try await withThrowingTaskGroup(of: Peripheral?.self) { group in
                if let limit {
                    group.addTask {
                        try await system.sleep(for: limit)
                        throw BluetoothError(.timeout, "the scan for \(target) found nothing within \(limit)")
                    }
                }
                group.addTask {
                    let services = target.services.isEmpty ? nil : target.services
                    for try await discovery in self.scan(withServices: services)
                    where target.matches(discovery.peripheral, advertised: discovery.advertisementData) {
                        return discovery.peripheral
                    }
                    // The stream ends without an error only when the task was cancelled.
                    try Task.checkCancellation()
                    return nil
                }
                defer { group.cancelAll() }
                return try await group.next() ?? nil
            }
            guard let found else { return nil }
            let left = limit.map { $0 - (system.now - start) }
            try await connect(found, options: options.connectOptions, timeout: left.map { max($0, .milliseconds(1)) })
            return found
        }
    }
}

extension ReconnectTarget: CustomStringConvertible {
    public var description: String {
        var parts: [String] = []
        if let identifier { parts.append(identifier.uuidString) }
        if let name { parts.append("\"\(name)\"") }
        if !services.isEmpty { parts.append("offering \(services.map(\.uuidString).joined(separator: ", "))") }
        return parts.joined(separator: " ")
    }
}

/// When to try again after a failed or lost connection: a delay that grows by `multiplier` from
/// `initialDelay` up to `maximumDelay`, for at most `maximumAttempts` attempts in a row (nil: no limit). An
/// attempt that connects starts the count again.
public struct ReconnectPolicy: Sendable, Hashable {
    public var initialDelay: Duration
    public var multiplier: Double
    public var maximumDelay: Duration
    public var maximumAttempts: Int?

    public init(
        initialDelay: Duration = .seconds(1), multiplier: Double = 2, maximumDelay: Duration = .seconds(60),
        maximumAttempts: Int? = nil
    ) {
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.maximumAttempts = maximumAttempts
    }

    /// The pause before attempt `attempt` (1 is the first retry): `initialDelay` times `multiplier` to the
    /// power `attempt - 1`, at most `maximumDelay`.
    public func delay(beforeRetry attempt: Int) -> Duration {
        let initial = initialDelay.inSeconds
        let limit = maximumDelay.inSeconds
        let factor = pow(max(multiplier, 1), Double(max(attempt - 1, 0)))
        // At most a year, so that a huge `maximumDelay` (no cap meant) cannot overflow the conversion.
        let seconds = min(initial * factor, limit, 365 * 24 * 3600)
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }

    /// Whether the values make sense: positive delays, a multiplier of at least 1, at least one attempt.
    func validate() throws {
        guard initialDelay >= .zero, maximumDelay >= initialDelay, multiplier >= 1, multiplier.isFinite,
            (maximumAttempts ?? 1) >= 1
        else {
            throw BluetoothError(
                .invalidParameters,
                "a reconnect policy needs 0 <= initialDelay <= maximumDelay, a finite multiplier >= 1 and at least one attempt"
            )
        }
    }
}

/// What `CentralManager.connections(to:policy:options:)` reports.
public enum ConnectionStateChange: Sendable, CustomStringConvertible {
    /// Attempt number `attempt` (1 for the first) started.
    case connecting(attempt: Int)
    /// Connected.
    case connected(Peripheral)
    /// The link ended (the error, nil when the app ended it); a new attempt follows by the policy.
    case disconnected(Peripheral, BluetoothError?)
    /// An attempt failed; the next one starts after `retryIn`.
    case failed(BluetoothError, retryIn: Duration)

    public var description: String {
        switch self {
        case .connecting(let n): "connecting (attempt \(n))"
        case .connected(let p): "connected to \(p.name ?? p.identifier.uuidString)"
        case .disconnected(let p, let e):
            "disconnected from \(p.name ?? p.identifier.uuidString)\(e.map { ": \($0)" } ?? "")"
        case .failed(let e, let pause): "attempt failed: \(e); retrying in \(pause)"
        }
    }
}

extension CentralManager {
    /// Keeps a device connected: reconnects (`reconnect(to:options:)`) at once and again after every link loss,
    /// waiting between failed attempts as `policy` says, and reports each change. The sequence throws the last
    /// error when `policy.maximumAttempts` attempts in a row failed, and `.invalidParameters` for a policy that
    /// makes no sense. It runs in the iterating task; ending the iteration (leaving the loop, or cancelling the
    /// task) disconnects.
    public func connections(
        to target: ReconnectTarget, policy: ReconnectPolicy = ReconnectPolicy(),
        options: ReconnectOptions = ReconnectOptions()
    ) -> ConnectionStates {
        ConnectionStates(central: self, target: target, policy: policy, options: options)
    }
}

/// The changes of a connection kept by `CentralManager.connections(to:policy:options:)`.
public struct ConnectionStates: AsyncSequence, Sendable {
    public typealias Element = ConnectionStateChange
    let central: CentralManager
    let target: ReconnectTarget
    let policy: ReconnectPolicy
    let options: ReconnectOptions

    public func makeAsyncIterator() -> Iterator {
        Iterator(keeper: ConnectionKeeper(central: central, target: target, policy: policy, options: options))
    }

    public struct Iterator: AsyncIteratorProtocol {
        let keeper: ConnectionKeeper
        public mutating func next() async throws -> ConnectionStateChange? { try await keeper.next() }
    }
}

/// The state of one iteration of `ConnectionStates`, advanced by its iterator only (one task at a time);
/// when the iteration ends, the connection it holds ends with it.
final class ConnectionKeeper {
    private enum Phase {
        case idle
        case attempting
        case waiting(Duration)
        case connected(Peripheral, AsyncStream<PeripheralDisconnection>.Iterator)
        case finished
    }

    private let central: CentralManager
    private let target: ReconnectTarget
    private let policy: ReconnectPolicy
    private let options: ReconnectOptions
    private var phase = Phase.idle
    private var failures = 0
    private var validated = false

    init(central: CentralManager, target: ReconnectTarget, policy: ReconnectPolicy, options: ReconnectOptions) {
        self.central = central
        self.target = target
        self.policy = policy
        self.options = options
    }

    deinit {
        if case .connected(let peripheral, _) = phase { central.cancelPeripheralConnection(peripheral) }
    }

    func next() async throws -> ConnectionStateChange? {
        do {
            return try await step()
        } catch is CancellationError {
            // Cancelling the iterating task ends the iteration, whatever phase it was in.
            finish()
            return nil
        } catch {
            finish()
            throw error
        }
    }

    /// Ends the iteration, letting go of the connection.
    private func finish() {
        if case .connected(let peripheral, _) = phase { central.cancelPeripheralConnection(peripheral) }
        phase = .finished
    }

    private func step() async throws -> ConnectionStateChange? {
        if !validated {
            try policy.validate()
            try CentralManager.check(target, options)
            validated = true
        }
        guard !Task.isCancelled else {
            finish()
            return nil
        }
        switch phase {
        case .finished:
            return nil
        case .idle:
            phase = .attempting
            return .connecting(attempt: failures + 1)
        case .waiting(let pause):
            try await central.system.sleep(for: pause)
            phase = .attempting
            return .connecting(attempt: failures + 1)
        case .attempting:
            do {
                let peripheral = try await central.reconnect(to: target, options: options)
                failures = 0
                // Listening before saying so, so that no disconnection is missed.
                phase = .connected(peripheral, central.disconnections.makeAsyncIterator())
                return .connected(peripheral)
            } catch let error as BluetoothError {
                failures += 1
                if let limit = policy.maximumAttempts, failures >= limit { throw error }
                let pause = policy.delay(beforeRetry: failures)
                phase = .waiting(pause)
                return .failed(error, retryIn: pause)
            }
        case .connected(let peripheral, var ends):
            var lost: PeripheralDisconnection?
            if peripheral.state == .connected || peripheral.state == .connecting {
                while let end = await ends.next() {
                    if end.peripheral === peripheral && !end.isReconnecting {
                        lost = end
                        break
                    }
                }
            }
            guard !Task.isCancelled else {
                finish()
                return nil
            }
            phase = .idle
            return .disconnected(peripheral, lost?.error)
        }
    }
}
