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

/// How an app's advertisement goes on the air where the app is in its lifecycle (IOSRules.md 2.3–2.5, 2.13).
enum AdvertisingMode: Sendable, Hashable {
    /// The app is in the foreground: its advertisement as asked.
    case foreground
    /// A `bluetooth-peripheral` app out of the foreground: its background form (no name, the services in the
    /// overflow area, a longer interval).
    case background
    /// A foreground-only app out of the foreground: off the air until it comes back.
    case off
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
///
/// Each app's advertisement follows its `AdvertisingMode`: the foreground form, the background form, or off the
/// air (kept aside, with its callbacks, and back in the rotation when the app returns to the foreground).
final class AdvertisingRotation: Sendable {
    static let slot = Duration.seconds(1)

    typealias Started = @Sendable (Result<Void, HostError>) -> Void
    typealias Ended = @Sendable (HostError) -> Void

    private struct Entry {
        var id: ObjectIdentifier
        /// The form on the air now.
        var request: AdvertisingRequest
        var foreground: AdvertisingRequest
        var background: AdvertisingRequest?
        var mode: AdvertisingMode
        /// Told once the controller advertises on this app's behalf (or why not).
        var started: Started?
        /// Told when the controller refuses the app's advertisement after it had started (put on the air again
        /// after a connection, or in its turn): the app is out of the rotation.
        var ended: Ended
    }

    /// What the controller should be doing.
    private enum Wish: Sendable {
        case advertise(AdvertisingRequest)
        case stop
    }

    private struct State {
        /// What `send` hands the host.
        var wishes = LatestWish<Wish>()
        var entries: [Entry] = []
        /// Advertisements of apps off the air for now (`AdvertisingMode.off`).
        var paused: [Entry] = []
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
    /// advertises for it, or why it does not; `ended`, when the controller refuses it later.
    func start(
        _ client: ObjectIdentifier, _ request: AdvertisingRequest, background: AdvertisingRequest? = nil,
        mode: AdvertisingMode = .foreground, started: @escaping Started, ended: @escaping Ended
    ) {
        let entry = Entry(
            id: client, request: mode == .background ? background ?? request : request, foreground: request,
            background: background, mode: mode, started: started, ended: ended)
        if mode == .off {
            let overtaken = state.withLock { s -> Started? in
                let overtaken = s.paused.first { $0.id == client }?.started
                s.paused.removeAll { $0.id == client }
                s.paused.append(entry)
                return overtaken
            }
            overtaken?(.failure(HostError(.cancelled, "a later start replaced this one")))
            return
        }
        add(entry)
    }

    /// What a change of the rotation asks of the controller and tells the apps, done after the lock section that
    /// made the change, in this order.
    private struct Effects {
        /// Starts replaced by a later one.
        var overtaken: [Started] = []
        /// Clients whose start is answered now: they joined a rotation already on the air.
        var joined: [ObjectIdentifier] = []
        /// What the controller should do, in order (only the latest is done, `LatestWish`).
        var wishes: [Wish] = []
    }

    private func apply(_ effects: Effects) {
        for overtaken in effects.overtaken {
            overtaken(.failure(HostError(.cancelled, "a later start replaced this one")))
        }
        for client in effects.joined { takeStarted(client)?(.success(())) }
        for wish in effects.wishes { send(wish) }
        scheduleRotation()
    }

    /// Puts `entry` in the rotation (replacing the client's earlier advertisement). An entry without `started`
    /// (a change of form) keeps the one waiting, if any.
    private func add(_ entry: Entry) {
        var effects = Effects()
        state.withLock { Self.insert(entry, into: &$0, &effects) }
        apply(effects)
    }

    private static func insert(_ entry: Entry, into s: inout State, _ effects: inout Effects) {
        if let i = s.entries.firstIndex(where: { $0.id == entry.id }) {
            let waiting = s.entries[i].started
            var replacement = entry
            if replacement.started == nil { replacement.started = waiting }
            s.entries[i] = replacement
            if i == s.current { effects.wishes.append(.advertise(entry.request)) }
            if entry.started != nil, let waiting { effects.overtaken.append(waiting) }
            return
        }
        s.entries.append(entry)
        if s.entries.count == 1 {
            s.current = 0
            effects.wishes.append(.advertise(entry.request))
        } else if s.advertising {
            // Joins a rotation already on the air: the system advertises for it now.
            effects.joined.append(entry.id)
        }
    }

    /// `client` stops advertising; the controller stops with the last.
    func stop(_ client: ObjectIdentifier) {
        let paused = state.withLock { s -> Started?? in
            guard let i = s.paused.firstIndex(where: { $0.id == client }) else { return nil }
            return .some(s.paused.remove(at: i).started)
        }
        if let paused {
            paused?(.failure(HostError(.cancelled, "the advertising was stopped before it started")))
            return
        }
        guard let waiting = remove(client) else { return }
        // A start not confirmed yet is over: the app stopped first.
        waiting.started?(.failure(HostError(.cancelled, "the advertising was stopped before it started")))
    }

