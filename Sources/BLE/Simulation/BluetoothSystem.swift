import BLECore
import BLEHost
import BLESystem
import BLETransport
import BLEVirtualController
import Foundation
import Logging
import Synchronization

/// One Bluetooth controller with its host stack: what a `CentralManager` or `PeripheralManager` runs on.
///
/// Managers on the same system share its controller, its address and its identifier store, as apps on one
/// phone share its radio. Create one per simulated device with `simulated(on:name:position:)`, or reach a real
/// controller with `connect(transport:)`; managers created without a system use `processDefault`.
public final class BluetoothSystem: Sendable, CustomStringConvertible {
    let core: SystemCore
    /// The virtual controller, for a simulated system.
    public let virtualController: VirtualController?
    /// Each app's launch handler and launched object, by app id.
    let runtimes = Mutex<[String: AppRuntime]>([:])
    /// Which manager writes each preserved state in the store (`BluetoothSystem+Preservation.swift`).
    let preservationOwners = Mutex<[PreservedManager.Key: ObjectIdentifier]>([:])
    /// The pairing delegate (`Pairing.swift`).
    let pairingDelegateBox = Mutex(WeakPairingDelegate())

    func withRuntime<T>(of app: String, _ body: (inout AppRuntime) -> T) -> T {
        runtimes.withLock { body(&$0[app, default: AppRuntime()]) }
    }

    init(core: SystemCore, virtualController: VirtualController?) {
        self.core = core
        self.virtualController = virtualController
        // What reaches a kept manager relaunches its app when the system's rules say so.
        core.onRelaunch { [weak self] id in
            guard let self else { return }
            relaunchForRestoration(app(id: id))
        }
        // A store that kept managers' state (a phone restarted): their work goes on for their apps.
        resumePreservedWork()
    }

    /// The system's name (the simulated device's name; the GAP Device Name its GATT server shows).
    public var name: String { core.name }

    /// The controller's address once initialised.
    public var address: BluetoothAddress? { core.host.controllerInfo?.address }

    public var description: String { "<BluetoothSystem \(name)>" }

    /// Where the systems say what no call reports (a capture that cannot be written, say).
    static let logger = Logger(label: "swift-ble.system")

    /// A virtual controller and a host on `radio`, at `position`. The host starts initialising at once; managers
    /// created on the system report `poweredOn` once the radio has run long enough for that (a few
    /// milliseconds of virtual time).
    public static func simulated(
        on radio: SimulatedRadio, name: String,
        position: RadioPosition = RadioPosition(x: 0, y: 0),
        configuration: Configuration = Configuration()
    ) -> BluetoothSystem {
        do {
            return try makeSimulated(on: radio, name: name, position: position, configuration: configuration)
        } catch {
            // A btsnoop file that cannot be created or a store that cannot be used: run without them and say so
            // (in the log; the library writes nothing to stdout or stderr itself). Call `makeSimulated` to get
            // the error instead.
            logger.error("\(name) runs unrecorded, with its store in memory: \(error)")
            var plain = configuration
            plain.btsnoop = nil
            plain.storePath = nil
            // `try!` cannot trap: without a btsnoop file or a store file, making a simulated system throws nothing.
            return try! makeSimulated(on: radio, name: name, position: position, configuration: plain)
        }
    }

