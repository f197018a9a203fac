import BLECore
import BLEHost
import Synchronization

/// Notifications and indications on a shared link, as one Client Characteristic Configuration per characteristic
/// (Arbitration/SharedSubscriptions.swift): each app says what it wants (nothing, notifications or indications),
/// and the descriptor is written whenever what the apps want together differs from what the peer last accepted.
/// So a second app's subscribe writes nothing once the first's was accepted, and one app's unsubscribe does not
/// end another's (Core Spec 5.4, Vol 3, Part G, 3.3.3.3). A write the peer refuses takes back the wish it was
/// made for, so a later attempt (after pairing, say) writes again.
final class SharedSubscriptions: Sendable {
    private struct Key: Hashable {
        var link: ConnectionHandle
        var descriptor: AttributeHandle
    }

    private struct Entry {
        var wants: [ObjectIdentifier: UInt16] = [:]
        /// What the peer last accepted (0 until a write succeeds).
        var accepted: UInt16 = 0
        var union: UInt16 { wants.values.reduce(0, |) }
    }

    private let state = Mutex<[Key: Entry]>([:])

    /// `client` wants `value` (0, 1 notify, 2 indicate) in the descriptor at `descriptor` on `link`. Returns the
    /// value to write when what everyone wants differs from what the peer accepted; nil when the peer already
    /// holds it. `previous` is the client's earlier wish, for `written` to restore if the write fails.
    func set(_ value: UInt16, by client: ObjectIdentifier, descriptor: AttributeHandle, on link: ConnectionHandle)
        -> (write: UInt16?, previous: UInt16)
    {
        state.withLock { s in
            let key = Key(link: link, descriptor: descriptor)
            var entry = s[key] ?? Entry()
            let previous = entry.wants[client] ?? 0
            entry.wants[client] = value == 0 ? nil : value
            s[key] = entry
            return (entry.union == entry.accepted ? nil : entry.union, previous)
        }
    }

    /// The write of `value` made for `client` ended: accepted, or refused (the client's wish goes back to
    /// `previous`).
    func written(
        _ value: UInt16, accepted: Bool, for client: ObjectIdentifier, previous: UInt16, descriptor: AttributeHandle,
        on link: ConnectionHandle
    ) {
        state.withLock { s in
            let key = Key(link: link, descriptor: descriptor)
            guard var entry = s[key] else { return }
            if accepted {
                entry.accepted = value
            } else {
                entry.wants[client] = previous == 0 ? nil : previous
            }
            s[key] = entry
        }
    }

    /// `client` left `link` (or went away): what it wanted no longer counts. Returns the descriptors to write.
    func leave(_ client: ObjectIdentifier, link: ConnectionHandle) -> [(AttributeHandle, UInt16)] {
        state.withLock { s in
            var writes: [(AttributeHandle, UInt16)] = []
            for (key, var entry) in s where key.link == link && entry.wants[client] != nil {
                entry.wants[client] = nil
                if entry.union != entry.accepted {
                    writes.append((key.descriptor, entry.union))
                    entry.accepted = entry.union  // written on the system's account: taken as accepted
                }
                s[key] = entry
            }
            return writes.sorted { $0.0 < $1.0 }
        }
    }

    /// The link went down: nothing is subscribed on it any more.
    func linkDown(_ link: ConnectionHandle) {
        state.withLock { s in s = s.filter { $0.key.link != link } }
    }

    func reset() { state.withLock { $0 = [:] } }

    /// What `old` wants becomes what `new` wants (a restored manager taking over).
    func transfer(from old: ObjectIdentifier, to new: ObjectIdentifier) {
        state.withLock { s in
            for (key, var entry) in s {
                guard let wanted = entry.wants.removeValue(forKey: old) else { continue }
                entry.wants[new] = wanted
                s[key] = entry
            }
        }
    }
}
