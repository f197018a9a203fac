import BLEATT
import BLECore
import BLEHCI
import BLEL2CAP
import BLESMP
import Foundation
import NIOCore

/// A btmon-like reading of HCI traffic: each packet as one line of its layers' fields, by the names the Core
/// Specification gives them (`ATT Write Request handle 0x0012 value 01 00`, `SMP Pairing Request
/// io=NoInputNoOutput auth=bonding,SC ...`, `HCI Event Disconnection Complete status=Success handle 0x0040
/// reason=Remote User Terminated Connection (0x13)`).
///
/// The codecs of BLEHCI, BLEL2CAP, BLEATT and BLESMP decode; this only says what they decoded, so it lives with
/// the tool that prints it (`ble btsnoop`, `--trace`), not in the library: it is presentation, and a library user
/// who wants a trace has the btsnoop writer and Wireshark.
///
/// The value is stateful in one way: ACL fragments are put together per connection handle and direction until
/// their L2CAP frame is whole, as a controller delivers them (Vol 3 Part A 3, Vol 4 Part E 5.4.2); the packet
/// that completes a frame is the one whose line decodes it.
///
/// Keys and secrets (LTK, IRK, CSRK, pairing random and confirm values, DHKey checks, public keys, the key and
/// data of LE Encrypt and the number of LE Rand) are replaced by `<redacted>` unless `showsSecrets`; a line that
/// carries one says so (`Line.carriesSecret`), so a caller that also prints raw bytes can hide them.
struct PacketTrace {
    /// Who sent a packet.
    enum Direction: Sendable, Hashable {
        case hostToController, controllerToHost

        /// btmon's arrows would be `<` and `>`; these say who sent it.
        var label: String { self == .hostToController ? "H>C" : "C>H" }
    }

    /// One packet's line.
    struct Line: Sendable, Hashable {
        /// The link the packet concerns, when it concerns one.
        var handle: ConnectionHandle?
        var text: String
        /// Whether the packet holds a key or a secret (shown or not).
        var carriesSecret = false
    }

    let showsSecrets: Bool
    /// ACL fragments received so far of an L2CAP frame, per link and direction.
    private var partial: [Key: [UInt8]] = [:]

    private struct Key: Hashable {
        var handle: ConnectionHandle
        var direction: Direction
    }

    init(showsSecrets: Bool = false) {
        self.showsSecrets = showsSecrets
    }

    /// What `packet` says.
    mutating func describe(_ packet: HCIPacket, direction: Direction) -> Line {
        switch packet {
        case .command(let command): return describe(command)
        case .event(let event): return describe(event)
        case .acl(let acl): return describe(acl, direction: direction)
        case .other(let type, let bytes): return Line(text: "\(HCIPacketType(rawValue: type)) \(bytes.count) octets")
        }
    }

    /// Forgets fragments of a link that went away (its handle may come back for another link).
    mutating func forget(_ handle: ConnectionHandle) {
        partial = partial.filter { $0.key.handle != handle }
    }

    // MARK: Secrets

    private func secret(_ bytes: [UInt8]) -> String {
        showsSecrets ? bytes.hexString : "<redacted>"
    }

    private func secret(_ value: UInt64) -> String {
        showsSecrets ? "0x" + String(value, radix: 16) : "<redacted>"
    }

    // MARK: Commands (Core Spec 5.4, Vol 4, Part E, 7.1-7.8)

    private func describe(_ packet: HCICommandPacket) -> Line {
        let name = "HCI Command \(Self.name(of: packet.opcode))"
        let command: any HCICommand
        do {
            command = try decodeCommand(packet)
        } catch {
            let data = packet.parameters.isEmpty ? "" : " \(packet.parameters.hexString)"
            return Line(text: "\(name)\(data)")
        }
        switch command {
        case let c as HCILEEncrypt:
            return Line(text: "\(name) key=\(secret(c.key)) plaintext=\(secret(c.plaintext))", carriesSecret: true)
        case let c as HCILEEnableEncryption:
            return Line(
                handle: c.handle,
                text: "\(name) handle \(c.handle) rand=0x\(String(c.randomNumber, radix: 16))"
                    + " ediv=0x\(String(c.encryptedDiversifier, radix: 16)) ltk=\(secret(c.longTermKey))",
                carriesSecret: true)
        case let c as HCILELongTermKeyRequestReply:
            return Line(
                handle: c.handle, text: "\(name) handle \(c.handle) ltk=\(secret(c.longTermKey))", carriesSecret: true)
        case let c as HCIDisconnect:
            return Line(handle: c.handle, text: "\(name) handle \(c.handle) reason=\(c.reason)")
        case let c as HCILESetAdvertisingData:
            return Line(text: "\(name) \(Self.advertisingData(c.advertisingData))")
        case let c as HCILESetScanResponseData:
            return Line(text: "\(name) \(Self.advertisingData(c.scanResponseData))")
        default:
            let fields = Fields.of(command)
            return Line(handle: fields.handle, text: fields.text.isEmpty ? name : "\(name) \(fields.text)")
        }
    }

