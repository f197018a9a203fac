import BLECore
import BLEHCI
import BLEHost

/// A write of a Client Characteristic Configuration descriptor the system made for a session's wish, until the
/// peer answers it (`SubscriptionTable`).
package struct DescriptorWriteID: RawRepresentable, Hashable, Sendable {
    package let rawValue: UInt64
    package init(rawValue: UInt64) { self.rawValue = rawValue }
}

/// What a session's wish for a descriptor came to at once.
package enum SubscriptionAnswer: Sendable, Hashable {
    /// The peer already holds what every session wants together: nothing to write.
    case done
    /// The session is not on the link (it left, or the link went down).
    case notOnLink
    /// The descriptor is to be written with this value, by the caller at once (so it reaches the peer in the
    /// order of the caller's other requests); `subscriptionWritten` is stepped with the peer's answer.
    case write(DescriptorWriteID, UInt16)
    /// A write on its way writes what is wanted now: the session waits for its answer.
    case joined(DescriptorWriteID)
}

/// Notifications and indications on the shared central-role links, as one Client Characteristic Configuration per
/// characteristic and link, as a value of `SystemMachine`.
///
/// ### Function
/// Each session says what it wants of a descriptor (nothing, notifications, indications), and the descriptor is
/// written whenever what the sessions want together differs from what the peer holds or is being written: a
/// second app's subscribe writes nothing once the first's was accepted (and waits for the first's write while it
/// is on its way), and one app's unsubscribe does not end another's (Core Spec 5.4, Vol 3, Part G, 3.3.3.3). A
/// write the peer refuses takes back the wishes it was made for, so a later attempt (after pairing, say) writes
/// again; a session that asked again meanwhile keeps its newer wish. A session that leaves a link others stay on
/// no longer counts, and the descriptors only it wanted are written on the system's account. When a write is
/// accepted and what the sessions want changed meanwhile, the descriptor is written again on the system's
/// account, so that whenever no write is on its way and none was refused the peer holds what the sessions want
/// together.
///
/// ### Implementation
/// Kept by link and descriptor: each session's wish, the value the peer accepted, and the newest write on its
/// way. A write remembers the sessions waiting for it, with what each wanted before, for its refusal.
package struct SubscriptionTable: Sendable, Hashable {
    struct Key: Hashable, Sendable {
        var link: ConnectionHandle
        var descriptor: AttributeHandle
    }

    struct Entry: Hashable, Sendable {
        var wants: [SessionID: UInt16] = [:]
        /// The value handle of the characteristic the descriptor configures, when the session said it.
        var characteristic: AttributeHandle?
        /// What the peer last accepted (0 until a write succeeds).
        var accepted: UInt16 = 0
        /// The newest write on its way.
        var newest: InFlight?
        var union: UInt16 { wants.values.reduce(0, |) }
        /// What the peer holds once the writes on their way are done.
        var target: UInt16 { newest?.value ?? accepted }
    }

    /// A write on its way, and the value it writes.
    struct InFlight: Hashable, Sendable {
        var id: DescriptorWriteID
        var value: UInt16
    }

    struct Waiter: Hashable, Sendable {
        var session: SessionID
        /// What the session wanted before: its wish again if the write is refused.
        var previous: UInt16
    }

    struct Write: Hashable, Sendable {
        var key: Key
        var value: UInt16
        var waiters: [Waiter]
    }

    private var entries: [Key: Entry] = [:]
    private var writes: [DescriptorWriteID: Write] = [:]
    private var nextWrite: UInt64 = 1

    package init() {}

    /// What `session` wants of the descriptor at `descriptor` on `link`.
    package func wish(of session: SessionID, descriptor: AttributeHandle, on link: ConnectionHandle) -> UInt16? {
        entries[Key(link: link, descriptor: descriptor)]?.wants[session]
    }

    /// The writes on their way.
    package var writesInFlight: Int { writes.count }

    /// Whether `session` wants the notifications or indications of the characteristic whose value is at `value`
    /// on `link` (a kept session is relaunched for them: IOSRules.md 5.10).
    package func subscribes(_ session: SessionID, to value: AttributeHandle, on link: ConnectionHandle) -> Bool {
        entries.contains { $0.key.link == link && $0.value.characteristic == value && $0.value.wants[session] != nil }
    }

    /// `session` wants `value` (0, 1 notify, 2 indicate) in the descriptor: done at once, or waiting for a write
    /// (a new one, or the one on its way that writes what is wanted now).
    mutating func set(
        _ value: UInt16, by session: SessionID, descriptor: AttributeHandle, characteristic: AttributeHandle? = nil,
        on link: ConnectionHandle, _ actions: inout [SystemAction]
    ) -> SubscriptionAnswer {
        let key = Key(link: link, descriptor: descriptor)
        var entry = entries[key] ?? Entry()
        if let characteristic { entry.characteristic = characteristic }
        let waiter = Waiter(session: session, previous: entry.wants[session] ?? 0)
        entry.wants[session] = value == 0 ? nil : value
        defer { entries[key] = entry }
        if entry.union == entry.target {
            guard let newest = entry.newest else { return .done }
            writes[newest.id]?.waiters.append(waiter)
            return .joined(newest.id)
        }
        let id = track(key, &entry, waiters: [waiter])
        return .write(id, entry.union)
    }

    /// The write `id` ended: accepted (the peer holds its value), or refused (the wishes it was made for go back
    /// to what they were). Whoever waited for it is answered either way.
    mutating func written(_ id: DescriptorWriteID, error: HostError?, _ actions: inout [SystemAction]) {
        guard let write = writes.removeValue(forKey: id) else { return }
        actions.append(.subscriptionWritten(id, error))
        guard var entry = entries[write.key] else { return }
        if entry.newest?.id == id { entry.newest = nil }
        if error == nil {
            entry.accepted = write.value
            // What is wanted changed while this write was on its way, and nothing newer writes it.
            if entry.newest == nil, entry.union != entry.accepted {
                self.write(write.key, &entry, &actions)
            }
        } else {
            // Newest first, so a session that waited twice gets back what it wanted before the first time.
            for waiter in write.waiters.reversed() { refused(waiter, after: id, on: write.key, &entry) }
        }
        entries[write.key] = entry
    }

    /// A write `waiter` waited for was refused: its session's wish goes back to what it was before, unless the
    /// session asked again since (it waits in a newer write on the descriptor): that newer wish stands, and goes
    /// back to the same value if it is refused too.
    private mutating func refused(_ waiter: Waiter, after id: DescriptorWriteID, on key: Key, _ entry: inout Entry) {
        let newer = writes.filter { $0.key.rawValue > id.rawValue && $0.value.key == key }
            .filter { $0.value.waiters.contains { $0.session == waiter.session } }.keys
            .min { $0.rawValue < $1.rawValue }
        if let newer, let i = writes[newer]?.waiters.firstIndex(where: { $0.session == waiter.session }) {
            writes[newer]!.waiters[i].previous = waiter.previous
        } else {
            entry.wants[waiter.session] = waiter.previous == 0 ? nil : waiter.previous
        }
    }

    /// A write of what is wanted now, on its way from here (the caller, or the action, writes it).
    private mutating func track(_ key: Key, _ entry: inout Entry, waiters: [Waiter]) -> DescriptorWriteID {
        let id = DescriptorWriteID(rawValue: nextWrite)
        nextWrite += 1
        writes[id] = Write(key: key, value: entry.union, waiters: waiters)
        entry.newest = InFlight(id: id, value: entry.union)
        return id
    }

    /// A write on the system's account (no session waits for it), as an action.
    private mutating func write(_ key: Key, _ entry: inout Entry, _ actions: inout [SystemAction]) {
        let id = track(key, &entry, waiters: [])
        actions.append(.writeDescriptor(key.link, key.descriptor, entry.union, id))
    }

    /// `session` left `link` (others stay on it): what it wanted no longer counts (nor does a refusal give it
    /// back), and the descriptors only it wanted are written on the system's account.
    mutating func leave(_ session: SessionID, link: ConnectionHandle, _ actions: inout [SystemAction]) {
        for (id, write) in writes where write.key.link == link {
            writes[id]?.waiters.removeAll { $0.session == session }
        }
        let mine = entries.filter { $0.key.link == link && $0.value.wants[session] != nil }.keys
            .sorted { $0.descriptor < $1.descriptor }
        for key in mine {
            var entry = entries[key]!
            entry.wants[session] = nil
            if entry.union != entry.target { write(key, &entry, &actions) }
            entries[key] = entry
        }
    }

    /// The link went down: nothing is subscribed on it any more; a write on its way there ends with the link's
    /// failure, which the host reports, and is answered then.
    mutating func linkDown(_ link: ConnectionHandle) {
        entries = entries.filter { $0.key.link != link }
    }

    /// What `old` wants becomes what `new` wants (a restored session taking over), and so do its waits.
    mutating func transfer(from old: SessionID, to new: SessionID) {
        for (key, var entry) in entries {
            guard let wanted = entry.wants.removeValue(forKey: old) else { continue }
            entry.wants[new] = wanted
            entries[key] = entry
        }
        for (id, write) in writes where write.waiters.contains(where: { $0.session == old }) {
            writes[id]?.waiters = write.waiters.map { w in
                w.session == old ? Waiter(session: new, previous: w.previous) : w
            }
        }
    }

    /// The controller went away: nothing is subscribed anywhere. Writes on their way are kept until the host ends
    /// them (it fails every pending request with the transport's end), so whoever waits for them is answered.
    mutating func reset() {
        entries = [:]
    }
}
