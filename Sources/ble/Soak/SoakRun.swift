import BLE
import BLECore
import Dispatch
import Foundation
import Synchronization

/// `ble soak`: simulated hours of several centrals and peripherals on one radio and one seed, each central doing
/// random work (connects, reads, writes with and without response, long writes, subscriptions, transfers,
/// disconnects), with peripherals that wander out of range now and then; then the account: operations by kind,
/// acknowledged writes checked byte for byte against what the peripherals received, operations that never
/// completed, and the process's resident memory after each simulated hour.
struct SoakRun: Sendable {
    var hours: Double
    var seed: UInt64
    var centrals: Int
    var peripherals: Int

    /// An operation that has not completed this long after it started (virtual time) is hung: every request of
    /// the stack completes within the ATT transaction timeout (30 s) or the link's supervision timeout.
    static let hungAfter = Duration.seconds(90)

    struct Report: Sendable {
        var hours: Double
        var seed: UInt64
        var centrals: Int
        var peripherals: Int
        var operations: [String: (ok: Int, failed: Int)] = [:]
        var connections = 0
        var linksLost = 0
        var outOfRange = 0
        var acknowledgedWrites = 0
        var lostWrites: [String] = []
        var hung: [String] = []
        /// Resident memory after each simulated hour, in bytes.
        var residentPerHour: [Int] = []
        /// Of that, the anonymous part (heap, stacks: what a leak would grow), from /proc/self/status's RssAnon;
        /// the rest is file pages (code, mapped files).
        var anonymousPerHour: [Int] = []
        var wallSeconds = 0.0

        /// Memory is flat when, after the first hour (warm-up), it never grows past the first hour's by more
        /// than a quarter and 16 MiB (allocators keep what they got; a leak grows with the hours).
        var memoryFlat: Bool {
            guard let warm = residentPerHour.first, let peak = residentPerHour.dropFirst().max() else { return true }
            return peak <= warm + max(warm / 4, 16 << 20)
        }

        var passed: Bool { lostWrites.isEmpty && hung.isEmpty && memoryFlat }
    }

