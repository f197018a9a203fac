import BLECore
import BLESystem
import Foundation

/// The system's bonds, as Settings shows and forgets them on a phone (swift-ble extensions: iOS gives apps no
/// access to them).
extension BluetoothSystem {
    /// Every bond this system keeps, the oldest first.
    public var bonds: [Bond] { Self.bonds(of: core.store) }

    /// Forgets the bond with the peer `identifier` names, at once, here and in the store: the next link to it is
    /// not encrypted until the two pair again (and a peer that kept its half refuses to encrypt with this side's
    /// new keys until it forgets it too). A link up now stays as it is. Whether there was a bond.
    @discardableResult
    public func removeBond(for identifier: UUID) -> Bool {
        let removed = core.store.removeBond(identifier)
        // Its private addresses are no longer resolved to it.
        core.security.refreshResolvingList()
        return removed
    }

    /// The bonds a system store file keeps, read without a system (for a tool that lists them), the oldest first.
    ///
    /// - Throws: `BluetoothError` `.storeUnavailable`, naming the file, when it cannot be used.
    public static func bonds(inStoreAt path: String) throws(BluetoothError) -> [Bond] {
        let store = try openStore(at: path)
        defer { store.close() }
        return bonds(of: store)
    }

    /// Forgets a bond in a system store file, without a system; whether there was one. A system running on the
    /// file meanwhile keeps the bond in its memory until it opens the store again.
    ///
    /// - Throws: `BluetoothError` `.storeUnavailable`, naming the file, when it cannot be used.
    @discardableResult
    public static func removeBond(for identifier: UUID, inStoreAt path: String) throws(BluetoothError) -> Bool {
        let store = try openStore(at: path)
        defer { store.close() }
        return store.removeBond(identifier)
    }

    private static func bonds(of store: SystemStore) -> [Bond] {
        store.bonds.map { Bond($0, name: store.knownPeer($0.identifier)?.name) }
    }

    private static func openStore(at path: String) throws(BluetoothError) -> SystemStore {
        do {
            // Read as it is: nothing is aged out by this reader's clock.
            return try SystemStore(path: path, ageing: false, now: { Int64(Date().timeIntervalSince1970) })
        } catch {
            throw BluetoothError(.storeUnavailable, error.description)
        }
    }
}