    /// The apps' modes changed: each listed client's advertisement takes the form its mode calls for, leaves the
    /// air, or comes back.
    func setModes(_ modes: [ObjectIdentifier: AdvertisingMode]) {
        // One lock section for the whole change: a client's stop or start on another thread comes before it or
        // after it, never between an entry leaving and coming back.
        var effects = Effects()
        state.withLock { s in
            var leaving: [ObjectIdentifier] = []
            var returning: [Entry] = []
            var changing: [Entry] = []
            for entry in s.entries {
                guard let mode = modes[entry.id], mode != entry.mode else { continue }
                if mode == .off {
                    leaving.append(entry.id)
                } else {
                    var changed = entry
                    changed.started = nil
                    changed.mode = mode
                    changed.request = mode == .background ? entry.background ?? entry.foreground : entry.foreground
                    changing.append(changed)
                }
            }
            for (i, entry) in s.paused.enumerated().reversed() {
                guard let mode = modes[entry.id], mode != .off else { continue }
                var back = s.paused.remove(at: i)
                back.mode = mode
                back.request = mode == .background ? back.background ?? back.foreground : back.foreground
                returning.insert(back, at: 0)
            }
            for client in leaving {
                guard var entry = Self.take(client, from: &s, &effects) else { continue }
                entry.mode = .off
                s.paused.append(entry)
            }
            for entry in changing + returning { Self.insert(entry, into: &s, &effects) }
        }
        apply(effects)
    }

    /// `old`'s advertisement is `new`'s (a restored manager taking over), in its place: `started` (when a start
    /// is still waiting) and `ended` now tell the new manager.
    func transfer(
        from old: ObjectIdentifier, to new: ObjectIdentifier, started: @escaping Started, ended: @escaping Ended
    ) {
        state.withLock { s in
            for i in s.entries.indices where s.entries[i].id == old {
                s.entries[i].id = new
                s.entries[i].ended = ended
                if s.entries[i].started != nil { s.entries[i].started = started }
            }
            for i in s.paused.indices where s.paused[i].id == old {
                s.paused[i].id = new
                s.paused[i].ended = ended
                if s.paused[i].started != nil { s.paused[i].started = started }
            }
        }
    }

    /// Takes `client` out of the rotation; returns its entry.
    private func remove(_ client: ObjectIdentifier) -> Entry? {
        var effects = Effects()
        let removed = state.withLock { Self.take(client, from: &$0, &effects) }
        apply(effects)
        return removed
    }

    private static func take(_ client: ObjectIdentifier, from s: inout State, _ effects: inout Effects) -> Entry? {
        guard let i = s.entries.firstIndex(where: { $0.id == client }) else { return nil }
        let removed = s.entries.remove(at: i)
        if s.entries.isEmpty {
            s.current = 0
            s.advertising = false
            effects.wishes.append(.stop)
            return removed
        }
        if i < s.current { s.current -= 1 }
        if i == s.current || s.current >= s.entries.count {
            s.current %= s.entries.count
            effects.wishes.append(.advertise(s.entries[s.current].request))
        }
        return removed
    }

    /// A central connected and the controller stopped advertising: it advertises again.
    func ended() {
        let again = state.withLock { s -> AdvertisingRequest? in
            s.advertising = false
            return s.entries.isEmpty ? nil : s.entries[s.current].request
        }
        if let again { send(.advertise(again)) }
    }

    /// The controller went away: nothing advertises.
    func reset() {
        let waiting = state.withLock { s -> [Started] in
            s.timer?.cancel()
            let wishes = s.wishes.droppingPending
            defer {
                s = State()
                s.wishes = wishes
            }
            return (s.entries + s.paused).compactMap(\.started)
        }
        for tell in waiting { tell(.failure(HostError(.transportClosed, "the controller went away"))) }
    }

    private func takeStarted(_ client: ObjectIdentifier) -> Started? {
        state.withLock { s in
            guard let i = s.entries.firstIndex(where: { $0.id == client }) else { return nil }
            defer { s.entries[i].started = nil }
            return s.entries[i].started
        }
    }

    /// Hands the host `wish`, the latest one only (`LatestWish`).
    private func send(_ wish: Wish) {
        guard state.withLock({ $0.wishes.offer(wish) }) else { return }
        while let next = state.withLock({ $0.wishes.take() }) {
            switch next {
            case .advertise(let request): putOnAir(request)
            case .stop: host.stopAdvertising { _ in }
            }
        }
    }

    /// Puts `request` on the air; the apps waiting to hear that the controller advertises hear it (or why not).
    private func putOnAir(_ request: AdvertisingRequest) {
        host.startAdvertising(request.parameters, data: request.data, scanResponse: request.scanResponse) {
            [weak self] result in
            guard let self else { return }
            // Cancelled: a later change (the next turn, a stop) overtook it; that change answers for itself.
            if case .failure(let error) = result, error.code == .cancelled { return }
            let (tell, endedFor, next) = state.withLock { s -> ([Started], [Ended], AdvertisingRequest?) in
                switch result {
                case .success:
                    // Every app in the rotation is now being advertised for.
                    s.advertising = true
                    let waiting = s.entries.compactMap(\.started)
                    for i in s.entries.indices { s.entries[i].started = nil }
                    return (waiting, [], nil)
                case .failure:
                    // The apps whose advertisement the controller refused hear why and leave the rotation; the
                    // next one left goes on the air.
                    let refused = s.entries.filter { $0.request == request }
                    s.entries.removeAll { $0.request == request }
                    s.advertising = false
                    if s.current >= s.entries.count { s.current = 0 }
                    return (
                        refused.compactMap(\.started), refused.filter { $0.started == nil }.map(\.ended),
                        s.entries.isEmpty ? nil : s.entries[s.current].request
                    )
                }
            }
            if case .failure(let error) = result {
                for started in tell { started(.failure(error)) }
                for ended in endedFor { ended(error) }
            } else {
                for started in tell { started(result) }
            }
            if let next { send(.advertise(next)) }
            scheduleRotation()
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
        send(.advertise(next))
        scheduleRotation()
    }
}
