import BLE
import Dispatch
import Foundation
import Synchronization

/// One measurement of `ble bench link` and `ble bench host`: payload throughput of one kind of transfer over one
/// link of the simulated radio, through the public API, in virtual time next to the air-time model of
/// BLEVirtualController.docc/AirTimeModel.md, and in wall-clock time (what the whole stack, both hosts and the radio, carries per second
/// of this machine's time).
public struct LinkBenchmark: Sendable, Hashable {
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case notifications
        case writesWithoutResponse = "writes-without-response"
        case writes
        case indications

        public var isAcknowledged: Bool { self == .writes || self == .indications }
    }

    /// How the phone takes the values it counts, for notifications and indications.
    public enum Receiver: String, Sendable, Hashable, CaseIterable {
        /// `peripheral(_:didUpdateValueFor:error:)`: CoreBluetooth's way, and the like of the callback
        /// Scripts/bumble_stream.py gives Bumble (`subscribe(callback)`).
        case delegate
        /// `for try await value in peripheral.notifications(for:)`: the async API, an AsyncThrowingStream.
        case stream
    }

    public var kind: Kind
    public var phy: LinkPHY
    /// The LL payload both ends allow (27...251); ATT_MTU is this minus 4, so one ATT PDU fills one LL PDU.
    public var payload: Int
    public var interval: Duration
    /// What each notification carries: plain bytes, or bumble-bench's packets (`BumbleBenchPacket`).
    public var format: PacketFormat
    public var receiver: Receiver

    public init(
        kind: Kind, phy: LinkPHY, payload: Int, interval: Duration, format: PacketFormat = .plain,
        receiver: Receiver = .delegate
    ) {
        self.kind = kind
        self.phy = phy
        self.payload = payload
        self.interval = interval
        self.format = format
        self.receiver = receiver
    }

    /// The application payload one ATT PDU carries: ATT_MTU - 3.
    public var valueLength: Int { payload - 4 - 3 }

    /// One run: payload bytes received in the measured window, the window in virtual time and in wall-clock time.
    public struct Measurement: Sendable, Hashable {
        public var bytes: Int
        public var values: Int
        public var virtualSeconds: Double
        public var wallSeconds: Double
        /// Payload kbit/s in virtual time (what the model predicts).
        public var virtualKbps: Double { Double(bytes * 8) / virtualSeconds / 1000 }
        /// Payload bytes per wall-clock second: how fast the whole stack runs on this machine.
        public var bytesPerWallSecond: Double { wallSeconds > 0 ? Double(bytes) / wallSeconds : 0 }
        /// Packets in bumble-bench's format that decoded and came in sequence (0 with plain values).
        public var inSequence: Int
    }

    /// The model's kbit/s (AirTimeModel.md, Throughput). Unacknowledged: `N · P · 8 / CI` with
    /// `N = floor(CI / T_pair)`, `T_pair = T_pkt(L) + T_IFS + T_pkt(0) + T_IFS`. Acknowledged: one value every
    /// two intervals, `P · 8 / (2 · CI)`.
    public var model: Double {
        let ci = Double(interval.clampedNanoseconds) / 1e3  // µs
        let p = Double(valueLength)
        if kind.isAcknowledged { return p * 8 / (2 * ci) * 1e3 }
        func packet(_ octets: Int) -> Double {
            switch phy {
            case .le1M: Double(8 * (1 + 4 + 2 + octets + 3))
            case .le2M: Double(4 * (2 + 4 + 2 + octets + 3))
            case .leCoded: Double(80 + 256 + 16 + 24 + 64 * (2 + octets + 3) + 24)
            }
        }
        let pair = packet(payload) + 150 + packet(0) + 150
        let n = (ci / pair).rounded(.down)
        return n * p * 8 / ci * 1e3
    }

    /// Runs the transfer for `seconds` of virtual time after a second of warm-up and returns kbit/s of payload.
    public func measure(seconds: Int, seed: UInt64) async throws -> Double {
        try await run(seconds: Double(seconds), seed: seed).virtualKbps
    }

    /// Runs the transfer for `seconds` of virtual time after a second of warm-up, timing the window on the wall
    /// clock too. With `values`, the window closes as soon as that many values arrived (within `seconds`), so a
    /// caller can count what each value costs; `window` hears the window open (true) and close (false).
    public func run(
        seconds: Double, seed: UInt64, values: Int? = nil, window: (@Sendable (Bool) -> Void)? = nil
    ) async throws -> Measurement {
        let radio = SimulatedRadio(seed: seed)
        let link = BluetoothSystem.Configuration(
            preferredMTU: payload - 4, preferredDataLength: payload, preferredPHY: phy,
            connectionInterval: interval...interval, supervisionTimeout: .seconds(6))
        let phoneSystem = BluetoothSystem.simulated(on: radio, name: "phone", configuration: link)
        let sensorSystem = BluetoothSystem.simulated(
            on: radio, name: "sensor", position: RadioPosition(x: 1, y: 0), configuration: link)
        let sensor = BenchPeripheral(
            system: sensorSystem, valueLength: valueLength, kind: kind, format: format, radio: radio)
        let central = CentralManager(
            delegate: nil, queue: DispatchQueue(label: "bench.phone"), options: nil, system: phoneSystem)
        let meter = BenchMeter(radio: radio, format: format)
        let kind = self.kind
        let valueLength = self.valueLength
        let model = self.model
        let format = self.format
        let receiver = self.receiver
        let flow = Task(executorPreference: radio) {
            try await central.waitUntilPoweredOn(timeout: .seconds(5))
            var found: Peripheral?
            for try await discovery in central.scan(withServices: [BenchPeripheral.service(format)]) {
                found = discovery.peripheral
                break
            }
            guard let peripheral = found else { return }
            try await central.connect(peripheral, timeout: .seconds(10))
            // The model is one link alone on its radios: advertising would take its share of the sensor's.
            sensor.manager.stopAdvertising()
            let services = try await peripheral.discoverServices(
                [BenchPeripheral.service(format)], timeout: .seconds(10))
            let characteristics = try await peripheral.discoverCharacteristics(
                nil, for: services[0], timeout: .seconds(10))
            func characteristic(_ uuid: BluetoothUUID) throws -> Characteristic {
                guard let found = characteristics.first(where: { $0.uuid == uuid }) else {
                    throw BluetoothError(.invalidHandle, "the bench characteristic \(uuid) is missing")
                }
                return found
            }
            switch kind {
            case .notifications, .indications:
                let source = try characteristic(
                    kind == .notifications ? BenchPeripheral.stream(format) : BenchPeripheral.confirmed)
                switch receiver {
                case .stream:
                    let values = peripheral.notifications(for: source)
                    try await peripheral.setNotifyValue(true, for: source, timeout: .seconds(10))
                    for try await value in values { meter.received(value) }
                case .delegate:
                    let counter = BenchReceiver(meter: meter, source: source)
                    defer { withExtendedLifetime(counter) {} }
                    peripheral.delegate = counter
                    try await peripheral.setNotifyValue(true, for: source, timeout: .seconds(10))
                    // The values arrive through the delegate until the bench cancels this flow.
                    try await radio.sleep(for: .seconds(366 * 86_400))
                }
            case .writesWithoutResponse:
                let sink = try characteristic(BenchPeripheral.sink)
                // One send that lasts the whole measurement: between two sends the controller's queue would run
                // dry (a send ends when every chunk is acknowledged), its connection event would end, and the
                // rest of that event would be lost to the measurement.
                let chunks = Int(model * 1_000 / 8 / Double(valueLength) * Double(seconds + 3)) + 1
                let data = Data(repeating: 0x5A, count: valueLength * chunks)
                while !Task.isCancelled {
                    for try await _ in peripheral.send(data, to: sink, type: .withoutResponse, chunkSize: valueLength) {
                    }
                }
            case .writes:
                let sink = try characteristic(BenchPeripheral.sink)
                let value = Data(repeating: 0x5A, count: valueLength)
                while true { try await peripheral.writeValue(value, for: sink, type: .withResponse, timeout: nil) }
            }
        }
        sensor.meter = meter
        Task(executorPreference: radio) {
            _ = await flow.result
            meter.flowEnded()
        }
        try await radio.run(for: .seconds(10), until: { meter.started || meter.ended })
        guard meter.started else {
            flow.cancel()
            try await radio.run(for: .seconds(1), until: { meter.ended })
            let failure = await flow.result
            throw BenchError("the \(kind.rawValue) case did not start: \(failure)")
        }
        try await radio.run(for: .seconds(1))
        let limit = Duration.milliseconds(Int64((seconds * 1000).rounded()))
        let opened = radio.now
        window?(true)
        meter.open()
        let wallStart = ContinuousClock.now
        if let values {
            try await radio.run(for: limit, until: { meter.values >= values })
        } else {
            try await radio.run(for: limit)
        }
        let wall = ContinuousClock.now - wallStart
        window?(false)
        let elapsed = radio.now - opened
        let (bytes, received, inSequence) = meter.close()
        // Let the flow unwind on the radio, so that nothing of this case outlives it.
        flow.cancel()
        try await radio.run(for: .seconds(1), until: { meter.ended })
        withExtendedLifetime((sensor, central, phoneSystem, sensorSystem)) {}
        return Measurement(
            bytes: bytes, values: received, virtualSeconds: Double(elapsed.clampedNanoseconds) / 1e9,
            wallSeconds: Double(wall.components.seconds) + Double(wall.components.attoseconds) / 1e18,
            inSequence: inSequence)
    }
}

