import Dispatch
import Foundation
import Synchronization
import Testing

@testable import BLE

// The async/await layer on two devices of a simulated radio. Every test body runs under `drive`, as a task that
// prefers the radio as its executor, driven by one plain `radio.run`: the body's code runs between radio
// events, virtual time stands still while it has work, and timeouts are in virtual time.

@Suite("AsyncAPI")
struct AsyncAPITests {
    static let service = BluetoothUUID(string: "6E400001-B5A3-F393-E0A9-E50E24DCCA9E")!
    static let counter = BluetoothUUID(string: "6E400002-B5A3-F393-E0A9-E50E24DCCA9E")!
    static let sink = BluetoothUUID(string: "6E400003-B5A3-F393-E0A9-E50E24DCCA9E")!

    @Test func connectDiscoverReadWriteNotifyDisconnect() async throws {
        let rig = AsyncRig()
        let recorder = AsyncCentralRecorder()
        rig.central.delegate = recorder
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, sink) = try await rig.connect()
            #expect(!rig.central.isScanning)
            #expect(peripheral.state == .connected)

            // Read: the server answers 1, then 2.
            #expect(try await peripheral.readValue(for: counter, timeout: .seconds(5)) == Data([1]))
            #expect(try await peripheral.readValue(for: counter, timeout: .seconds(5)) == Data([2]))
            #expect(counter.value == Data([2]))

            // Write with response, then a descriptor listing.
            try await peripheral.writeValue(Data("hello".utf8), for: sink, type: .withResponse, timeout: .seconds(5))
            #expect(rig.server.writes.value == [Data("hello".utf8)])
            let descriptors = try await peripheral.discoverDescriptors(for: counter, timeout: .seconds(5))
            #expect(descriptors.contains { $0.uuid == .clientCharacteristicConfiguration })

            // Notifications: the stream subscribes; the server sees the subscription and notifies three values.
            let subscribed = rig.server.manager.subscriptions
            let stream = peripheral.notifications(for: counter)
            for await event in subscribed {
                if case .subscribed(_, let c) = event, c.uuid == Self.counter { break }
            }
            for v in UInt8(10)..<13 {
                try await rig.server.manager.updateValue(
                    Data([v]), for: rig.server.counter, onSubscribedCentrals: nil, timeout: .seconds(1))
            }
            var received: [Data] = []
            for try await value in stream {
                received.append(value)
                if received.count == 3 { break }
            }
            #expect(received == [Data([10]), Data([11]), Data([12])])
            #expect(counter.isNotifying)

