import BLE
import BLECore
import Dispatch
import Foundation
import Synchronization

/// `ble bench scale` and the heart-rate day: many links in one simulated room, each peripheral notifying a small
/// value at a steady rate, measured through the public API. The room has `centrals` phones, each connected to
/// `peripheralsPerCentral` sensors of its own (every controller within its connection limit, every link within
/// its air time); once every link is subscribed, the radio runs `seconds` of virtual time while the wall clock
/// is read, and the centrals count what reached them.
///
/// The figure is the real-time factor (virtual seconds per wall-clock second) with the share delivered; memory
/// per link is what the process's resident set grew by while the links came up, divided by the links (every
/// device was already on and advertising before).
public struct ScaleBenchmark: Sendable, Hashable {
    public var centrals: Int
    public var peripheralsPerCentral: Int
    /// Notifications per second of each peripheral.
    public var rate: Double
    /// The octets of each notification.
    public var valueLength: Int
    /// Every link's connection interval.
    public var interval: Duration

    public init(
        centrals: Int, peripheralsPerCentral: Int, rate: Double = 10, valueLength: Int = 20,
        interval: Duration = .milliseconds(50)
    ) {
        self.centrals = max(1, centrals)
        self.peripheralsPerCentral = max(1, peripheralsPerCentral)
        self.rate = rate
        self.valueLength = max(1, valueLength)
        self.interval = interval
    }

    /// A connected heart-rate sensor notifying a 2-octet measurement once a second (one link).
    public static let heartRate = ScaleBenchmark(
        centrals: 1, peripheralsPerCentral: 1, rate: 1, valueLength: 2, interval: .milliseconds(30))

    public var links: Int { centrals * peripheralsPerCentral }

    public struct Result: Sendable, Hashable {
        public var links: Int
        /// Links that were up and subscribed when the window opened.
        public var subscribed: Int
        /// Notifications the sensors sent in the window, from sensors subscribed before it opened. A sensor
        /// hears of its subscription before its central does (by up to an interval), so a link the window opened
        /// between the two counts here and not in `subscribed`: `sent` can exceed what `expected` covers.
        public var sent: Int
        public var received: Int
        /// What `rate` promises over the window from the subscribed links: subscribed · rate · seconds.
        public var expected: Int
        public var virtualSeconds: Double
        public var wallSeconds: Double
        /// Wall-clock seconds it took the links to come up (scan, connect, discover, subscribe).
        public var setupWallSeconds: Double
        /// Growth of the resident set while the links came up, per link (nil where it cannot be read).
        public var bytesPerLink: Int?

        public var realTimeFactor: Double { wallSeconds > 0 ? virtualSeconds / wallSeconds : 0 }
        public var deliveredShare: Double { expected > 0 ? Double(received) / Double(expected) : 0 }
    }

    /// The service each central looks for: one per central, so each finds its own sensors.
    static func service(ofGroup group: Int) -> BluetoothUUID {
        BluetoothUUID(string: "B3C5" + String(format: "%04X", group & 0xFFFF) + "-5E1D-4F7A-9A0B-2C3D4E5F6071")!
    }
    static let characteristic = BluetoothUUID(string: "B3C50002-5E1D-4F7A-9A1B-2C3D4E5F6071")!