    /// A virtual controller and a host on `radio`, as `simulated(on:name:position:configuration:)`, with a
    /// chosen identity address when `address` is given (a public address, as a device with an IEEE-assigned
    /// one reports; otherwise a random static address derived from the radio's seed and the name).
    ///
    /// A system made again with the name and store of one that was shut down is the same phone after a restart:
    /// the same address, and the same identifiers for the same devices.
    ///
    /// - Throws: `BluetoothError` `.storeUnavailable` (naming the file) when `configuration.storePath` cannot be
    ///   used and `rebuildUnusableStore` is false; `.invalidParameters` when `configuration.btsnoop` names a file
    ///   that cannot be created. Nothing else can fail.
    public static func makeSimulated(
        on radio: SimulatedRadio, name: String, address: BluetoothAddress? = nil,
        position: RadioPosition = RadioPosition(x: 0, y: 0),
        configuration: Configuration = Configuration()
    ) throws -> BluetoothSystem {
        // Virtual seconds from 2026-01-01, the origin of the radio's captures.
        let store = try openStore(
            configuration, seed: radio.seed ^ stableHash(name),
            now: { [radio] in 1_767_225_600 + radio.now.components.seconds })
        let controller = radio.addController(
            name: name, address: address, position: position, txPower: configuration.txPower,
            aclBufferLength: configuration.aclBufferLength,
            aclBufferCount: configuration.aclBufferCount, maximumConnections: configuration.maximumConnections,
            hostLink: configuration.hostLink)
        var transport = controller.hostTransport
        if let path = configuration.btsnoop {
            // Virtual time, from a fixed origin: the same run gives the same capture, byte for byte.
            let origin: Int64 = 1_767_225_600_000_000  // 2026-01-01T00:00:00Z in microseconds
            transport = try recorded(
                transport, to: path, domain: radio,
                clock: { [radio] in
                    let now = radio.now.components
                    return origin + now.seconds * 1_000_000 + now.attoseconds / 1_000_000_000_000
                })
        }
        let core = SystemCore(
            name: name, transport: transport, scheduler: radio,
            configuration: configuration.hostConfiguration(name: name, store: store), store: store,
            appRules: configuration.appRules)
        return BluetoothSystem(core: core, virtualController: controller)
    }

    /// The store `configuration` names, or one in memory.
    static func openStore(_ configuration: Configuration, seed: UInt64?, now: @escaping @Sendable () -> Int64)
        throws(BluetoothError) -> SystemStore
    {
        do {
            return try SystemStore(
                path: configuration.storePath, rebuildUnusable: configuration.rebuildUnusableStore, seed: seed,
                now: now)
        } catch {
            throw BluetoothError(.storeUnavailable, error.description)
        }
    }

    /// A store in memory, for systems that have no configuration to name a file.
    static func memoryStore(seed: UInt64?) -> SystemStore {
        // `try!` cannot trap short of SQLite running out of memory: an in-memory database has no file to be
        // unusable.
        try! SystemStore(path: nil, seed: seed, now: { Int64(Date().timeIntervalSince1970) })
    }

