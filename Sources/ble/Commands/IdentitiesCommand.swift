import ArgumentParser
import BLE
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `ble identities`: the tool's own devices, one store each (`ble` for the central every command uses, one per
/// name `ble serve` served), and forgetting them. Each store holds a device's identity (its IRK and static
/// address, as a phone keeps one), its bonds and the devices it knew: a name served once keeps its store until
/// it is forgotten here.
struct IdentitiesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identities",
        abstract: "List the tool's own devices (one store each: ble, and each name ble serve served), or forget one.",
        discussion: """
            Each line: the store's name, its bonds, its size, when it was last used, and 'in use' while a process \
            (a running ble serve) holds it. With --json, one object per line: {"name", "file", "bonds", "bytes", \
            "lastUsed", "inUse"}. 'ble identities forget NAME' deletes a store (the device comes back with a new \
            identity and no bonds); a store in use is refused (status 2).
            """,
        subcommands: [IdentitiesList.self, IdentitiesForget.self],
        defaultSubcommand: IdentitiesList.self)

    struct Store {
        var name: String
        var path: String
        var bonds: Int?
        var bytes: Int
        var lastUsed: Date
        var inUse: Bool
    }

    /// The stores in the tool's state folder, the most recently used first.
    static func stores() throws -> [Store] {
        guard let folder = try StateDirectory.folder() else { return [] }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
        return files.filter { $0.hasSuffix(".sqlite") }.map { file -> Store in
            let path = folder + "/" + file
            var bytes = 0
            var lastUsed = Date(timeIntervalSince1970: 0)
            for suffix in ["", "-wal", "-shm"] {
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: path + suffix) else {
                    continue
                }
                bytes += (attributes[.size] as? Int) ?? 0
                if let modified = attributes[.modificationDate] as? Date, modified > lastUsed { lastUsed = modified }
            }
            let inUse = held(path)
            // A store in use is not opened here (its process writes it); one that cannot be read shows no count.
            let bonds = inUse ? nil : (try? BluetoothSystem.bonds(inStoreAt: path))?.count
            return Store(
                name: String(file.dropLast(".sqlite".count)), path: path, bonds: bonds, bytes: bytes,
                lastUsed: lastUsed, inUse: inUse)
        }.sorted { $0.lastUsed > $1.lastUsed }
    }

    /// Whether a process holds the store: any command using it holds its lock (shared for the tool's central,
    /// exclusive for a served device). Looked at with a shared lock, which only a served device's excludes; the
    /// central's users are seen by `forget`, which takes the lock whole.
    static func held(_ path: String) -> Bool {
        guard let lock = try? StateDirectory.lockPath(for: path) else { return false }
        let fd = open(lock, O_RDWR | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard flock(fd, LOCK_SH | LOCK_NB) == 0 else { return true }
        flock(fd, LOCK_UN)
        return false
    }

    /// Takes the store whole (no process may use it meanwhile) and returns the lock's descriptor to close once
    /// the store is deleted; nil when a process holds it.
    static func takeWhole(_ path: String) -> Int32? {
        guard let lock = try? StateDirectory.lockPath(for: path) else { return nil }
        let fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return nil }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            close(fd)
            return nil
        }
        return fd
    }
}

/// `ble identities [list]`.
struct IdentitiesList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the tool's own devices' stores, the most recently used first.")

    @Flag(help: "One JSON object per line.")
    var json = false

    func run() async throws {
        let stores = try IdentitiesCommand.stores()
        let format = ISO8601DateFormatter()
        if !json, !stores.isEmpty {
            Output.line("NAME                 BONDS  SIZE       LAST USED             ")
        }
        for store in stores {
            let used = format.string(from: store.lastUsed)
            if json {
                Output.line(
                    JSON.object([
                        ("name", .string(store.name)), ("file", .string(store.path)),
                        ("bonds", store.bonds.map { .number($0) } ?? .null), ("bytes", .number(store.bytes)),
                        ("lastUsed", .string(used)), ("inUse", .bool(store.inUse)),
                    ]).text)
            } else {
                let bonds = store.bonds.map(String.init) ?? "-"
                Output.line(
                    store.name.padding(toLength: max(20, store.name.count), withPad: " ", startingAt: 0) + " "
                        + bonds.padding(toLength: 6, withPad: " ", startingAt: 0) + " "
                        + "\(store.bytes / 1024) KiB".padding(toLength: 10, withPad: " ", startingAt: 0) + " " + used
                        + (store.inUse ? "  in use" : ""))
            }
        }
    }
}

/// `ble identities forget NAME|--all`.
struct IdentitiesForget: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "forget",
        abstract: "Delete a device's store: its identity, bonds and known devices (a new identity next time).",
        discussion: """
            NAME is the name 'ble identities' lists, or the name given to ble serve. Prints 'forgot NAME (FILE)'. \
            A store in use by a running process is refused (status 2); a NAME with no store is status 3.
            """)

    @Argument(help: ArgumentHelp("The store's name (as listed), or the name served.", valueName: "name"))
    var name: String?

    @Flag(help: "Every store that is not in use.")
    var all = false

    func validate() throws {
        guard (name == nil) != !all else { throw ValidationError("give NAME or --all (one of them)") }
    }

    func run() async throws {
        let stores = try IdentitiesCommand.stores()
        let chosen: [IdentitiesCommand.Store]
        if let name {
            let file = StateDirectory.fileName(name)
            guard let store = stores.first(where: { $0.name == name || $0.name == file }) else {
                throw ToolError(.noSuchDevice, "no store named '\(name)' (ble identities lists them)")
            }
            chosen = [store]
        } else {
            chosen = stores
        }
        for store in chosen {
            // Taken whole while it is deleted: a running command (a serve, a shell, a scan) keeps it.
            guard let lock = IdentitiesCommand.takeWhole(store.path) else {
                if name != nil {
                    throw ToolError(.transport, "'\(store.name)' is in use by a running process: stop it first")
                }
                Output.error("'\(store.name)' is in use: kept")
                continue
            }
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store.path + suffix) }
            close(lock)
            Output.line("forgot \(store.name) (\(store.path))")
        }
    }
}
