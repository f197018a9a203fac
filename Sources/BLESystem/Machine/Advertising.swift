import BLECore
import BLEHost

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
package enum AdvertisingMode: Sendable, Hashable {
    /// The app is in the foreground: its advertisement as asked.
    case foreground
    /// A `bluetooth-peripheral` app out of the foreground: its background form (no name, the services in the
    /// overflow area, a longer interval).
    case background
    /// A foreground-only app out of the foreground: off the air until it comes back.
    case off
}

/// Which start of advertising an answer (`.advertisingStarted`) is for.
package struct AdvertisingStartID: RawRepresentable, Hashable, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// The sessions' advertisements on a controller with one legacy advertising set, as a value of `SystemMachine`.
///
/// ### Function
/// One session advertising has the controller to itself; with several, each session's advertisement has the air
/// in turn, `slot` at a time (1 s: about ten advertising events at iOS's 100 ms), in the order they started, so
/// every app is heard, each about 1/n of the time, and none replaces another's data. When a central connects
/// (legacy connectable advertising stops then, Core Spec 5.4, Vol 6, Part B, 4.4.2), the controller advertises
/// again, as iOS keeps advertising while connected. A session that stops leaves the rotation; the last one stops
/// the controller. A start is answered once the controller advertises (its own advertisement, or, within a
/// rotation, the one on the air: its own comes within `slot` per other session), or with why not.
///
/// Each advertisement follows its `AdvertisingMode`: the foreground form, the background form, or off the air
/// (kept aside, its start still waiting, and back in the rotation when its app returns to the foreground).
///
/// ### Implementation
/// The rotation in the order the sessions started, the index of the advertisement on the air, and the paused
/// ones aside. Every change restarts the turn's timer under a new token (`.startTimer(.advertisingTurn)`), so a
/// timer of an earlier turn does nothing when it fires; with fewer than two in the rotation none is started. Each
/// request to the controller is numbered, and only the answer to the latest counts (an earlier one was
/// overtaken, or stopped): a refusal takes out of the rotation every session advertising exactly what was asked.
/// Each entry remembers the start that put its advertisement in (`origin`), by which its end is told.
package struct AdvertisingTable: Sendable, Hashable {
    /// How long each advertisement has the air when several take turns.
    package static let slot = Duration.seconds(1)

    package struct Entry: Sendable, Hashable {
        package var session: SessionID
        /// The form on the air now.
        package var request: AdvertisingRequest
        var foreground: AdvertisingRequest
        var background: AdvertisingRequest?
        package var mode: AdvertisingMode
        /// The start waiting to hear that the controller advertises for it (nil once answered).
        package var start: AdvertisingStartID?
        /// The start that put this advertisement in: its end is told by it (`.advertisingRefused`).
        package var origin: AdvertisingStartID

        /// This entry in `mode`, in the form that mode calls for.
        func inMode(_ mode: AdvertisingMode) -> Entry {
            var changed = self
            changed.mode = mode
            changed.request = mode == .background ? background ?? foreground : foreground
            return changed
        }
    }

    /// The rotation, in the order the sessions started.
    package private(set) var entries: [Entry] = []
    /// Advertisements of sessions off the air for now (`AdvertisingMode.off`).
    package private(set) var paused: [Entry] = []
    /// Index in `entries` of the advertisement on the air (or being put there).
    package private(set) var current = 0
    /// Whether the controller confirmed it advertises what it was last asked.
    package private(set) var advertising = false
    /// The number of the latest request to the controller, and what it asked (nil: to stop, or never asked).
    package private(set) var attempt: UInt64 = 0
    package private(set) var asked: AdvertisingRequest?
    /// The token of the turn's timer now running.
    private var turn: UInt64 = 0
    private var nextStart: UInt64 = 0

    package init() {}

    /// What a change asks of the controller and answers, in the order it is done: starts overtaken first, then
    /// the starts answered now, then the controller's requests, then the turn's timer.
    private struct Effects {
        var overtaken: [AdvertisingStartID] = []
        var joined: [AdvertisingStartID] = []
        /// What the controller is to do, in order: advertise this, or stop (nil).
        var requests: [AdvertisingRequest?] = []
    }

    // MARK: Sessions

    /// `session` advertises `request` (replacing what it advertised) in `mode`, `background` being its form in
    /// `.background`; the returned start is answered when the controller advertises for it, or why not.
    mutating func start(
        _ session: SessionID, _ request: AdvertisingRequest, background: AdvertisingRequest?, mode: AdvertisingMode,
        _ actions: inout [SystemAction]
    ) -> AdvertisingStartID {
        let id = AdvertisingStartID(rawValue: nextStart)
        nextStart += 1
        let entry = Entry(
            session: session, request: request, foreground: request, background: background, mode: .foreground,
            start: id, origin: id
        ).inMode(mode)
        var effects = Effects()
        // A start kept aside while the app was out of the foreground is overtaken whichever way this one goes.
        if let i = paused.firstIndex(where: { $0.session == session }), let old = paused.remove(at: i).start {
            effects.overtaken.append(old)
        }
        if mode == .off {
            // Off the air, and so is what the session advertised before.
            if let old = take(session, &effects)?.start { effects.overtaken.append(old) }
            paused.append(entry)
            perform(effects, &actions)
            rotate(&actions)
            return id
        }
        insert(entry, &effects)
        perform(effects, &actions)
        rotate(&actions)
        return id
    }

    /// A start refused before it began (`error` says why): answered at once, nothing changes.
    mutating func refused(_ error: HostError, _ actions: inout [SystemAction]) -> AdvertisingStartID {
        let id = AdvertisingStartID(rawValue: nextStart)
        nextStart += 1
        actions.append(.advertisingStarted(id, error))
        return id
    }

    /// `session` stops advertising; the controller stops with the last. A start still waiting is answered as
    /// cancelled.
    mutating func stop(_ session: SessionID, _ actions: inout [SystemAction]) {
        let stopped = HostError(.cancelled, "the advertising was stopped before it started")
        if let i = paused.firstIndex(where: { $0.session == session }), let start = paused.remove(at: i).start {
            actions.append(.advertisingStarted(start, stopped))
        }
        var effects = Effects()
        guard let removed = take(session, &effects) else { return }
        if let start = removed.start { actions.append(.advertisingStarted(start, stopped)) }
        perform(effects, &actions)
        rotate(&actions)
    }

    /// The sessions' apps moved in their lifecycles: each listed session's advertisement takes the form its mode
    /// calls for, leaves the air, or comes back.
    mutating func setModes(_ modes: [SessionID: AdvertisingMode], _ actions: inout [SystemAction]) {
        var effects = Effects()
        var leaving: [SessionID] = []
        var changing: [Entry] = []
        for entry in entries {
            guard let mode = modes[entry.session], mode != entry.mode else { continue }
            if mode == .off {
                leaving.append(entry.session)
            } else {
                // A change of form keeps the start waiting, if any (`insert`).
                var changed = entry.inMode(mode)
                changed.start = nil
                changing.append(changed)
            }
        }
        var returning: [Entry] = []
        for (i, entry) in paused.enumerated().reversed() {
            guard let mode = modes[entry.session], mode != .off else { continue }
            paused.remove(at: i)
            returning.insert(entry.inMode(mode), at: 0)
        }
        for session in leaving {
            guard var entry = take(session, &effects) else { continue }
            entry.mode = .off
            paused.append(entry)
        }
        for entry in changing + returning { insert(entry, &effects) }
        perform(effects, &actions)
        rotate(&actions)
    }

    /// The restored `new` advertises what `old` did, in its place; returns the start still waiting, if any (its
    /// answer now tells `new`).
    mutating func transfer(from old: SessionID, to new: SessionID) -> [AdvertisingStartID] {
        var waiting: [AdvertisingStartID] = []
        for i in entries.indices where entries[i].session == old {
            entries[i].session = new
            if let start = entries[i].start { waiting.append(start) }
        }
        for i in paused.indices where paused[i].session == old {
            paused[i].session = new
            if let start = paused[i].start { waiting.append(start) }
        }
        return waiting
    }

    // MARK: The controller

    /// The controller answered the request numbered `attempt`: every start waiting is answered when it
    /// advertises; when it refused, the sessions advertising exactly that leave the rotation (a start waiting
    /// hears why, one answered already is told its advertising ended), and the next one left goes on the air.
    /// The answer to a request overtaken since (by a later one, or a stop) changes nothing: the later one answers
    /// for itself.
    mutating func answered(_ attempt: UInt64, _ result: Result<Void, HostError>, _ actions: inout [SystemAction]) {
        guard attempt == self.attempt, let request = asked else { return }
        switch result {
        case .success:
            advertising = true
            for i in entries.indices {
                if let start = entries[i].start { actions.append(.advertisingStarted(start, nil)) }
                entries[i].start = nil
            }
        case .failure(let error) where error.code == .cancelled:
            return
        case .failure(let error):
            asked = nil
            let refused = entries.filter { $0.request == request }
            // The one after the refused current goes on the air: counted past the refused ones before it.
            let before = entries[..<min(current, entries.count)].filter { $0.request == request }.count
            entries.removeAll { $0.request == request }
            advertising = false
            current = entries.isEmpty ? 0 : (current - before) % entries.count
            for entry in refused {
                if let start = entry.start {
                    actions.append(.advertisingStarted(start, error))
                } else {
                    actions.append(.advertisingRefused(entry.origin, error))
                }
            }
            if !entries.isEmpty { ask(entries[current].request, &actions) }
        }
        rotate(&actions)
    }

    /// A central connected and the controller stopped advertising: it advertises again.
    mutating func interrupted(_ actions: inout [SystemAction]) {
        advertising = false
        if !entries.isEmpty { ask(entries[current].request, &actions) }
    }

    /// The controller went away, is reset, or Bluetooth was switched off: nothing advertises, and every start
    /// waiting hears why. A controller asked to advertise is told to stop, after that request (it may still be on
    /// its way, or reach a controller that comes back).
    mutating func reset(_ error: HostError, _ actions: inout [SystemAction]) {
        for entry in entries + paused {
            if let start = entry.start { actions.append(.advertisingStarted(start, error)) }
        }
        let wasAsked = asked != nil
        // The counters go on: a turn's timer may still fire, an answer may still come, a start id is never reused.
        let (turn, nextStart, attempt) = (self.turn + 1, self.nextStart, self.attempt)
        self = AdvertisingTable()
        self.turn = turn
        self.nextStart = nextStart
        self.attempt = attempt
        if wasAsked { stopController(&actions) }
    }

    /// The turn `token` is over: the next advertisement has the air.
    mutating func turnEnded(_ token: UInt64, _ actions: inout [SystemAction]) {
        guard token == turn, entries.count > 1 else { return }
        current = (current + 1) % entries.count
        ask(entries[current].request, &actions)
        rotate(&actions)
    }

    // MARK: The rotation

    private static let replaced = "a later start replaced this one"

    /// Puts `entry` in the rotation (replacing the session's earlier advertisement). An entry without a start (a
    /// change of form) keeps the one waiting, if any.
    private mutating func insert(_ entry: Entry, _ effects: inout Effects) {
        if let i = entries.firstIndex(where: { $0.session == entry.session }) {
            let waiting = entries[i].start
            var replacement = entry
            if replacement.start == nil { replacement.start = waiting }
            entries[i] = replacement
            if i == current { effects.requests.append(entry.request) }
            if entry.start != nil, let waiting { effects.overtaken.append(waiting) }
            return
        }
        entries.append(entry)
        if entries.count == 1 {
            current = 0
            effects.requests.append(entry.request)
        } else if advertising, let start = entry.start {
            // Joins a rotation already on the air: the system advertises for it now.
            entries[entries.count - 1].start = nil
            effects.joined.append(start)
        }
    }

    /// Takes `session` out of the rotation; returns its entry.
    private mutating func take(_ session: SessionID, _ effects: inout Effects) -> Entry? {
        guard let i = entries.firstIndex(where: { $0.session == session }) else { return nil }
        let removed = entries.remove(at: i)
        if entries.isEmpty {
            current = 0
            advertising = false
            effects.requests.append(nil)
            return removed
        }
        if i < current { current -= 1 }
        if i == current || current >= entries.count {
            current %= entries.count
            effects.requests.append(entries[current].request)
        }
        return removed
    }

    /// Answers and asks what `effects` says, in its order.
    private mutating func perform(_ effects: Effects, _ actions: inout [SystemAction]) {
        for start in effects.overtaken {
            actions.append(.advertisingStarted(start, HostError(.cancelled, Self.replaced)))
        }
        for start in effects.joined { actions.append(.advertisingStarted(start, nil)) }
        for request in effects.requests {
            if let request { ask(request, &actions) } else { stopController(&actions) }
        }
    }

    /// Asks the controller to advertise `request`, under a new number.
    private mutating func ask(_ request: AdvertisingRequest, _ actions: inout [SystemAction]) {
        attempt += 1
        asked = request
        actions.append(.startAdvertising(request, attempt: attempt))
    }

    /// Tells the controller to stop; an answer to an earlier request no longer counts.
    private mutating func stopController(_ actions: inout [SystemAction]) {
        attempt += 1
        asked = nil
        actions.append(.stopAdvertising)
    }

    /// A new turn: with two advertisements or more, the next one has the air after `slot`.
    private mutating func rotate(_ actions: inout [SystemAction]) {
        turn += 1
        if entries.count > 1 { actions.append(.startTimer(.advertisingTurn(turn), after: Self.slot)) }
    }
}
