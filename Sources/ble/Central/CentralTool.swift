import BLE
import Dispatch
import Foundation
import Synchronization

/// The tool's central on the public async API: a `CentralManager` and the steps the commands share. Every wait
/// is the API's own (power-on, scanning, connecting, each GATT request); timeouts count in the system's time,
/// so on the simulated room they are virtual and a run repeats exactly.
struct CentralTool: Sendable {
    let system: BluetoothSystem
    let manager: CentralManager
    /// Set once the command is doing what it was asked (scanning, subscribed, every link up): Ctrl-C after that
    /// ends a command that runs until interrupted as a success, and before it as an interruption (130).
    private let startedFlag = StartedFlag()

    var hasStarted: Bool { startedFlag.value.withLock { $0 } }

    func markStarted() { startedFlag.value.withLock { $0 = true } }

    /// Shared by the tool's copies (the flow and its run loop hold one each).
    private final class StartedFlag: Sendable {
        let value = Mutex(false)
    }

    init(system: BluetoothSystem) {
        self.system = system
        manager = CentralManager(
            delegate: nil, queue: DispatchQueue(label: "ble.central"), options: nil, system: system)
    }

    /// Waits for the controller to power on.
    func ready() async throws {
        do {
            try await manager.waitUntilPoweredOn(timeout: .seconds(5))
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ToolError(.transport, "the controller did not power on (state \(manager.state))")
        }
    }

    /// What `bestDiscovery`'s tasks share: the names seen and the first match in another case.
    final class BestDiscoveryState: Sendable {
        let seen = Mutex<Set<String>>([])
        let fallback = Mutex<DiscoveredPeripheral?>(nil)
    }

    /// How long a match in another case waits for one spelled exactly as typed.
    static let exactMatchGrace: Duration = .milliseconds(1500)

    /// The advertiser `matcher` prefers, within `limit`: the first exact match, or else the first match in
    /// another case once `exactMatchGrace` has passed without an exact one (or `limit` ends); and the names
    /// seen, for suggestions.
    func bestDiscovery(
        of matcher: TargetMatcher, within limit: Duration
    ) async throws -> (found: DiscoveredPeripheral?, names: Set<String>) {
        let shared = BestDiscoveryState()
        let looseFound = AsyncStream<Void>.makeStream()
        return try await withThrowingTaskGroup(of: DiscoveredPeripheral?.self) { group in
            group.addTask { [manager] in
                for try await discovery in manager.scan(withServices: nil) {
                    if let name = discovery.advertisementData.localName ?? discovery.peripheral.name {
                        shared.seen.withLock { _ = $0.insert(name) }
                    }
                    switch matcher.match(discovery.peripheral, discovery.advertisementData) {
                    case .exact: return discovery
                    case .caseInsensitive:
                        let first = shared.fallback.withLock { held -> Bool in
                            guard held == nil else { return false }
                            held = discovery
                            return true
                        }
                        if first { looseFound.continuation.yield() }
                    case nil: continue
                    }
                }
                return shared.fallback.withLock { $0 }
            }
            group.addTask { [system] in
                for await _ in looseFound.stream {
                    try await system.sleep(for: Self.exactMatchGrace)
                    return shared.fallback.withLock { $0 }
                }
                try await system.sleep(for: limit)  // the stream ended: leave the answer to the others
                return nil
            }
            group.addTask { [system] in
                try await system.sleep(for: limit)
                return shared.fallback.withLock { $0 }
            }
            defer {
                looseFound.continuation.finish()
                group.cancelAll()
            }
            let found = try await group.next() ?? nil
            return (found, shared.seen.withLock { $0 })
        }
    }

    /// Scans until an advertiser matches `target`, then connects to it; fails clearly when it advertises
    /// non-connectably.
    func connect(to target: TargetOptions) async throws -> Peripheral {
        try await connect(toTarget: target.target, within: target.timeoutDuration)
    }

    /// As `connect(to:)`, for a TARGET string and a scan limit.
    func connect(toTarget text: String, within limit: Duration) async throws -> Peripheral {
        try await ready()
        let matcher = TargetMatcher(text: text)
        let (best, seen) = try await bestDiscovery(of: matcher, within: limit)
        guard let found = best else {
            let suggestions = matcher.nearMisses(among: seen)
            let hint =
                suggestions.isEmpty
                ? "" : "; did you mean " + suggestions.map { "'\($0)'" }.joined(separator: " or ") + "?"
            throw ToolError(.noSuchDevice, "no device matching '\(text)' found within \(Self.seconds(limit))\(hint)")
        }
        let peripheral = found.peripheral
        guard found.advertisementData.isConnectable != false else {
            throw ToolError(
                .notConnectable,
                "\(Self.describe(peripheral)) does not accept connections (it advertises non-connectably)")
        }
        let connectLimit: Duration = .seconds(10)
        do {
            try await manager.connect(peripheral, timeout: connectLimit)
        } catch let error as BluetoothError where error.code == .timeout {
            throw ToolError(
                .timeout, "connecting to \(Self.describe(peripheral)) timed out after \(Self.seconds(connectLimit))")
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ToolError(.notConnectable, "could not connect to \(Self.describe(peripheral)): \(error)")
        }
        return peripheral
    }

