import Dispatch
import Foundation
import Synchronization

/// How far a `send` has come.
public struct SendProgress: Sendable, Hashable, CustomStringConvertible {
    /// Bytes the peripheral has acknowledged so far: for writes with response, its Write Responses; for writes
    /// without response, its link layer (the controller reported the packets completed).
    public let bytesAcknowledged: Int
    /// All the bytes being sent.
    public let totalBytes: Int
    /// How many times the sender found the link's queue full and waited for
    /// `peripheralIsReady(toSendWriteWithoutResponse:)` (always 0 with response).
    public let timesWaitedForRoom: Int

    public var description: String {
        "\(bytesAcknowledged) of \(totalBytes) bytes acknowledged, waited for room \(timesWaitedForRoom) times"
    }
}

extension Peripheral {
    /// Sends `data` to `characteristic` in chunks, flow-controlled, and reports each acknowledgement.
    ///
    /// Chunks are `chunkSize` bytes (by default `maximumWriteValueLength(for: type)`), sent in order. Without
    /// response, chunks are queued as fast as the link takes them: when its queue is full
    /// (`canSendWriteWithoutResponse` false) the sender waits for `peripheralIsReady(toSendWriteWithoutResponse:)`,
    /// and never sleeps a thread; with `interval`, each chunk waits until the previous one reached the peer (its
    /// link layer acknowledged it) and then `interval` (in the system's time), so chunks arrive at least that far
    /// apart whatever the connection events: for peripherals that need time to drain a buffer. With response,
    /// one chunk is written at a time, each after the previous one's Write Response (the interval, if any, after
    /// that).
    ///
    /// The stream yields a `SendProgress` for each acknowledged chunk and finishes when every chunk is
    /// acknowledged. It throws when the link goes down, when the peripheral refuses a write (its ATT error),
    /// or for a `chunkSize` larger than one write can carry; ending the iteration (or cancelling its task) stops
    /// sending, and what was already queued still goes out.
    public func send(
        _ data: Data, to characteristic: Characteristic, type: CharacteristicWriteType, chunkSize: Int? = nil,
        interval: Duration? = nil
    ) -> AsyncThrowingStream<SendProgress, any Error> {
        AsyncThrowingStream { continuation in
            guard state == .connected else {
                continuation.finish(throwing: BluetoothError(.notConnected, "the peripheral is not connected"))
                return
            }
            let needed: CharacteristicProperties = type == .withResponse ? .write : .writeWithoutResponse
            guard characteristic.properties.contains(needed) else {
                continuation.finish(
                    throwing: Self.notPermitted(
                        .writeNotPermitted,
                        type == .withResponse ? "written with response" : "written without response",
                        characteristic))
                return
            }
            let limit = maximumWriteValueLength(for: type)
            let size = chunkSize ?? limit
            guard size > 0, size <= limit else {
                continuation.finish(
                    throwing: BluetoothError(
                        .invalidParameters, "a chunk carries 1 to \(limit) bytes on this link; \(size) was asked for"))
                return
            }
            guard characteristic.remoteAttribute != nil, characteristic.owner === self, let manager else {
                continuation.finish(
                    throwing: BluetoothError(
                        .invalidParameters, "\(characteristic) is not a discovered attribute of \(self)"))
                return
            }
            // An empty value is one empty write (ATT allows it), not none.
            let chunks =
                data.isEmpty
                ? [Data()]
                : stride(from: 0, to: data.count, by: size).map {
                    data.subdata(in: data.startIndex + $0..<data.startIndex + min(data.count, $0 + size))
                }
            let sender = Sender(
                peripheral: self, characteristic: characteristic, type: type, chunks: chunks, interval: interval,
                system: manager.system, queue: manager.queue, continuation: continuation)
            continuation.onTermination = { _ in sender.stop() }
            // Every step runs on the manager's queue, where "ready" and the acknowledgements arrive: a refusal and
            // the "ready" that follows it can then never cross. (Scheduled, not dispatched, so a simulation
            // counts it.)
            manager.system.schedule(after: .zero, on: manager.queue) { sender.pump() }
        }
    }
}

