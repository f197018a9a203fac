import Foundation
import GRDB

/// The store's tables as GRDB records, for the writes the store makes (the tables themselves are made by the
/// migrations in `SystemStore.swift`, whose SQL never changes once applied; loading at open reads rows one by
/// one, so that a damaged row is logged and skipped rather than failing the whole load).

/// A row of `peer` (migration "v1: peers"): an identifier given to an address, with its last name and when it
/// was last seen.
struct PeerRow: Codable, TableRecord, PersistableRecord {
    static let databaseTableName = "peer"
    enum Columns {
        static let identifier = Column(CodingKeys.identifier)
        static let address = Column(CodingKeys.address)
        static let addressType = Column(CodingKeys.addressType)
        static let name = Column(CodingKeys.name)
        static let lastSeen = Column(CodingKeys.lastSeen)
    }
    var identifier: String
    var address: Data
    var addressType: Int64
    var name: String?
    var lastSeen: Int64

    /// Writes a known peer's name and last-seen time into its row; a row gone meanwhile (another process forgot
    /// the peer) is left gone.
    static func updateSeen(_ peer: SystemStore.KnownPeer, _ db: Database) throws {
        try filter(key: peer.identifier.uuidString).updateAll(
            db, [Columns.name.set(to: peer.name), Columns.lastSeen.set(to: peer.lastSeen)])
    }
}

/// A row of `gattCache` (migration "v2: gatt cache"): what was discovered of a peer's database, under its
/// hash.
struct GATTCacheRow: Codable, TableRecord, PersistableRecord {
    static let databaseTableName = "gattCache"
    var identifier: String
    var hash: Data
    var record: Data

    /// Keeps `cache` for the peer (replacing what was kept), or forgets it (nil).
    static func set(_ cache: SystemStore.GATTCache?, for identifier: UUID, _ db: Database) throws {
        if let cache {
            try GATTCacheRow(identifier: identifier.uuidString, hash: Data(cache.hash), record: Data(cache.record))
                .insert(db, onConflict: .replace)
        } else {
            try deleteOne(db, key: identifier.uuidString)
        }
    }
}