            // RSSI and disconnect; the disconnections stream and the delegate see it too.
            let rssi = try await peripheral.readRSSI(timeout: .seconds(5))
            #expect(rssi < 20)
            let disconnections = rig.central.disconnections
            try await rig.central.disconnect(peripheral)
            #expect(peripheral.state == .disconnected)
            for await d in disconnections {
                #expect(d.peripheral === peripheral)
                #expect(d.error == nil)
                break
            }
        }
        // The delegate kept receiving the same events while the async API was used.
        #expect(recorder.events.value == ["poweredOn", "didConnect", "didDisconnect"])
    }

    @Test func connectTimesOutInVirtualTime() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.central.waitUntilPoweredOn(timeout: .seconds(1))
            // Nobody has this address: the request would stay pending forever.
            let ghost = rig.central.peripheral(
                for: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice))
            let start = rig.radio.now
            let error = await #expect(throws: BluetoothError.self) {
                try await rig.central.connect(ghost, timeout: .seconds(3))
            }
            #expect(error?.code == .timeout)
            let elapsed = rig.radio.now - start
            #expect(elapsed >= .seconds(3) && elapsed < .seconds(4))
            // The attempt was cancelled: the peripheral is disconnected again once the cancel is through.
            try await rig.waitUntil { ghost.state == .disconnected }
            #expect(ghost.state == .disconnected)
        }
    }

    @Test func connectsAndDisconnectsEndWithTheAttemptTheyJoined() async throws {
        let rig = AsyncRig()
        let recorder = AsyncCentralRecorder()
        rig.central.delegate = recorder
        try await rig.drive {
            try await rig.startServer()
            try await rig.central.waitUntilPoweredOn(timeout: .seconds(1))
            var found: Peripheral?
            for try await discovery in rig.central.scan(withServices: [Self.service]) {
                found = discovery.peripheral
                break
            }
            let peripheral = try #require(found)
            // A delegate-style connect is under way: two tasks' connects join it and end with its didConnect.
            rig.central.connect(peripheral)
            #expect(peripheral.state == .connecting)
            async let first: Void = rig.central.connect(peripheral, timeout: .seconds(5))
            async let second: Void = rig.central.connect(peripheral, timeout: .seconds(5))
            _ = try await (first, second)
            #expect(peripheral.state == .connected)
            #expect(recorder.events.value == ["poweredOn", "didConnect"], "one attempt, told once")
            // Connected already: at once.
            try await rig.central.connect(peripheral, timeout: nil)

            // Another app of the phone connects to the same peer: the link is shared, its connect ends at once.
            let other = CentralManager(
                delegate: nil, queue: DispatchQueue(label: "other"), options: nil,
                app: rig.phoneSystem.app(id: "com.example.other"))
            try await other.waitUntilPoweredOn(timeout: .seconds(1))
            let shared = try #require(other.retrievePeripherals(withIdentifiers: [peripheral.identifier]).first)
            #expect(shared.state == .disconnected)
            try await other.connect(shared, timeout: .seconds(1))
            #expect(shared.state == .connected)

            // Two tasks await the disconnection: both return once it is told.
            async let gone: Void = rig.central.disconnect(peripheral)
            async let goneToo: Void = rig.central.disconnect(peripheral)
            _ = try await (gone, goneToo)
            #expect(peripheral.state == .disconnected)
            #expect(recorder.events.value == ["poweredOn", "didConnect", "didDisconnect"])
            #expect(shared.state == .connected, "the other app's link stays")

            // A connect waiting for a device nobody has ends with the app's own cancel.
            let ghost = rig.central.peripheral(
                for: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice))
            let attempt = Task(executorPreference: rig.radio) {
                try await rig.central.connect(ghost, timeout: nil)
            }
            try await rig.waitUntil { ghost.state == .connecting }
            rig.central.cancelPeripheralConnection(ghost)
            let error = await #expect(throws: BluetoothError.self) { try await attempt.value }
            #expect(error?.code == .operationCancelled)
            #expect(ghost.state == .disconnected)
            withExtendedLifetime(other) {}
        }
    }

    @Test func aPendingConnectAndAPowerOnWaitEndWithTheSwitchAndItsReturn() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.central.waitUntilPoweredOn(timeout: .seconds(1))
            let ghost = rig.central.peripheral(
                for: BluetoothAddress(bytes: [1, 2, 3, 4, 5, 0xC6], type: .randomDevice))
            let attempt = Task(executorPreference: rig.radio) {
                try await rig.central.connect(ghost, timeout: nil)
            }
            try await rig.waitUntil { ghost.state == .connecting }
            // Bluetooth switched off in Settings: the pending connect fails with the controller's going.
            rig.phoneSystem.setBluetoothEnabled(false)
            let error = await #expect(throws: BluetoothError.self) { try await attempt.value }
            #expect(error?.code == .transportClosed)
            #expect(ghost.state == .disconnected)
            #expect(rig.central.state == .poweredOff)
            let off = await #expect(throws: BluetoothError.self) {
                try await rig.central.waitUntilPoweredOn(timeout: nil)
            }
            #expect(off?.code == .transportClosed)
            // Switched on again: the manager is on, and a wait asked now ends at once.
            rig.phoneSystem.setBluetoothEnabled(true)
            try await rig.waitUntil { rig.central.state == .poweredOn }
            try await rig.central.waitUntilPoweredOn(timeout: nil)
        }
    }

    /// With a scan stream running, a delegate that implements only CoreBluetooth's dictionary form of a discovery
    /// hears it: the delegate hears every form of an event the async layer also hears.
    @Test func aDelegateHearsTheDictionaryFormOfADiscoveryWhileAScanStreamRuns() async throws {
        let rig = AsyncRig()
        let recorder = DictionaryDiscoveryRecorder()
        rig.central.delegate = recorder
        let streamed = try await rig.drive {
            try await rig.startServer()
            try await rig.central.waitUntilPoweredOn(timeout: .seconds(1))
            for try await discovery in rig.central.scan(withServices: [Self.service]) {
                return discovery.advertisementData.localName
            }
            return nil
        }
        #expect(streamed == "sensor")
        #expect(recorder.names.value.first == "sensor", "\(recorder.names.value)")
    }

    @Test func pendingReadFailsWhenTheLinkGoesDown() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            let notifications = peripheral.notifications(for: counter)
            try await rig.waitUntil { counter.isNotifying }
            let read = try await rig.heldRead(of: counter, on: peripheral)
            // The sensor's battery dies: the central's link times out and everything pending fails.
            rig.sensorSystem.vanish()
            let readError = await #expect(throws: BluetoothError.self) { try await read.value }
            #expect(readError.map { [.peripheralDisconnected, .connectionTimeout].contains($0.code) } == true)
            let streamError = await #expect(throws: BluetoothError.self) {
                for try await _ in notifications {}
            }
            #expect(streamError?.code == .connectionTimeout)
            #expect(peripheral.state == .disconnected)
            // A new request fails at once.
            let late = await #expect(throws: BluetoothError.self) {
                try await peripheral.readValue(for: counter, timeout: .seconds(1))
            }
            #expect(late?.code == .notConnected)
        }
    }

    @Test func delegateAndAsyncReadsMixedOnOneCharacteristicEachGetTheirOwnAnswer() async throws {
        let rig = AsyncRig()
        let recorder = ValueRecorder()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            peripheral.delegate = recorder
            let stream = peripheral.notifications(for: counter)
            try await rig.waitUntil { counter.isNotifying }
            // Before answering the first read, the server notifies 0xAA on the same characteristic.
            rig.server.notifyBeforeFirstRead.withLock { $0 = true }
            let answers = AsyncLocked<[Int: Data]>([:])
            // Four reads of one characteristic, outstanding at once (the radio stands still while this task
            // runs), in this order: delegate-style, two made the way the async API makes them (each with its own
            // reply), delegate-style again.
            peripheral.readValue(for: counter)
            for n in 2...3 {
                peripheral.readValue(
                    for: counter, reply: .task { result in answers.mutate { $0[n] = try? result.get() } })
            }
            peripheral.readValue(for: counter)
            try await rig.waitUntil { answers.value.count == 2 && recorder.values.value.count == 5 }
            // Each async request got the answer to its own request...
            #expect(answers.value == [2: Data([2]), 3: Data([3])])
            // ...and the delegate was told of every new value, whoever asked, the notification among them.
            #expect(recorder.values.value == [Data([0xAA]), Data([1]), Data([2]), Data([3]), Data([4])])
            #expect(recorder.errors.value == 0)
            var iterator = stream.makeAsyncIterator()
            #expect(try await iterator.next() == Data([0xAA]))
        }
    }

    @Test func concurrentAsyncRequestsOfEveryKindOnOnePeripheralEachGetTheirOwnAnswer() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, sink) = try await rig.connect()
            async let read = peripheral.readValue(for: counter, timeout: .seconds(5))
            async let descriptors = peripheral.discoverDescriptors(for: counter, timeout: .seconds(5))
            async let write: Void = peripheral.writeValue(
                Data([7]), for: sink, type: .withResponse, timeout: .seconds(5))
            async let rssi = peripheral.readRSSI(timeout: .seconds(5))
            async let services = peripheral.discoverServices(nil, timeout: .seconds(5))
            async let secondRead = peripheral.readValue(for: counter, timeout: .seconds(5))
            let values = try await [read, secondRead]
            #expect(Set(values) == [Data([1]), Data([2])])
            #expect(try await descriptors.contains { $0.uuid == .clientCharacteristicConfiguration })
            try await write
            #expect(rig.server.writes.value == [Data([7])])
            #expect(try await rssi < 20)
            #expect(try await services.contains { $0.uuid == AsyncAPITests.service })
        }
    }

    @Test func anAsyncRespondReturnsOnceTheResponseIsHandedOverAndASecondOneFails() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            let read = try await rig.heldRead(of: counter, on: peripheral, timeout: .seconds(5))
            let request = try #require(rig.server.held.withLock { $0.first })
            request.value = Data([0x5A])
            try await rig.server.manager.respond(to: request, withResult: .success, timeout: .seconds(1))
            #expect(try await read.value == Data([0x5A]))
            let again = await #expect(throws: BluetoothError.self) {
                try await rig.server.manager.respond(to: request, withResult: .success, timeout: .seconds(1))
            }
            #expect(again?.code == .invalidParameters)
        }
    }

    @Test func cancellingTheConnectionFailsAPendingReadAsCancelled() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            let read = try await rig.heldRead(of: counter, on: peripheral)
            try await rig.central.disconnect(peripheral)
            let error = await #expect(throws: BluetoothError.self) { try await read.value }
            #expect(error?.code == .operationCancelled)
        }
    }

    @Test func sendWithoutResponseDeliversEveryChunkInOrderPacedByTheLink() async throws {
        let rig = AsyncRig(configuration: .init(writeWithoutResponseQueueDepth: 2))
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, _, sink) = try await rig.connect()
            let data = Data((0..<800).map { UInt8($0 % 251) })
            var progress: [SendProgress] = []
            for try await step in peripheral.send(data, to: sink, type: .withoutResponse, chunkSize: 20) {
                progress.append(step)
            }
            #expect(progress.map(\.bytesAcknowledged) == Array(stride(from: 20, through: 800, by: 20)))
            #expect(progress.allSatisfy { $0.totalBytes == 800 })
            // 40 chunks into a link that holds far fewer: the sender waited for room, it did not drop.
            #expect((progress.last?.timesWaitedForRoom ?? 0) > 0)
            try await rig.waitUntil { rig.server.writes.value.count == 40 }
            #expect(rig.server.writes.value.reduce(Data(), +) == data)
        }
    }

    @Test func sendWithResponseWritesOneChunkAtATimeAndHonoursTheInterval() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, _, sink) = try await rig.connect()
            let start = rig.radio.now
            var acknowledged: [Int] = []
            let stream = peripheral.send(
                Data(repeating: 7, count: 50), to: sink, type: .withResponse, chunkSize: 20,
                interval: .milliseconds(40))
            for try await step in stream { acknowledged.append(step.bytesAcknowledged) }
            #expect(acknowledged == [20, 40, 50])
            #expect(
                rig.server.writes.value == [
                    Data(repeating: 7, count: 20), Data(repeating: 7, count: 20), Data(repeating: 7, count: 10),
                ])
            #expect(rig.radio.now - start >= .milliseconds(80))
            // A chunk larger than one write can carry is refused before anything is sent.
            let refused = await #expect(throws: BluetoothError.self) {
                for try await _ in peripheral.send(Data(count: 600), to: sink, type: .withResponse, chunkSize: 600) {}
            }
            #expect(refused?.code == .invalidParameters)
        }
    }

    @Test func aWriteWithoutResponseCancelledWhileWaitingForRoomThrowsCancellation() async throws {
        let rig = AsyncRig(configuration: .init(writeWithoutResponseQueueDepth: 1))
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, _, sink) = try await rig.connect()
            // A bulk send fills the link, so the write below has to wait for room.
            let bulk = peripheral.send(Data(count: 2000), to: sink, type: .withoutResponse, chunkSize: 20)
            try await rig.radio.sleep(for: .milliseconds(1))
            #expect(!peripheral.canSendWriteWithoutResponse)
            let write = Task(executorPreference: rig.radio) {
                try await peripheral.writeValue(Data([1]), for: sink, type: .withoutResponse, timeout: nil)
            }
            try await rig.radio.sleep(for: .milliseconds(1))
            write.cancel()
            await #expect(throws: CancellationError.self) { try await write.value }
            for try await _ in bulk {}
        }
    }

    @Test func requestsTheCharacteristicsPropertiesDoNotAllowAreRefusedWithoutAsking() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, sink) = try await rig.connect()
            // The sink is written, not read; the counter is read and notifies, never written.
            let read = await #expect(throws: BluetoothError.self) {
                try await peripheral.readValue(for: sink, timeout: .seconds(1))
            }
            #expect(read?.code == .att(.readNotPermitted))
            let write = await #expect(throws: BluetoothError.self) {
                try await peripheral.writeValue(Data([1]), for: counter, type: .withResponse, timeout: .seconds(1))
            }
            #expect(write?.code == .att(.writeNotPermitted))
            let command = await #expect(throws: BluetoothError.self) {
                try await peripheral.writeValue(Data([1]), for: counter, type: .withoutResponse, timeout: .seconds(1))
            }
            #expect(command?.code == .att(.writeNotPermitted))
            // Nothing reached the server: its next read answer is still the first.
            #expect(try await peripheral.readValue(for: counter, timeout: .seconds(1)) == Data([1]))
            #expect(rig.server.writes.value.isEmpty)
        }
    }

    @Test func cancellingATaskAwaitingAReadEndsItsWaitOnly() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            let read = try await rig.heldRead(of: counter, on: peripheral)
            read.cancel()
            await #expect(throws: CancellationError.self) { try await read.value }
            // The request was still answered on the link (value 1); that late completion is discarded and the
            // next read gets its own answer.
            rig.server.holdReads.withLock { $0 = false }
            rig.server.releaseHeld()
            #expect(try await peripheral.readValue(for: counter, timeout: .seconds(5)) == Data([2]))
            #expect(peripheral.state == .connected)
        }
    }

    @Test func writesWithoutResponseAreFlowControlled() async throws {
        let rig = AsyncRig(configuration: .init(writeWithoutResponseQueueDepth: 2))
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, _, sink) = try await rig.connect()
            let chunks = (0..<40).map { Data([UInt8($0), 0xEE]) }
            for chunk in chunks {
                try await peripheral.writeValue(chunk, for: sink, type: .withoutResponse, timeout: .seconds(5))
            }
            // Every chunk arrives exactly once: none was dropped by a full queue, none sent twice.
            try await rig.waitUntil { rig.server.writes.value.count == chunks.count }
            #expect(Set(rig.server.writes.value) == Set(chunks))
            // This layer issues the chunks in order and the host sends packets in the order it produced them,
            // even while the radio's thread pumps the same link: they arrive in order.
            #expect(rig.server.writes.value == chunks)
        }
    }

    @Test func updateValueWaitsForRoomInsteadOfDropping() async throws {
        let rig = AsyncRig(sensorConfiguration: .init(notificationQueueDepth: 2))
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            let subscribed = rig.server.manager.subscriptions
            let stream = peripheral.notifications(for: counter)
            for await event in subscribed {
                if case .subscribed = event { break }
            }
            let values = (0..<30).map { Data([UInt8($0)]) }
            for v in values {
                try await rig.server.manager.updateValue(
                    v, for: rig.server.counter, onSubscribedCentrals: nil, timeout: .seconds(5))
            }
            var received: [Data] = []
            for try await value in stream {
                received.append(value)
                if received.count == values.count { break }
            }
            #expect(Set(received) == Set(values))
            #expect(received == values)
        }
    }

    @Test func operationTimeoutIsVirtual() async throws {
        let rig = AsyncRig()
        try await rig.drive {
            try await rig.startServer()
            let (peripheral, counter, _) = try await rig.connect()
            rig.server.holdReads.withLock { $0 = true }
            let start = rig.radio.now
            let error = await #expect(throws: BluetoothError.self) {
                try await peripheral.readValue(for: counter, timeout: .milliseconds(500))
            }
            #expect(error?.code == .timeout)
            #expect(rig.radio.now - start >= .milliseconds(500))
        }
    }
}