    /// Sets the room up, waits until every link is subscribed (at most `setupLimit` of virtual time), runs
    /// `seconds` of virtual time after a second of warm-up, and tears the room down.
    /// `window` hears the measured window open (true) and close (false).
    public func run(
        seconds: Double, seed: UInt64, setupLimit: Duration = .seconds(300), window: (@Sendable (Bool) -> Void)? = nil
    ) async throws -> Result {
        let radio = SimulatedRadio(seed: seed)
        let meter = ScaleMeter()
        // The devices' positions and phases, fixed by the seed.
        var random = SeededRandom(seed: seed)
        func position() -> RadioPosition {
            RadioPosition(x: Double(random.next() % 2000) / 100, y: Double(random.next() % 2000) / 100)
        }
        let linkConfiguration = BluetoothSystem.Configuration(
            maximumConnections: max(32, peripheralsPerCentral), connectionInterval: interval...interval,
            supervisionTimeout: .seconds(4))
        let period = Duration.nanoseconds(Int64((1e9 / max(rate, 0.001)).rounded()))
        var sensors: [ScaleSensor] = []
        var managers: [CentralManager] = []
        var flows: [Task<Void, any Error>] = []
        for group in 0..<centrals {
            let service = Self.service(ofGroup: group)
            for index in 0..<peripheralsPerCentral {
                let system = BluetoothSystem.simulated(
                    on: radio, name: "p\(group)-\(index)", position: position(), configuration: linkConfiguration)
                let phase = Duration.nanoseconds(Int64(random.next() % UInt64(period.clampedNanoseconds)))
                sensors.append(
                    ScaleSensor(
                        system: system, radio: radio, service: service, valueLength: valueLength, period: period,
                        phase: phase, meter: meter))
            }
            let system = BluetoothSystem.simulated(
                on: radio, name: "c\(group)", position: position(), configuration: linkConfiguration)
            let central = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "scale.c\(group)"), options: nil, system: system)
            managers.append(central)
            let wanted = peripheralsPerCentral
            flows.append(
                Task(executorPreference: radio) {
                    try await central.waitUntilPoweredOn(timeout: .seconds(30))
                    // Every device is up and advertising before any link comes: what links cost is measured apart.
                    try await radio.sleep(for: .seconds(2))
                    meter.centralReady()
                    var found: [Peripheral] = []
                    for try await discovery in central.scan(withServices: [service]) {
                        if !found.contains(where: { $0 === discovery.peripheral }) {
                            found.append(discovery.peripheral)
                        }
                        if found.count == wanted { break }
                    }
                    try await withThrowingTaskGroup(of: Void.self) { counting in
                        for peripheral in found {
                            // A link that cannot be set up (its central's air is full) is counted out, not fatal:
                            // the result says how many links were subscribed.
                            do {
                                try await central.connect(peripheral, timeout: .seconds(30))
                                let services = try await peripheral.discoverServices([service], timeout: .seconds(30))
                                guard let first = services.first else { throw BenchError("no bench service") }
                                let characteristics = try await peripheral.discoverCharacteristics(
                                    [Self.characteristic], for: first, timeout: .seconds(30))
                                guard let source = characteristics.first else { throw BenchError("no bench value") }
                                // The stream keeps what arrives until it is iterated, from the subscription on.
                                let values = peripheral.notifications(for: source)
                                try await peripheral.setNotifyValue(true, for: source, timeout: .seconds(30))
                                // Only a link subscribed before the window opened counts in it: one the setup
                                // was still bringing up would add values the expected count does not hold.
                                let inWindow = meter.subscribed()
                                counting.addTask {
                                    for try await _ in values where inWindow { meter.received() }
                                }
                            } catch is CancellationError {
                                throw CancellationError()
                            } catch {
                                meter.failed()
                            }
                        }
                        try await counting.waitForAll()
                    }
                })
        }
        let links = self.links
        let centrals = self.centrals
        let setupStart = ContinuousClock.now
        try await radio.run(for: setupLimit, until: { meter.readyCentrals == centrals })
        let devicesUp = ResidentMemory.bytes()
        try await radio.run(for: setupLimit, until: { meter.subscribedLinks + meter.failedLinks == links })
        let linksUp = ResidentMemory.bytes()
        let setupWall = ContinuousClock.now - setupStart
        let subscribedAtSetup = meter.subscribedLinks
        try await radio.run(for: .seconds(1))
        let span = Duration.milliseconds(Int64((max(seconds, 0.001) * 1000).rounded()))
        window?(true)
        let subscribed = meter.open()
        let wallStart = ContinuousClock.now
        try await radio.run(for: span)
        let wall = ContinuousClock.now - wallStart
        window?(false)
        let (sent, received) = meter.close()
        for sensor in sensors { sensor.stop() }
        for flow in flows { flow.cancel() }
        try await radio.run(for: .seconds(1))
        withExtendedLifetime((sensors, managers)) {}
        var perLink: Int?
        if let devicesUp, let linksUp, subscribedAtSetup > 0 {
            perLink = max(0, linksUp - devicesUp) / subscribedAtSetup
        }
        return Result(
            links: links, subscribed: subscribed, sent: sent, received: received,
            expected: Int((Double(subscribed) * rate * Double(span.clampedNanoseconds) / 1e9).rounded()),
            virtualSeconds: Double(span.clampedNanoseconds) / 1e9, wallSeconds: wall.seconds,
            setupWallSeconds: setupWall.seconds, bytesPerLink: perLink)
    }
}