    /// Tunables of a system's host (and, for a simulated one, of its virtual controller).
    public struct Configuration: Sendable, Hashable {
        /// The ATT_MTU this device offers in an MTU exchange, 23...517 (iOS offers 517 or so).
        public var preferredMTU: Int = 517
        /// The LL payload asked for after connecting, 27...251 (27: no data length extension).
        public var preferredDataLength: Int = 251
        /// Write Commands queued in the host per link before `canSendWriteWithoutResponse` turns false; they
        /// wait behind the controller's own buffers (`aclBufferCount`), so the refusal comes after both fill.
        public var writeWithoutResponseQueueDepth: Int = 8
        /// Notifications queued in the host per link before `updateValue` returns false, behind the
        /// controller's own buffers.
        public var notificationQueueDepth: Int = 8
        /// Simulated controllers: transmit power in dBm.
        public var txPower: Int8 = 0
        /// Simulated controllers: LE ACL buffer size and count (HCI LE Read Buffer Size).
        public var aclBufferLength: Int = 251
        public var aclBufferCount: Int = 8
        /// Simulated controllers: the links the controller holds at once, as central and peripheral together;
        /// beyond, a connection fails with `.connectionLimitReached` (HCI Connection Limit Exceeded, 0x09).
        public var maximumConnections: Int = 32
        /// Simulated controllers: how long HCI packets take between host and controller (`.ideal`, as inside a
        /// phone, or `.uart(baud:)`).
        public var hostLink: HostControllerLink = .ideal
        /// Link preferences (our own, not CoreBluetooth API), applied by the host through the LL procedures: the
        /// PHY (set as the controller's default and asked for by a central after connecting; nil leaves it to
        /// the controllers), and what a central asks for in LE Create Connection. The interval is rounded to
        /// 1.25 ms and kept within 7.5 ms...4 s, the latency within 0...499 events and the timeout within
        /// 100 ms...32 s; parameters the controller finds inconsistent (a timeout not above
        /// `(1 + latency) · interval · 2`) fail the connection with the controller's status.
        public var preferredPHY: LinkPHY?
        public var connectionInterval: ClosedRange<Duration> = .milliseconds(30) ... .milliseconds(50)
        public var peripheralLatency: Int = 0
        public var supervisionTimeout: Duration = .seconds(5)
        /// Whether this system's scans are active (scan requests sent, scan responses heard: the default, as a
        /// phone scans) or passive (only listening, as a sniffer). Our own, not CoreBluetooth API.
        public var activeScanning = true
        /// Record every HCI packet of this system to this file in the btsnoop format (Wireshark reads it).
        public var btsnoop: String?
        /// The system store's file (SQLite): identifiers and known peripherals outlive the process there. nil,
        /// the default, keeps them in memory.
        public var storePath: String?
        /// A store file that cannot be used (corrupt, unreadable, written by a newer version) is moved aside
        /// (to `storePath + ".unusable"`), the move logged, and a new store started; when false, the default,
        /// making the system fails with `.storeUnavailable`.
        public var rebuildUnusableStore = false
        /// The timing of the rules for apps out of the foreground: how soon an app that left the foreground is
        /// suspended, an app's wake budget, and how events are held for a suspended app.
        public var appRules = AppRules()
        /// How this device pairs (a swift-ble extension: iOS decides it itself); nil: it does not pair (a
        /// Pairing Request is answered Pairing Not Supported, a key request refused).
        public var pairing: PairingConfiguration? = PairingConfiguration()
        /// LE privacy (a swift-ble extension: an iPhone always uses it, and decides its own period): this device
        /// advertises, scans and connects from resolvable private addresses it renews every period, and gives a
        /// peer it bonds with its IRK and identity address, so the peer still knows it. The identity is kept in
        /// the store under the system's name (made on first use). nil, the default: the controller's address is
        /// used as it is.
        public var privacy: PrivacyConfiguration?
        /// Whether this device's GATT server has a Database Hash; false simulates a device older than Core 5.1,
        /// which a phone caches only when bonded (tests).
        var servesDatabaseHash = true

        public init(
            preferredMTU: Int = 517, preferredDataLength: Int = 251, writeWithoutResponseQueueDepth: Int = 8,
            notificationQueueDepth: Int = 8, txPower: Int8 = 0, aclBufferLength: Int = 251, aclBufferCount: Int = 8,
            maximumConnections: Int = 32, hostLink: HostControllerLink = .ideal, preferredPHY: LinkPHY? = nil,
            connectionInterval: ClosedRange<Duration> = .milliseconds(30) ... .milliseconds(50),
            peripheralLatency: Int = 0, supervisionTimeout: Duration = .seconds(5), btsnoop: String? = nil,
            storePath: String? = nil, rebuildUnusableStore: Bool = false
        ) {
            self.storePath = storePath
            self.rebuildUnusableStore = rebuildUnusableStore
            self.maximumConnections = maximumConnections
            self.hostLink = hostLink
            self.preferredPHY = preferredPHY
            self.connectionInterval = connectionInterval
            self.peripheralLatency = peripheralLatency
            self.supervisionTimeout = supervisionTimeout
            self.btsnoop = btsnoop
            self.preferredMTU = preferredMTU
            self.preferredDataLength = preferredDataLength
            self.writeWithoutResponseQueueDepth = writeWithoutResponseQueueDepth
            self.notificationQueueDepth = notificationQueueDepth
            self.txPower = txPower
            self.aclBufferLength = aclBufferLength
            self.aclBufferCount = aclBufferCount
        }

