import BLECore
import BLEHCI
import NIOCore

extension FuzzTarget {
    /// An H4 byte stream from a controller (a UART, a TCP peer, `ble controller`'s host): framed by `H4Decoder`,
    /// each packet decoded by type. The stream fed whole and fed a byte at a time gives the same packets (a
    /// decoder that needs more bytes consumes none), and each packet re-encodes to the bytes it was read from.
    static let h4Framer = FuzzTarget("h4-framer", "an H4 byte stream into H4Decoder, and each packet decoded") {
        input throws(Violation) in
        var whole = H4Decoder()
        var buffer = ByteBuffer(bytes: input)
        var packets: [HCIPacket] = []
        var failed = false
        while true {
            let start = buffer.readerIndex
            let packet: HCIPacket?
            do {
                packet = try whole.decode(&buffer)
            } catch {
                try expect(buffer.readerIndex == start, "a decoder that threw consumed bytes")
                failed = true
                break
            }
            guard let packet else {
                try expect(buffer.readerIndex == start, "a decoder that needs more bytes consumed some")
                break
            }
            try expect(
                H4Encoder.encode(packet) == Array(input[start..<buffer.readerIndex]),
                "\(packet) does not re-encode to the bytes it was read from")
            packets.append(packet)
            try decodeContents(packet)
        }

        var stepwise = H4Decoder()
        var trickle = ByteBuffer()
        var trickled: [HCIPacket] = []
        var trickleFailed = false
        feeding: for byte in input {
            trickle.writeInteger(byte)
            while true {
                do {
                    guard let packet = try stepwise.decode(&trickle) else { break }
                    trickled.append(packet)
                } catch {
                    trickleFailed = true
                    break feeding
                }
            }
        }
        try expect(
            trickled == packets && trickleFailed == failed,
            "a byte at a time gives \(trickled.count) packets (failed: \(trickleFailed)), "
                + "the whole stream \(packets.count) (failed: \(failed))")
    }

    /// Decodes what a host or a controller reads in a packet: an event (and a Command Complete's return
    /// parameters) or a command (the virtual controller decodes commands from a host it serves).
    static func decodeContents(_ packet: HCIPacket) throws(Violation) {
        switch packet {
        case .event(let event): try decodeEvent(event)
        case .command(let command): try decodeCommand(command)
        case .acl, .other: break
        }
    }

    /// An event as a host receives it: the code, then the parameters (the input's, up to the 255 octets an
    /// event's length octet allows).
    static let hciEvent = FuzzTarget("hci-event", "an event code and parameters into HCIEvent, and return parameters") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        let code = HCIEventCode(rawValue: reader.byte())
        try decodeEvent(HCIEventPacket(code: code, parameters: reader.bytes(HCIEventPacket.maximumParameterLength)))
    }

    static func decodeEvent(_ packet: HCIEventPacket) throws(Violation) {
        guard let event = try? HCIEvent(packet) else { return }
        _ = "\(event)"
        try expect((try? HCIEvent(event.packet)) == event, "\(event) does not survive its own encoding")
        guard case .commandComplete(let complete) = event else { return }
        // The return parameters as the command the opcode names, or, for any other opcode, as one of the
        // commands a host sends (so every input reaches some return parameter decoder).
        let named = syncCommandTypes.first { $0.opcode == complete.opcode }
        let type = named ?? syncCommandTypes[Int(complete.opcode.rawValue) % syncCommandTypes.count]
        var relabelled = complete
        relabelled.opcode = type.opcode
        try decodeReturn(type, relabelled)
    }

    static let syncCommandTypes: [any HCISyncCommand.Type] = HCICommandRegistry.allStandardCommandTypes.compactMap {
        $0 as? any HCISyncCommand.Type
    }

    private static func decodeReturn<C: HCISyncCommand>(_ type: C.Type, _ complete: HCIEvent.CommandComplete)
        throws(Violation)
    {
        guard let parameters = try? complete.decodeReturn(type) else { return }
        var buffer = ByteBuffer(bytes: parameters.bytes)
        try expect(
            (try? C.ReturnParameters(decoding: &buffer)) == parameters,
            "\(C.self)'s return parameters do not survive their own encoding")
    }

    /// A command as a controller receives it: the opcode, then the parameters (up to 255 octets). The first octet
    /// picks one of the commands this stack defines; past their count, the next two octets are any opcode.
    static let hciCommand = FuzzTarget("hci-command", "an opcode and parameters into the command registry") {
        input throws(Violation) in
        var reader = FuzzInput(input)
        let opcodes = HCICommandRegistry.standard.opcodes
        let pick = Int(reader.byte())
        let opcode = pick < opcodes.count ? opcodes[pick] : HCIOpcode(rawValue: reader.uint16())
        try decodeCommand(
            HCICommandPacket(opcode: opcode, parameters: reader.bytes(HCICommandPacket.maximumParameterLength)))
    }

    static func decodeCommand(_ packet: HCICommandPacket) throws(Violation) {
        guard let command = try? BLEHCI.decodeCommand(packet) else { return }
        try roundTrip(command)
    }

    private static func roundTrip<C: HCICommand>(_ command: C) throws(Violation) {
        try expect((try? C(packet: command.packet)) == command, "\(command) does not survive its own encoding")
    }
}
