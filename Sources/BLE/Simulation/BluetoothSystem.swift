import BLECore
import BLEHost
import BLESystem
import BLETransport
import BLEVirtualController
import Foundation
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

    init(core: SystemCore, virtualController: VirtualController?) {
        self.core = core
        self.virtualController = virtualController
    }

    /// The system's name (the simulated device's name; the GAP Device Name its GATT server shows).
    public var name: String { core.name }

    /// The controller's address once initialised.
    public var address: BluetoothAddress? { core.host.controllerInfo?.address }

    public var description: String { "<BluetoothSystem \(name)>" }

    /// A virtual controller and a host on `radio`, at `position`. The host starts initialising at once; managers
    /// created on the system report `poweredOn` once the radio has run long enough for that (a few
    /// milliseconds of virtual time).
    public static func simulated(on radio: SimulatedRadio, name: String,
                                 position: RadioPosition = RadioPosition(x: 0, y: 0),
                                 configuration: Configuration = Configuration()) -> BluetoothSystem {
        let controller = radio.addController(name: name, position: position, txPower: configuration.txPower,
                                             aclBufferLength: configuration.aclBufferLength,
                                             aclBufferCount: configuration.aclBufferCount)
        let core = SystemCore(name: name, transport: controller.hostTransport, scheduler: radio,
                              configuration: configuration.hostConfiguration(name: name))
        return BluetoothSystem(core: core, virtualController: controller)
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

        public init(preferredMTU: Int = 517, preferredDataLength: Int = 251, writeWithoutResponseQueueDepth: Int = 8,
                    notificationQueueDepth: Int = 8, txPower: Int8 = 0, aclBufferLength: Int = 251, aclBufferCount: Int = 8) {
            self.preferredMTU = preferredMTU
            self.preferredDataLength = preferredDataLength
            self.writeWithoutResponseQueueDepth = writeWithoutResponseQueueDepth
            self.notificationQueueDepth = notificationQueueDepth
            self.txPower = txPower
            self.aclBufferLength = aclBufferLength
            self.aclBufferCount = aclBufferCount
        }

        func hostConfiguration(name: String) -> HostConfiguration {
            var host = HostConfiguration()
            host.deviceName = name
            host.preferredMTU = min(517, max(23, preferredMTU))
            host.preferredDataLength = min(251, max(27, preferredDataLength))
            host.writeWithoutResponseQueueDepth = max(1, writeWithoutResponseQueueDepth)
            host.notificationQueueDepth = max(1, notificationQueueDepth)
            host.randomSeed = name.utf8.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
            return host
        }
    }

    /// Moves a simulated device (its links time out if it leaves the others' range).
    public func move(to position: RadioPosition) {
        guard let controller = virtualController else { return }
        controller.radio.move(controller, to: position)
    }

    /// Makes a simulated device vanish, as if its battery died: it stops radiating, its peers' links time out,
    /// and its own managers report `poweredOff`.
    public func vanish() {
        virtualController?.vanish()
    }

    private static let defaultSystem = Mutex<BluetoothSystem?>(nil)

    /// A system on the controller a transport spec string names (ARCHITECTURE.md, "Transports"):
    /// `virtual` is a device on a private simulated radio running in real time. The real transports
    /// (`tcp-client:HOST:PORT`, `tcp-server:HOST:PORT`, `serial:DEVICE[,BAUD[,rtscts]]`, `hci-socket:N`) are not
    /// in this build yet: asking for one throws `BluetoothError` `.operationNotSupported` saying so; an
    /// unrecognised spec throws `.invalidParameters`.
    public static func connect(transport spec: String) async throws -> BluetoothSystem {
        let kind = spec.split(separator: ":", maxSplits: 1).first.map(String.init) ?? ""
        switch kind {
        case "virtual":
            return makeVirtual(name: ProcessInfo.processInfo.processName)
        case "tcp-client", "tcp-server", "serial", "hci-socket":
            throw BluetoothError(.operationNotSupported, "the \(kind) transport is not available in this build yet")
        default:
            throw BluetoothError(.invalidParameters,
                                 "'\(spec)' is not a transport: use virtual, tcp-client:HOST:PORT, tcp-server:HOST:PORT, serial:DEVICE[,BAUD[,rtscts]] or hci-socket:N")
        }
    }

    /// A device on a private simulated radio that runs in real time in the background.
    static func makeVirtual(name: String) -> BluetoothSystem {
        let radio = SimulatedRadio(seed: 0)
        let system = BluetoothSystem.simulated(on: radio, name: name)
        Task.detached {
            while !Task.isCancelled {
                try? await radio.run(for: .seconds(3600), pacing: .realtime)
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
            let spec = ProcessInfo.processInfo.environment["BLE_TRANSPORT"] ?? "virtual"
            let system: BluetoothSystem
            if spec.isEmpty || spec == "virtual" {
                system = makeVirtual(name: name)
            } else {
                // Not reachable in this build: managers on it report poweredOff, and the reason is printed once.
                let reason = "BLE_TRANSPORT=\(spec): this transport is not available in this build yet"
                FileHandle.standardError.write(Data("ble: \(reason)\n".utf8))
                let core = SystemCore(name: name, transport: UnavailableTransport(reason: reason),
                                      scheduler: DispatchHostScheduler())
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
    public func schedule(after delay: Duration, on queue: DispatchQueue, _ work: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let scheduler = core.scheduler
        let token = scheduler.schedule(after: delay) {
            scheduler.dispatch(on: queue, work)
        }
        return ScheduledTimer(token: token)
    }

    /// Time since the system started: virtual time on a simulated radio.
    public var now: Duration { core.scheduler.now }
}

/// Cancels work scheduled with `BluetoothSystem.schedule(after:on:_:)`.
public struct ScheduledTimer: Sendable {
    let token: any ScheduledWork
    public func cancel() { token.cancel() }
}
