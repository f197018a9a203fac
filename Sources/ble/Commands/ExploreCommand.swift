import ArgumentParser
import BLE
import Foundation

/// `ble explore`: the whole GATT database of a device, with every readable value.
struct ExploreCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "explore",
        abstract:
            "Connect, discover every service, characteristic and descriptor, read every readable value, and print the tree.",
        discussion: """
            With --json, prints one object:
              {"address", "addressType", "identifier", "name", "mtu", "services": [{"uuid", "name", "primary",
                "handle", "endHandle", "includedServices": [uuid, ...],
                "characteristics": [{"uuid", "name", "handle", "properties": ["read", "write", "writeWithoutResponse",
                "notify", "indicate", ...], "value": "<hex>" | null, "decoded": {...} | null,
                "descriptors": [{"uuid", "name", "handle", "value", "decoded"}]}]}]}
            "name" is the SIG name (null when unknown); a service's "handle" is its first handle and "endHandle" its \
            last, a characteristic's "handle" its value handle, a descriptor's its own; "value" is null when the \
            characteristic is not readable or the read was refused; "decoded" is what the value means, as `read \
            --json` gives it ({"text", "value", "unit", ...}), by \
            the characteristic's Characteristic Presentation Format descriptor (0x2904) when it has one, else by \
            the SIG-assigned format of its type, or null when the tool does not know; "mtu" is the link's ATT_MTU \
            (Peripheral.attMTU).

            The text tree shows each value as hex, then its meaning found the same way.
            """)

    @OptionGroup var target: TargetOptions

    @Flag(help: "Print one JSON object.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        let target = target
        let json = json
        try await CommandRun.flow(transport, controllerWait: target.timeoutDuration) { tool in
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let explorer = Explorer(tool: tool, peripheral: peripheral)
                try await explorer.run()
                Output.line(json ? explorer.json().text : explorer.text())
            }
        }
    }
}

/// Walks a connected peripheral's database and remembers what each read gave.
final class Explorer: @unchecked Sendable {
    // @unchecked Sendable: the values are written by `run`, one step at a time in one task, and read by the
    // printers after it returned.
    let tool: CentralTool
    let peripheral: Peripheral
    private var characteristicValues: [ObjectIdentifier: Result<Data, ToolError>] = [:]
    private var descriptorValues: [ObjectIdentifier: Result<Data, ToolError>] = [:]

    init(tool: CentralTool, peripheral: Peripheral) {
        self.tool = tool
        self.peripheral = peripheral
    }

    /// Discovers every service (with its included services), characteristic and descriptor, and reads every
    /// readable value. A refused read is part of the picture; a lost link or a timeout ends the walk.
    func run() async throws {
        let services = try await tool.run("discovering services") {
            try await peripheral.discoverServices(nil, timeout: nil)
        }
        for service in services {
            let uuid = service.uuid.uuidString
            _ = try await tool.run("discovering included services of \(uuid)") {
                try await peripheral.discoverIncludedServices(nil, for: service, timeout: nil)
            }
            let characteristics = try await tool.run("discovering characteristics of \(uuid)") {
                try await peripheral.discoverCharacteristics(nil, for: service, timeout: nil)
            }
            for characteristic in characteristics { try await explore(characteristic) }
        }
    }

    private func explore(_ characteristic: Characteristic) async throws {
        let descriptors = try await tool.run("discovering descriptors of \(characteristic.uuid.uuidString)") {
            try await peripheral.discoverDescriptors(for: characteristic, timeout: nil)
        }
        if characteristic.properties.contains(.read) {
            let value = try await read("reading \(characteristic.uuid.uuidString)") {
                try await self.peripheral.readValue(for: characteristic, timeout: nil)
            }
            characteristicValues[ObjectIdentifier(characteristic)] = value
            try Self.continuing(value)
        }
        for descriptor in descriptors {
            let value = try await read("reading descriptor \(descriptor.uuid.uuidString)") {
                try await self.peripheral.readValue(for: descriptor, timeout: nil)
            }
            descriptorValues[ObjectIdentifier(descriptor)] = value
            try Self.continuing(value)
        }
    }

    /// A read's value or why the peer refused it; a cancelled read (Ctrl-C) ends the walk instead of becoming an
    /// error line in the tree.
    private func read(_ what: String, _ request: () async throws -> Data) async throws -> Result<Data, ToolError> {
        do {
            return .success(try await request())
        } catch let error as ToolError {
            return .failure(error)
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            return .failure(ToolError(error, doing: what))
        }
    }

    /// A refused read is part of the picture; a lost link or a timeout ends the walk.
    private static func continuing(_ value: Result<Data, ToolError>) throws {
        if case .failure(let error) = value, error.kind != .attError { throw error }
    }

    var mtu: Int { peripheral.attMTU }

    // MARK: Printing

