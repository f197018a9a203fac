import BLE
import Dispatch
import Foundation
import Synchronization

/// `ble demo door-lock`: seeds 002 and 003's door lock, on a simulated phone.
///
/// A lock app with `bluetooth-central` and a restore identifier connects to the door lock. The user leaves: the
/// link is lost, the app (woken for it) asks to connect again, a request that never times out. The system ends
/// the app to free memory; it keeps the pending connection. Hours later the user comes home: the connection
/// completes, the system relaunches the app in the background, it restores its manager and unlocks the door
/// within its wake budget.
enum DoorLockDemo {
    static let restoreIdentifier = "door-lock"

    /// How many times the app was launched.
    final class LaunchCount: Sendable {
        private let value = Mutex(0)
        var count: Int { value.withLock { $0 } }
        func add() { value.withLock { $0 += 1 } }
    }

    /// Set once the door is unlocked.
    final class Flag: Sendable {
        let value = Mutex(false)
        var isSet: Bool { value.withLock { $0 } }
        func set() { value.withLock { $0 = true } }
    }

    /// The lock app: what its launch handler makes at each launch.
    final class LockApp: CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
        // @unchecked: every field is touched only on `queue`, the manager's delegate queue.
        let app: BluetoothSystem.App
        let log: DemoLog
        let queue = DispatchQueue(label: "demo.lock-app")
        let relaunched: Bool
        var central: CentralManager!
        var lock: Peripheral?
        let unlocked: Flag

        init(app: BluetoothSystem.App, options: BluetoothSystem.App.LaunchOptions, log: DemoLog, unlocked: Flag) {
            self.app = app
            self.log = log
            self.relaunched = !options.bluetoothCentrals.isEmpty
            self.unlocked = unlocked
            let launch = relaunched ? "relaunched in the \(app.state) for \(options.bluetoothCentrals)" : "launched"
            log("app", launch)
            queue.sync {
                central = CentralManager(
                    delegate: self, queue: queue, options: .init(restoreIdentifier: DoorLockDemo.restoreIdentifier),
                    app: app)
            }
        }

        func centralManager(_ central: CentralManager, willRestoreState state: CentralManager.RestoredState) {
            lock = state.peripherals?.first
            lock?.delegate = self
            log("app", "restored: \(lock?.name ?? "no peripheral") \(lock.map { "\($0.state)" } ?? "")")
        }

        func centralManagerDidUpdateState(_ central: CentralManager) {
            log("app", "state \(central.state)")
            guard central.state == .poweredOn, lock == nil else { return }
            central.scanForPeripherals(withServices: [DoorLockProfile.service])
        }

        func centralManager(
            _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: AdvertisementData,
            rssi: Int
        ) {
            central.stopScan()
            lock = peripheral
            peripheral.delegate = self
            log("app", "found \(peripheral.name ?? "the lock"); connecting")
            central.connect(peripheral)
        }

        func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
            log("app", "connected to \(peripheral.name ?? "the lock") while \(app.state)")
            peripheral.discoverServices([DoorLockProfile.service])
        }

        func centralManager(
            _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
        ) {
            log("app", "lost the lock (\(error.map { "\($0)" } ?? "no error")); asking to connect again")
            // A connection request never times out (IOSRules.md 6.1): the phone connects when the lock is back.
            central.connect(peripheral)
        }

        func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
            guard let service = peripheral.services?.first(where: { $0.uuid == DoorLockProfile.service }) else {
                return
            }
            peripheral.discoverCharacteristics([DoorLockProfile.lockCommand], for: service)
        }

        func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
            guard relaunched,
                let command = service.characteristics?.first(where: { $0.uuid == DoorLockProfile.lockCommand })
            else { return }
            log("app", "unlocking")
            peripheral.writeValue(Data([0x00]), for: command, type: .withResponse)
        }

        func peripheral(_ peripheral: Peripheral, didWriteValueFor characteristic: Characteristic, error: (any Error)?)
        {
            log("app", error.map { "the lock refused: \($0)" } ?? "unlocked, still \(app.state)")
            if error == nil { unlocked.set() }
        }
    }

    static func run(radio: SimulatedRadio, log: DemoLog, pacing: SimulationPacing) async throws {
        let home = RadioPosition(x: 2, y: 1)
        let lockSystem = BluetoothSystem.simulated(on: radio, name: "DoorLock", position: home)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 0, y: 0))
        let lock = ServedDevice(system: lockSystem, profile: DoorLockProfile.make(name: "DoorLock")) { line in
            log("lock", line.split(separator: " ").dropFirst().joined(separator: " "))
        }
        let app = phone.app(id: "com.example.lock", backgroundModes: [.bluetoothCentral])
        let unlocked = Flag()
        let launches = LaunchCount()
        app.onLaunch { launch in
            launches.add()
            return LockApp(app: launch.app, options: launch.options, log: log, unlocked: unlocked)
        }
        func run(_ duration: Duration) async throws { try await radio.run(for: duration, pacing: pacing) }
        func run(until condition: () -> Bool, within limit: Duration, _ what: String) async throws {
            let end = radio.now + limit
            while !condition() {
                guard radio.now < end else {
                    throw ToolError(.failure, "the door-lock demo stalled waiting for \(what)")
                }
                try await run(.milliseconds(100))
            }
        }

        log("user", "opens the lock app at the door")
        app.launch()
        try await run(.seconds(3))
        log("user", "puts the phone away and leaves")
        app.moveToBackground()
        lockSystem.move(to: RadioPosition(x: 5_000, y: 0))
        try await run(.seconds(30))
        log("phone", "the lock app is \(app.state), its connection request pending")
        try await run(.seconds(3600))
        app.terminate(.bySystem)
        log("phone", "ended the lock app to free memory; kept its work for \(app.keptCentralManagers)")
        let away = Duration.seconds(10 * 3600)
        try await run(away)
        log("user", "comes home \(Int(away.inSeconds / 3600)) hours later")
        lockSystem.move(to: home)
        try await run(until: { launches.count == 2 }, within: .seconds(30), "the relaunch")
        let relaunch = radio.now
        try await run(until: { unlocked.isSet }, within: .seconds(30), "the unlock")
        let wake = (radio.now - relaunch).inSeconds
        log(
            "phone",
            String(
                format: "the door unlocked %.1f s after the relaunch (wake budget %.0f s)", wake,
                AppRules().wakeBudget.inSeconds))
        log.flush()
        withExtendedLifetime(lock) {}
    }
}
