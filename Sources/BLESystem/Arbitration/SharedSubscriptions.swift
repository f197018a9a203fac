import BLECore
import BLEHost
import Synchronization

/// Notifications and indications on a shared link, as one Client Characteristic Configuration per characteristic
/// (Arbitration/SharedSubscriptions.swift): each app says what it wants (nothing, notifications or indications),
/// and the descriptor is written only when what the apps want together changes. So a second app's subscribe
/// writes nothing, and one app's unsubscribe does not end another's (Core Spec 5.4, Vol 3, Part G, 3.3.3.3).
final class SharedSubscriptions: Sendable {
    private struct Key: Hashable {
        var link: ConnectionHandle
        var descriptor: AttributeHandle
    }

    private let state = Mutex<[Key: [ObjectIdentifier: UInt16]]>([:])

    /// What the descriptor holds for everyone on the link: the union of the apps' bits.
    private static func union(_ wants: [ObjectIdentifier: UInt16]?) -> UInt16 {
        (wants ?? [:]).values.reduce(0, |)
    }

    /// `client` wants `value` (0, 1 notify, 2 indicate) in the descriptor at `descriptor` on `link`. Returns the
    /// value to write when what everyone wants changed, nil when the descriptor already holds it.
    func set(_ value: UInt16, by client: ObjectIdentifier, descriptor: AttributeHandle, on link: ConnectionHandle)
        -> UInt16?
    {
        state.withLock { s in
            let key = Key(link: link, descriptor: descriptor)
            let before = Self.union(s[key])
            var wants = s[key] ?? [:]
            wants[client] = value == 0 ? nil : value
            s[key] = wants.isEmpty ? nil : wants
            let after = Self.union(s[key])
            return after == before ? nil : after
        }
    }

    /// `client` left `link` (or went away): what it wanted no longer counts. Returns the descriptors to write.
    func leave(_ client: ObjectIdentifier, link: ConnectionHandle) -> [(AttributeHandle, UInt16)] {
        state.withLock { s in
            var writes: [(AttributeHandle, UInt16)] = []
            for (key, wants) in s where key.link == link && wants[client] != nil {
                let before = Self.union(wants)
                var rest = wants
                rest[client] = nil
                s[key] = rest.isEmpty ? nil : rest
                let after = Self.union(s[key])
                if after != before { writes.append((key.descriptor, after)) }
            }
            return writes.sorted { $0.0 < $1.0 }
        }
    }

    /// The link went down: nothing is subscribed on it any more.
    func linkDown(_ link: ConnectionHandle) {
        state.withLock { s in s = s.filter { $0.key.link != link } }
    }

    func reset() { state.withLock { $0 = [:] } }
}
