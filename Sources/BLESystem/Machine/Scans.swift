import BLECore
import BLEHost
import OrderedCollections

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
    /// The services of the scan it was reported to that an iOS app advertising in the background lists in
    /// Apple's overflow area (IOSRules.md 2.8): only a scan for a service sees its bit there, so this is set
    /// per scan, as the discovery is handed to it.
    public var overflowServices: [BluetoothUUID] = []
}

/// How a scan runs for its app's place in its lifecycle (IOSRules.md section 1 and 3.1).
package enum ScanMode: Sendable, Hashable {
    /// The app is in the foreground: the scan as asked.
    case foreground
    /// A `bluetooth-central` app out of the foreground: a scan with no services hears nothing; with services,
    /// each device is reported once per scan (duplicates are not reported, whatever was asked).
    case background
    /// A foreground-only app out of the foreground: it hears nothing.
    case off
}

/// The scans of every app of a system as one controller scan: the controller scans while any session does, with
/// the system's parameters; each advertisement is merged with its scan response once, here; each session gets
/// only what its own request matches, coalesced per session (a device is reported again when what it
/// advertises changes) unless it allows duplicates. Stopping ends one session's scan only.
///
/// Each session's scan runs in its app's `ScanMode`. When no session is in the foreground, the controller scans
/// with the background parameters (a longer interval, IOSRules.md 1.2: the figures are a setting).
///
/// Memory is bounded whatever the room: advertisements held for their scan response, scan responses, and each
/// session's record of what it was told are kept for the most recent `memoryLimit` devices.
///
/// A part of `SystemMachine`: its methods return the `SystemAction`s they produce (`.startScan`, `.stopScan`,
/// deliveries of `.discovered` and `.scanEnded`), in order.
package struct ScanUnion: Sendable {
    static let memoryLimit = 1_024
    static let parameters = ScanParameters(active: true, interval: 0x0060, window: 0x0030, filterDuplicates: false)
    /// The controller's parameters while every scanning app is out of the foreground.
    let backgroundParameters: ScanParameters
    /// Whether the controller asks for scan responses (`HostConfiguration.activeScanning`).
    let active: Bool

    struct Scanner: Sendable {
        var id: UInt64
        var request: ScanRequest
        var mode: ScanMode
        /// What this session was last told per device (coalescing).
        var reported = OrderedDictionary<BluetoothAddress, SystemDiscovery>()
    }

    private(set) var scanners: [SessionID: Scanner] = [:]
    private(set) var controllerScanning = false
    /// The parameters the controller was last asked to scan with.
    private(set) var parameters = ScanUnion.parameters
    /// Scannable advertisements waiting for their scan response (each with the number it was held under), and
    /// the last scan response per device.
    private var held = OrderedDictionary<BluetoothAddress, Held>()
    private var scanResponses = OrderedDictionary<BluetoothAddress, [UInt8]>()
    /// The number the next held advertisement gets.
    private var nextHeld: UInt64 = 0
    /// The wait for scan responses under way (`.startTimer(.scanResponseWait)`): its token, and the number of the
    /// first advertisement held after it started (those before it are let go of when it ends).
    private var waiting: (token: UInt64, before: UInt64)?
    private var nextWait: UInt64 = 1
    /// The held advertisement the memory bound just pushed out, to report.
    private var evicted: Held?

    struct Held: Sendable {
        var report: AdvertisingReport
        var number: UInt64
    }

    /// How long a scannable advertisement waits for its scan response at most (between this and twice this): a
    /// device that advertised once and stopped, or whose response was lost and that does not advertise again,
    /// is reported without it rather than never.
    static let scanResponseWait: Duration = .seconds(1)

    package init(backgroundParameters: ScanParameters, active: Bool = true) {
        self.backgroundParameters = backgroundParameters
        self.active = active
    }

    /// The parameters the scanners' modes call for.
    private var wantedParameters: ScanParameters {
        var wanted = scanners.values.contains { $0.mode == .foreground } ? Self.parameters : backgroundParameters
        wanted.active = active
        return wanted
    }

    /// Starts (or changes) `session`'s scan. Every discovery for it carries `id`, which the session chose and
    /// recorded before asking, so that none can arrive before it knows the scan it belongs to.
    mutating func start(_ session: SessionID, _ request: ScanRequest, id: UInt64, mode: ScanMode) -> [SystemAction] {
        scanners[session] = Scanner(id: id, request: request, mode: mode)
        return changedParameters()
    }

    /// Sets each listed session's mode (its app moved in its lifecycle); the controller's parameters follow.
    mutating func setModes(_ modes: [SessionID: ScanMode]) -> [SystemAction] {
        for (session, mode) in modes where scanners[session] != nil { scanners[session]?.mode = mode }
        return controllerScanning ? changedParameters() : []
    }

    /// The controller starts, or changes, when the parameters wanted are not those it scans with.
    private mutating func changedParameters() -> [SystemAction] {
        let wanted = wantedParameters
        guard !controllerScanning || wanted != parameters else { return [] }
        controllerScanning = true
        parameters = wanted
        return [.startScan(wanted)]
    }

    /// Ends `session`'s scan; the controller stops when no session scans.
    mutating func stop(_ session: SessionID) -> [SystemAction] {
        guard scanners.removeValue(forKey: session) != nil else { return [] }
        guard scanners.isEmpty else {
            // The last foreground scanner gone: the others' background parameters apply.
            return controllerScanning ? changedParameters() : []
        }
        guard controllerScanning else { return [] }
        controllerScanning = false
        held.removeAll()
        waiting = nil
        scanResponses.removeAll()
        return [.stopScan]
    }

    /// `old`'s scan becomes `new`'s, under the scan id `id` (a restored manager taking over); false when `old`
    /// was not scanning.
    mutating func transfer(from old: SessionID, to new: SessionID, id: UInt64) -> Bool {
        guard var scanner = scanners.removeValue(forKey: old) else { return false }
        scanner.id = id
        scanners[new] = scanner
        return true
    }

    /// How many advertisements wait for their scan response.
    var heldCount: Int { held.count }

    /// How many devices `session`'s record of what it was told holds.
    func remembered(by session: SessionID) -> Int { scanners[session]?.reported.count ?? 0 }

    /// The request `session` scans with, if it scans.
    func request(of session: SessionID) -> ScanRequest? { scanners[session]?.request }

    /// The id `session`'s scan's discoveries carry (nil: it does not scan).
    func scanID(of session: SessionID) -> UInt64? { scanners[session]?.id }

    /// The controller no longer scans (power off, a reset, a start it `refused`): every session's scan ends, and
    /// each hears it, in the order the scans were started.
    mutating func controllerFailed(refused: HostError? = nil) -> [SystemAction] {
        let ended = scanners.sorted { $0.value.id < $1.value.id }.map {
            SystemAction.deliver($0.key, .scanEnded($0.value.id, refused: refused))
        }
        scanners.removeAll()
        controllerScanning = false
        held.removeAll()
        waiting = nil
        scanResponses.removeAll()
        return ended
    }

    /// An advertising report from the controller: merged with its scan response, then handed to each session
    /// whose request it matches and whose coalescing lets it through, in the order the scans were started.
    mutating func received(_ report: AdvertisingReport, into actions: inout [SystemAction]) {
        guard !scanners.isEmpty else { return }
        let discovery = merge(report)
        // One held advertisement too many for the memory bound: reported as the wait's end would.
        if let evicted {
            self.evicted = nil
            deliver(
                Self.discovery(
                    evicted.report, scanResponse: scanResponses[evicted.report.address],
                    rssi: evicted.report.rssi),
                into: &actions)
        }
        if waiting == nil, !held.isEmpty { startWaiting(&actions) }
        guard let discovery else { return }
        deliver(discovery, into: &actions)
    }

    /// Starts the wait for the scan responses of the advertisements held now.
    private mutating func startWaiting(_ actions: inout [SystemAction]) {
        waiting = (nextWait, nextHeld)
        actions.append(.startTimer(.scanResponseWait(nextWait), after: Self.scanResponseWait))
        nextWait += 1
    }

    /// The wait `token` ended: the advertisements held before it started that still have no scan response are
    /// reported without it (with the device's last known response, if any); a wait follows for those held since.
    mutating func scanResponseWaitEnded(_ token: UInt64, into actions: inout [SystemAction]) {
        guard let wait = waiting, wait.token == token else { return }
        waiting = nil
        // Held in the order of their numbers (a device held again goes to the end): those due are the first.
        let due = held.values.firstIndex { $0.number >= wait.before } ?? held.count
        for (address, entry) in held.elements.prefix(due) {
            deliver(
                Self.discovery(entry.report, scanResponse: scanResponses[address], rssi: entry.report.rssi),
                into: &actions)
        }
        held.removeFirst(due)
        if !held.isEmpty { startWaiting(&actions) }
    }

    /// Hands `discovery` to each session whose request it matches and whose coalescing lets it through.
    private mutating func deliver(_ discovery: SystemDiscovery, into actions: inout [SystemAction]) {
        for key in scanners.keys.sorted(by: { scanners[$0]!.id < scanners[$1]!.id }) {
            var scanner = scanners[key]!
            guard scanner.request.matches(discovery.data), scanner.mode != .off else { continue }
            if scanner.mode == .background {
                // IOSRules.md 1.1, 1.5, 1.6: no results without services; each device once per scan.
                let hasServices = !(scanner.request.services ?? []).isEmpty
                guard hasServices, scanner.reported[discovery.address] == nil else { continue }
            } else if !scanner.request.allowDuplicates {
                if let last = scanner.reported[discovery.address], Self.sameContent(last, discovery) { continue }
            }
            scanner.reported[discovery.address] = discovery
            if scanner.reported.count > Self.memoryLimit { scanner.reported.removeFirst() }
            scanners[key] = scanner
            var told = discovery
            if let services = scanner.request.services, !services.isEmpty {
                told.overflowServices = AppleOverflowArea.listed(services, in: discovery.data)
            }
            actions.append(.deliver(key, .discovered(told, scan: scanner.id)))
        }
    }

    /// The same advertisement, whatever the RSSI.
    private static func sameContent(_ a: SystemDiscovery, _ b: SystemDiscovery) -> Bool {
        a.advertisement == b.advertisement && a.scanResponse == b.scanResponse && a.kind == b.kind
    }

    /// One device heard: `adv` with `scanResponse`, decoded together.
    private static func discovery(_ adv: AdvertisingReport, scanResponse: [UInt8]?, rssi: Int?) -> SystemDiscovery {
        SystemDiscovery(
            address: adv.address, advertisement: adv.data, scanResponse: scanResponse, kind: adv.kind,
            connectable: adv.kind.isConnectable, rssi: rssi,
            data: AdvertisingData(
                AdvertisingData(leniently: adv.data).structures
                    + AdvertisingData(leniently: scanResponse ?? []).structures))
    }

    /// Merges an advertisement with its scan response: in an active scan, a scannable advertisement is held until
    /// its response arrives (or the device's next advertisement shows the response was lost, or the wait for
    /// responses ends: `scanResponseWaitEnded`); other kinds, and every kind in a passive scan, pass at once.
    private mutating func merge(_ report: AdvertisingReport) -> SystemDiscovery? {
        func remember<V>(
            _ value: V, for address: BluetoothAddress, in map: inout OrderedDictionary<BluetoothAddress, V>
        ) {
            map.removeValue(forKey: address)
            map[address] = value
            if map.count > ScanUnion.memoryLimit { map.removeFirst() }
        }
        switch report.kind {
        case .scanResponse:
            remember(report.data, for: report.address, in: &scanResponses)
            guard let held = held.removeValue(forKey: report.address)?.report else { return nil }
            return Self.discovery(held, scanResponse: report.data, rssi: report.rssi ?? held.rssi)
        case .connectableUndirected where active, .scannableUndirected where active:
            let earlier = held.removeValue(forKey: report.address)?.report
            held[report.address] = Held(report: report, number: nextHeld)
            nextHeld += 1
            if held.count > ScanUnion.memoryLimit { evicted = held.removeFirst().value }
            guard let earlier else { return nil }
            return Self.discovery(earlier, scanResponse: scanResponses[report.address], rssi: earlier.rssi)
        case .connectableUndirected, .scannableUndirected, .connectableDirected, .nonConnectableUndirected:
            // Passive: no scan request is sent, so no response comes to wait for.
            return Self.discovery(report, scanResponse: nil, rssi: report.rssi)
        }
    }
}
