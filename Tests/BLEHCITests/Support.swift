import BLECore
import BLEHCI
import NIOCore
import Testing

/// A random static address, C0:11:22:33:44:55; on the wire 55 44 33 22 11 C0.
let randomPeer = BluetoothAddress(string: "C0:11:22:33:44:55", type: .randomDevice)!
/// A public address, 00:1B:DC:01:02:03; on the wire 03 02 01 DC 1B 00.
let publicAddress = BluetoothAddress(string: "00:1B:DC:01:02:03", type: .publicDevice)!
/// The connection handle used throughout: 0x0040, on the wire 40 00.
let handle40 = ConnectionHandle(0x0040)

/// Compares a concrete command with a decoded existential.
func commandsEqual<A: HCICommand>(_ a: A, _ b: any HCICommand) -> Bool {
    (b as? A) == a
}

/// One command's golden bytes: the whole command packet (opcode, length, parameters), no H4 indicator.
struct CommandCase: Sendable, CustomTestStringConvertible {
    let command: any HCICommand
    let bytes: [UInt8]
    init(_ command: any HCICommand, _ bytes: [UInt8]) {
        self.command = command
        self.bytes = bytes
    }
    var testDescription: String { "\(type(of: command))" }
}

/// One synchronous command's Command Complete event (whole event packet, no H4 indicator) and the return
/// parameters it carries.
struct ReturnCase: Sendable, CustomTestStringConvertible {
    let name: String
    let opcode: HCIOpcode
    let event: [UInt8]
    /// Builds the successful Command Complete from the typed return parameters.
    let encode: @Sendable () -> HCIEvent.CommandComplete
    /// Decodes with `decodeReturn` and compares with the typed value.
    let decodeMatches: @Sendable (HCIEvent.CommandComplete) throws -> Bool
    /// Decodes with `decodeReturn`, discarding the value.
    let decode: @Sendable (HCIEvent.CommandComplete) throws -> Void

    static func make<C: HCISyncCommand>(_ command: C.Type, _ value: C.ReturnParameters, _ event: [UInt8]) -> ReturnCase
    {
        ReturnCase(
            name: "\(C.self)", opcode: C.opcode, event: event,
            encode: { HCIEvent.CommandComplete(numHCICommandPackets: 1, completing: C.self, returning: value) },
            decodeMatches: { try $0.decodeReturn(C.self) == value },
            decode: { _ = try $0.decodeReturn(C.self) })
    }

    var testDescription: String { name }
}

/// One event's golden bytes: the whole event packet (code, length, parameters), no H4 indicator.
struct EventCase: Sendable, CustomTestStringConvertible {
    let name: String
    let event: HCIEvent
    let bytes: [UInt8]
    init(_ name: String, _ event: HCIEvent, _ bytes: [UInt8]) {
        self.name = name
        self.event = event
        self.bytes = bytes
    }
    var testDescription: String { name }
}
