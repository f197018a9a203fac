import ArgumentParser
import BLECore
import BLEHCI
import BLETransport
import Foundation

/// `ble btsnoop FILE`: the HCI packets of a capture, one per line.
struct BTSnoopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "btsnoop",
        abstract: "Decode the HCI packets of a btsnoop capture, one per line.",
        discussion: """
            Reads what '--btsnoop' (every command takes it), 'ble controller --btsnoop' and \
            BluetoothSystem.Configuration.btsnoop write, Android's HCI snoop log, PacketLogger's btsnoop export \
            and 'btmon -w' (datalinks 1001, 1002 and 2001). Each line: the record's number, its time in seconds \
            from the first record, who sent it (H>C: host to controller, C>H: controller to host), the connection \
            handle when the packet concerns a link, then the packet decoded as '--trace' prints it live: HCI \
            commands and events with their parameters by the Core Specification's names (Disconnection Complete \
            with its reason, LE Connection Complete with the peer's address and the link's parameters, advertising \
            reports with address, RSSI and AD structures), and ACL data as its L2CAP frame, ATT PDU or SMP \
            command once its fragments are whole (ATT Write Request handle 0x0012 value 01 00; SMP Pairing \
            Request io=NoInputNoOutput auth=bond,sc ...).
            Keys and secrets (LTK, IRK, CSRK, pairing random and confirm values, DHKey checks, public keys, LE \
            Encrypt's key and data, LE Rand's number) are shown as <redacted>, and the raw bytes of a packet that \
            holds one are not printed; --secrets shows them.
            --hex adds each packet's bytes after its line: a command's or event's parameters, an ACL packet's data.
            With --json, one object per line:
              {"record": N, "time": <seconds from the first>, "unixMicroseconds": N, "from": "host" | "controller" | "system",
               "kind": "command" | "event" | "acl" | "sco" | "iso" | "undecodable" | "truncated" | "monitor",
               "handle": N | null, "summary": "<the decoded packet, as the line>",
               "hex": "<parameters or data, as --hex>" | null (a packet holding a key, without --secrets)}
            A packet that does not decode is printed as undecodable with the reason, and reading goes on; a file \
            that is not btsnoop, or that is cut or corrupt part way, ends with an error naming the record and \
            its byte offset, after the records before it (exit status 1).
            """)

    @Argument(help: "The btsnoop file.")
    var file: String

    @Flag(help: "One JSON object per line.")
    var json = false

    @Flag(help: "Add each packet's bytes in hex after its line.")
    var hex = false

    @Flag(help: "Show keys, random numbers and confirm values instead of <redacted>.")
    var secrets = false

    /// A file that is not there is a usage error (64), as for every command that reads a file it is given; one
    /// that is there but is not a capture fails reading it (1).
    func validate() throws {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: file, isDirectory: &isFolder), !isFolder.boolValue,
            FileManager.default.isReadableFile(atPath: file)
        else { throw ValidationError("FILE '\(file)' is not a readable file") }
    }

    func run() throws {
        let reader: BTSnoopReader
        do {
            reader = try BTSnoopReader(path: file)
        } catch let error as TransportError {
            throw ToolError(.failure, error.message).report()
        } catch {
            throw ToolError(.failure, "\(file): \(error)").report()
        }
        var iterator = reader.makeIterator()
        var first: Int64?
        var decoder = PacketTrace(showsSecrets: secrets)
        while true {
            let record: BTSnoopReader.Record?
            do {
                record = try iterator.nextRecord()
            } catch {
                throw ToolError(.failure, "\(file): \(error)").report()
            }
            // Nobody reads any more (| head): the rest is not decoded.
            guard let record, !Output.isClosed else { return }
            let start = first ?? record.unixMicroseconds
            first = start
            let line = Self.describe(record, with: &decoder)
            // A monitor record (btmon's notes, adapters added) is neither side's packet.
            let from: String
            if case .monitor = record.content {
                from = "system"
            } else {
                from = record.direction == .sent ? "host" : "controller"
            }
            let seconds = Double(record.unixMicroseconds &- start) / 1_000_000
            let bytes = line.hidesBytes && !secrets ? nil : line.bytes.hexString
            if json {
                Output.line(
                    JSON.object([
                        ("record", .number(record.index)), ("time", .double(seconds)),
                        ("unixMicroseconds", .number(Int(record.unixMicroseconds))),
                        ("from", .string(from)),
                        ("kind", .string(line.kind)),
                        ("handle", line.handle.map { .number(Int($0.rawValue)) } ?? .null),
                        ("summary", .string(line.summary)), ("hex", .optional(bytes)),
                    ]).text)
            } else {
                let data = hex ? "  " + (bytes.map { $0.isEmpty ? "" : $0 } ?? "<redacted>") : ""
                let who: String
                if case .packet = record.content {
                    who = (record.direction == .sent ? PacketTrace.Direction.hostToController : .controllerToHost).label
                } else {
                    who = from
                }
                let handle = line.handle.map(\.description) ?? "      "
                Output.line(
                    String(format: "%6d %12.6f  ", record.index, seconds) + "\(who) \(handle) \(line.summary)\(data)")
            }
        }
    }

    /// What a record's line says: its kind, the link it concerns, a summary, the bytes, and whether the bytes hold
    /// a key (so they are hidden unless --secrets).
    static func describe(_ record: BTSnoopReader.Record, with decoder: inout PacketTrace) -> (
        kind: String, handle: ConnectionHandle?, summary: String, bytes: [UInt8], hidesBytes: Bool
    ) {
        let direction: PacketTrace.Direction = record.direction == .sent ? .hostToController : .controllerToHost
        switch record.content {
        case .packet(let packet):
            let line = decoder.describe(packet, direction: direction)
            let (kind, bytes): (String, [UInt8])
            switch packet {
            case .command(let command): (kind, bytes) = ("command", command.parameters)
            case .event(let event): (kind, bytes) = ("event", event.parameters)
            case .acl(let acl): (kind, bytes) = ("acl", acl.data)
            case .other(let type, let data): (kind, bytes) = ("\(HCIPacketType(rawValue: type))".lowercased(), data)
            }
            return (kind, line.handle, line.text, bytes, line.carriesSecret)
        case .undecodable(let type, let bytes, let reason):
            return ("undecodable", nil, "\(type.map { "\($0)" } ?? "no HCI packet"): \(reason)", bytes, false)
        case .truncated(let type, let bytes):
            let what = type.map { "\($0)" } ?? "packet"
            return (
                "truncated", nil, "\(what), \(record.includedLength) of \(record.originalLength) octets kept", bytes,
                false
            )
        case .monitor(let opcode, let bytes):
            return ("monitor", nil, "opcode \(opcode), adapter \(record.adapter)", bytes, false)
        }
    }
}