        func hostConfiguration(name: String, store: SystemStore) -> HostConfiguration {
            var host = HostConfiguration()
            if let privacy {
                let identity = store.localIdentity(named: name)
                host.privacy = HostPrivacyConfiguration(
                    resolvingKey: identity.resolvingKey, identityAddress: identity.address,
                    rotationPeriod: privacy.rotationPeriod)
            }
            host.deviceName = name
            host.preferredMTU = min(517, max(23, preferredMTU))
            host.preferredDataLength = min(251, max(27, preferredDataLength))
            host.writeWithoutResponseQueueDepth = max(1, writeWithoutResponseQueueDepth)
            host.notificationQueueDepth = max(1, notificationQueueDepth)
            host.preferredPHY = preferredPHY
            host.activeScanning = activeScanning
            host.connectionParameters = ConnectionParameters(
                intervalMin: connectionInterval.lowerBound.units(of: .microseconds(1250), within: 6...3200),
                intervalMax: connectionInterval.upperBound.units(of: .microseconds(1250), within: 6...3200),
                latency: UInt16(min(max(peripheralLatency, 0), 499)),
                supervisionTimeout: supervisionTimeout.units(of: .milliseconds(10), within: 10...3200))
            host.randomSeed = stableHash(name)
            host.servesDatabaseHash = servesDatabaseHash
            if let pairing {
                // A simulated device's pairings repeat with its name; a real one draws fresh values (below).
                var security = HostSecurityConfiguration(
                    seed: (0..<16).map { UInt8(truncatingIfNeeded: stableHash(name + "#pairing") >> (8 * ($0 % 8))) })
                security.ioCapability = pairing.ioCapability.smp
                security.bonding = pairing.bonding
                security.mitm = pairing.requiresMITMProtection
                security.secureConnectionsOnly = pairing.secureConnectionsOnly
                security.secureConnections = pairing.secureConnections || pairing.secureConnectionsOnly
                security.distributedKeys = pairing.distributedKeys?.smp
                security.requestedKeys = pairing.requestedKeys?.smp
                host.security = security
            }
            return host
        }
    }

    /// Moves a simulated device (its links time out if it leaves the others' range).
    public func move(to position: RadioPosition) {
        guard let controller = virtualController else { return }
        controller.radio.move(controller, to: position)
    }

    /// A simulated device's controller fails and restarts (a firmware fault): it forgets its links, scan and
    /// advertising and tells the host with a Hardware Error event; the host resets it, managers see `.resetting`
    /// (links gone without a callback each, what was pending on them failed) and then `.poweredOn`, as on iOS when
    /// Bluetooth restarts. Nothing resumes by itself.
    public func failHardware(code: UInt8 = 0x01) {
        virtualController?.failHardware(code: code)
    }

    /// A simulated device's controller hangs (firmware stuck): it forgets its links, scan and advertising and
    /// from then on drops whatever the host sends and answers nothing, until its firmware restarts after
    /// `duration` (nil: never). The host finds out from two commands that go unanswered (the first one's request
    /// fails with `.controllerTimeout`; then a probe of its own) and resets the controller: managers see
    /// `.resetting`, then `.poweredOn` if the controller answers the reset, or `.poweredOff` while it does not, the
    /// host trying again after 1, 2, 4, … up to 32 s, and `.poweredOn` once it answers. Nothing resumes by itself.
    public func hangController(for duration: Duration?) {
        virtualController?.hang(for: duration)
    }

    /// Makes a simulated device vanish, as if its battery died: it stops radiating, its peers' links time out,
    /// and its own managers report `poweredOff`.
    public func vanish() {
        virtualController?.vanish()
    }

    private static let defaultSystem = Mutex<BluetoothSystem?>(nil)

    /// The process default system if something has made it already; nil otherwise (nothing is opened).
    static var existingProcessDefault: BluetoothSystem? { defaultSystem.withLock { $0 } }

