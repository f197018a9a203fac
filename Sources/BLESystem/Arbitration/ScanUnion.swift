import BLECore
import BLEHost
import OrderedCollections
import Synchronization

/// What a scanner asks the system for: the services a device must advertise (any of them; nil or empty: every
/// device), or solicit, and whether every advertisement is reported or only new and changed ones.
public struct ScanRequest: Sendable, Hashable {
    public var services: [BluetoothUUID]?
    public var solicitedServices: [BluetoothUUID]
    public var allowDuplicates: Bool

    public init(services: [BluetoothUUID]?, solicitedServices: [BluetoothUUID] = [], allowDuplicates: Bool = false) {
        self.services = services
        self.solicitedServices = solicitedServices
        self.allowDuplicates = allowDuplicates
    }

    /// Whether `data` (an advertisement merged with its scan response) is one this request wants: it lists one
    /// of the services (also in an iOS app's overflow area, which only a scan for the service can see, IOSRules.md
    /// 1.8, 2.8), or solicits one of the solicited services.
    func matches(_ data: AdvertisingData) -> Bool {
        guard let services, !services.isEmpty else { return true }
        if data.serviceUUIDs.contains(where: services.contains) { return true }
        if !AppleOverflowArea.listed(services, in: data).isEmpty { return true }
        return data.solicitedServiceUUIDs.contains(where: solicitedServices.contains)
    }
}

/// One device heard: its advertisement merged with its scan response, as every scanner of the system sees it.
public struct SystemDiscovery: Sendable, Hashable {
    public var address: BluetoothAddress
    public var advertisement: [UInt8]
    public var scanResponse: [UInt8]?
    /// The advertising PDU's type, from the report's event type (never `.scanResponse`: that report's data is
    /// `scanResponse`).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.2 (Event_Type); Vol 6, Part B, 2.3 (advertising PDUs).
    public var kind: AdvertisingReport.Kind
    public var connectable: Bool
    public var rssi: Int?
    /// Both decoded, leniently (every whole AD structure before one that overruns).
    public var data: AdvertisingData
}

/// A manager that scans through the system.
public protocol ScanClient: AnyObject, Sendable {
    /// A device matched this client's request (after its own coalescing). Called on the host's context: must not
    /// block, and dispatches to the client's queue.
    func scanDiscovered(_ discovery: SystemDiscovery, scan: UInt64)
    /// The scan with this id ended without `stopScan` (the controller refused to scan, or went away).
    func scanEnded(_ scan: UInt64)
}

/// How a scan runs for its app's place in its lifecycle (IOSRules.md section 1 and 3.1).
enum ScanMode: Sendable, Hashable {
    /// The app is in the foreground: the scan as asked.
    case foreground
    /// A `bluetooth-central` app out of the foreground: a scan with no services hears nothing; with services,
    /// each device is reported once per scan (duplicates are not reported, whatever was asked).
    case background
    /// A foreground-only app out of the foreground: it hears nothing.
    case off
}

/// The scans of every app of a system as one controller scan (Arbitration/ScanUnion.swift): the controller scans
/// while any client does, with the system's parameters; each advertisement is merged with its scan response
/// once, here; each client gets only what its own request matches, coalesced per client (a device is reported
/// again when what it advertises changes) unless it allows duplicates. `stopScan` ends one client's scan only.
///
/// Each client's scan runs in its app's `ScanMode`. When no client is in the foreground, the controller scans with
/// the background parameters (a longer interval, IOSRules.md 1.2: the figures are a setting).
///
/// Memory is bounded whatever the room: advertisements held for their scan response, scan responses, and each
/// client's record of what it was told are kept for the most recent `memoryLimit` devices.
final class ScanUnion: Sendable {
    static let memoryLimit = 1_024
    static let parameters = ScanParameters(active: true, interval: 0x0060, window: 0x0030, filterDuplicates: false)
    /// The controller's parameters while every scanning app is out of the foreground.
    let backgroundParameters: ScanParameters

    private struct Scanner {
        weak var client: (any ScanClient)?
        var id: UInt64
        var request: ScanRequest
        var mode: ScanMode
        /// What this client was last told per device (coalescing).
        var reported = OrderedDictionary<BluetoothAddress, SystemDiscovery>()
    }

