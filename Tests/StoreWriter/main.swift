// ble-store-writer: the process the store's kill -9 trials kill (Tests/BLESystemTests/StoreKillTrials.swift,
// Scripts/kill-trials.sh). Not a product and not a tool: only those trials run it.
//
//     ble-store-writer PATH --seed N --clock T [--seconds S]
//
// It opens the system store at PATH as a system would (`SystemStore(path:)`, no seed: identifiers and identities
// from the system's generator, as on a real controller) and changes it until it is killed, or for S seconds:
// identifiers for addresses from a pool, names and last-seen times, GATT caches kept and forgotten, bonds kept
// and removed, local identities, and now and then a close and a new open (which checkpoints the write-ahead log
// and runs the open again: the check, the migrations' look, the ageing). Its clock starts at T and moves one
// second per change.
//
// It writes one line per step to standard output, each with one write(2), so a line is there whole or not at
// all:
//
//     open N / opened N / close N / closed N       the Nth open of the store and its close
//     try-seen ID NAME T / try-cache ID HASH RECORD / try-uncache ID / try-bond BOND / try-unbond ID
//                                                   a change about to be made (it may reach the file or not)
//     id ADDRESS ID                                 ADDRESS has identifier ID (in any later process too)
//     peer ADDRESS ID / seen ID NAME T / cache ID HASH RECORD / uncache ID
//                                                   committed by a flush (these are batched: one line per peer
//                                                   for what the flush wrote)
//     bond BOND / unbond ID                         committed
//     identity NAME IRK ADDRESS                     committed: the identity kept under NAME
//     error MESSAGE                                 the store logged an error: nothing since the last committed
//                                                   line is claimed, and the writer exits with status 3
//
// ADDRESS is TYPE-HEX (type 0 public, 1 random; six octets as `BluetoothAddress.bytes` holds them); BOND is
// ID ADDRESS IRK CENTRAL PERIPHERAL KEYSIZE AUTHENTICATED SC CREATED, with IRK hex or "-" and a key HEX:EDIV:RAND
// or "-". The store's public API commits bonds, bond removals and identities before it returns; peers' rows,
// names, last-seen times and GATT caches go to the store's writer (`flush()` and `close()` wait for it), so their
// committed lines follow the writer's own `flush()`. An identifier is derived under the file's key, so it is
// claimed as soon as it is given.
import BLECore
import BLESystem
import Foundation
import Logging
import Synchronization

/// Writes whole lines to standard output, unbuffered: the killer reads what was committed from them.
func emit(_ line: String) {
    let bytes = Array((line + "\n").utf8)
    var offset = 0
    while offset < bytes.count {
        let written = bytes[offset...].withUnsafeBytes { write(1, $0.baseAddress, $0.count) }
        if written <= 0 { exit(4) }
        offset += written
    }
}

func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func token(_ address: BluetoothAddress) -> String { "\(address.type.rawValue)-\(hex(address.bytes))" }

func token(_ key: StoredLongTermKey?) -> String {
    guard let key else { return "-" }
    return "\(hex(key.key)):\(key.ediv):\(key.rand)"
}

func token(_ bond: StoredBond) -> String {
    [
        bond.identifier.uuidString, token(bond.identityAddress), bond.resolvingKey.map(hex) ?? "-",
        token(bond.centralKey), token(bond.peripheralKey), "\(bond.keySize)", bond.authenticated ? "1" : "0",
        bond.secureConnections ? "1" : "0", "\(bond.created)",
    ].joined(separator: " ")
}

/// Errors the store logs: a write it could not make (kept in memory only), which the writer must not claim.
final class ErrorWatch: Sendable {
    let errors = Mutex<[String]>([])

    var logger: Logger {
        var logger = Logger(label: "ble-store-writer") { _ in Handler(watch: self) }
        logger.logLevel = .warning
        return logger
    }

    /// Exits (status 3) when the store logged an error since the last look.
    func check() {
        let seen = errors.withLock { errors in
            defer { errors.removeAll() }
            return errors
        }
        guard let first = seen.first else { return }
        emit("error \(first)")
        exit(3)
    }

    struct Handler: LogHandler {
        let watch: ErrorWatch
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .warning
        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }
        func log(event: LogEvent) {
            // A warning as the store opens (rows that cannot be read) is damage too.
            let fields = (event.metadata ?? [:]).sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
            let line = (["\(event.level)", "\(event.message)"] + fields).joined(separator: " ")
            watch.errors.withLock { $0.append(line.replacingOccurrences(of: "\n", with: " ")) }
        }
    }
}

/// The writer's choices come from BLECore's seeded generator, so they repeat for a seed.
extension SeededRandom {
    mutating func bytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &self) } }
}

/// The pool of addresses identifiers are asked for: 400, half public and half static random, fewer than the
/// store's 1,000-peer limit, so no peer is evicted and every committed identifier must stay.
func poolAddress(_ n: Int) -> BluetoothAddress {
    if n % 2 == 0 {
        return BluetoothAddress(bytes: [0x00, 0x1B, 0xDC, 0x4B, UInt8(n >> 8), UInt8(n & 0xFF)], type: .publicDevice)
    }
    return BluetoothAddress(bytes: [0xC7, 0x11, 0x4B, 0x1D, UInt8(n >> 8), UInt8(n & 0xFF)], type: .randomDevice)
}

// MARK: Arguments