    /// A system on the controller a transport spec string names (ARCHITECTURE.md, "Transports"):
    /// `virtual` (a device on a private simulated radio running in real time), `tcp-client:HOST:PORT`,
    /// `tcp-server:HOST:PORT`, `serial:DEVICE[,BAUD[,rtscts]]` or `hci-socket:N`.
    ///
    /// Returns once the host has initialised the controller. The real transports are opened through
    /// `TransportRegistry.shared`, where a program registers them (the `ble` tool calls
    /// `PosixTransports.install()`): the library itself does no socket or serial I/O. With `btsnoop` (or the
    /// `BLE_BTSNOOP` environment variable), every HCI packet is recorded to that file in the btsnoop format.
    /// `name` is the GAP Device Name the system's GATT server shows (the process name by default).
    /// `configuration` gives the host's preferences (MTU, data length, queue depths, link preferences); the
    /// values marked "simulated controllers" do not apply to a real one.
    ///
    /// - Throws: `BluetoothError` `.invalidParameters` for a malformed spec, `.operationNotSupported` when no
    ///   transport of that kind is registered, `.connectionFailed` when it cannot be opened, and the host's
    ///   error when the controller does not initialise.
    public static func connect(
        transport spec: String, btsnoop: String? = nil, name: String? = nil, configuration: Configuration = .init()
    ) async throws -> BluetoothSystem {
        let parsed: TransportSpec
        do {
            parsed = try TransportSpec(parsing: spec)
        } catch {
            throw BluetoothError(.invalidParameters, "\(error)")
        }
        let name = name ?? ProcessInfo.processInfo.processName
        let recording = btsnoop ?? configuration.btsnoop ?? ProcessInfo.processInfo.environment["BLE_BTSNOOP"]
        if parsed == .virtual {
            var virtual = configuration
            virtual.btsnoop = recording
            return try makeVirtual(name: name, configuration: virtual)
        }
        // The store (and the identity it keeps) first: a controller shared over the network (`ble controller`)
        // gives a connection a few seconds to speak, and a new store takes a few writes to make.
        let store = try openStore(configuration, seed: nil, now: { Int64(Date().timeIntervalSince1970) })
        var transport: any HCITransport
        do {
            transport = try await TransportRegistry.shared.open(parsed)
        } catch let error as TransportError {
            store.close()
            throw BluetoothError(
                error.code == .notRegistered ? .operationNotSupported : .connectionFailed, error.message)
        } catch {
            store.close()
            throw BluetoothError(.connectionFailed, "\(parsed): \(error)")  // names the spec, as TransportError does
        }
        let scheduler = DispatchHostScheduler()
        if let recording {
            do {
                transport = try recorded(
                    transport, to: recording, domain: scheduler, clock: BTSnoopWriter.wallClock)
            } catch {
                // Neither is left open behind the refusal.
                transport.close()
                store.close()
                throw error
            }
        }
        var host = configuration.hostConfiguration(name: name, store: store)
        host.randomSeed = UInt64.random(in: 1...UInt64.max)  // a real device: a fresh static address
        // ... and pairings whose nonces, passkeys and keys come from the system's secure generator.
        var generator = SystemRandomNumberGenerator()
        host.security?.seed = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let core = SystemCore(
            name: name, transport: transport, scheduler: scheduler, configuration: host, store: store,
            appRules: configuration.appRules)
        let system = BluetoothSystem(core: core, virtualController: nil)
        try await system.waitForController()
        return system
    }

    /// Waits until the host has initialised the controller (or failed to: every start-up command has its
    /// own timeout, so this ends).
    func waitForController() async throws {
        let waiter = PowerWaiter()
        let power = await withCheckedContinuation { continuation in
            waiter.wait(continuation)
            core.register(waiter)  // reports the current state at once unless it is still unknown
        }
        core.unregister(waiter)
        switch power {
        case .poweredOn, .unknown, .unauthorized, .resetting: return  // a reset ends in poweredOn or poweredOff
        case .unsupported(let reason): throw BluetoothError(.operationNotSupported, reason)
        case .poweredOff(let reason): throw BluetoothError(.transportClosed, reason)
        }
    }

    /// `transport`, recording every packet to a btsnoop file.
    /// `domain`: the host's scheduler, in whose serial domain received packets are recorded.
    static func recorded(
        _ transport: any HCITransport, to path: String, domain: any HostScheduler,
        clock: @escaping BTSnoopWriter.Clock
    ) throws -> any HCITransport {
        do {
            return RecordingTransport(
                wrapping: transport, writer: try BTSnoopWriter(path: path, clock: clock), domain: domain)
        } catch {
            throw BluetoothError(.invalidParameters, "cannot record to \(path): \(error)")
        }
    }

    /// A device on a private simulated radio that runs in real time in the background.
    static func makeVirtual(name: String, configuration: Configuration) throws -> BluetoothSystem {
        let radio = SimulatedRadio(seed: 0)
        let system = try BluetoothSystem.makeSimulated(on: radio, name: name, configuration: configuration)
        Task.detached {
            do {
                while !Task.isCancelled { try await radio.run(for: .seconds(3600), pacing: .realtime) }
            } catch {
                // Cancelled, or someone else runs this radio: either way this loop is done.
            }
        }
        return system
    }