    /// "LE Set Scan Enable" for HCI_LE_Set_Scan_Enable, as btmon and the specification's prose write it; the
    /// opcode in hex for one the table does not name.
    static func name(of opcode: HCIOpcode) -> String {
        guard let name = opcode.name else { return "\(opcode)" }
        let words = name.hasPrefix("HCI_") ? String(name.dropFirst(4)) : name
        return words.replacingOccurrences(of: "_", with: " ")
    }

    // MARK: Events (Vol 4, Part E, 7.7)

    private func describe(_ packet: HCIEventPacket) -> Line {
        let event: HCIEvent
        do {
            event = try HCIEvent(packet)
        } catch {
            return Line(
                text: "HCI Event \(Self.bare(packet.code)) (malformed: \(error)) \(packet.parameters.hexString)")
        }
        switch event {
        case .disconnectionComplete(let e):
            return Line(
                handle: e.handle,
                text: "HCI Event Disconnection Complete status=\(e.status) handle \(e.handle) reason=\(e.reason)")
        case .encryptionChange(let e):
            return Line(
                handle: e.handle,
                text:
                    "HCI Event Encryption Change status=\(e.status) handle \(e.handle) encryption=\(Fields.value(e.encryptionEnabled))"
            )
        case .commandComplete(let e):
            return describe(e)
        case .commandStatus(let e):
            return Line(
                text:
                    "HCI Event Command Status \(Self.name(of: e.opcode)) status=\(e.status) ncmd=\(e.numHCICommandPackets)"
            )
        case .numberOfCompletedPackets(let e):
            let counts = e.entries.map { "\($0.handle): \($0.numCompletedPackets)" }.joined(separator: ", ")
            return Line(
                handle: e.entries.count == 1 ? e.entries.first?.handle : nil,
                text: "HCI Event Number Of Completed Packets \(counts)")
        case .leMeta(let meta):
            return describe(meta)
        case .unknown(let packet):
            return Line(text: "HCI Event \(Self.bare(packet.code)) \(packet.parameters.hexString)")
        default:
            let fields = Fields.of(event)
            return Line(handle: fields.handle, text: "HCI Event \(Self.bare(event.code)) \(fields.text)")
        }
    }

    /// An event code's name without its number.
    private static func bare(_ code: HCIEventCode) -> String {
        let text = "\(code)"
        guard let cut = text.range(of: " (0x", options: .backwards), text.hasSuffix(")") else { return text }
        return String(text[..<cut.lowerBound])
    }

    private func describe(_ e: HCIEvent.CommandComplete) -> Line {
        let name = "HCI Event Command Complete \(Self.name(of: e.opcode))"
        let bytes = e.returnParameters
        guard let status = bytes.first else { return Line(text: name) }
        let head = "\(name) status=\(HCIStatus(rawValue: status))"
        let rest = Array(bytes.dropFirst())
        guard status == 0, !rest.isEmpty else { return Line(text: head) }
        if e.opcode == HCILERand.opcode { return Line(text: "\(head) random=\(secret(rest))", carriesSecret: true) }
        if e.opcode == HCILEEncrypt.opcode {
            return Line(text: "\(head) encrypted=\(secret(rest))", carriesSecret: true)
        }
        guard let type = HCICommandRegistry.allStandardCommandTypes.first(where: { $0.opcode == e.opcode }),
            let parameters = Self.returnParameters(of: type, rest)
        else {
            return Line(text: "\(head) \(rest.hexString)")
        }
        let fields = Fields.of(parameters)
        return Line(handle: fields.handle, text: fields.text.isEmpty ? head : "\(head) \(fields.text)")
    }

    /// The return parameters of a command that has them, decoded; nil for one that returns only its status.
    private static func returnParameters(of type: any HCICommand.Type, _ bytes: [UInt8]) -> (any HCIReturnParameters)? {
        guard let sync = type as? any HCISyncCommand.Type else { return nil }
        return decodeReturn(sync, bytes)
    }

    private static func decodeReturn<C: HCISyncCommand>(_: C.Type, _ bytes: [UInt8]) -> (any HCIReturnParameters)? {
        var buffer = ByteBuffer(bytes: bytes)
        return try? C.ReturnParameters(decoding: &buffer)
    }

