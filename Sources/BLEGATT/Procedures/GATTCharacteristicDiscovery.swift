import BLEATT
import BLECore

/// Discover All Characteristics of a Service (or, with a UUID, Discover Characteristics by UUID): Read By
/// Type of «Characteristic» across the service. Each characteristic ends just before the next declaration,
/// the last one at the service's end; the UUID filter applies after that, so end handles stay right.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.6.1 and 4.6.2.
public struct GATTDiscoverCharacteristics: GATTProcedure {
    public var service: GATTService
    public var uuid: BluetoothUUID?
    private var declarations:
        [(
            handle: AttributeHandle, properties: GATTCharacteristicProperties,
            valueHandle: AttributeHandle, uuid: BluetoothUUID
        )] = []
    private var start: AttributeHandle

    public init(service: GATTService, uuid: BluetoothUUID? = nil) {
        self.service = service
        self.uuid = uuid
        self.start = service.handleRange.lowerBound
    }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep { request() }

    private func request() -> GATTProcedureStep {
        .send(
            .readByTypeRequest(
                .init(
                    startingHandle: start, endingHandle: service.handleRange.upperBound,
                    attributeType: .characteristicDeclaration)))
    }

    private func finish() -> GATTProcedureStep {
        // A server should list declarations in handle order; one that does not must not yield characteristics
        // whose end lies before their own value: order them (and drop repeats) before deriving the ends.
        var seen = Set<AttributeHandle>()
        let declarations = self.declarations.sorted { $0.handle < $1.handle }.filter { seen.insert($0.handle).inserted }
        var characteristics: [GATTCharacteristic] = []
        for (index, declaration) in declarations.enumerated() {
            let end =
                index + 1 < declarations.count
                ? declarations[index + 1].handle.advanced(by: -1) : service.handleRange.upperBound
            guard uuid == nil || declaration.uuid == uuid else { continue }
            characteristics.append(
                GATTCharacteristic(
                    uuid: declaration.uuid, properties: declaration.properties,
                    declarationHandle: declaration.handle,
                    valueHandle: declaration.valueHandle, endHandle: end))
        }
        return .finished(.success(.characteristics(characteristics)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch result {
        case .failure(let failure) where failure.isAttributeNotFound: return finish()
        case .failure(let failure): return .fail(failure)
        case .success(.readByTypeResponse(let response)):
            for entry in response.attributeData {
                let v = entry.value
                guard v.count == 5 || v.count == 19, entry.handle >= start,
                    let uuid = BluetoothUUID(littleEndian: v[3...])
                else {
                    return .invalid("a malformed characteristic declaration")
                }
                let valueHandle = AttributeHandle(UInt16(v[1]) | UInt16(v[2]) << 8)
                // The value lies inside the service (Vol 3, Part G, 3.3): a handle elsewhere would make reads and
                // writes of this characteristic reach another service's attribute.
                guard service.handleRange.contains(valueHandle) else {
                    return .invalid("a characteristic whose value handle \(valueHandle) lies outside its service")
                }
                declarations.append((entry.handle, GATTCharacteristicProperties(rawValue: v[0]), valueHandle, uuid))
            }
            let last = response.attributeData.map(\.handle).max()!
            guard last < service.handleRange.upperBound else { return finish() }
            start = last.advanced(by: 1)
            return request()
        case .success: return .invalid("not a Read By Type Response")
        }
    }
}

/// Discover All Characteristic Descriptors: Find Information from the value handle + 1 to the
/// characteristic's end handle.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.7.1 (Discover All Characteristic Descriptors).
public struct GATTDiscoverDescriptors: GATTProcedure {
    public var characteristic: GATTCharacteristic
    private var descriptors: [GATTDescriptor] = []
    private var start: AttributeHandle

    public init(characteristic: GATTCharacteristic) {
        self.characteristic = characteristic
        self.start = characteristic.valueHandle.advanced(by: 1)
    }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep {
        guard characteristic.valueHandle < characteristic.endHandle else {
            return .finished(.success(.descriptors([])))
        }
        return request()
    }

    private func request() -> GATTProcedureStep {
        .send(.findInformationRequest(.init(startingHandle: start, endingHandle: characteristic.endHandle)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch result {
        case .failure(let failure) where failure.isAttributeNotFound:
            return .finished(.success(.descriptors(descriptors)))
        case .failure(let failure): return .fail(failure)
        case .success(.findInformationResponse(let response)):
            for entry in response.information {
                guard entry.handle >= start else { return .invalid("a descriptor before the requested range") }
                guard entry.handle <= characteristic.endHandle else { break }
                descriptors.append(GATTDescriptor(uuid: entry.type, handle: entry.handle))
            }
            let last = response.information.last!.handle
            guard last < characteristic.endHandle else { return .finished(.success(.descriptors(descriptors))) }
            start = last.advanced(by: 1)
            return request()
        case .success: return .invalid("not a Find Information Response")
        }
    }
}
