import BLECore
import BLEHost
import BLETransport
import Synchronization

/// One app's advertisement: what it asks the system to put on the air.
public struct AdvertisingRequest: Sendable, Hashable {
    public var parameters: AdvertisingParameters
    public var data: [UInt8]
    public var scanResponse: [UInt8]

    public init(parameters: AdvertisingParameters, data: [UInt8], scanResponse: [UInt8]) {
        self.parameters = parameters
        self.data = data
        self.scanResponse = scanResponse
    }
}

/// The apps' advertisements on a controller with one legacy advertising set (Arbitration/AdvertisingRotation.swift).
///
/// The policy: one app advertising has the controller to itself; with several, the system gives each app's
/// advertisement the air in turn, `slot` at a time (1 s: about ten advertising events at iOS's 100 ms), in the
/// order the apps started, so every app is heard, each about 1/n of the time, and none replaces another's data.
/// When a central connects (legacy connectable advertising stops then, Core Spec 5.4, Vol 6, Part B, 4.4.2), the
/// system advertises again, as iOS keeps advertising while connected. An app that stops leaves the rotation;
/// the last one stops the controller. A start is reported to its app once the controller advertises (its own
/// advertisement, or, within a rotation, the one on the air: its own comes within `slot` per other app).
final class AdvertisingRotation: Sendable {
    static let slot = Duration.seconds(1)

    private struct Entry {
        var id: ObjectIdentifier
        var request: AdvertisingRequest
        /// Told once the controller advertises on this app's behalf.
        var started: (@Sendable (Result<Void, HostError>) -> Void)?
    }

    private struct State {
        var entries: [Entry] = []
        /// Index in `entries` of the advertisement on the air (or being put there).
        var current = 0
        var advertising = false
        var timer: (any ScheduledWork)?
        var generation: UInt64 = 0
    }
    private let state = Mutex(State())
    private let host: HostDriver
    private let scheduler: any HostScheduler

    init(host: HostDriver, scheduler: any HostScheduler) {
        self.host = host
        self.scheduler = scheduler
    }

    /// `client` advertises `request` (replacing what it advertised); `started` hears when the controller
    /// advertises for it, or why it does not.
    func start(
        _ client: ObjectIdentifier, _ request: AdvertisingRequest,
        started: @escaping @Sendable (Result<Void, HostError>) -> Void
    ) {
        let (put, tell) = state.withLock { s -> (AdvertisingRequest?, Bool) in
            if let i = s.entries.firstIndex(where: { $0.id == client }) {
                s.entries[i].request = request
                s.entries[i].started = started
                return (i == s.current ? request : nil, false)
            }
            s.entries.append(Entry(id: client, request: request, started: started))
            if s.entries.count == 1 {
                s.current = 0
                return (request, false)
            }
            // Joins a rotation already on the air: the system advertises for it now.
            return (nil, s.advertising)
        }
        if tell { takeStarted(client)?(.success(())) }
        if let put { putOnAir(put) }
        scheduleRotation()
    }

    /// `client` stops advertising; the controller stops with the last.
    func stop(_ client: ObjectIdentifier) {
        let (next, stopAll) = state.withLock { s -> (AdvertisingRequest?, Bool) in
            guard let i = s.entries.firstIndex(where: { $0.id == client }) else { return (nil, false) }
            s.entries.remove(at: i)
            if s.entries.isEmpty {
                s.current = 0
                s.advertising = false
                return (nil, true)
            }
            if i < s.current { s.current -= 1 }
            guard i == s.current || s.current >= s.entries.count else { return (nil, false) }
            s.current %= s.entries.count
            return (s.entries[s.current].request, false)
        }
        if stopAll { host.stopAdvertising { _ in } }
        if let next { putOnAir(next) }
        scheduleRotation()
    }

    /// A central connected and the controller stopped advertising: it advertises again.
    func ended() {
        let again = state.withLock { s -> AdvertisingRequest? in
            s.advertising = false
            return s.entries.isEmpty ? nil : s.entries[s.current].request
        }
        if let again { putOnAir(again) }
    }

    /// The controller went away: nothing advertises.
    func reset() {
        let waiting = state.withLock { s -> [@Sendable (Result<Void, HostError>) -> Void] in
            s.timer?.cancel()
            defer { s = State() }
            return s.entries.compactMap(\.started)
        }
        for tell in waiting { tell(.failure(HostError(.transportClosed, "the controller went away"))) }
    }

    private func takeStarted(_ client: ObjectIdentifier) -> (@Sendable (Result<Void, HostError>) -> Void)? {
        state.withLock { s in
            guard let i = s.entries.firstIndex(where: { $0.id == client }) else { return nil }
            defer { s.entries[i].started = nil }
            return s.entries[i].started
        }
    }

    /// Puts `request` on the air; the apps waiting to hear that the controller advertises hear it (or why not).
    private func putOnAir(_ request: AdvertisingRequest) {
        host.startAdvertising(request.parameters, data: request.data, scanResponse: request.scanResponse) {
            [weak self] result in
            guard let self else { return }
            // Cancelled: a later change (the next turn, a stop) overtook it; that change answers for itself.
            if case .failure(let error) = result, error.code == .cancelled { return }
            let tell = state.withLock { s -> [@Sendable (Result<Void, HostError>) -> Void] in
                var out: [@Sendable (Result<Void, HostError>) -> Void] = []
                switch result {
                case .success:
                    // Every app in the rotation is now being advertised for.
                    s.advertising = true
                    for i in s.entries.indices {
                        if let started = s.entries[i].started { out.append(started) }
                        s.entries[i].started = nil
                    }
                case .failure:
                    // The apps that asked for this advertisement hear why it is not on the air, and leave.
                    let refused = s.entries.filter { $0.request == request && $0.started != nil }
                    out = refused.compactMap(\.started)
                    s.entries.removeAll { entry in refused.contains { $0.id == entry.id } }
                    if s.current >= s.entries.count { s.current = 0 }
                }
                return out
            }
            for started in tell { started(result) }
        }
    }

    /// With two apps or more, the next turn after `slot`; with fewer, no timer.
    private func scheduleRotation() {
        let generation = state.withLock { s -> UInt64? in
            s.timer?.cancel()
            s.timer = nil
            s.generation &+= 1
            return s.entries.count > 1 ? s.generation : nil
        }
        guard let generation else { return }
        let timer = scheduler.schedule(after: Self.slot) { [weak self] in self?.nextTurn(generation) }
        state.withLock { s in if s.generation == generation { s.timer = timer } else { timer.cancel() } }
    }

    private func nextTurn(_ generation: UInt64) {
        let next = state.withLock { s -> AdvertisingRequest? in
            guard s.generation == generation, s.entries.count > 1 else { return nil }
            s.current = (s.current + 1) % s.entries.count
            return s.entries[s.current].request
        }
        guard let next else { return }
        putOnAir(next)
        scheduleRotation()
    }
}