    private func describe(_ meta: HCILEMetaEvent) -> Line {
        switch meta {
        case .connectionComplete(let e):
            return Line(
                handle: e.handle,
                text: "HCI Event LE Connection Complete status=\(e.status) handle \(e.handle) role=\(e.role)"
                    + " peer=\(e.peerAddress)"
                    + Self.parameters(e.connectionInterval, e.peripheralLatency, e.supervisionTimeout))
        case .enhancedConnectionComplete(let e):
            return Line(
                handle: e.handle,
                text: "HCI Event LE Enhanced Connection Complete status=\(e.status) handle \(e.handle) role=\(e.role)"
                    + " peer=\(e.peerAddress)"
                    + Self.parameters(e.connectionInterval, e.peripheralLatency, e.supervisionTimeout))
        case .connectionUpdateComplete(let e):
            return Line(
                handle: e.handle,
                text: "HCI Event LE Connection Update Complete status=\(e.status) handle \(e.handle)"
                    + Self.parameters(e.connectionInterval, e.peripheralLatency, e.supervisionTimeout))
        case .advertisingReport(let e):
            let reports = e.reports.map { r in
                "\(r.eventType) \(r.address) rssi=\(r.rssi) dBm\(r.data.isEmpty ? "" : " " + Self.advertisingData(r.data))"
            }
            return Line(text: "HCI Event LE Advertising Report " + reports.joined(separator: "; "))
        case .longTermKeyRequest(let e):
            return Line(
                handle: e.handle,
                text:
                    "HCI Event LE Long Term Key Request handle \(e.handle) rand=0x\(String(e.randomNumber, radix: 16))"
                    + " ediv=0x\(String(e.encryptedDiversifier, radix: 16))")
        case .unknown(let subevent, let parameters):
            return Line(text: "HCI Event LE Meta \(subevent) \(parameters.hexString)")
        default:
            let fields = Fields.of(meta)
            let name = "\(meta.subevent)"
            let bare = name.range(of: " (0x", options: .backwards).map { String(name[..<$0.lowerBound]) } ?? name
            return Line(
                handle: fields.handle,
                text: "HCI Event LE \(bare.hasPrefix("LE ") ? String(bare.dropFirst(3)) : bare) \(fields.text)")
        }
    }

    /// A link's parameters in milliseconds (Vol 4 Part E 7.7.65.1: interval in 1.25 ms, timeout in 10 ms).
    private static func parameters(_ interval: UInt16, _ latency: UInt16, _ timeout: UInt16) -> String {
        " interval=\(Fields.milliseconds(interval, 1.25)) ms latency=\(latency) timeout=\(Int(timeout) * 10) ms"
    }

    /// Advertising data as its AD structures: type names and, where they read as such, their values.
    static func advertisingData(_ bytes: [UInt8]) -> String {
        let data = AdvertisingData(leniently: bytes)
        guard !data.structures.isEmpty else { return bytes.isEmpty ? "(empty)" : bytes.hexString }
        return data.structures.map { structure in
            let type = structure.type
            let name = type.name ?? "\(type)"
            switch type {
            case .completeLocalName, .shortenedLocalName:
                return "\(name) \"\(String(decoding: structure.data, as: UTF8.self))\""
            case .flags:
                return "\(name) \(ADFlags(rawValue: structure.data.first ?? 0))"
            case .incompleteList16BitServiceUUIDs, .completeList16BitServiceUUIDs:
                let uuids = stride(from: 0, to: structure.data.count - 1, by: 2).map {
                    BluetoothUUID(UInt16(structure.data[$0]) | UInt16(structure.data[$0 + 1]) << 8).uuidString
                }
                return "\(name) \(uuids.joined(separator: ","))"
            case .txPowerLevel where structure.data.count == 1:
                return "\(name) \(Int8(bitPattern: structure.data[0])) dBm"
            default:
                return "\(name) \(structure.data.hexString)"
            }
        }.joined(separator: ", ")
    }

    // MARK: ACL and L2CAP (Vol 3, Part A, 3.1)

    private mutating func describe(_ acl: HCIACLDataPacket, direction: Direction) -> Line {
        let key = Key(handle: acl.handle, direction: direction)
        var frame: [UInt8]
        if acl.packetBoundary.isFirst {
            frame = acl.data
        } else if let started = partial[key] {
            frame = started + acl.data
        } else {
            return Line(handle: acl.handle, text: "ACL continuation of no frame, \(acl.data.count) octets")
        }
        guard frame.count >= 4 else {
            partial[key] = frame
            return Line(handle: acl.handle, text: "ACL start of an L2CAP frame, \(frame.count) octets so far")
        }
        let length = Int(frame[0]) | Int(frame[1]) << 8
        if frame.count < 4 + length {
            partial[key] = frame
            return Line(
                handle: acl.handle, text: "ACL part of an L2CAP frame, \(frame.count - 4) of \(length) octets so far")
        }
        partial[key] = nil
        let channel = L2CAPChannelID(rawValue: UInt16(frame[2]) | UInt16(frame[3]) << 8)
        let payload = Array(frame[4..<(4 + length)])
        var line = describe(payload, channel: channel)
        line.handle = acl.handle
        if frame.count > 4 + length { line.text += " (and \(frame.count - 4 - length) octets after the frame)" }
        return line
    }

