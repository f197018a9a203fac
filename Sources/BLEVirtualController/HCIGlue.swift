import BLECore
import BLEHCI

// The only place the virtual controller touches BLEHCI's types. The controller parses command parameters and
// builds event parameters itself, from the spec, as silicon would: sharing the host's codecs would let a
// codec bug on one side hide the same bug on the other, and the host/controller pair would agree on a wrong
// wire format.

enum HostInput {
    case command(opcode: UInt16, parameters: [UInt8])
    case acl(handle: UInt16, boundary: UInt8, data: [UInt8])
    case ignored
}

func decodeHostPacket(_ packet: HCIPacket) -> HostInput {
    switch packet {
    case .command(let command):
        return .command(opcode: command.opcode.rawValue, parameters: command.parameters)
    case .acl(let acl):
        return .acl(handle: acl.handle.rawValue, boundary: acl.packetBoundary.rawValue, data: acl.data)
    default:
        return .ignored
    }
}

func makeEventPacket(code: UInt8, parameters: [UInt8]) -> HCIPacket {
    .event(HCIEventPacket(code: HCIEventCode(rawValue: code), parameters: parameters))
}

func makeACLPacket(handle: UInt16, boundary: UInt8, data: [UInt8]) -> HCIPacket {
    .acl(HCIACLDataPacket(handle: ConnectionHandle(handle), packetBoundary: .init(rawValue: boundary), data: data))
}