// MARK: AsyncRig

/// A phone (central) and a sensor (a `PeripheralManager` serving one service through the async API).
final class AsyncRig: Sendable {
    let radio = SimulatedRadio(seed: 11)
    let phoneSystem: BluetoothSystem
    let sensorSystem: BluetoothSystem
    let central: CentralManager
    let server: AsyncTestServer

    init(
        configuration: BluetoothSystem.Configuration = .init(),
        sensorConfiguration: BluetoothSystem.Configuration = .init()
    ) {
        phoneSystem = BluetoothSystem.simulated(on: radio, name: "phone", configuration: configuration)
        sensorSystem = BluetoothSystem.simulated(
            on: radio, name: "sensor", position: RadioPosition(x: 2, y: 0),
            configuration: sensorConfiguration)
        central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phoneSystem)
        server = AsyncTestServer(system: sensorSystem, radio: radio)
    }

    func startServer() async throws { try await server.start() }

    /// Scans for the sensor, connects, discovers its service and characteristics.
    func connect() async throws -> (Peripheral, counter: Characteristic, sink: Characteristic) {
        try await central.waitUntilPoweredOn(timeout: .seconds(1))
        var found: Peripheral?
        for try await discovery in central.scan(withServices: [AsyncAPITests.service]) {
            #expect(discovery.advertisementData.localName == "sensor")
            found = discovery.peripheral
            break
        }
        let peripheral = try #require(found)
        try await central.connect(peripheral, timeout: .seconds(5))
        let services = try await peripheral.discoverServices([AsyncAPITests.service], timeout: .seconds(5))
        let service = try #require(services.first)
        let characteristics = try await peripheral.discoverCharacteristics(nil, for: service, timeout: .seconds(5))
        let counter = try #require(characteristics.first { $0.uuid == AsyncAPITests.counter })
        let sink = try #require(characteristics.first { $0.uuid == AsyncAPITests.sink })
        return (peripheral, counter, sink)
    }

    /// Waits (in wall time, while the radio runs) until `condition` holds.
    /// A read of `counter` that the server holds unanswered (until `releaseHeld()`): the read is under way when
    /// this returns. Later reads are held too.
    func heldRead(of counter: Characteristic, on peripheral: Peripheral, timeout: Duration? = nil) async throws
        -> Task<Data, any Error>
    {
        server.holdReads.withLock { $0 = true }
        let read = Task(executorPreference: radio) { try await peripheral.readValue(for: counter, timeout: timeout) }
        try await waitUntil { server.held.withLock { !$0.isEmpty } }
        return read
    }

    /// Waits, in virtual time, until `condition` holds (checked every millisecond of it); fails after `limit`.
    func waitUntil(limit: Duration = .seconds(30), _ condition: @Sendable () -> Bool) async throws {
        let deadline = radio.now + limit
        while !condition() {
            guard radio.now < deadline else {
                throw BluetoothError(.timeout, "the condition did not hold within \(limit) of virtual time")
            }
            try await radio.sleep(for: .milliseconds(1))
        }
    }
}