/// Counts the values the phone's peripheral delegate hears from the bench characteristic.
final class BenchReceiver: PeripheralDelegate, Sendable {
    let meter: BenchMeter
    let source: Characteristic

    init(meter: BenchMeter, source: Characteristic) {
        self.meter = meter
        self.source = source
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        guard error == nil, characteristic === source, let value = characteristic.value else { return }
        meter.received(value)
    }
}

/// Counts payload bytes received while its window is open, in the radio's time; with bumble-bench's format it
/// decodes each packet and counts those that came in sequence.
final class BenchMeter: Sendable {
    private struct State {
        var started = false
        var open = false
        var bytes = 0
        var values = 0
        var inSequence = 0
        var nextSequence: UInt32?
        var ended = false
    }
    private let state = Mutex(State())
    let radio: SimulatedRadio
    let format: PacketFormat

    init(radio: SimulatedRadio, format: PacketFormat = .plain) {
        self.radio = radio
        self.format = format
    }

    var started: Bool { state.withLock { $0.started } }
    /// Values received in the window so far.
    var values: Int { state.withLock { $0.values } }
    /// The flow's task has returned (or thrown).
    var ended: Bool { state.withLock { $0.ended } }
    func flowEnded() { state.withLock { $0.ended = true } }

    func received(_ value: Data) {
        let packet = format == .bumbleBench ? BumbleBenchPacket(decoding: value) : nil
        state.withLock { s in
            s.started = true
            if let packet, packet.type == .sequence {
                if s.open, s.nextSequence == nil || s.nextSequence == packet.sequence { s.inSequence += 1 }
                s.nextSequence = packet.sequence &+ 1
            }
            if s.open {
                s.bytes += value.count
                s.values += 1
            }
        }
    }