    private func describe(_ payload: [UInt8], channel: L2CAPChannelID) -> Line {
        switch channel {
        case .att: return Line(text: describeATT(payload))
        case .smp: return describeSMP(payload)
        case .leSignaling:
            do {
                let command = try L2CAPSignalingCommand(decoding: ByteBuffer(bytes: payload))
                return Line(text: "L2CAP \(command.pdu) id=\(command.identifier.rawValue)")
            } catch {
                return Line(text: "L2CAP signalling (malformed: \(error)) \(payload.hexString)")
            }
        default:
            return Line(text: "L2CAP channel \(channel) \(payload.count) octets \(payload.hexString)")
        }
    }

    // MARK: ATT (Vol 3, Part F, 3.4)

    private func describeATT(_ payload: [UInt8]) -> String {
        let pdu: ATTPDU
        do {
            pdu = try ATTPDU(bytes: payload)
        } catch {
            return "ATT (malformed: \(error)) \(payload.hexString)"
        }
        return "ATT " + ATTText.describe(pdu)
    }

    // MARK: SMP (Vol 3, Part H, 3.5-3.6)

    private func describeSMP(_ payload: [UInt8]) -> Line {
        let pdu: SMPPDU
        do {
            pdu = try SMPPDU(decoding: payload)
        } catch {
            return Line(text: "SMP (malformed: \(error)) \(payload.hexString)")
        }
        switch pdu {
        case .pairingRequest(let f): return Line(text: "SMP Pairing Request \(Self.features(f))")
        case .pairingResponse(let f): return Line(text: "SMP Pairing Response \(Self.features(f))")
        case .pairingConfirm(let v): return Line(text: "SMP Pairing Confirm value=\(secret(v))", carriesSecret: true)
        case .pairingRandom(let v): return Line(text: "SMP Pairing Random value=\(secret(v))", carriesSecret: true)
        case .pairingFailed(let reason): return Line(text: "SMP Pairing Failed reason=\(reason)")
        case .encryptionInformation(let key):
            return Line(text: "SMP Encryption Information ltk=\(secret(key))", carriesSecret: true)
        case .centralIdentification(let ediv, let rand):
            return Line(
                text: "SMP Central Identification ediv=0x\(String(ediv, radix: 16)) rand=0x\(String(rand, radix: 16))")
        case .identityInformation(let key):
            return Line(text: "SMP Identity Information irk=\(secret(key))", carriesSecret: true)
        case .identityAddressInformation(let address):
            return Line(text: "SMP Identity Address Information address=\(address)")
        case .signingInformation(let key):
            return Line(text: "SMP Signing Information csrk=\(secret(key))", carriesSecret: true)
        case .securityRequest(let auth): return Line(text: "SMP Security Request auth=\(Self.authentication(auth))")
        case .pairingPublicKey(let x, let y):
            return Line(text: "SMP Pairing Public Key x=\(secret(x)) y=\(secret(y))", carriesSecret: true)
        case .pairingDHKeyCheck(let v):
            return Line(text: "SMP Pairing DHKey Check value=\(secret(v))", carriesSecret: true)
        case .keypressNotification(let type): return Line(text: "SMP Keypress Notification type=\(type)")
        case .unknown(let code, let data):
            return Line(text: "SMP code 0x\(String(code, radix: 16)) \(data.hexString)")
        }
    }

    /// A Pairing Request's or Response's features (Vol 3 Part H 3.5.1).
    static func features(_ f: PairingFeatures) -> String {
        "io=\(f.ioCapability) oob=\(f.oobDataPresent ? "present" : "absent") auth=\(authentication(f.authentication))"
            + " max_key_size=\(f.maximumKeySize) initiator_keys=\(keys(f.initiatorKeys))"
            + " responder_keys=\(keys(f.responderKeys))"
    }

    static func authentication(_ a: AuthenticationRequirements) -> String {
        var names: [String] = []
        if a.contains(.bonding) { names.append("bond") }
        if a.contains(.mitm) { names.append("mitm") }
        if a.contains(.secureConnections) { names.append("sc") }
        if a.contains(.keypress) { names.append("keypress") }
        if a.contains(.ct2) { names.append("ct2") }
        return names.isEmpty ? "none" : names.joined(separator: ",")
    }

    static func keys(_ k: KeyDistribution) -> String {
        var names: [String] = []
        if k.contains(.encryptionKey) { names.append("enc") }
        if k.contains(.identityKey) { names.append("id") }
        if k.contains(.signingKey) { names.append("sign") }
        if k.contains(.linkKey) { names.append("link") }
        return names.isEmpty ? "none" : names.joined(separator: ",")
    }
}
