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
    /// What the tool's copies (the flow and its run loop hold one each) share.
    private let shared = Shared()

    private final class Shared: Sendable {
        /// Set once the command is doing what it was asked (scanning, subscribed, every link up): Ctrl-C after
        /// that ends a command that runs until interrupted as a success, and before it as an interruption (130).
        let started = Mutex(false)
        /// Every peripheral this run connected or began connecting to, for `closeLinks`.
        let links = Mutex<[Peripheral]>([])
        /// The TARGET text of the last connection, for the advice in errors.
        let target = Mutex<String?>(nil)
    }

    var hasStarted: Bool { shared.started.withLock { $0 } }

    func markStarted() { shared.started.withLock { $0 = true } }

    /// Records a peripheral this run connects to (the commands' own `connect` does), so that a stop signal can
    /// close its link.
    func track(_ peripheral: Peripheral) {
        shared.links.withLock { list in
            if !list.contains(where: { $0 === peripheral }) { list.append(peripheral) }
        }
    }

    /// Asks every link this run made (or is making) to close, as the command's own cleanup would had the stop
    /// signal not cancelled it; `linksClosed` tells when they are down.
    func closeLinks() {
        for peripheral in shared.links.withLock({ $0 }) where peripheral.state != .disconnected {
            manager.cancelPeripheralConnection(peripheral)
        }
    }

    var linksClosed: Bool { shared.links.withLock { $0.allSatisfy { $0.state == .disconnected } } }

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

    /// The devices that matched a TARGET, by identifier: their addresses and how well they matched.
    final class Matches: Sendable {
        let found = Mutex<[UUID: (address: BluetoothAddress, match: TargetMatcher.Match)]>([:])

        func add(_ peripheral: Peripheral, _ match: TargetMatcher.Match) {
            found.withLock { found in
                // An exact match stays one.
                if found[peripheral.identifier]?.match != .exact {
                    found[peripheral.identifier] = (peripheral.address, match)
                }
            }
        }

        /// The other devices that matched as well as `chosen` did.
        func others(than chosen: Peripheral) -> [BluetoothAddress] {
            found.withLock { found in
                let level = found[chosen.identifier]?.match ?? .exact
                return found.filter { $0.key != chosen.identifier && $0.value.match == level }.map(\.value.address)
            }
        }
    }

    /// How long a match in another case waits for one spelled exactly as typed.
    static let exactMatchGrace: Duration = .milliseconds(1500)

    /// The advertiser `matcher` prefers, within `limit`: the first exact match, or else the first match in
    /// another case once `exactMatchGrace` has passed without an exact one (or `limit` ends); and the names
    /// seen, for suggestions.
    func bestDiscovery(
        of matcher: TargetMatcher, within limit: Duration, matches: Matches = Matches()
    ) async throws -> (found: DiscoveredPeripheral?, names: Set<String>) {
        let shared = BestDiscoveryState()
        let looseFound = AsyncStream<Void>.makeStream()
        return try await withThrowingTaskGroup(of: DiscoveredPeripheral?.self) { group in
            group.addTask { [manager] in
                for try await discovery in manager.scan(withServices: nil) {
                    if let name = discovery.advertisementData.localName ?? discovery.peripheral.name {
                        shared.seen.withLock { _ = $0.insert(name) }
                    }
                    let match = matcher.match(discovery.peripheral, discovery.advertisementData)
                    if let match { matches.add(discovery.peripheral, match) }
                    switch match {
                    case .exact: return discovery
                    case .loose:
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
        shared.target.withLock { $0 = text }
        let matcher = TargetMatcher(text: text)
        let matches = Matches()
        let (best, seen) = try await bestDiscovery(of: matcher, within: limit, matches: matches)
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
        track(peripheral)
        // A name may be several devices' (an address or an identifier is one's): the scan goes on while the link
        // is made, and the others it finds are named.
        let byName = BluetoothAddress(string: text) == nil && UUID(uuidString: text) == nil
        do {
            try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask { [manager] in
                    try await manager.connect(peripheral, timeout: connectLimit)
                    return true
                }
                if byName {
                    group.addTask { [manager] in
                        do {
                            for try await discovery in manager.scan(withServices: nil) {
                                if let match = matcher.match(discovery.peripheral, discovery.advertisementData) {
                                    matches.add(discovery.peripheral, match)
                                }
                            }
                        } catch is CancellationError {
                            throw CancellationError()
                        } catch {
                            // Only a look for others: the connection says what failed.
                        }
                        return false
                    }
                }
                defer { group.cancelAll() }
                while let connected = try await group.next() {
                    if connected { return }
                }
            }
        } catch let error as BluetoothError where error.code == .timeout {
            throw ToolError(
                .timeout, "connecting to \(Self.describe(peripheral)) timed out after \(Self.seconds(connectLimit))")
        } catch is CancellationError {
            throw CancellationError()
        } catch let error as BluetoothError where error.code == .peerRemovedPairingInformation {
            // A bond the device no longer has (it was reset, or forgot us): a pairing failure (9), said with the
            // way out, as iOS tells its user to forget the device.
            throw ToolError(
                .pairingFailed,
                "connecting to \(Self.describe(peripheral)): the device no longer has the keys of its bond with this tool (it was reset, or forgot it): remove the bond with `ble bonds remove \(peripheral.identifier.uuidString)`, then connect again to pair anew"
            )
        } catch {
            throw ToolError(.notConnectable, "could not connect to \(Self.describe(peripheral)): \(error)")
        }
        guard byName else { return peripheral }
        let report: @Sendable () -> Bool = {
            let others = matches.others(than: peripheral)
            guard !others.isEmpty else { return false }
            let addresses = others.map(\.string).sorted().joined(separator: ", ")
            Output.error(
                "\(others.count + 1) devices match '\(text)': using \(Self.describe(peripheral)), not \(addresses) "
                    + "(give an address or an identifier to choose)")
            return true
        }
        if report() { return peripheral }
        // A link is often made before the other devices of the name advertised again: the look for them goes on
        // beside the command for a second more (each advertises several times in it), and says so when it finds one.
        Task { [manager, system] in
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for try await discovery in manager.scan(withServices: nil) {
                        guard let match = matcher.match(discovery.peripheral, discovery.advertisementData) else {
                            continue
                        }
                        matches.add(discovery.peripheral, match)
                        if report() { return }
                    }
                }
                group.addTask { try await system.sleep(for: .seconds(1)) }
                defer { group.cancelAll() }
                try await group.next()
            }
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

    /// Refuses, before asking, a subscription to a characteristic that neither notifies nor indicates: as iOS
    /// does, with Request Not Supported (0x06), and the same status as every other operation its properties do not
    /// allow.
    func requireSubscribable(_ c: Characteristic, for what: String) throws {
        guard !c.properties.contains(.notify), !c.properties.contains(.indicate) else { return }
        try require(.notify, of: c, code: .requestNotSupported, for: what)
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
            throw securityAdvice(ToolError(error, doing: what), error)
        }
    }

    /// A refusal for want of security, after the system tried to secure the link on its own as iOS does (it
    /// encrypts with the bond's key, or pairs, and asks again): the pairing it could make (Just Works unless the
    /// command was given an IO capability) cannot give what the peer asks, typically protection against a man in
    /// the middle. Said as the pairing failure it is (status 9), with what to try.
    func securityAdvice(_ error: ToolError, _ underlying: any Error) -> ToolError {
        guard let code = (underlying as? BluetoothError)?.attErrorCode,
            [.insufficientAuthentication, .insufficientEncryption, .insufficientEncryptionKeySize].contains(code)
        else { return error }
        let target = shared.target.withLock { $0 }.map { Self.shellWord($0) } ?? "TARGET"
        return ToolError(
            .pairingFailed,
            "\(error.message): the link's security is not what the peer asks, and the pairing tried on the way (as iOS pairs, by itself) could not give it; pair first in a way that confirms the peer, e.g. `ble pair \(target) --io-capability keyboard` (or display, or yesno), then try again"
        )
    }

    /// A word as a shell needs it: quoted when it has spaces or quotes.
    static func shellWord(_ text: String) -> String {
        guard text.contains(where: { $0 == " " || $0 == "'" || $0 == "\"" || $0 == "$" }) else { return text }
        return "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
    }

    static func describe(_ peripheral: Peripheral) -> String {
        peripheral.name.map { "\($0) (\(peripheral.address.string))" } ?? peripheral.address.string
    }

    static func seconds(_ d: Duration) -> String {
        let s = d.inSeconds
        return s == s.rounded() ? "\(Int(s)) s" : "\(s) s"
    }
}