    func received(_ count: Int) {
        state.withLock { s in
            s.started = true
            if s.open {
                s.bytes += count
                s.values += 1
            }
        }
    }

    func open() { state.withLock { $0.open = true } }

    func close() -> (bytes: Int, values: Int, inSequence: Int) {
        state.withLock { s in
            s.open = false
            return (s.bytes, s.values, s.inSequence)
        }
    }
}

/// The sending or receiving device of a link benchmark: one service with a notifying, an indicating and a
/// writable characteristic; it keeps the transmit queue full while a central subscribes, and counts writes.
final class BenchPeripheral: PeripheralManagerDelegate, @unchecked Sendable {
    // @unchecked: the fields below the lets are touched on `queue` only, the manager's delegate queue; `meter` is
    // set before the radio runs.
    static let plainService = BluetoothUUID(string: "B3C40001-5E1D-4F7A-9A0B-2C3D4E5F6071")!
    static let plainStream = BluetoothUUID(string: "B3C40002-5E1D-4F7A-9A0B-2C3D4E5F6071")!
    static func service(_ format: PacketFormat) -> BluetoothUUID {
        format == .bumbleBench ? BumbleBenchPacket.service : plainService
    }
    static func stream(_ format: PacketFormat) -> BluetoothUUID {
        format == .bumbleBench ? BumbleBenchPacket.notifyCharacteristic : plainStream
    }
    static let confirmed = BluetoothUUID(string: "B3C40003-5E1D-4F7A-9A0B-2C3D4E5F6071")!
    static let sink = BluetoothUUID(string: "B3C40004-5E1D-4F7A-9A0B-2C3D4E5F6071")!

