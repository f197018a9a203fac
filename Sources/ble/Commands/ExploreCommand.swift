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
              {"address", "name", "mtu", "services": [{"uuid", "name", "primary", "handle", "includedServices": [uuid, ...],
                "characteristics": [{"uuid", "name", "handle", "properties": ["read", "write", "writeWithoutResponse",
                "notify", "indicate", ...], "value": "<hex>" | null, "descriptors": [{"uuid", "handle", "value"}]}]}]}
            "name" is the SIG name (null when unknown); a service's "handle" is its first handle, a characteristic's \
            "handle" its value handle, a descriptor's its own; "value" is null when the characteristic is not \
            readable or the read was refused; "mtu" is the ATT_MTU (maximumWriteValueLength(for: .withoutResponse) + 3).
            """)

    @OptionGroup var target: TargetOptions

    @Flag(help: "Print one JSON object.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        let target = target
        let json = json
        try await CommandRun.central(transport) { central, outcome in
            central.connect(to: target, outcome: outcome) { peripheral in
                let explorer = Explorer(central: central, peripheral: peripheral)
                explorer.run { result in
                    if case .success = result {
                        Output.line(json ? explorer.json().text : explorer.text())
                    }
                    central.finish(peripheral, outcome, result)
                }
            }
        }
    }
}

/// Walks a connected peripheral's database and remembers what each read gave.
final class Explorer {
    let central: ToolCentral
    let peripheral: Peripheral
    private var characteristicValues: [ObjectIdentifier: Result<Data, ToolError>] = [:]
    private var descriptorValues: [ObjectIdentifier: Result<Data, ToolError>] = [:]

    init(central: ToolCentral, peripheral: Peripheral) {
        self.central = central
        self.peripheral = peripheral
    }

    func run(_ completion: @escaping ToolCentral.Completion<Void>) {
        central.discoverServices(peripheral) { [self] result in
            if case .failure = result { return completion(result) }
            central.sequentially(peripheral.services ?? [], explore, completion)
        }
    }

    private func explore(_ service: Service, _ completion: @escaping ToolCentral.Completion<Void>) {
        central.discoverIncludedServices(peripheral, for: service) { [self] result in
            if case .failure = result { return completion(result) }
            central.discoverCharacteristics(peripheral, for: service) { [self] result in
                if case .failure = result { return completion(result) }
                central.sequentially(service.characteristics ?? [], explore, completion)
            }
        }
    }

    private func explore(_ characteristic: Characteristic, _ completion: @escaping ToolCentral.Completion<Void>) {
        central.discoverDescriptors(peripheral, for: characteristic) { [self] result in
            if case .failure = result { return completion(result) }
            let readDescriptors = { [self] in
                central.sequentially(
                    characteristic.descriptors ?? [],
                    { [self] descriptor, next in
                        central.read(peripheral, descriptor) { [self] value in
                            descriptorValues[ObjectIdentifier(descriptor)] = value
                            next(Self.continuing(value))
                        }
                    }, completion)
            }
            guard characteristic.properties.contains(.read) else { return readDescriptors() }
            central.read(peripheral, characteristic) { [self] value in
                characteristicValues[ObjectIdentifier(characteristic)] = value
                if case .failure = Self.continuing(value) { return completion(Self.continuing(value)) }
                readDescriptors()
            }
        }
    }

    /// A refused read is part of the picture; a lost link or a timeout ends the walk.
    private static func continuing(_ value: Result<Data, ToolError>) -> Result<Void, ToolError> {
        if case .failure(let error) = value, error.kind != .attError { return .failure(error) }
        return .success(())
    }

    var mtu: Int { peripheral.maximumWriteValueLength(for: .withoutResponse) + 3 }

    // MARK: Printing

    func json() -> JSON {
        func value(_ result: Result<Data, ToolError>?) -> JSON {
            if case .success(let data)? = result { return .string(data.hex) }
            return .null
        }
        let services: [JSON] = (peripheral.services ?? []).map { service in
            let characteristics: [JSON] = (service.characteristics ?? []).map { c in
                let descriptors: [JSON] = (c.descriptors ?? []).map { d in
                    .object([
                        ("uuid", .string(d.uuid.uuidString)),
                        ("handle", .number(Int(d.handle ?? 0))),
                        ("value", value(descriptorValues[ObjectIdentifier(d)])),
                    ])
                }
                return .object([
                    ("uuid", .string(c.uuid.uuidString)),
                    ("name", .optional(c.uuid.displayName)),
                    ("handle", .number(Int(c.valueHandle ?? 0))),
                    ("properties", .array(c.properties.names.map { .string($0) })),
                    ("value", value(characteristicValues[ObjectIdentifier(c)])),
                    ("descriptors", .array(descriptors)),
                ])
            }
            return .object([
                ("uuid", .string(service.uuid.uuidString)),
                ("name", .optional(service.uuid.displayName)),
                ("primary", .bool(service.isPrimary)),
                ("handle", .number(Int(service.handleRange?.lowerBound ?? 0))),
                ("includedServices", .array((service.includedServices ?? []).map { .string($0.uuid.uuidString) })),
                ("characteristics", .array(characteristics)),
            ])
        }
        return .object([
            ("address", .string(peripheral.address.string)),
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
                    lines.append("    value: " + Self.show(result, type: c.uuid))
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

    static func show(_ result: Result<Data, ToolError>, type: BluetoothUUID) -> String {
        switch result {
        case .success(let data):
            let hex = data.isEmpty ? "(empty)" : data.hex
            return ValueDecoding.describe(data, of: type).map { "\(hex)  \($0)" } ?? hex
        case .failure(let error):
            return "(\(error.message))"
        }
    }
}
