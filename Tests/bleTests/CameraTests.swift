import BLE
import Foundation
import Synchronization
import Testing

@testable import ble

/// The underwater drone's camera: an 18-byte buffer draining a byte every 2 ms. Commands sent the way its documentation says
/// arrive whole; written without response at full speed, they visibly do not. The time limit only stops a run
/// that hangs: on a loaded machine the 64 KiB transfer has taken 73 s of wall time.
@Suite(.timeLimit(.minutes(5))) struct CameraTests {
    enum Way: Sendable {
        case withResponse
        case withoutResponseAtFullSpeed
        case withoutResponseAsDocumented
    }

    /// Sends `count` bytes to the camera one way; returns what its status says it took and dropped, and the
    /// virtual time the send took.
    struct Measured: Sendable {
        var taken: Int
        var dropped: Int
        var took: Duration
    }

    /// The scenario's outcome, set from the radio's executor and read by the test.
    final class Outcome: Sendable {
        let value = Mutex<Result<Measured, any Error>?>(nil)
    }

    static func send(_ count: Int, _ way: Way, chunk: Int = 18) async throws -> Measured {
        let radio = SimulatedRadio(seed: 4)
        let cameraSystem = BluetoothSystem.simulated(on: radio, name: "Camera")
        let phone = BluetoothSystem.simulated(on: radio, name: "phone", position: RadioPosition(x: 2, y: 0))
        let served = ServedDevice(system: cameraSystem, profile: CameraProfile.make(name: "Camera"))
        let central = CentralManager(delegate: nil, queue: DispatchQueue(label: "phone"), options: nil, system: phone)
        let outcome = Outcome()
        let scenario = Task(executorPreference: radio) { () -> Measured in
            try await central.waitUntilPoweredOn(timeout: .seconds(1))
            var found: Peripheral?
            for try await discovery in central.scan(withServices: [CameraProfile.service]) {
                found = discovery.peripheral
                break
            }
            let camera = try #require(found)
            try await central.connect(camera, timeout: .seconds(10))
            let services = try await camera.discoverServices([CameraProfile.service], timeout: .seconds(5))
            let characteristics = try await camera.discoverCharacteristics(nil, for: services[0], timeout: .seconds(5))
            let command = try #require(characteristics.first { $0.uuid == CameraProfile.command })
            let status = try #require(characteristics.first { $0.uuid == CameraProfile.status })
            let data = Data((0..<count).map { UInt8(truncatingIfNeeded: $0) })
            let start = radio.now
            let progress: AsyncThrowingStream<SendProgress, any Error>
            switch way {
            case .withResponse:
                progress = camera.send(data, to: command, type: .withResponse, chunkSize: chunk)
            case .withoutResponseAtFullSpeed:
                progress = camera.send(data, to: command, type: .withoutResponse, chunkSize: chunk)
            case .withoutResponseAsDocumented:
                progress = camera.send(
                    data, to: command, type: .withoutResponse, chunkSize: chunk, interval: .milliseconds(40))
            }
            for try await _ in progress {}
            let took = radio.now - start
            try await radio.sleep(for: .milliseconds(100))  // the last bytes drain
            let value = try await camera.readValue(for: status, timeout: .seconds(5))
            func word(_ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(value[at + $1]) << (8 * $1) } }
            return Measured(taken: word(0), dropped: word(4), took: took)
        }
        Task(executorPreference: radio) {
            let result = await scenario.result
            outcome.value.withLock { $0 = result }
        }
        try await radio.run(for: .seconds(600), until: { outcome.value.withLock { $0 } != nil })
        scenario.cancel()
        withExtendedLifetime(served) {}
        return try #require(outcome.value.withLock { $0 }).get()
    }

    @Test func sixtyFourKiBWithResponseArriveWholeAtTheCamerasRate() async throws {
        let result = try await Self.send(64 * 1024, .withResponse)
        #expect(result.taken == 64 * 1024 && result.dropped == 0)
        // The camera takes 18 bytes every 36 ms at best: 64 KiB cannot take less than 131 s.
        #expect(result.took >= .seconds(131), "took \(result.took)")
    }

    @Test func withoutResponseAtFullSpeedLosesData() async throws {
        let result = try await Self.send(4 * 1024, .withoutResponseAtFullSpeed)
        #expect(result.dropped > 0 && result.taken + result.dropped == 4 * 1024, "\(result)")
    }

    /// A Write Command longer than the whole buffer is not refused whole (its sender would never know): what fits
    /// is taken, the rest dropped and counted, as the status characteristic's documentation says.
    @Test func writeCommandsLargerThanTheBufferAreCountedInTakenAndDropped() async throws {
        let result = try await Self.send(3000, .withoutResponseAsDocumented, chunk: 100)
        #expect(result.taken + result.dropped == 3000 && result.dropped >= 3000 - 30 * 18, "\(result)")
    }

    /// A Write Request longer than the buffer could never be taken: refused, and nothing is counted.
    @Test func writeRequestsLargerThanTheBufferAreRefused() async throws {
        let error = await #expect(throws: BluetoothError.self) { try await Self.send(100, .withResponse, chunk: 100) }
        #expect(error?.attErrorCode == .invalidAttributeValueLength)
    }

    @Test func withoutResponseAsDocumentedArrivesWhole() async throws {
        let result = try await Self.send(4 * 1024, .withoutResponseAsDocumented)
        #expect(result.taken == 4 * 1024 && result.dropped == 0, "\(result)")
    }
}
