import BLEATT
import BLECore

/// Discover All Primary Services: Read By Group Type of «Primary Service» from 0x0001, each next request
/// starting after the last group found, until Attribute Not Found or a group ending at 0xFFFF.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.4.1 (Discover All Primary Services).
public struct GATTDiscoverAllPrimaryServices: GATTProcedure {
    private var services: [GATTService] = []
    private var start = AttributeHandle.min
    public init() {}

    public mutating func start(mtu: UInt16) -> GATTProcedureStep { request() }

    private func request() -> GATTProcedureStep {
        .send(
            .readByGroupTypeRequest(
                .init(startingHandle: start, endingHandle: .max, attributeGroupType: .primaryService)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch result {
        case .failure(let failure) where failure.isAttributeNotFound: return .finished(.success(.services(services)))
        case .failure(let failure): return .fail(failure)
        case .success(.readByGroupTypeResponse(let response)):
            // Groups come in handle order and never overlap: each starts after the one before ends (Vol 3,
            // Part F, 3.4.4.10), so the search only moves forward.
            var next = start
            for entry in response.attributeData {
                guard let uuid = BluetoothUUID(littleEndian: entry.value), entry.value.count != 4,
                    entry.handle >= next, entry.endGroupHandle >= entry.handle
                else {
                    return .invalid("a malformed service group, or one that overlaps another")
                }
                services.append(
                    GATTService(uuid: uuid, isPrimary: true, handleRange: entry.handle...entry.endGroupHandle))
                guard entry.endGroupHandle != .max else { return .finished(.success(.services(services))) }
                next = entry.endGroupHandle.advanced(by: 1)
            }
            start = next
            return request()
        case .success: return .invalid("not a Read By Group Type Response")
        }
    }
}

/// Discover Primary Service by Service UUID: Find By Type Value of «Primary Service» with the UUID, until
/// Attribute Not Found or a group ending at 0xFFFF.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.4.2 (Discover Primary Service by Service UUID).
public struct GATTDiscoverPrimaryServicesByUUID: GATTProcedure {
    public var uuid: BluetoothUUID
    private var services: [GATTService] = []
    private var start = AttributeHandle.min
    public init(uuid: BluetoothUUID) { self.uuid = uuid }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep { request() }

    private func request() -> GATTProcedureStep {
        .send(
            .findByTypeValueRequest(
                .init(
                    startingHandle: start, endingHandle: .max, attributeType: 0x2800,
                    attributeValue: uuid.attWireBytes)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        switch result {
        case .failure(let failure) where failure.isAttributeNotFound: return .finished(.success(.services(services)))
        case .failure(let failure): return .fail(failure)
        case .success(.findByTypeValueResponse(let response)):
            // As for Read By Group Type: in handle order, never overlapping.
            var next = start
            for entry in response.handlesInformation {
                guard entry.foundAttributeHandle >= next, entry.groupEndHandle >= entry.foundAttributeHandle else {
                    return .invalid("a malformed service group, or one that overlaps another")
                }
                services.append(
                    GATTService(
                        uuid: uuid, isPrimary: true,
                        handleRange: entry.foundAttributeHandle...entry.groupEndHandle))
                guard entry.groupEndHandle != .max else { return .finished(.success(.services(services))) }
                next = entry.groupEndHandle.advanced(by: 1)
            }
            start = next
            return request()
        case .success: return .invalid("not a Find By Type Value Response")
        }
    }
}

/// Find Included Services: Read By Type of «Include» across the service; an include that omits its 128-bit
/// UUID is completed with a Read Request of the included service's declaration.
///
/// - SeeAlso: Core Spec 5.4, Vol 3, Part G, 4.5.1 (Find Included Services).
public struct GATTFindIncludedServices: GATTProcedure {
    public var service: GATTService
    private var found: [GATTService] = []
    /// Includes whose UUID must still be read: (index in `found`).
    private var unresolved: [Int] = []
    private var start: AttributeHandle
    private var searchDone = false

    public init(service: GATTService) {
        self.service = service
        self.start = service.handleRange.lowerBound
    }

    public mutating func start(mtu: UInt16) -> GATTProcedureStep { next() }

    private func next() -> GATTProcedureStep {
        if let index = unresolved.first {
            return .send(.readRequest(.init(handle: found[index].handleRange.lowerBound)))
        }
        if searchDone { return .finished(.success(.includedServices(found))) }
        return .send(
            .readByTypeRequest(
                .init(
                    startingHandle: start, endingHandle: service.handleRange.upperBound,
                    attributeType: .include)))
    }

    public mutating func received(_ result: Result<ATTPDU, ATTRequestFailure>, mtu: UInt16) -> GATTProcedureStep {
        if let index = unresolved.first {
            switch result {
            case .success(.readResponse(let response)):
                guard response.value.count == 16, let uuid = BluetoothUUID(littleEndian: response.value) else {
                    return .invalid("an included service declaration without a 128-bit UUID")
                }
                found[index].uuid = uuid
                unresolved.removeFirst()
                return next()
            case .success: return .invalid("not a Read Response")
            case .failure(let failure): return .fail(failure)
            }
        }
        switch result {
        case .failure(let failure) where failure.isAttributeNotFound:
            searchDone = true
            return next()
        case .failure(let failure): return .fail(failure)
        case .success(.readByTypeResponse(let response)):
            for entry in response.attributeData {
                let v = entry.value
                guard v.count == 6 || v.count == 4, entry.handle >= start else {
                    return .invalid("a malformed include declaration")
                }
                let first = AttributeHandle(UInt16(v[0]) | UInt16(v[1]) << 8)
                let end = AttributeHandle(UInt16(v[2]) | UInt16(v[3]) << 8)
                guard first <= end else { return .invalid("an include with an empty range") }
                let uuid = v.count == 6 ? BluetoothUUID(UInt16(v[4]) | UInt16(v[5]) << 8) : BluetoothUUID(0)
                found.append(GATTService(uuid: uuid, isPrimary: false, handleRange: first...end))
                if v.count == 4 { unresolved.append(found.count - 1) }
            }
            let last = response.attributeData.last!.handle
            if last >= service.handleRange.upperBound {
                searchDone = true
            } else {
                start = last.advanced(by: 1)
            }
            return next()
        case .success: return .invalid("not a Read By Type Response")
        }
    }
}