/// The sensor: a counter characteristic (read, notify; reads answered with 1, 2, 3, ...) and a sink
/// (write, write without response; values recorded), served from the async `requests` stream.
final class AsyncTestServer: Sendable {
    let manager: PeripheralManager
    let counter = MutableCharacteristic(
        type: AsyncAPITests.counter, properties: [.read, .notify], value: nil, permissions: [.readable])
    let sink = MutableCharacteristic(
        type: AsyncAPITests.sink, properties: [.write, .writeWithoutResponse], value: nil,
        permissions: [.writeable])
    let writes = AsyncLocked<[Data]>([])
    let reads = Mutex<UInt8>(0)
    let holdReads = Mutex(false)
    let held = Mutex<[ATTRequest]>([])
    let notifyBeforeFirstRead = Mutex(false)
    let task = Mutex<Task<Void, Never>?>(nil)
    let radio: SimulatedRadio

    init(system: BluetoothSystem, radio: SimulatedRadio) {
        self.radio = radio
        manager = PeripheralManager(delegate: nil, queue: DispatchQueue(label: "sensor"), options: nil, system: system)
    }

    deinit { task.withLock { $0?.cancel() } }

    func start() async throws {
        try await manager.waitUntilPoweredOn(timeout: .seconds(1))
        let service = MutableService(type: AsyncAPITests.service, primary: true)
        service.characteristics = [counter, sink]
        try await manager.add(service, timeout: .seconds(1))
        let requests = manager.requests
        task.withLock {
            $0 = Task(executorPreference: radio) { [self] in
                for await request in requests { await handle(request) }
            }
        }
        try await manager.startAdvertising(
            AdvertisementData(localName: "sensor", serviceUUIDs: [AsyncAPITests.service]),
            timeout: .seconds(1))
        #expect(manager.isAdvertising)
    }

