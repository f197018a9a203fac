import BLECore
import BLESystem
import Foundation

/// A device the system has reported to an app, as its store keeps it (our own API, not CoreBluetooth's).
public struct KnownPeripheral: Sendable, Hashable {
    /// The identifier apps know it by.
    public var identifier: UUID
    /// The name it last advertised, if any.
    public var name: String?
    /// The address it was last heard from.
    public var address: BluetoothAddress
    /// When a scan last reported it or an app last connected to it (in a simulation: virtual time from
    /// 2026-01-01T00:00:00Z).
    public var lastSeen: Date

    init(_ peer: SystemStore.KnownPeer) {
        identifier = peer.identifier
        name = peer.name
        address = peer.address
        lastSeen = Date(timeIntervalSince1970: TimeInterval(peer.lastSeen))
    }
}

extension BluetoothSystem {
    /// The devices this system knows (its store: at most 1,000, the most recently seen first).
    public var knownPeripherals: [KnownPeripheral] { core.store.knownPeers.map(KnownPeripheral.init) }

    /// Writes what the store batched (devices' rows, names, last-seen times and GATT caches) now, and returns once
    /// it is on disk, as a process about to end does when it does not `shutDown()`. An identifier needs no
    /// write to stay the same: it is derived from the device's address under the store's key.
    public func flushStore() { core.store.flush() }

    /// The devices a system store file knows, read without a system (for a tool that lists them).
    ///
    /// - Throws: `BluetoothError` `.storeUnavailable`, naming the file, when it cannot be used.
    public static func knownPeripherals(inStoreAt path: String) throws(BluetoothError) -> [KnownPeripheral] {
        let store: SystemStore
        do {
            // Read as it is: nothing is aged out by this reader's clock.
            store = try SystemStore(path: path, ageing: false, now: { Int64(Date().timeIntervalSince1970) })
        } catch {
            throw BluetoothError(.storeUnavailable, error.description)
        }
        defer { store.close() }
        return store.knownPeers.map(KnownPeripheral.init)
    }

    /// Forgets a device in a system store file, without a system: its identifier, name, GATT cache and bond; the
    /// next report of it gives it a new identifier. Whether the store knew it. A system running on the file
    /// meanwhile keeps the device in its memory until it opens the store again.
    ///
    /// - Throws: `BluetoothError` `.storeUnavailable`, naming the file, when it cannot be used.
    @discardableResult
    public static func forgetPeripheral(_ identifier: UUID, inStoreAt path: String) throws(BluetoothError) -> Bool {
        let store: SystemStore
        do {
            store = try SystemStore(path: path, ageing: false, now: { Int64(Date().timeIntervalSince1970) })
        } catch {
            throw BluetoothError(.storeUnavailable, error.description)
        }
        defer { store.close() }
        return store.removePeer(identifier)
    }
}