    private struct State {
        var scanners: [ObjectIdentifier: Scanner] = [:]
        var controllerScanning = false
        /// The parameters the controller was last asked to scan with.
        var parameters = ScanUnion.parameters
        /// Scannable advertisements waiting for their scan response, and the last scan response per device.
        var held = OrderedDictionary<BluetoothAddress, AdvertisingReport>()
        var scanResponses = OrderedDictionary<BluetoothAddress, [UInt8]>()
    }
    private let state = Mutex(State())
    /// Held from a decision to start or stop the controller until the host has the request, so two threads'
    /// decisions reach the host in the order they were made. The host never calls back into `start` or `stop`.
    private let hostOrder = Mutex(())
    private let host: HostDriver

    init(host: HostDriver, backgroundParameters: ScanParameters) {
        self.host = host
        self.backgroundParameters = backgroundParameters
    }

    /// The parameters the scanners' modes call for.
    private func wantedParameters(_ s: State) -> ScanParameters {
        var wanted = s.scanners.values.contains { $0.mode == .foreground } ? Self.parameters : backgroundParameters
        wanted.active = host.configuration.activeScanning
        return wanted
    }

    /// Starts (or changes) `client`'s scan. Every discovery for it carries `id`, which the client chose and
    /// recorded before calling, so that none can arrive before the client knows the scan it belongs to.
    func start(_ client: any ScanClient, _ request: ScanRequest, id: UInt64, mode: ScanMode = .foreground) {
        hostOrder.withLock { _ in
            let parameters = state.withLock { s -> ScanParameters? in
                s.scanners[ObjectIdentifier(client)] = Scanner(client: client, id: id, request: request, mode: mode)
                return changedParameters(&s)
            }
            if let parameters { scan(with: parameters) }
        }
    }

    /// Sets each listed client's mode (its app moved in its lifecycle); the controller's parameters follow.
    func setModes(_ modes: [ObjectIdentifier: ScanMode]) {
        hostOrder.withLock { _ in
            let parameters = state.withLock { s -> ScanParameters? in
                for (key, mode) in modes where s.scanners[key] != nil { s.scanners[key]?.mode = mode }
                return s.controllerScanning ? changedParameters(&s) : nil
            }
            if let parameters { scan(with: parameters) }
        }
    }

    /// The parameters to ask the controller for, when it must start or change; nil when it scans as wanted.
    private func changedParameters(_ s: inout State) -> ScanParameters? {
        let wanted = wantedParameters(s)
        guard !s.controllerScanning || wanted != s.parameters else { return nil }
        s.controllerScanning = true
        s.parameters = wanted
        return wanted
    }

    private func scan(with parameters: ScanParameters) {
        host.startScan(parameters) { [weak self] result in
            // Cancelled: every client stopped before the controller scanned (or a later start overtook this one).
            if case .failure(let error) = result, error.code != .cancelled { self?.controllerFailed() }
        }
    }

    /// Ends `client`'s scan; the controller stops when no client scans.
    func stop(_ client: any ScanClient) {
        stop(ObjectIdentifier(client))
    }

    /// Ends the scan of the client with this identifier (which may be mid-deinit).
    func stop(_ id: ObjectIdentifier) {
        hostOrder.withLock { _ in
            // Clients whose managers went away are swept too; their last references are let go after the lock.
            var released: [any ScanClient] = []
            var parameters: ScanParameters?
            let stopController = state.withLock { s -> Bool in
                guard s.scanners.removeValue(forKey: id) != nil else { return false }
                for (key, scanner) in s.scanners {
                    if let client = scanner.client { released.append(client) } else { s.scanners[key] = nil }
                }
                guard s.scanners.isEmpty else {
                    // The last foreground scanner gone: the others' background parameters apply.
                    if s.controllerScanning { parameters = changedParameters(&s) }
                    return false
                }
                guard s.controllerScanning else { return false }
                s.controllerScanning = false
                s.held.removeAll()
                s.scanResponses.removeAll()
                return true
            }
            if stopController { host.stopScan { _ in } }
            if let parameters { scan(with: parameters) }
            withExtendedLifetime(released) {}
        }
    }

    /// `old`'s scan becomes `new`'s, under the scan id `id` (a restored manager taking over); false when `old`
    /// was not scanning.
    func transfer(from old: ObjectIdentifier, to new: any ScanClient, id: UInt64) -> Bool {
        state.withLock { s in
            guard var scanner = s.scanners.removeValue(forKey: old) else { return false }
            scanner.client = new
            scanner.id = id
            s.scanners[ObjectIdentifier(new)] = scanner
            return true
        }
    }

    /// The request `client` scans with, if it scans.
    func request(of client: ObjectIdentifier) -> ScanRequest? {
        state.withLock { $0.scanners[client]?.request }
    }