    func run() async throws -> Report {
        let started = Date()
        let radio = SimulatedRadio(seed: seed)
        var configuration = BluetoothSystem.Configuration(supervisionTimeout: .seconds(4))
        configuration.pairing = nil
        let devices = (0..<peripherals).map { i in
            SoakPeripheral(
                index: i,
                system: BluetoothSystem.simulated(
                    on: radio, name: "soak-p\(i)", position: Self.home(i), configuration: configuration))
        }
        let ledger = SoakLedger(radio: radio)
        let end = radio.now + .milliseconds(Int64(hours * 3_600_000))
        var actors: [Task<Void, Never>] = []
        var managers: [CentralManager] = []
        for c in 0..<centrals {
            let system = BluetoothSystem.simulated(
                on: radio, name: "soak-c\(c)", position: RadioPosition(x: Double(c % 3), y: Double(c / 3)),
                configuration: configuration)
            let central = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "soak.central.\(c)"), options: nil, system: system)
            managers.append(central)
            let actor = SoakCentral(
                index: UInt8(c), central: central, devices: devices.count, ledger: ledger, end: end,
                random: SeededRandom(seed: seed &+ 0x9E37_79B9 &* UInt64(c + 1)))
            actors.append(Task(executorPreference: radio) { await actor.run() })
        }
        // The world: every device ticks once a second; now and then one wanders out of range and back.
        var chaos = SeededRandom(seed: seed ^ 0xC4A0_5EED)
        var report = Report(hours: hours, seed: seed, centrals: centrals, peripherals: peripherals)
        var nextHour = radio.now + .seconds(3600)
        var away: [(device: Int, back: Duration)] = []
        var nextWander = radio.now + .seconds(Int64(chaos.next(in: 300...900)))
        while radio.now < end {
            try await radio.run(for: .seconds(1))
            for device in devices { device.tick(on: radio) }
            let now = radio.now
            if now >= nextWander {
                let device = chaos.next(in: 0...(peripherals - 1))
                if !away.contains(where: { $0.device == device }) {
                    devices[device].system.move(to: RadioPosition(x: 500, y: 500))
                    away.append((device, now + .seconds(Int64(chaos.next(in: 10...60)))))
                    report.outOfRange += 1
                }
                nextWander = now + .seconds(Int64(chaos.next(in: 300...900)))
            }
            for (device, back) in away where back <= now {
                devices[device].system.move(to: Self.home(device))
            }
            away.removeAll { $0.back <= now }
            if now >= nextHour {
                // Checked as they come, and let go of: the account itself must not grow with the hours.
                Self.check(ledger.takeAcknowledged(), against: devices, into: &report)
                report.residentPerHour.append(Self.residentBytes())
                report.anonymousPerHour.append(Self.anonymousBytes())
                nextHour = now + .seconds(3600)
            }
        }
        for (device, _) in away { devices[device].system.move(to: Self.home(device)) }
        // The actors stop starting work; what they have under way ends (or is hung), then they return.
        ledger.stop()
        try await radio.run(for: Self.hungAfter + .seconds(30), until: { ledger.actorsRunning == 0 })
        report.hung = ledger.outstanding(olderThan: Self.hungAfter)
        if ledger.actorsRunning > 0 {
            report.hung.append("\(ledger.actorsRunning) central(s) still busy \(Self.hungAfter) after the end")
        }
        if report.residentPerHour.count < Int(hours.rounded(.up)) {
            report.residentPerHour.append(Self.residentBytes())
            report.anonymousPerHour.append(Self.anonymousBytes())
        }
        Self.check(ledger.takeAcknowledged(), against: devices, into: &report)
        report.operations = ledger.operations
        report.connections = ledger.connections
        report.linksLost = ledger.linksLost
        for actor in actors where ledger.actorsRunning > 0 { actor.cancel() }
        for device in devices { device.stop() }
        withExtendedLifetime(managers) {}
        report.wallSeconds = Date().timeIntervalSince(started)
        return report
    }

    /// Every acknowledged write is in its peripheral's log, byte for byte (the peripheral logs a write before it
    /// answers, so an acknowledged one is there already); checked entries leave both sides' memory.
    static func check(_ writes: [SoakLedger.Acknowledged], against devices: [SoakPeripheral], into report: inout Report)
    {
        for write in writes {
            report.acknowledgedWrites += 1
            let got = devices[write.device].take(from: write.central, sequence: write.sequence)
            if got != write.payload {
                report.lostWrites.append(
                    "central \(write.central) write #\(write.sequence) to Soak-\(write.device) (\(write.payload.count) bytes): "
                        + (got.map { "received \($0.count) different bytes" } ?? "not received"))
            }
        }
    }

    static func home(_ device: Int) -> RadioPosition {
        RadioPosition(x: Double(device % 4) * 2 + 1, y: Double(device / 4) * 2 + 1)
    }

    /// The anonymous resident memory (RssAnon in /proc/self/status: heap and stacks, no file pages), 0 where
    /// there is none.
    static func anonymousBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("RssAnon:") }),
            let kib = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Int($0) })
        else { return 0 }
        return kib * 1024
    }

    /// The process's resident set, from /proc/self/statm (0 where there is none).
    static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// The soak's draws, from BLECore's seeded generator: the same seed, the same run.
extension SeededRandom {
    mutating func next(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    mutating func chance(_ percent: Int) -> Bool { next(in: 0...99) < percent }

    mutating func bytes(_ count: Int) -> Data { Data((0..<count).map { _ in UInt8(truncatingIfNeeded: next()) }) }
}

/// What the centrals did, kept for the account: operations under way (to find hung ones), results by kind, and
/// every write the peripheral acknowledged.
final class SoakLedger: Sendable {
    struct Acknowledged: Sendable {
        var central: UInt8
        var device: Int
        var sequence: UInt32
        var payload: Data
    }

