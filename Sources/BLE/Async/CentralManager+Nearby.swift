import Foundation
import Synchronization

/// A device heard by `CentralManager.nearbyDevices(withServices:lostAfter:)`.
public struct NearbyDevice: Sendable, CustomStringConvertible {
    public let peripheral: Peripheral
    /// The latest advertisement (merged with its scan response).
    public let advertisementData: AdvertisementData
    /// The latest received signal strength, in dBm (127: not measured).
    public let rssi: Int
    /// When it was last heard, in the system's time (`BluetoothSystem.now`).
    public let lastSeen: Duration

    public var description: String {
        "<NearbyDevice \(advertisementData.localName ?? peripheral.identifier.uuidString) rssi=\(rssi)>"
    }
}

/// What changed in the list of nearby devices.
public enum NearbyDevicesChange: Sendable, CustomStringConvertible {
    /// Heard for the first time (or again after it was lost).
    case appeared(NearbyDevice)
    /// Heard again with another RSSI or other data.
    case updated(NearbyDevice)
    /// Not heard for the list's `lostAfter`: it stopped advertising or went out of range.
    case lost(NearbyDevice)

    public var device: NearbyDevice {
        switch self {
        case .appeared(let d), .updated(let d), .lost(let d): d
        }
    }

    public var description: String {
        switch self {
        case .appeared(let d): "appeared \(d)"
        case .updated(let d): "updated \(d)"
        case .lost(let d): "lost \(d)"
        }
    }
}

/// One change, and the whole list after it, keyed by identifier.
public struct NearbyDevicesUpdate: Sendable {
    public let change: NearbyDevicesChange
    public let devices: [UUID: NearbyDevice]
}

extension CentralManager {
    /// The devices around, as a device list wants them: a scan with every advertisement reported, kept
    /// as a list keyed by identifier with each device's current RSSI, and a `.lost` change for a device not heard
    /// for `lostAfter` (checked every quarter of it, in the system's time). An `.updated` change comes only when
    /// the RSSI or the data changed. The stream throws as `scan` does when the manager is not (or no longer)
    /// powered on; ending the iteration stops the scan.
    ///
    /// The manager has one scan, as in CoreBluetooth: a later scan of the same manager (`scan`, or the `.scan`
    /// step of `reconnect`) replaces this one's filter and duplicates policy, and the list then loses devices
    /// it no longer hears of. Give the list a manager of its own.
    public func nearbyDevices(withServices serviceUUIDs: [BluetoothUUID]?, lostAfter: Duration = .seconds(5))
        -> AsyncThrowingStream<NearbyDevicesUpdate, any Error>
    {
        let observer = asyncObserver
        let system = self.system
        let queue = self.queue
        let lostAfter = max(lostAfter, .milliseconds(100))
        return AsyncThrowingStream { continuation in
            let list = NearbyList()
            let id = observer.nextID()
            let sink = CentralAsyncObserver.ScanSink(
                yield: { discovery in
                    if let change = list.heard(discovery, at: system.now) {
                        continuation.yield(NearbyDevicesUpdate(change: change, devices: list.devices))
                    }
                },
                finish: { error in
                    list.stop()
                    continuation.finish(throwing: error)
                })
            // Lost devices are looked for on the manager's queue, where discoveries arrive, in the system's time.
            @Sendable func check() {
                guard !list.isStopped else { return }
                for change in list.expire(now: system.now, after: lostAfter) {
                    continuation.yield(NearbyDevicesUpdate(change: change, devices: list.devices))
                }
                list.setTimer(system.schedule(after: lostAfter / 4, on: queue, check))
            }
            list.setTimer(system.schedule(after: lostAfter / 4, on: queue, check))
            continuation.onTermination = { [weak self] _ in
                list.stop()
                if observer.removeScan(id) { self?.stopScan() }
            }
            let options = ScanOptions(allowDuplicates: true)
            observer.addScan(id, sink, request: .init(services: serviceUUIDs, options: options))
            switch state {
            case .poweredOn: scanForPeripherals(withServices: serviceUUIDs, options: options)
            case .poweredOff, .unsupported, .unauthorized:
                continuation.finish(throwing: BluetoothError.notPoweredOn(state, system: system))
            case .unknown, .resetting: break  // the observer starts the scan on `.poweredOn`
            }
        }
    }
}

/// The list behind `nearbyDevices`: touched from the manager's queue (discoveries, checks) and from the
/// stream's end.
final class NearbyList: Sendable {
    private struct State {
        var devices: [UUID: NearbyDevice] = [:]
        var timer: ScheduledTimer?
        var stopped = false
    }
    private let state = Mutex(State())

    var devices: [UUID: NearbyDevice] { state.withLock { $0.devices } }
    var isStopped: Bool { state.withLock { $0.stopped } }

    func heard(_ discovery: DiscoveredPeripheral, at now: Duration) -> NearbyDevicesChange? {
        state.withLock { s in
            guard !s.stopped else { return nil }
            let id = discovery.peripheral.identifier
            let device = NearbyDevice(
                peripheral: discovery.peripheral, advertisementData: discovery.advertisementData,
                rssi: discovery.rssi, lastSeen: now)
            let before = s.devices.updateValue(device, forKey: id)
            guard let before else { return .appeared(device) }
            let changed = before.rssi != device.rssi || before.advertisementData != device.advertisementData
            return changed ? .updated(device) : nil
        }
    }

    func expire(now: Duration, after limit: Duration) -> [NearbyDevicesChange] {
        state.withLock { s in
            let gone = s.devices.values.filter { now - $0.lastSeen >= limit }
                .sorted { $0.peripheral.identifier.uuidString < $1.peripheral.identifier.uuidString }
            for d in gone { s.devices[d.peripheral.identifier] = nil }
            return gone.map { .lost($0) }
        }
    }

    func setTimer(_ timer: ScheduledTimer) {
        let cancel = state.withLock { s -> Bool in
            guard !s.stopped else { return true }
            s.timer = timer
            return false
        }
        if cancel { timer.cancel() }
    }

    func stop() {
        let timer = state.withLock { s -> ScheduledTimer? in
            s.stopped = true
            defer { s.timer = nil }
            return s.timer
        }
        timer?.cancel()
    }
}