    /// Whether `client` scans.
    func isScanning(_ client: any ScanClient) -> Bool {
        state.withLock { $0.scanners[ObjectIdentifier(client)] != nil }
    }

    /// The controller no longer scans (power off, a refused start): every client's scan ends.
    func controllerFailed() {
        let ended = state.withLock { s -> [(any ScanClient, UInt64)] in
            defer {
                s.scanners.removeAll()
                s.controllerScanning = false
                s.held.removeAll()
                s.scanResponses.removeAll()
            }
            return s.scanners.values.compactMap { scanner in scanner.client.map { ($0, scanner.id) } }
        }
        for (client, id) in ended { client.scanEnded(id) }
    }

    /// An advertising report from the controller: merged with its scan response, then handed to each client whose
    /// request it matches and whose coalescing lets it through.
    func received(_ report: AdvertisingReport) {
        // Strong references taken under the lock are let go after it (a manager's deinit takes this lock).
        var skipped: [any ScanClient] = []
        let deliveries = state.withLock { s -> [(any ScanClient, SystemDiscovery, UInt64)] in
            guard !s.scanners.isEmpty, let discovery = Self.merge(report, into: &s) else { return [] }
            var out: [(any ScanClient, SystemDiscovery, UInt64)] = []
            for (key, found) in s.scanners.sorted(by: { $0.value.id < $1.value.id }) {
                var scanner = found
                guard let client = scanner.client else { continue }
                guard scanner.request.matches(discovery.data), scanner.mode != .off else {
                    skipped.append(client)
                    continue
                }
                if scanner.mode == .background {
                    // IOSRules.md 1.1, 1.5, 1.6: no results without services; each device once per scan.
                    let hasServices = !(scanner.request.services ?? []).isEmpty
                    guard hasServices, scanner.reported[discovery.address] == nil else {
                        skipped.append(client)
                        continue
                    }
                } else if !scanner.request.allowDuplicates {
                    if let last = scanner.reported[discovery.address], Self.sameContent(last, discovery) {
                        skipped.append(client)
                        continue
                    }
                }
                scanner.reported[discovery.address] = discovery
                if scanner.reported.count > Self.memoryLimit { scanner.reported.removeFirst() }
                s.scanners[key] = scanner
                out.append((client, discovery, scanner.id))
            }
            return out
        }
        for (client, discovery, id) in deliveries { client.scanDiscovered(discovery, scan: id) }
        withExtendedLifetime(skipped) {}
    }

    /// The same advertisement, whatever the RSSI.
    private static func sameContent(_ a: SystemDiscovery, _ b: SystemDiscovery) -> Bool {
        a.advertisement == b.advertisement && a.scanResponse == b.scanResponse && a.kind == b.kind
    }

    /// Merges an advertisement with its scan response: a scannable advertisement is held until its response
    /// arrives (or the device's next advertisement shows the response was lost); other kinds pass at once.
    private static func merge(_ report: AdvertisingReport, into s: inout State) -> SystemDiscovery? {
        func discovery(_ adv: AdvertisingReport, scanResponse: [UInt8]?, rssi: Int?) -> SystemDiscovery {
            SystemDiscovery(
                address: adv.address, advertisement: adv.data, scanResponse: scanResponse, kind: adv.kind,
                connectable: adv.kind.isConnectable, rssi: rssi,
                data: AdvertisingData(
                    AdvertisingData(leniently: adv.data).structures
                        + AdvertisingData(leniently: scanResponse ?? []).structures))
        }
        func remember<V>(
            _ value: V, for address: BluetoothAddress, in map: inout OrderedDictionary<BluetoothAddress, V>
        ) {
            map.removeValue(forKey: address)
            map[address] = value
            if map.count > memoryLimit { map.removeFirst() }
        }
        switch report.kind {
        case .scanResponse:
            remember(report.data, for: report.address, in: &s.scanResponses)
            guard let held = s.held.removeValue(forKey: report.address) else { return nil }
            return discovery(held, scanResponse: report.data, rssi: report.rssi ?? held.rssi)
        case .connectableUndirected, .scannableUndirected:
            let earlier = s.held.removeValue(forKey: report.address)
            remember(report, for: report.address, in: &s.held)
            guard let earlier else { return nil }
            return discovery(earlier, scanResponse: s.scanResponses[report.address], rssi: earlier.rssi)
        case .connectableDirected, .nonConnectableUndirected:
            return discovery(report, scanResponse: nil, rssi: report.rssi)
        }
    }
}
