import ArgumentParser
import BLECore
import BLEHCI
import BLETransport
import Foundation

/// `ble btsnoop FILE`: the HCI packets of a capture, one per line.
struct BTSnoopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "btsnoop",
        abstract: "Print the HCI packets of a btsnoop capture, one per line.",
        discussion: """
            Reads what 'ble controller --btsnoop' and BluetoothSystem.Configuration.btsnoop write, Android's HCI \
            snoop log, PacketLogger's btsnoop export and 'btmon -w' (datalinks 1001, 1002 and 2001). Each line: \
            the record's number, its time in seconds from the first record, who sent it (host or controller), \
            the packet's kind and what it is: a command's name, an event's name (the command a Command Complete \
            or Command Status answers, the LE subevent), an ACL packet's handle and boundary, then the \
            parameters or data in hex.
            With --json, one object per line:
              {"record": N, "time": <seconds from the first>, "unixMicroseconds": N, "from": "host" | "controller" | "system",
               "kind": "command" | "event" | "acl" | "sco" | "iso" | "undecodable" | "truncated" | "monitor",
               "summary": "<as the line>", "hex": "<the packet without its H4 indicator>"}
            A packet that does not decode is printed as undecodable with the reason, and reading goes on; a file \
            that is not btsnoop, or that is cut or corrupt part way, ends with an error naming the record and \
            its byte offset, after the records before it (exit status 1).
            """)

    @Argument(help: "The btsnoop file.")
    var file: String

    @Flag(help: "One JSON object per line.")
    var json = false

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
        while true {
            let record: BTSnoopReader.Record?
            do {
                record = try iterator.nextRecord()
            } catch {
                throw ToolError(.failure, "\(file): \(error)").report()
            }
            guard let record else { return }
            let start = first ?? record.unixMicroseconds
            first = start
            let line = Self.describe(record)
            // A monitor record (btmon's notes, adapters added) is neither side's packet.
            let from: String
            if case .monitor = record.content {
                from = "system"
            } else {
                from = record.direction == .sent ? "host" : "controller"
            }
            let seconds = Double(record.unixMicroseconds &- start) / 1_000_000
            if json {
                Output.line(
                    JSON.object([
                        ("record", .number(record.index)), ("time", .double(seconds)),
                        ("unixMicroseconds", .number(Int(record.unixMicroseconds))),
                        ("from", .string(from)),
                        ("kind", .string(line.kind)), ("summary", .string(line.summary)),
                        ("hex", .string(line.bytes.hexString)),
                    ]).text)
            } else {
                let kind = line.kind.padding(toLength: 11, withPad: " ", startingAt: 0)
                let data = line.bytes.isEmpty ? "" : "  \(line.bytes.hexString)"
                Output.line(
                    String(format: "%6d %12.6f  ", record.index, seconds)
                        + "\(from.padding(toLength: 10, withPad: " ", startingAt: 0))  \(kind) \(line.summary)\(data)")
            }
        }
    }

    /// What a record's line says: its kind, a summary, and the bytes to show after it.
    static func describe(_ record: BTSnoopReader.Record) -> (kind: String, summary: String, bytes: [UInt8]) {
        switch record.content {
        case .packet(.command(let command)):
            return ("command", "\(command.opcode)", command.parameters)
        case .packet(.event(let event)):
            return ("event", summary(of: event), event.parameters)
        case .packet(.acl(let acl)):
            return ("acl", "handle \(acl.handle) \(acl.packetBoundary)", acl.data)
        case .packet(.other(let type, let bytes)):
            return ("\(HCIPacketType(rawValue: type))".lowercased(), "\(bytes.count) octets", bytes)
        case .undecodable(let type, let bytes, let reason):
            return ("undecodable", "\(type.map { "\($0)" } ?? "no HCI packet"): \(reason)", bytes)
        case .truncated(let type, let bytes):
            let what = type.map { "\($0)" } ?? "packet"
            return ("truncated", "\(what), \(record.includedLength) of \(record.originalLength) octets kept", bytes)
        case .monitor(let opcode, let bytes):
            return ("monitor", "opcode \(opcode), adapter \(record.adapter)", bytes)
        }
    }

    /// An event's name, and for Command Complete and Command Status the command they answer, for LE Meta its
    /// subevent (Vol 4 Part E 7.7.14, 7.7.15, 7.7.65).
    private static func summary(of event: HCIEventPacket) -> String {
        let p = event.parameters
        switch event.code {
        case .commandComplete where p.count >= 3:
            let opcode = HCIOpcode(rawValue: UInt16(p[1]) | UInt16(p[2]) << 8)
            return "\(event.code): \(opcode)"
        case .commandStatus where p.count >= 4:
            let opcode = HCIOpcode(rawValue: UInt16(p[2]) | UInt16(p[3]) << 8)
            return "\(event.code): \(opcode), status 0x\(String(format: "%02X", p[0]))"
        case .leMeta where !p.isEmpty:
            return "\(event.code): \(HCILEMetaSubevent(rawValue: p[0]))"
        default:
            return "\(event.code)"
        }
    }
}