let arguments = Array(CommandLine.arguments.dropFirst())
guard let path = arguments.first else {
    FileHandle.standardError.write(Data("usage: ble-store-writer PATH --seed N --clock T [--seconds S]\n".utf8))
    exit(2)
}
@MainActor func option(_ name: String) -> Int64? {
    guard let at = arguments.firstIndex(of: name), at + 1 < arguments.count else { return nil }
    return Int64(arguments[at + 1])
}
var choices = SeededRandom(seed: UInt64(bitPattern: option("--seed") ?? 1))
/// The store's clock: seconds since 1970, a second more for each change.
final class Clock: Sendable {
    let seconds: Mutex<Int64>
    init(_ start: Int64) { seconds = Mutex(start) }
    var now: Int64 { seconds.withLock { $0 } }
    func tick() -> Int64 {
        seconds.withLock {
            $0 += 1
            return $0
        }
    }
}
let clock = Clock(option("--clock") ?? 1_767_225_600)
let deadline = Date().addingTimeInterval(TimeInterval(option("--seconds") ?? 30))
@MainActor func tick() -> Int64 { clock.tick() }
let watch = ErrorWatch()

// MARK: Writing

var cycle = 0
/// Committed lines that wait for a flush, by what they are about (a later change replaces an earlier one).
var waiting: [String: String] = [:]
var waitingOrder: [String] = []

@MainActor func wait(_ key: String, _ line: String) {
    if waiting.updateValue(line, forKey: key) == nil { waitingOrder.append(key) }
}

@MainActor func flushed() {
    for key in waitingOrder { if let line = waiting[key] { emit(line) } }
    waiting.removeAll()
    waitingOrder.removeAll()
}

@MainActor func open() -> SystemStore {
    cycle += 1
    emit("open \(cycle)")
    do {
        let now: @Sendable () -> Int64 = { [clock] in clock.now }
        let store = try SystemStore(path: path, now: now, logger: watch.logger)
        watch.check()
        emit("opened \(cycle)")
        return store
    } catch {
        emit("error \(error)")
        exit(3)
    }
}

var store = open()
var changes = 0
while Date() < deadline {
    changes += 1
    let known = store.knownPeers
    let roll = Int.random(in: 0..<100, using: &choices)
    let time = tick()
    switch roll {
    case 0..<30:
        let address = poolAddress(Int.random(in: 0..<400, using: &choices))
        let identifier = store.identifier(for: address)
        watch.check()
        emit("id \(token(address)) \(identifier.uuidString)")
        wait("peer \(token(address))", "peer \(token(address)) \(identifier.uuidString)")
    case 30..<50:
        guard let peer = known.randomElement(using: &choices) else { continue }
        let name = "n\(changes)-\(Int.random(in: 0..<1_000_000, using: &choices))"
        emit("try-seen \(peer.identifier.uuidString) \(name) \(time)")
        store.noteSeen(peer.identifier, name: name)
        watch.check()
        wait("seen \(peer.identifier)", "seen \(peer.identifier.uuidString) \(name) \(time)")
    case 50..<62:
        guard let peer = known.randomElement(using: &choices) else { continue }
        if Int.random(in: 0..<4, using: &choices) == 0 {
            emit("try-uncache \(peer.identifier.uuidString)")
            store.setGATTCache(nil, for: peer.identifier)
            watch.check()
            wait("cache \(peer.identifier)", "uncache \(peer.identifier.uuidString)")
        } else {
            let cache = SystemStore.GATTCache(
                hash: choices.bytes(16), record: choices.bytes(Int.random(in: 1...200, using: &choices)))
            let line = "\(peer.identifier.uuidString) \(hex(cache.hash)) \(hex(cache.record))"
            emit("try-cache \(line)")
            store.setGATTCache(cache, for: peer.identifier)
            watch.check()
            wait("cache \(peer.identifier)", "cache \(line)")
        }
    case 62..<80:
        guard let peer = known.randomElement(using: &choices) else { continue }
        func key() -> StoredLongTermKey? {
            guard Bool.random(using: &choices) else { return nil }
            return StoredLongTermKey(
                key: choices.bytes(16), ediv: UInt16.random(in: 0...UInt16.max, using: &choices),
                rand: UInt64.random(in: 0...UInt64.max, using: &choices))
        }
        // The peer's own address as its identity, so no bond displaces another peer's.
        let bond = StoredBond(
            identifier: peer.identifier, identityAddress: peer.address,
            resolvingKey: Bool.random(using: &choices) ? choices.bytes(16) : nil, centralKey: key(),
            peripheralKey: key(), keySize: UInt8.random(in: 7...16, using: &choices),
            authenticated: Bool.random(using: &choices), secureConnections: Bool.random(using: &choices),
            created: time)
        emit("try-bond \(token(bond))")
        store.setBond(bond)
        watch.check()
        emit("bond \(token(bond))")
    case 80..<90:
        guard let bond = store.bonds.randomElement(using: &choices) else { continue }
        emit("try-unbond \(bond.identifier.uuidString)")
        store.removeBond(bond.identifier)
        watch.check()
        emit("unbond \(bond.identifier.uuidString)")
    case 90..<94:
        let name = "role\(Int.random(in: 0..<5, using: &choices))"
        let identity = store.localIdentity(named: name)
        watch.check()
        emit("identity \(name) \(hex(identity.resolvingKey)) \(token(identity.address))")
    case 94..<98:
        store.flush()
        watch.check()
        flushed()
    default:
        emit("close \(cycle)")
        store.close()
        watch.check()
        flushed()
        emit("closed \(cycle)")
        store = open()
    }
}
store.close()
watch.check()
flushed()
emit("done")
