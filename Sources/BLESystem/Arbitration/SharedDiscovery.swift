import BLECore
import BLEGATT
import BLEHost
import Synchronization

/// One GATT discovery per link, shared by the apps on it (Arbitration/SharedDiscovery.swift): a complete result
/// (every primary service, every characteristic of a service, every descriptor of a characteristic) is kept for
/// the link's life, and an app that asks again, for all or for some types, is answered from it without a
/// request to the peer. A filtered request with nothing kept goes to the peer as it is (and is not kept). A
/// Service Changed indication, or the link's end, forgets everything kept for the link.
public final class SharedDiscovery: Sendable {
    private struct Kept {
        var services: [GATTService]?
        /// By the service's first handle.
        var characteristics: [AttributeHandle: [GATTCharacteristic]] = [:]
        /// By the characteristic's value handle.
        var descriptors: [AttributeHandle: [GATTDescriptor]] = [:]
        /// Changes when the link goes down or the peer's database changes: an answer to a request made before
        /// is handed on, not kept.
        var generation: UInt64 = 0
    }

    private let state = Mutex<[ConnectionHandle: Kept]>([:])
    private let host: HostDriver

    init(host: HostDriver) { self.host = host }

    private func generation(_ link: ConnectionHandle) -> UInt64 {
        state.withLock { $0[link]?.generation ?? 0 }
    }

    private func keep(_ link: ConnectionHandle, asOf generation: UInt64, _ change: (inout Kept) -> Void) {
        state.withLock { s in
            var kept = s[link] ?? Kept()
            guard kept.generation == generation else { return }
            change(&kept)
            s[link] = kept
        }
    }

    public func services(
        on link: ConnectionHandle, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTService], HostError>) -> Void
    ) {
        if let all = state.withLock({ $0[link]?.services }) {
            return completion(.success(all.filter { uuid == nil || $0.uuid == uuid }))
        }
        guard uuid == nil else { return host.discoverServices(on: link, uuid: uuid, completion: completion) }
        let asOf = generation(link)
        host.discoverServices(on: link, uuid: nil) { [self] result in
            if case .success(let all) = result { keep(link, asOf: asOf) { $0.services = all } }
            completion(result)
        }
    }

    public func characteristics(
        on link: ConnectionHandle, in service: GATTService, uuid: BluetoothUUID?,
        completion: @escaping @Sendable (Result<[GATTCharacteristic], HostError>) -> Void
    ) {
        let key = service.handleRange.lowerBound
        if let all = state.withLock({ $0[link]?.characteristics[key] }) {
            return completion(.success(all.filter { uuid == nil || $0.uuid == uuid }))
        }
        guard uuid == nil else {
            return host.discoverCharacteristics(on: link, in: service, uuid: uuid, completion: completion)
        }
        let asOf = generation(link)
        host.discoverCharacteristics(on: link, in: service, uuid: nil) { [self] result in
            if case .success(let all) = result { keep(link, asOf: asOf) { $0.characteristics[key] = all } }
            completion(result)
        }
    }

    public func descriptors(
        on link: ConnectionHandle, of characteristic: GATTCharacteristic,
        completion: @escaping @Sendable (Result<[GATTDescriptor], HostError>) -> Void
    ) {
        let key = characteristic.valueHandle
        if let all = state.withLock({ $0[link]?.descriptors[key] }) { return completion(.success(all)) }
        let asOf = generation(link)
        host.discoverDescriptors(on: link, of: characteristic) { [self] result in
            if case .success(let all) = result { keep(link, asOf: asOf) { $0.descriptors[key] = all } }
            completion(result)
        }
    }

    /// The peer's database changed in `start...end` (Service Changed): everything kept for the link is forgotten
    /// (a service that only overlaps the range changed too, and the indication is rare), and an answer to a
    /// request made before, still on its way, is not kept.
    public func invalidate(on link: ConnectionHandle, from start: UInt16, to end: UInt16) {
        state.withLock { s in
            let next = (s[link]?.generation ?? 0) &+ 1
            s[link] = Kept(generation: next)
        }
    }

    /// The link went down: nothing of it is kept.
    func linkDown(_ link: ConnectionHandle) {
        state.withLock { s in
            let next = (s[link]?.generation ?? 0) &+ 1
            s[link] = Kept(generation: next)
        }
    }

    func reset() { state.withLock { $0 = [:] } }
}