    private func handle(_ request: PeripheralManagerRequest) async {
        switch request {
        case .read(let r):
            if holdReads.withLock({ $0 }) {
                held.withLock { $0.append(r) }
                return
            }
            if notifyBeforeFirstRead.withLock({ flag -> Bool in
                defer { flag = false }
                return flag
            }) {
                try? await manager.updateValue(
                    Data([0xAA]), for: counter, onSubscribedCentrals: nil, timeout: .seconds(1))
            }
            answer(r)
        case .write(let rs):
            writes.mutate { $0.append(contentsOf: rs.compactMap(\.value)) }
            if let first = rs.first { manager.respond(to: first, withResult: .success) }
        }
    }

    private func answer(_ r: ATTRequest) {
        let n = reads.withLock { n -> UInt8 in
            n += 1
            return n
        }
        r.value = Data([n])
        manager.respond(to: r, withResult: .success)
    }

    func releaseHeld() {
        for r in held.withLock({ h -> [ATTRequest] in
            defer { h = [] }
            return h
        }) { answer(r) }
    }
}

/// Records the values a peripheral's delegate is told of.
final class ValueRecorder: PeripheralDelegate, Sendable {
    let values = AsyncLocked<[Data]>([])
    let errors = AsyncLocked(0)
    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        if error != nil { errors.mutate { $0 += 1 } }
        values.mutate { $0.append(characteristic.value ?? Data()) }
    }
}