extension Duration {
    /// This duration in seconds, as a `Double`.
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

/// The process's resident set, from /proc/self/statm (nil where there is none).
enum ResidentMemory {
    static func bytes() -> Int? {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return nil }
        let fields = text.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return nil }
        return pages * Int(sysconf(Int32(_SC_PAGESIZE)))
    }
}

/// Counts of a scale run, read between the radio's events.
final class ScaleMeter: Sendable {
    private struct State {
        var ready = 0
        var subscribed = 0
        var failed = 0
        var open = false
        /// Whether the window has opened: links and sensors subscribed after it do not count.
        var opened = false
        var sent = 0
        var received = 0
    }
    private let state = Mutex(State())

    var readyCentrals: Int { state.withLock { $0.ready } }
    var subscribedLinks: Int { state.withLock { $0.subscribed } }
    func centralReady() { state.withLock { $0.ready += 1 } }
    /// A link is subscribed; returns whether it counts in the window (it was subscribed before it opened).
    func subscribed() -> Bool {
        state.withLock { s in
            s.subscribed += 1
            return !s.opened
        }
    }
    /// A sensor heard its subscription; returns whether what it sends counts in the window.
    func sensorSubscribed() -> Bool { state.withLock { !$0.opened } }
    var failedLinks: Int { state.withLock { $0.failed } }
    func failed() { state.withLock { $0.failed += 1 } }
    /// Opens the window; returns the links subscribed by then, the ones it counts.
    func open() -> Int {
        state.withLock { s in
            s.open = true
            s.opened = true
            return s.subscribed
        }
    }
    func sent() { state.withLock { if $0.open { $0.sent += 1 } } }
    func received() { state.withLock { if $0.open { $0.received += 1 } } }
    func close() -> (sent: Int, received: Int) {
        state.withLock { s in
            s.open = false
            return (s.sent, s.received)
        }
    }
}

/// A sensor of a scale run: one notifying characteristic; once a central subscribes it notifies every `period`
/// (starting `phase` in), on the radio's clock.
final class ScaleSensor: PeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: `manager` is set inside `queue.sync` in `init`, before any callback; `ticking`, `stopped` and `counts` are
    // touched under `lock` only; the rest are lets.
    let queue: DispatchQueue
    let radio: SimulatedRadio
    let service: BluetoothUUID
    let value: Data
    let period: Duration
    let phase: Duration
    let meter: ScaleMeter
    let characteristic = MutableCharacteristic(
        type: ScaleBenchmark.characteristic, properties: [.notify], value: nil, permissions: [.readable])
    var manager: PeripheralManager!
    private let lock = Mutex((ticking: false, stopped: false, counts: false))

    init(
        system: BluetoothSystem, radio: SimulatedRadio, service: BluetoothUUID, valueLength: Int, period: Duration,
        phase: Duration, meter: ScaleMeter
    ) {
        queue = DispatchQueue(label: "scale.sensor")
        self.radio = radio
        self.service = service
        value = Data(repeating: 0x48, count: valueLength)
        self.period = period
        self.phase = phase
        self.meter = meter
        queue.sync { manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system) }
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = MutableService(type: service, primary: true)
        service.characteristics = [characteristic]
        peripheral.add(service)
        peripheral.startAdvertising(AdvertisementData(serviceUUIDs: [self.service]))
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        // One link each: the sensor stops advertising (its radio is then the link's alone) and starts its clock.
        peripheral.stopAdvertising()
        let counts = meter.sensorSubscribed()
        let start = lock.withLock { s -> Bool in
            defer { s.ticking = true }
            if !s.ticking { s.counts = counts }
            return !s.ticking && !s.stopped
        }
        if start { radio.schedule(after: phase) { [self] in tick() } }
    }

    private func tick() {
        let (stopped, counts) = lock.withLock { ($0.stopped, $0.counts) }
        guard !stopped else { return }
        if manager.updateValue(value, for: characteristic, onSubscribedCentrals: nil), counts { meter.sent() }
        radio.schedule(after: period) { [self] in tick() }
    }

    func stop() { lock.withLock { $0.stopped = true } }
}
