import BLEATT
import BLECore
import BLEHCI
import Foundation

/// The fields of a decoded HCI command, event or return parameters, as `name=value` words: the codecs' property
/// names are the Core Specification's parameter names in Swift's spelling (`Connection_Interval` is
/// `connectionInterval`), printed as the specification writes them in lower case (`connection_interval=24`). A
/// connection handle is `handle 0x0040`, and it is also handed back, so a trace line can show its link.
///
/// Reflection keeps this to one place for the fifty-odd commands and events; the ones whose fields need words
/// (reasons, addresses, advertising data, keys) are described by hand in `PacketTrace`.
enum Fields {
    static func of(_ value: Any) -> (text: String, handle: ConnectionHandle?) {
        var words: [String] = []
        var handle: ConnectionHandle?
        collect(value, into: &words, handle: &handle)
        return (words.joined(separator: " "), handle)
    }

    private static func collect(_ value: Any, into words: inout [String], handle: inout ConnectionHandle?) {
        // An enum (an LE Meta event, an HCI event) is one case with its payload: its fields are the payload's.
        let mirror = Mirror(reflecting: value)
        if mirror.displayStyle == .enum {
            for child in mirror.children { collect(child.value, into: &words, handle: &handle) }
            return
        }
        for child in mirror.children {
            guard let label = child.label, !label.hasPrefix("_") else { continue }
            if let h = child.value as? ConnectionHandle {
                handle = handle ?? h
                words.append("handle \(h)")
                continue
            }
            // A long list (Read Local Supported Commands' bit field) is cut: a trace line stays one line to read.
            var text = Self.value(child.value)
            if text.count > 160 { text = String(text.prefix(157)) + "..." }
            words.append("\(specName(label))=\(text)")
        }
    }

    /// `connectionInterval` as `connection_interval`; `txPHY` as `tx_phy`.
    static func specName(_ label: String) -> String {
        var out = ""
        let characters = Array(label)
        for (i, c) in characters.enumerated() {
            let previousIsLower = i > 0 && characters[i - 1].isLowercase
            let nextIsLower = i + 1 < characters.count && characters[i + 1].isLowercase
            let previousIsUpper = i > 0 && characters[i - 1].isUppercase
            if c.isUppercase, i > 0, previousIsLower || (previousIsUpper && nextIsLower) { out.append("_") }
            out.append(contentsOf: c.lowercased())
        }
        return out
    }

    /// A field's value: its description when it has one, hex for bytes, numbers in decimal, and a struct or an
    /// array of them in braces.
    static func value(_ value: Any) -> String {
        switch value {
        case let bytes as [UInt8]: return bytes.isEmpty ? "(none)" : bytes.hexString
        case let flag as Bool: return flag ? "yes" : "no"
        case let text as String: return "\"\(text)\""
        case let described as any CustomStringConvertible:
            let mirror = Mirror(reflecting: value)
            // A struct that only prints its type name (Swift's default) is shown by its fields instead.
            if mirror.displayStyle == .struct, !(value is any RawRepresentable), "\(described)".contains("(") == false,
                !mirror.children.isEmpty
            {
                return "{" + of(value).text + "}"
            }
            return "\(described)"
        default:
            let mirror = Mirror(reflecting: value)
            switch mirror.displayStyle {
            case .collection?, .set?:
                return "[" + mirror.children.map { Self.value($0.value) }.joined(separator: ", ") + "]"
            case .optional?:
                return mirror.children.first.map { Self.value($0.value) } ?? "none"
            case .struct?, .class?:
                return "{" + of(value).text + "}"
            default:
                return "\(value)"
            }
        }
    }

    /// A count of `unit` milliseconds, as "7.5" or "30".
    static func milliseconds(_ count: UInt16, _ unit: Double) -> String {
        let value = Double(count) * unit
        return value == value.rounded() ? String(Int(value)) : String(value)
    }

    static func value(_ flag: UInt8) -> String { flag == 0 ? "off" : "on" }
}

/// ATT PDUs by the names and parameters of Vol 3 Part F 3.4 (`Read Request handle 0x0003`).
enum ATTText {
    /// The PDU's name as the specification's section titles give it ("Read By Group Type Request").
    static func name(_ opcode: ATTOpcode) -> String {
        switch opcode {
        case .errorResponse: "Error Response"
        case .exchangeMTURequest: "Exchange MTU Request"
        case .exchangeMTUResponse: "Exchange MTU Response"
        case .findInformationRequest: "Find Information Request"
        case .findInformationResponse: "Find Information Response"
        case .findByTypeValueRequest: "Find By Type Value Request"
        case .findByTypeValueResponse: "Find By Type Value Response"
        case .readByTypeRequest: "Read By Type Request"
        case .readByTypeResponse: "Read By Type Response"
        case .readRequest: "Read Request"
        case .readResponse: "Read Response"
        case .readBlobRequest: "Read Blob Request"
        case .readBlobResponse: "Read Blob Response"
        case .readMultipleRequest: "Read Multiple Request"
        case .readMultipleResponse: "Read Multiple Response"
        case .readByGroupTypeRequest: "Read By Group Type Request"
        case .readByGroupTypeResponse: "Read By Group Type Response"
        case .writeRequest: "Write Request"
        case .writeResponse: "Write Response"
        case .writeCommand: "Write Command"
        case .signedWriteCommand: "Signed Write Command"
        case .prepareWriteRequest: "Prepare Write Request"
        case .prepareWriteResponse: "Prepare Write Response"
        case .executeWriteRequest: "Execute Write Request"
        case .executeWriteResponse: "Execute Write Response"
        case .handleValueNotification: "Handle Value Notification"
        case .handleValueIndication: "Handle Value Indication"
        case .handleValueConfirmation: "Handle Value Confirmation"
        case .readMultipleVariableRequest: "Read Multiple Variable Request"
        case .readMultipleVariableResponse: "Read Multiple Variable Response"
        case .multipleHandleValueNotification: "Multiple Handle Value Notification"
        default: "opcode \(opcode)"
        }
    }