    func json() -> JSON {
        func value(_ result: Result<Data, ToolError>?) -> JSON {
            if case .success(let data)? = result { return .string(data.hex) }
            return .null
        }
        func decoded(_ result: Result<Data, ToolError>?, type: BluetoothUUID, presentation: PresentationFormat?)
            -> JSON
        {
            guard case .success(let data)? = result else { return .null }
            return ValueReading(data, type: type, presentation: presentation).decoded?.json ?? .null
        }
        let services: [JSON] = (peripheral.services ?? []).map { service in
            let characteristics: [JSON] = (service.characteristics ?? []).map { c in
                let descriptors: [JSON] = (c.descriptors ?? []).map { d in
                    .object([
                        ("uuid", .string(d.uuid.uuidString)),
                        ("name", .optional(d.uuid.displayName)),
                        ("handle", .number(Int(d.handle ?? 0))),
                        ("value", value(descriptorValues[ObjectIdentifier(d)])),
                        ("decoded", decoded(descriptorValues[ObjectIdentifier(d)], type: d.uuid, presentation: nil)),
                    ])
                }
                return .object([
                    ("uuid", .string(c.uuid.uuidString)),
                    ("name", .optional(c.uuid.displayName)),
                    ("handle", .number(Int(c.valueHandle ?? 0))),
                    ("properties", .array(c.properties.names.map { .string($0) })),
                    ("value", value(characteristicValues[ObjectIdentifier(c)])),
                    (
                        "decoded",
                        decoded(
                            characteristicValues[ObjectIdentifier(c)], type: c.uuid, presentation: presentation(of: c))
                    ),
                    ("descriptors", .array(descriptors)),
                ])
            }
            return .object([
                ("uuid", .string(service.uuid.uuidString)),
                ("name", .optional(service.uuid.displayName)),
                ("primary", .bool(service.isPrimary)),
                ("handle", .number(Int(service.handleRange?.lowerBound ?? 0))),
                ("endHandle", .number(Int(service.handleRange?.upperBound ?? 0))),
                ("includedServices", .array((service.includedServices ?? []).map { .string($0.uuid.uuidString) })),
                ("characteristics", .array(characteristics)),
            ])
        }
        return .object([
            ("address", .string(peripheral.address.string)),
            ("addressType", .string(peripheral.address.type.isRandom ? "random" : "public")),
            ("identifier", .string(peripheral.identifier.uuidString)),
            ("name", .optional(peripheral.name)),
            ("mtu", .number(mtu)),
            ("services", .array(services)),
        ])
    }

    func text() -> String {
        var lines: [String] = []
        let address = peripheral.address
        lines.append(
            "\(peripheral.name.map { "\"\($0)\"" } ?? "(no name)") \(address.string) (\(address.type.isRandom ? "random" : "public")), ATT MTU \(mtu)"
        )
        for service in peripheral.services ?? [] {
            let range =
                service.handleRange.map {
                    "\(ValueDecoding.hex16(Int($0.lowerBound)))-\(ValueDecoding.hex16(Int($0.upperBound)))"
                } ?? "?"
            lines.append(
                "\(service.isPrimary ? "Primary" : "Secondary") service \(service.uuid.labelled), handles \(range)")
            for included in service.includedServices ?? [] {
                lines.append("  Includes \(included.uuid.labelled)")
            }
            for c in service.characteristics ?? [] {
                let handles =
                    "handle \(ValueDecoding.hex16(Int(c.valueHandle ?? 0))) (declaration \(ValueDecoding.hex16(Int(c.handle ?? 0))))"
                lines.append("  Characteristic \(c.uuid.labelled) \(c.properties), \(handles)")
                if let result = characteristicValues[ObjectIdentifier(c)] {
                    lines.append("    value: " + Self.show(result, type: c.uuid, presentation: presentation(of: c)))
                }
                for d in c.descriptors ?? [] {
                    let shown = descriptorValues[ObjectIdentifier(d)].map { Self.show($0, type: d.uuid) } ?? "not read"
                    lines.append(
                        "    Descriptor \(d.uuid.labelled), handle \(ValueDecoding.hex16(Int(d.handle ?? 0))): \(shown)"
                    )
                }
            }
        }
        return lines.joined(separator: "\n")
    }

    /// The characteristic's Presentation Format, when it has exactly one 0x2904 descriptor and it was read.
    func presentation(of c: Characteristic) -> PresentationFormat? {
        let formats = (c.descriptors ?? []).filter { $0.uuid == .characteristicPresentationFormat }
        guard formats.count == 1, case .success(let value)? = descriptorValues[ObjectIdentifier(formats[0])] else {
            return nil
        }
        return PresentationFormat(descriptor: value)
    }

    static func show(_ result: Result<Data, ToolError>, type: BluetoothUUID, presentation: PresentationFormat? = nil)
        -> String
    {
        switch result {
        case .success(let data):
            return ValueReading(data, type: type, presentation: presentation).hexAndMeaning
        case .failure(let error):
            return "(\(error.message))"
        }
    }
}