    /// The system managers use when none is passed. `BLE_TRANSPORT` selects it; the default (`virtual`, or
    /// unset) is a device on a private simulated radio that runs in real time in the background.
    public static var processDefault: BluetoothSystem {
        defaultSystem.withLock { existing in
            if let existing { return existing }
            let name = ProcessInfo.processInfo.processName
            let environment = ProcessInfo.processInfo.environment
            let spec = environment["BLE_TRANSPORT"].flatMap { $0.isEmpty ? nil : $0 } ?? "virtual"
            let recording = environment["BLE_BTSNOOP"].flatMap { $0.isEmpty ? nil : $0 }
            let system: BluetoothSystem
            do {
                let parsed = try TransportSpec(parsing: spec)
                if parsed == .virtual {
                    system = try makeVirtual(name: name, configuration: Configuration(btsnoop: recording))
                } else {
                    // Opened in the background; managers report poweredOn once the controller is initialised,
                    // or poweredOff if it cannot be reached.
                    var transport: any HCITransport = DeferredTransport {
                        try await TransportRegistry.shared.open(parsed)
                    }
                    let scheduler = DispatchHostScheduler()
                    if let recording {
                        transport = try recorded(
                            transport, to: recording, domain: scheduler, clock: BTSnoopWriter.wallClock)
                    }
                    let core = SystemCore(
                        name: name, transport: transport, scheduler: scheduler,
                        store: memoryStore(seed: nil))
                    system = BluetoothSystem(core: core, virtualController: nil)
                }
            } catch {
                let reason = "BLE_TRANSPORT=\(spec): \(error)"
                logger.error("the default system has no controller: \(reason)")
                let core = SystemCore(
                    name: name, transport: UnavailableTransport(reason: reason),
                    scheduler: DispatchHostScheduler(), store: memoryStore(seed: nil))
                system = BluetoothSystem(core: core, virtualController: nil)
            }
            existing = system
            return system
        }
    }
}

extension BluetoothSystem {
    /// Runs `work` on `queue` after `delay` in this system's time: virtual time on a simulated radio (counted,
    /// so the simulation waits for it like any delegate callback), wall-clock time over a real controller.
    /// Device logic written against the public API (a sensor that notifies every second) uses this to stay
    /// deterministic in simulation. Returns a handle that cancels the work if it has not run yet.
    @discardableResult
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void)
        -> ScheduledTimer
    {
        let scheduler = core.scheduler
        let token = scheduler.schedule(after: delay) {
            scheduler.dispatch(on: queue, work)
        }
        return ScheduledTimer(token: token)
    }

    /// Time since the system started: virtual time on a simulated radio.
    public var now: Duration { core.scheduler.now }

    /// The system's time as a date (`CFAbsoluteTime`, seconds since 2001): the wall clock over a real
    /// controller; on a simulated radio its virtual time from 2026-01-01, the origin of its captures and store.
    public var absoluteTime: CFAbsoluteTime {
        guard virtualController != nil else { return Date().timeIntervalSinceReferenceDate }
        let virtualOrigin: CFAbsoluteTime = 1_767_225_600 - 978_307_200  // 2026-01-01 in seconds since 2001
        return virtualOrigin + now.inSeconds
    }
}

/// Cancels work scheduled with `BluetoothSystem.schedule(after:on:_:)`.
public struct ScheduledTimer: Sendable {
    let token: any ScheduledWork
    public func cancel() { token.cancel() }
}

/// Resumes a continuation with the first known power state of a system.
private final class PowerWaiter: SystemSession, Sendable {
    private let continuation = Mutex<CheckedContinuation<SystemPowerState, Never>?>(nil)

    func wait(_ continuation: CheckedContinuation<SystemPowerState, Never>) {
        self.continuation.withLock { $0 = continuation }
    }

    func apply(_ event: SessionEvent) {
        guard case .powerChanged(let state) = event, state != .unknown else { return }
        continuation.withLock { c in
            c?.resume(returning: state)
            c = nil
        }
    }
}