    /// Bytes as the brief's traces show them: "01 00".
    static func value(_ bytes: [UInt8]) -> String {
        bytes.isEmpty
            ? "(empty)"
            : bytes.map { $0 < 0x10 ? "0" + String($0, radix: 16) : String($0, radix: 16) }
                .joined(separator: " ")
    }

    private static func range(_ start: AttributeHandle, _ end: AttributeHandle) -> String {
        "start \(start) end \(end)"
    }

    private static func type(_ uuid: BluetoothUUID) -> String {
        uuid.name.map { "\(uuid.uuidString) (\($0))" } ?? uuid.uuidString
    }

    static func describe(_ pdu: ATTPDU) -> String {
        let name = name(pdu.opcode)
        switch pdu {
        case .errorResponse(let p):
            let code = String(format: "0x%02X", p.errorCode.rawValue)
            let error = "\(p.errorCode)".hasPrefix("0x") ? code : "\(p.errorCode) (\(code))"
            return "\(name) request=\(self.name(p.requestOpcode)) handle \(p.handle) error=\(error)"
        case .exchangeMTURequest(let p): return "\(name) client_rx_mtu=\(p.clientRxMTU)"
        case .exchangeMTUResponse(let p): return "\(name) server_rx_mtu=\(p.serverRxMTU)"
        case .findInformationRequest(let p): return "\(name) \(range(p.startingHandle, p.endingHandle))"
        case .findInformationResponse(let p):
            return "\(name) " + p.information.map { "\($0.handle) \(type($0.type))" }.joined(separator: ", ")
        case .findByTypeValueRequest(let p):
            return "\(name) \(range(p.startingHandle, p.endingHandle)) type=\(type(BluetoothUUID(p.attributeType)))"
                + " value \(value(p.attributeValue))"
        case .findByTypeValueResponse(let p):
            return "\(name) "
                + p.handlesInformation.map { "\($0.foundAttributeHandle)-\($0.groupEndHandle)" }.joined(separator: ", ")
        case .readByTypeRequest(let p):
            return "\(name) \(range(p.startingHandle, p.endingHandle)) type=\(type(p.attributeType))"
        case .readByTypeResponse(let p):
            return "\(name) "
                + p.attributeData.map { "handle \($0.handle) value \(value($0.value))" }
                .joined(separator: ", ")
        case .readRequest(let p): return "\(name) handle \(p.handle)"
        case .readResponse(let p): return "\(name) value \(value(p.value))"
        case .readBlobRequest(let p): return "\(name) handle \(p.handle) offset=\(p.offset)"
        case .readBlobResponse(let p): return "\(name) value \(value(p.partAttributeValue))"
        case .readMultipleRequest(let p):
            return "\(name) handles \(p.setOfHandles.map(\.description).joined(separator: " "))"
        case .readMultipleResponse(let p): return "\(name) values \(value(p.setOfValues))"
        case .readByGroupTypeRequest(let p):
            return "\(name) \(range(p.startingHandle, p.endingHandle)) type=\(type(p.attributeGroupType))"
        case .readByGroupTypeResponse(let p):
            return "\(name) "
                + p.attributeData.map { "\($0.handle)-\($0.endGroupHandle) value \(value($0.value))" }
                .joined(separator: ", ")
        case .writeRequest(let p): return "\(name) handle \(p.handle) value \(value(p.value))"
        case .writeResponse: return name
        case .writeCommand(let p): return "\(name) handle \(p.handle) value \(value(p.value))"
        case .signedWriteCommand(let p):
            return "\(name) handle \(p.handle) value \(value(p.value)) signature \(value(p.authenticationSignature))"
        case .prepareWriteRequest(let p):
            return "\(name) handle \(p.handle) offset=\(p.offset) value \(value(p.partAttributeValue))"
        case .prepareWriteResponse(let p):
            return "\(name) handle \(p.handle) offset=\(p.offset) value \(value(p.partAttributeValue))"
        case .executeWriteRequest(let p): return "\(name) flags=\(p.flags.rawValue == 0 ? "cancel" : "write")"
        case .executeWriteResponse: return name
        case .handleValueNotification(let p): return "\(name) handle \(p.handle) value \(value(p.value))"
        case .handleValueIndication(let p): return "\(name) handle \(p.handle) value \(value(p.value))"
        case .handleValueConfirmation: return name
        case .readMultipleVariableRequest(let p):
            return "\(name) handles \(p.setOfHandles.map(\.description).joined(separator: " "))"
        case .readMultipleVariableResponse(let p):
            return "\(name) " + p.lengthValueTupleList.map { "value \(value($0.value))" }.joined(separator: ", ")
        case .multipleHandleValueNotification(let p):
            return "\(name) "
                + p.handleLengthValueTupleList.map { "handle \($0.handle) value \(value($0.value))" }
                .joined(separator: ", ")
        case .unknown(let opcode, let bytes): return "opcode \(opcode) \(bytes.hexString)"
        }
    }
}