    let queue = DispatchQueue(label: "bench.sensor")
    let value: Data
    let kind: LinkBenchmark.Kind
    let format: PacketFormat
    /// The radio whose time stamps bumble-bench's packets.
    let radio: SimulatedRadio?
    /// bumble-bench's sequence number of the next packet.
    private var sequence: UInt32 = 0
    var meter: BenchMeter?
    /// Set inside `queue.sync` in `init`, before any delegate callback (all of which arrive on `queue`).
    var manager: PeripheralManager!
    let streamCharacteristic: MutableCharacteristic
    let confirmedCharacteristic = MutableCharacteristic(
        type: confirmed, properties: [.indicate], value: nil, permissions: [.readable])
    let sinkCharacteristic = MutableCharacteristic(
        type: sink, properties: [.write, .writeWithoutResponse], value: nil, permissions: [.writeable])
    private var subscribed: MutableCharacteristic?

    init(
        system: BluetoothSystem, valueLength: Int, kind: LinkBenchmark.Kind, format: PacketFormat = .plain,
        radio: SimulatedRadio? = nil
    ) {
        self.radio = radio
        value = Data(repeating: 0xA5, count: valueLength)
        self.kind = kind
        self.format = format
        streamCharacteristic = MutableCharacteristic(
            type: Self.stream(format), properties: [.notify], value: nil, permissions: [.readable])
        queue.sync {
            manager = PeripheralManager(delegate: self, queue: queue, options: nil, system: system)
        }
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let service = MutableService(type: Self.service(format), primary: true)
        service.characteristics = [streamCharacteristic, confirmedCharacteristic, sinkCharacteristic]
        peripheral.add(service)
        peripheral.startAdvertising(AdvertisementData(localName: "bench", serviceUUIDs: [Self.service(format)]))
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        subscribed = characteristic.uuid == Self.stream(format) ? streamCharacteristic : confirmedCharacteristic
        pump()
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) { pump() }

    /// Keeps the transmit queue full: notifications until `updateValue` refuses; indications one at a time
    /// (the stack holds the next until the previous is confirmed, and refuses beyond its queue).
    private func pump() {
        guard let subscribed else { return }
        guard format == .bumbleBench, subscribed === streamCharacteristic else {
            while manager.updateValue(value, for: subscribed, onSubscribedCentrals: nil) {}
            return
        }
        // bumble-bench's packets: each a SEQUENCE with the next number, stamped with the radio's time.
        while true {
            let packet = BumbleBenchPacket(
                type: .sequence, flags: [], sequence: sequence,
                timestamp: UInt32(truncatingIfNeeded: (radio?.now ?? .zero).clampedNanoseconds / 1000),
                payloadLength: value.count - BumbleBenchPacket.headerLength)
            guard manager.updateValue(Data(packet.bytes), for: subscribed, onSubscribedCentrals: nil) else { return }
            sequence &+= 1
        }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        for request in requests { meter?.received(request.value?.count ?? 0) }
        if let first = requests.first { peripheral.respond(to: first, withResult: .success) }
    }
}
