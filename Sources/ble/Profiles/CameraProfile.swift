import BLE
import BLEProfiles
import Foundation

/// An underwater drone's camera: commands go into an 18-byte receive buffer that drains one byte every
/// 2 ms. Its documentation says "18-byte chunks, 40 ms apart".
///
/// - A Write Request is answered only once the buffer has taken the whole value, so writes with response go at
///   the rate the camera allows.
/// - A Write Command's bytes that do not fit are dropped (and counted), as a device with no flow control does,
///   however long the command; a Write Request longer than the whole buffer is refused (Invalid Attribute Value
///   Length), since it could never be taken.
/// - Status (read, notify): bytes taken and bytes dropped, each a little-endian UInt32.
enum CameraProfile {
    static let service = BluetoothUUID(string: "CA3E0001-0000-1000-8000-00805F9B34FB")!
    static let command = BluetoothUUID(string: "CA3E0002-0000-1000-8000-00805F9B34FB")!
    static let status = BluetoothUUID(string: "CA3E0003-0000-1000-8000-00805F9B34FB")!
    static let bufferSize = 18
    static let drainPerByte = Duration.milliseconds(2)

    static func make(name: String) -> Profile {
        Profile(
            name: name,
            services: [
                ProfileService(
                    uuid: service,
                    characteristics: [
                        ProfileCharacteristic(
                            uuid: command, properties: [.write, .writeWithoutResponse], permissions: [.writeable],
                            descriptors: [
                                (.characteristicUserDescription, Data("Commands: 18-byte chunks, 40 ms apart".utf8))
                            ]),
                        ProfileCharacteristic(
                            uuid: status, properties: [.read, .notify], permissions: [.readable],
                            initial: Data(count: 8),
                            descriptors: [(.characteristicUserDescription, Data("Bytes taken, bytes dropped".utf8))]),
                    ]),
                BuiltInProfiles.deviceInformation(model: "CAM-4", serial: "CA-0004"),
            ],
            advertisedServices: [service],
            behaviour: { CameraBehaviour() })
    }
}

final class CameraBehaviour: ProfileBehaviour, @unchecked Sendable {
    // @unchecked: as ProfileBehaviour, touched only on the device's queue.
    private var buffered = 0
    /// When `buffered` was last brought up to date: bytes leave at one per `drainPerByte` of the system's time
    /// since then, counted when looked at (a timer that fires late, on a loaded machine, drains no less).
    private var lastDrain: Duration?
    private var taken: UInt32 = 0
    private var dropped: UInt32 = 0
    /// A timer runs for the first waiting request (it fires when the buffer will have room for it).
    private var timerPending = false
    /// Write Requests waiting for room, in order.
    private var waiting: [(value: Data, answer: (ATTErrorCode) -> Void)] = []

    override func write(_ uuid: BluetoothUUID, value: Data) -> ATTErrorCode {
        uuid == CameraProfile.command ? .success : .writeNotPermitted
    }

    override func write(
        _ uuid: BluetoothUUID, value: Data, command: Bool, answer: @escaping (ATTErrorCode) -> Void
    ) {
        guard uuid == CameraProfile.command else { return answer(.writeNotPermitted) }
        // A Write Command is never refused (its sender hears nothing): what does not fit, however long it is, is
        // dropped and counted. A Write Request longer than the whole buffer could never be taken: refused.
        if command {
            drainToNow()
            let fits = min(value.count, CameraProfile.bufferSize - buffered)
            take(fits)
            dropped &+= UInt32(value.count - fits)
            publish()
            return answer(.success)
        }
        guard value.count <= CameraProfile.bufferSize else { return answer(.invalidAttributeValueLength) }
        waiting.append((value, answer))
        serveWaiting()
    }

    /// Brings `buffered` up to the system's time now.
    private func drainToNow() {
        guard let now = device?.system.now else { return }
        guard buffered > 0, let since = lastDrain else {
            lastDrain = now
            return
        }
        let gone = Int((now - since) / CameraProfile.drainPerByte)
        guard gone > 0 else { return }
        if gone >= buffered {
            buffered = 0
            lastDrain = now
        } else {
            buffered -= gone
            lastDrain = since + CameraProfile.drainPerByte * gone
        }
    }

    /// Takes the waiting requests that fit now, in order, and answers them; then waits for room for the next.
    private func serveWaiting() {
        drainToNow()
        while let first = waiting.first, first.value.count <= CameraProfile.bufferSize - buffered {
            waiting.removeFirst()
            take(first.value.count)
            publish()
            first.answer(.success)
        }
        guard !timerPending, let first = waiting.first else { return }
        let short = first.value.count - (CameraProfile.bufferSize - buffered)
        timerPending = true
        device?.after(CameraProfile.drainPerByte * short) { [self] in
            timerPending = false
            serveWaiting()
        }
    }

    private func take(_ count: Int) {
        drainToNow()
        buffered += count
        taken &+= UInt32(count)
    }

    private func publish() {
        var bytes = Data()
        for word in [taken, dropped] {
            for shift in stride(from: 0, to: 32, by: 8) { bytes.append(UInt8((word >> UInt32(shift)) & 0xFF)) }
        }
        values[CameraProfile.status] = bytes
    }

    override func read(_ uuid: BluetoothUUID) -> Result<Data, ATTRefusal> {
        .success(values[uuid] ?? Data(count: 8))
    }
}