/// One `send`: its chunks, what was sent and acknowledged, and the stream it reports to. Every step runs on the
/// manager's queue (the first one scheduled there, the rest the peripheral's callbacks); the state is a `Mutex`
/// only because the stream's termination may come from any thread. It is never held while a write is made or
/// the stream is fed.
private final class Sender: Sendable {
    private struct State {
        var next = 0
        var acknowledged = 0
        var waits = 0
        /// A write is under way (with response), or the sender waits for room or for the interval.
        var paused = false
        var pumping = false
        var done = false
    }

    let peripheral: Peripheral
    let characteristic: Characteristic
    let type: CharacteristicWriteType
    let chunks: [Data]
    let total: Int
    let interval: Duration?
    let system: BluetoothSystem
    let queue: DispatchQueue
    let continuation: AsyncThrowingStream<SendProgress, any Error>.Continuation
    private let state = Mutex(State())

    init(
        peripheral: Peripheral, characteristic: Characteristic, type: CharacteristicWriteType, chunks: [Data],
        interval: Duration?, system: BluetoothSystem, queue: DispatchQueue,
        continuation: AsyncThrowingStream<SendProgress, any Error>.Continuation
    ) {
        self.peripheral = peripheral
        self.characteristic = characteristic
        self.type = type
        self.chunks = chunks
        self.total = chunks.reduce(0) { $0 + $1.count }
        self.interval = interval
        self.system = system
        self.queue = queue
        self.continuation = continuation
    }

    func stop() { state.withLock { $0.done = true } }

    /// Sends what may be sent now. Only one pump runs at a time; a call while one runs is absorbed by it.
    func pump() {
        guard
            state.withLock({ s -> Bool in
                guard !s.pumping, !s.done, !s.paused else { return false }
                s.pumping = true
                return true
            })
        else { return }
        defer { state.withLock { $0.pumping = false } }
        while let index = state.withLock({ s -> Int? in s.done || s.paused || s.next >= chunks.count ? nil : s.next }) {
            guard peripheral.state == .connected else {
                return finish(BluetoothError(.notConnected, "the peripheral is not connected"))
            }
            switch type {
            case .withResponse:
                state.withLock {
                    $0.next += 1
                    $0.paused = true
                }
                peripheral.writeValue(
                    chunks[index], for: characteristic,
                    reply: .task { [self] result in
                        acknowledged(index, result)
                        resume()
                    })
            case .withoutResponse:
                let observer = peripheral.asyncObserver
                // With an interval, the next chunk waits for this one to reach the peer (its link layer acknowledged
                // it), then the interval: chunks arrive at least `interval` apart, whatever the connection events.
                let queued = peripheral.writeWithoutResponse(
                    chunks[index], for: characteristic,
                    delivered: .task { [self] result in
                        acknowledged(index, result)
                        if interval != nil, case .success = result { resume() }
                    })
                if queued {
                    state.withLock {
                        $0.next += 1
                        if interval != nil { $0.paused = true }
                    }
                } else {
                    state.withLock {
                        $0.waits += 1
                        $0.paused = true
                    }
                    observer.whenReady { [self] error in
                        if let error { return finish(error) }
                        state.withLock { $0.paused = false }
                        pump()
                    }
                }
            }
        }
    }

    /// After a write with response, or a chunk without: goes on, after the interval if there is one.
    private func resume() {
        guard state.withLock({ !$0.done && $0.next < chunks.count }) else { return }
        guard let interval else {
            state.withLock { $0.paused = false }
            return pump()
        }
        system.schedule(after: interval, on: queue) { [self] in
            state.withLock { $0.paused = false }
            pump()
        }
    }

    private func acknowledged(_ index: Int, _ result: Result<Void, BluetoothError>) {
        if case .failure(let error) = result { return finish(error) }
        let progress = state.withLock { s -> SendProgress? in
            guard !s.done else { return nil }
            s.acknowledged += chunks[index].count
            return SendProgress(bytesAcknowledged: s.acknowledged, totalBytes: total, timesWaitedForRoom: s.waits)
        }
        guard let progress else { return }
        continuation.yield(progress)
        if progress.bytesAcknowledged == total { finish(nil) }
    }

    private func finish(_ error: (any Error)?) {
        let first = state.withLock { s -> Bool in
            defer { s.done = true }
            return !s.done
        }
        guard first else { return }
        continuation.finish(throwing: error)
    }
}
