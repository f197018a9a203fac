import ArgumentParser
import BLE
import Foundation

/// What `read` and `write` work on: a characteristic's value or a descriptor.
enum ValueAttribute: Sendable {
    case characteristic(Characteristic)
    case descriptor(Descriptor)

    /// "Battery Level (2A19)", "Client Characteristic Configuration (2902) of Heart Rate Measurement (2A37)".
    var label: String {
        switch self {
        case .characteristic(let c): return c.uuid.labelled
        case .descriptor(let d): return "\(d.uuid.labelled) of \(d.characteristic?.uuid.labelled ?? "?")"
        }
    }

    /// The attribute's handle on the peer (a characteristic's value handle).
    var handle: UInt16? {
        switch self {
        case .characteristic(let c): return c.valueHandle
        case .descriptor(let d): return d.handle
        }
    }
}

extension CentralTool {
    /// Discovers every service, characteristic and descriptor: `--handle` looks among all of them.
    func discoverEverything(_ peripheral: Peripheral) async throws {
        guard !Self.everythingDiscovered(peripheral) else { return }
        try await discoverCharacteristicsOfAllServices(peripheral)
        for service in peripheral.services ?? [] {
            for c in service.characteristics ?? [] {
                _ = try await run("discovering descriptors of \(c.uuid.uuidString)") {
                    try await peripheral.discoverDescriptors(for: c, timeout: nil)
                }
            }
        }
    }

    /// Whether every service, characteristic and descriptor has been discovered on this link already.
    static func everythingDiscovered(_ peripheral: Peripheral) -> Bool {
        guard let services = peripheral.services, !services.isEmpty else { return false }
        return services.allSatisfy { service in
            guard let characteristics = service.characteristics else { return false }
            return characteristics.allSatisfy { $0.descriptors != nil }
        }
    }

    /// The characteristic's descriptors: those discovered on this link, or discovered now.
    func descriptors(of characteristic: Characteristic, on peripheral: Peripheral) async throws -> [Descriptor] {
        if let known = characteristic.descriptors { return known }
        return try await run("discovering descriptors of \(characteristic.uuid.uuidString)") {
            try await peripheral.discoverDescriptors(for: characteristic, timeout: nil)
        }
    }

    /// The descriptor `reference` names (a UUID or a name) of `characteristic`, after discovering its descriptors.
    func findDescriptor(_ reference: AttributeReference, of characteristic: Characteristic, on peripheral: Peripheral)
        async throws -> Descriptor
    {
        let descriptors = try await descriptors(of: characteristic, on: peripheral)
        guard let uuid = reference.uuid else {
            let uuid = try reference.pick(
                among: descriptors.map(\.uuid), on: characteristic.uuid.labelled)
            return descriptors.first { $0.uuid == uuid }!
        }
        guard let d = descriptors.first(where: { $0.uuid == uuid }) else {
            let has = descriptors.map(\.uuid.uuidString).joined(separator: ", ")
            throw ToolError(
                .noSuchCharacteristic,
                "\(characteristic.uuid.labelled) has no descriptor \(uuid.labelled) (its descriptors: \(has.isEmpty ? "none" : has))"
            )
        }
        return d
    }

    /// The characteristic value or descriptor at `handle`, among everything discovered. A declaration's handle
    /// (a service's or a characteristic's) is refused with what is there: the public API reads values and
    /// descriptors, as CoreBluetooth does, not declarations.
    func findAttribute(handle: UInt16, on peripheral: Peripheral) async throws -> ValueAttribute {
        try await discoverEverything(peripheral)
        let shown = ValueDecoding.hex16(Int(handle))
        var last: UInt16 = 0
        for service in peripheral.services ?? [] {
            if let range = service.handleRange {
                last = max(last, range.upperBound)
                if range.lowerBound == handle {
                    throw ToolError(
                        .noSuchCharacteristic,
                        "\(shown) is the declaration of service \(service.uuid.labelled); give a characteristic's value handle or a descriptor's"
                    )
                }
            }
            for c in service.characteristics ?? [] {
                if c.valueHandle == handle { return .characteristic(c) }
                if c.handle == handle {
                    throw ToolError(
                        .noSuchCharacteristic,
                        "\(shown) is the declaration of characteristic \(c.uuid.labelled); its value is at \(ValueDecoding.hex16(Int(c.valueHandle ?? 0)))"
                    )
                }
                for d in c.descriptors ?? [] where d.handle == handle { return .descriptor(d) }
            }
        }
        throw ToolError(
            .noSuchCharacteristic,
            "\(Self.describe(peripheral)) has no attribute at handle \(shown) (its database ends at \(ValueDecoding.hex16(Int(last))))"
        )
    }

    /// The characteristic's Characteristic Presentation Format, when it has exactly one 0x2904 descriptor (several
    /// go with an Aggregate Format, which the tool does not read) and it can be read.
    func presentationFormat(of characteristic: Characteristic, on peripheral: Peripheral) async throws
        -> PresentationFormat?
    {
        let descriptors = try await descriptors(of: characteristic, on: peripheral)
        let formats = descriptors.filter { $0.uuid == .characteristicPresentationFormat }
        guard formats.count == 1, let descriptor = formats.first else { return nil }
        // A refused read leaves the value to the other decoders; a lost link ends the command.
        do {
            let value = try await peripheral.readValue(for: descriptor, timeout: nil)
            return PresentationFormat(descriptor: value)
        } catch let error as BluetoothError where error.attErrorCode != nil {
            return nil
        }
    }
}

/// Parses `--handle`: 0x-prefixed hex or decimal, 0x0001-0xFFFF.
func parseHandle(_ text: String) throws -> UInt16 {
    let value: UInt16? =
        text.lowercased().hasPrefix("0x") ? UInt16(text.dropFirst(2), radix: 16) : UInt16(text, radix: 10)
    guard let value, value != 0 else {
        throw ValidationError("--handle '\(text)' is not an attribute handle (0x0001-0xFFFF, or decimal)")
    }
    return value
}