    /// Runs `body` on a connected peripheral, then disconnects politely (whatever `body` did), waiting at most
    /// two seconds of the system's time for a peer that vanished.
    func using<T: Sendable>(_ peripheral: Peripheral, _ body: () async throws -> T) async throws -> T {
        try await using([peripheral], body)
    }

    /// As `using(_:_:)` for several peripherals, disconnected together.
    func using<T: Sendable>(_ peripherals: [Peripheral], _ body: () async throws -> T) async throws -> T {
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        let connected = peripherals.filter { $0.state != .disconnected }
        if !connected.isEmpty {
            _ = try? await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { [manager] in
                    try await withThrowingTaskGroup(of: Void.self) { each in
                        for peripheral in connected { each.addTask { try await manager.disconnect(peripheral) } }
                        try await each.waitForAll()
                    }
                }
                group.addTask { [system] in try await system.sleep(for: .seconds(2)) }
                defer { group.cancelAll() }
                try await group.next()
            }
        }
        return try result.get()
    }

    /// Discovers every service and the characteristics of each.
    func discoverCharacteristicsOfAllServices(_ peripheral: Peripheral) async throws {
        let services = try await run("discovering services") {
            try await peripheral.discoverServices(nil, timeout: nil)
        }
        for service in services {
            _ = try await run("discovering characteristics of \(service.uuid.uuidString)") {
                try await peripheral.discoverCharacteristics(nil, for: service, timeout: nil)
            }
        }
    }

    /// The first characteristic of type `uuid`: among those discovered on this link when it is there (the shell
    /// discovers the database once), else after discovering the database.
    func findCharacteristic(_ uuid: BluetoothUUID, on peripheral: Peripheral) async throws -> Characteristic {
        for service in peripheral.services ?? [] {
            if let c = service.characteristics?.first(where: { $0.uuid == uuid }) { return c }
        }
        try await discoverCharacteristicsOfAllServices(peripheral)
        for service in peripheral.services ?? [] {
            if let c = service.characteristics?.first(where: { $0.uuid == uuid }) { return c }
        }
        throw ToolError(.noSuchCharacteristic, "\(Self.describe(peripheral)) has no characteristic \(uuid.labelled)")
    }

    /// The characteristic `reference` names: by its UUID as `findCharacteristic(_:on:)` finds it, or by a name
    /// that fits several assigned names, the one of them the device has (an error when it has several).
    func findCharacteristic(_ reference: AttributeReference, on peripheral: Peripheral) async throws -> Characteristic {
        if let uuid = reference.uuid { return try await findCharacteristic(uuid, on: peripheral) }
        let discovered = peripheral.services.map { !$0.isEmpty && $0.allSatisfy { $0.characteristics != nil } } ?? false
        if !discovered { try await discoverCharacteristicsOfAllServices(peripheral) }
        let all = (peripheral.services ?? []).flatMap { $0.characteristics ?? [] }
        let uuid = try reference.pick(among: all.map(\.uuid), on: Self.describe(peripheral))
        guard let c = all.first(where: { $0.uuid == uuid }) else {
            throw ToolError(
                .noSuchCharacteristic, "\(Self.describe(peripheral)) has no characteristic \(uuid.labelled)")
        }
        return c
    }

    /// Refuses, before asking, an operation the characteristic's properties do not allow: with the ATT code the
    /// stack (and a server) would give, worded as what it is, a local refusal.
    func require(_ property: CharacteristicProperties, of c: Characteristic, code: ATTErrorCode, for what: String)
        throws
    {
        guard !c.properties.contains(property) else { return }
        let has = c.properties.names.joined(separator: ", ")
        throw ToolError(
            .attError,
            "\(what): \(c.uuid.labelled) does not allow it (its properties: \(has.isEmpty ? "none" : has)), so it was not sent: \(ToolError.describe(code))"
        )
    }

    /// Runs one request of the API, turning its error into the tool's (`what` names the request).
    func run<T: Sendable>(_ what: String, _ request: () async throws -> T) async throws -> T {
        do {
            return try await request()
        } catch let error as ToolError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ToolError(error, doing: what)
        }
    }

    static func describe(_ peripheral: Peripheral) -> String {
        peripheral.name.map { "\($0) (\(peripheral.address.string))" } ?? peripheral.address.string
    }

    static func seconds(_ d: Duration) -> String {
        let s = d.inSeconds
        return s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
}