/// Records the central delegate's events, to show the delegate works beside the async API.
final class AsyncCentralRecorder: CentralManagerDelegate, Sendable {
    let events = AsyncLocked<[String]>([])
    func centralManagerDidUpdateState(_ central: CentralManager) { events.mutate { $0.append("\(central.state)") } }
    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        events.mutate { $0.append("didConnect") }
    }
    func centralManager(_ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?)
    {
        events.mutate { $0.append("didDisconnect") }
    }
}

/// A delegate in CoreBluetooth's own words: only the dictionary form of a discovery.
final class DictionaryDiscoveryRecorder: CentralManagerDelegate, Sendable {
    let names = AsyncLocked<[String]>([])
    func centralManagerDidUpdateState(_ central: CentralManager) {}
    // swift-format-ignore: AlwaysUseLowerCamelCase
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber
    ) {
        let name = advertisementData[AdvertisementDataLocalNameKey] as? String ?? "?"
        names.mutate { $0.append(name) }
    }
}

final class AsyncLocked<T: Sendable>: Sendable {
    private let m: Mutex<T>
    init(_ v: T) { m = Mutex(v) }
    var value: T { m.withLock { $0 } }
    func mutate(_ f: (inout T) -> Void) { m.withLock { f(&$0) } }
}

extension AsyncRig {
    /// Runs `body` as a task on the radio's executor, and the radio for `limit` of virtual time beside it: one
    /// plain run, no stepping. The body must be done by then.
    func drive<T: Sendable>(limit: Duration = .seconds(120), _ body: @escaping @Sendable () async throws -> T)
        async throws -> T
    {
        let finished = AsyncLocked(false)
        let task = Task(executorPreference: radio) {
            defer { finished.mutate { $0 = true } }
            return try await body()
        }
        try await radio.run(for: limit)
        guard finished.value else {
            // Its remaining jobs would run only if the radio ran again: leave it cancelled.
            task.cancel()
            throw BluetoothError(.timeout, "the test did not finish within \(limit) of virtual time")
        }
        return try await task.value
    }
}
