import ArgumentParser
import BLE
import Foundation

/// `ble bonds`: the bonds the tool's store keeps, and forgetting them.
struct BondsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bonds",
        abstract: "List the bonds the tool keeps (its store), or remove them.",
        discussion: """
            A bond is what a bonding pairing leaves (ble pair, or a value that needed encryption): the keys that \
            encrypt the next link without pairing again. They are kept in the tool's store, \
            $XDG_STATE_HOME/swift-ble/ble.sqlite, with the devices 'ble devices' lists.
            """,
        subcommands: [BondsList.self, BondsRemove.self],
        defaultSubcommand: BondsList.self)

    /// The tool's store, or nil when it has none yet (nothing was ever bonded).
    static func storePath() throws -> String? {
        guard let path = try StateDirectory.storePath(forDevice: "ble"), FileManager.default.fileExists(atPath: path)
        else { return nil }
        return path
    }
}

/// `ble bonds [list]`.
struct BondsList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the bonds, the oldest first.",
        discussion: """
            One row per bond under a header: the peer's identifier, its identity address, the security (SC for \
            Secure Connections or legacy, then authenticated or unauthenticated), the key size, when it was made \
            (UTC) and the name last seen. Nothing is printed when there is no bond. With --json, one object per \
            line:
              {"identifier": "<UUID>", "address": "AA:BB:CC:DD:EE:FF", "addressType": "public" | "random",
               "name": "<name>" | null, "secureConnections": true | false, "authenticated": true | false,
               "keySize": 7...16, "resolvesPrivateAddresses": true | false, "created": "<ISO 8601>"}
            Times are the clock of the system that paired: the wall clock on the shared room and real controllers, \
            virtual time from 2026-01-01T00:00:00Z on --transport virtual.
            """)

    @Flag(help: "One JSON object per line.")
    var json = false

    func run() async throws {
        let bonds: [Bond]
        do {
            guard let path = try BondsCommand.storePath() else { return }
            bonds = try BluetoothSystem.bonds(inStoreAt: path)
        } catch let error as BluetoothError {
            throw ToolError.storeUnavailable(error).report()
        }
        let format = ISO8601DateFormatter()
        if json {
            for bond in bonds {
                let object: JSON = .object([
                    ("identifier", .string(bond.identifier.uuidString)),
                    ("address", .string(bond.identityAddress.string)),
                    ("addressType", .string(bond.identityAddress.type.isRandom ? "random" : "public")),
                    ("name", .optional(bond.name)), ("secureConnections", .bool(bond.secureConnections)),
                    ("authenticated", .bool(bond.authenticated)), ("keySize", .number(bond.keySize)),
                    ("resolvesPrivateAddresses", .bool(bond.resolvesPrivateAddresses)),
                    ("created", .string(format.string(from: bond.created))),
                ])
                Output.line(object.text)
            }
            return
        }
        guard !bonds.isEmpty else { return }
        let rows =
            [["IDENTIFIER", "ADDRESS", "SECURITY", "KEY", "CREATED", "NAME"]]
            + bonds.map { bond in
                [
                    bond.identifier.uuidString, bond.identityAddress.string,
                    "\(bond.secureConnections ? "SC" : "legacy"), "
                        + (bond.authenticated ? "authenticated" : "unauthenticated"),
                    "\(bond.keySize)", format.string(from: bond.created), bond.name ?? "(no name)",
                ]
            }
        let widths = (0..<5).map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows {
            let padded = (0..<5).map { row[$0].padding(toLength: widths[$0], withPad: " ", startingAt: 0) }
            Output.line((padded + [row[5]]).joined(separator: "  "))
        }
    }
}

/// `ble bonds remove`.
struct BondsRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove",
        abstract: "Forget a bond (by identifier or identity address), or every bond with --all.",
        discussion: """
            The device stays known (ble devices), without a bond: the next link to it is not encrypted until the \
            two pair again, and a device that kept its half may refuse the new keys until it forgets it too. \
            Prints 'removed the bond with IDENTIFIER (ADDRESS)' per bond. A PEER that names no bond is an error \
            (status 10). A ble process running meanwhile keeps the bond until it ends.
            """)

    @Argument(
        help: ArgumentHelp("The bond's peer: its identifier (UUID) or identity address.", valueName: "peer"))
    var peer: String?

    @Flag(help: "Remove every bond.")
    var all = false

    func validate() throws {
        switch (peer, all) {
        case (nil, false): throw ValidationError("give the bond's PEER (identifier or address), or --all")
        case (_?, true): throw ValidationError("give PEER or --all, not both")
        case (let text?, false):
            guard UUID(uuidString: text) != nil || BluetoothAddress(string: text) != nil else {
                throw ValidationError(
                    "'\(text)' is neither an identifier (UUID) nor an address (AA:BB:CC:DD:EE:FF)")
            }
        default: break
        }
    }

    func run() async throws {
        do {
            let path = try BondsCommand.storePath()
            let bonds = try path.map { path throws(BluetoothError) in try BluetoothSystem.bonds(inStoreAt: path) } ?? []
            let chosen: [Bond]
            if all {
                chosen = bonds
            } else {
                let text = peer ?? ""
                let identifier = UUID(uuidString: text)
                let address = BluetoothAddress(string: text)
                chosen = bonds.filter { bond in
                    bond.identifier == identifier || address.map { $0.bytes == bond.identityAddress.bytes } == true
                }
                guard !chosen.isEmpty else {
                    throw ToolError(.noSuchBond, "no bond with \(text) (ble bonds lists them)").report()
                }
            }
            for bond in chosen {
                guard let path, try BluetoothSystem.removeBond(for: bond.identifier, inStoreAt: path) else { continue }
                Output.line("removed the bond with \(bond.identifier.uuidString) (\(bond.identityAddress.string))")
            }
        } catch let error as BluetoothError {
            throw ToolError.storeUnavailable(error).report()
        }
    }
}