    private struct State {
        var next = 0
        var underway: [Int: (what: String, since: Duration)] = [:]
        var operations: [String: (ok: Int, failed: Int)] = [:]
        var acknowledged: [Acknowledged] = []
        var connections = 0
        var linksLost = 0
        var stopped = false
        var actorsRunning = 0
    }
    private let state = Mutex(State())
    let radio: SimulatedRadio

    init(radio: SimulatedRadio) { self.radio = radio }

    var stopped: Bool { state.withLock { $0.stopped } }
    func stop() { state.withLock { $0.stopped = true } }

    var actorsRunning: Int { state.withLock { $0.actorsRunning } }
    func actorStarted() { state.withLock { $0.actorsRunning += 1 } }
    func actorEnded() { state.withLock { $0.actorsRunning -= 1 } }

    /// Runs `body` as one operation of kind `kind`, counted as ok or failed; its error is rethrown.
    func operation<T: Sendable>(_ kind: String, on device: Int, _ body: () async throws -> T) async throws -> T {
        let now = radio.now
        let id = state.withLock { s -> Int in
            s.next += 1
            s.underway[s.next] = ("\(kind) on Soak-\(device)", now)
            return s.next
        }
        do {
            let value = try await body()
            state.withLock { s in
                s.underway[id] = nil
                s.operations[kind, default: (0, 0)].ok += 1
            }
            return value
        } catch {
            state.withLock { s in
                s.underway[id] = nil
                s.operations[kind, default: (0, 0)].failed += 1
            }
            throw error
        }
    }

    func acknowledged(_ write: Acknowledged) { state.withLock { $0.acknowledged.append(write) } }

    /// The acknowledged writes recorded since the last call.
    func takeAcknowledged() -> [Acknowledged] {
        state.withLock { s in
            defer { s.acknowledged = [] }
            return s.acknowledged
        }
    }
    func connected() { state.withLock { $0.connections += 1 } }
    func linkLost() { state.withLock { $0.linksLost += 1 } }

    var operations: [String: (ok: Int, failed: Int)] { state.withLock { $0.operations } }
    var connections: Int { state.withLock { $0.connections } }
    var linksLost: Int { state.withLock { $0.linksLost } }

    /// Operations started more than `age` ago and not completed.
    func outstanding(olderThan age: Duration) -> [String] {
        let now = radio.now
        return state.withLock { s in
            s.underway.sorted { $0.key < $1.key }.filter { now - $0.value.since > age }.map {
                "\($0.value.what), started at \($0.value.since) and not completed at \(now)"
            }
        }
    }
}

/// One central's random work, as a task on the radio.
final class SoakCentral: @unchecked Sendable {
    // @unchecked: `random`, `sequence` and `known` are touched only by `run`, one task.
    let index: UInt8
    let central: CentralManager
    let devices: Int
    let ledger: SoakLedger
    let end: Duration
    var random: SeededRandom
    var sequence: UInt32 = 0
    var known: [Int: Peripheral] = [:]

    init(index: UInt8, central: CentralManager, devices: Int, ledger: SoakLedger, end: Duration, random: SeededRandom) {
        self.index = index
        self.central = central
        self.devices = devices
        self.ledger = ledger
        self.end = end
        self.random = random
    }

    func run() async {
        ledger.actorStarted()
        defer { ledger.actorEnded() }
        do {
            try await central.waitUntilPoweredOn(timeout: .seconds(10))
        } catch {
            return
        }
        while !ledger.stopped, ledger.radio.now < end {
            let device = random.next(in: 0...(devices - 1))
            do {
                try await visit(device)
            } catch {
                // A failed visit (the device wandered off, a link lost): counted by its operation; go on.
            }
            if ledger.stopped { break }
            try? await ledger.radio.sleep(for: .seconds(random.next(in: 1...20)))
        }
    }

    private func peripheral(_ device: Int) async throws -> Peripheral {
        if let known = known[device] { return known }
        let name = "Soak-\(device)"
        let found = try await ledger.operation("scan", on: device) { () async throws -> Peripheral in
            for try await discovery in central.scan(withServices: [SoakPeripheral.service])
            where discovery.peripheral.name == name || discovery.advertisementData.localName == name {
                return discovery.peripheral
            }
            throw BluetoothError(.unknownDevice, "the scan ended before \(name) was heard")
        }
        central.stopScan()
        known[device] = found
        return found
    }

    /// Connects to a device, does a few random things on it, and leaves (or loses the link trying).
    private func visit(_ device: Int) async throws {
        let peripheral = try await peripheral(device)
        try await ledger.operation("connect", on: device) {
            try await central.connect(peripheral, timeout: .seconds(30))
        }
        ledger.connected()
        defer {
            if peripheral.state != .disconnected {
                central.cancelPeripheralConnection(peripheral)
            } else {
                ledger.linkLost()
            }
        }
        let services = try await ledger.operation("discover", on: device) {
            try await peripheral.discoverServices([SoakPeripheral.service], timeout: nil)
        }
        guard let service = services.first else { return }
        let characteristics = try await ledger.operation("discover", on: device) {
            try await peripheral.discoverCharacteristics(nil, for: service, timeout: nil)
        }
        guard let log = characteristics.first(where: { $0.uuid == SoakPeripheral.log }),
            let counter = characteristics.first(where: { $0.uuid == SoakPeripheral.counter })
        else { return }
        for _ in 0..<random.next(in: 1...8) {
            if ledger.stopped || peripheral.state != .connected { return }
            switch random.next(in: 0...9) {
            case 0, 1:
                _ = try await ledger.operation("read", on: device) {
                    try await peripheral.readValue(for: counter, timeout: nil)
                }
            case 2, 3, 4:
                try await write(
                    random.next(in: 1...(peripheral.maximumWriteValueLength(for: .withResponse) - 5)),
                    to: log, of: peripheral, device: device, kind: "write")
            case 5:
                // A long write (prepared writes), up to the 512 bytes of an attribute.
                try await write(random.next(in: 200...507), to: log, of: peripheral, device: device, kind: "long write")
            case 6:
                // A transfer: writes without response, as fast as the link takes them (not acknowledged, so not
                // in the account of writes).
                let count = random.next(in: 5...40)
                let chunk = peripheral.maximumWriteValueLength(for: .withoutResponse)
                let data = random.bytes(count * chunk)
                try await ledger.operation("transfer", on: device) {
                    for try await _ in peripheral.send(data, to: log, type: .withoutResponse, chunkSize: chunk) {}
                }
            case 7, 8:
                let values = peripheral.notifications(for: counter)
                try await ledger.operation("subscribe", on: device) {
                    try await peripheral.setNotifyValue(true, for: counter, timeout: nil)
                }
                let wanted = random.next(in: 1...10)
                let listening = Task(executorPreference: ledger.radio) {
                    var heard = 0
                    for try await _ in values {
                        heard += 1
                        if heard >= wanted { break }
                    }
                    return heard
                }
                try? await ledger.radio.sleep(for: .seconds(wanted + 2))
                listening.cancel()
                _ = await listening.result
                try await ledger.operation("unsubscribe", on: device) {
                    try await peripheral.setNotifyValue(false, for: counter, timeout: nil)
                }
            default:
                try? await ledger.radio.sleep(for: .seconds(random.next(in: 1...15)))
            }
        }
    }

    /// A write with response whose acknowledgement is recorded with what it carried.
    private func write(
        _ length: Int, to log: Characteristic, of peripheral: Peripheral, device: Int, kind: String
    ) async throws {
        sequence &+= 1
        let payload = random.bytes(max(0, length))
        var value = Data([index])
        withUnsafeBytes(of: sequence.littleEndian) { value.append(contentsOf: $0) }
        value.append(payload)
        let number = sequence
        try await ledger.operation(kind, on: device) {
            try await peripheral.writeValue(value, for: log, type: .withResponse, timeout: nil)
        }
        ledger.acknowledged(.init(central: index, device: device, sequence: number, payload: payload))
    }
}
