import BLECore
import BLEHost
import BLESystem
import BLETransport
import Dispatch
import Foundation
import Logging
import Synchronization

/// Scans for, connects to and tracks remote peripherals (`CBCentralManager`).
///
/// Every delegate method is called on the manager's queue (the main queue when `queue` is nil), never under
/// a lock. Objects (`Peripheral`, `Service`, ...) are updated on that queue just before the callback that
/// reports the change, so a callback always sees the value it is about.
public final class CentralManager: Sendable {
    let system: BluetoothSystem
    /// What the system knows this manager by (its registration, scan, links and subscriptions): every call to the
    /// system names the manager with it, and the system's calls come through it.
    let session = CentralSession()
    let queue: DispatchQueue
    /// The options this manager was created with.
    public let options: Options?

    struct State {
        var managerState: ManagerState = .unknown
        var scan: ScanSession?
        var nextScanID: UInt64 = 1
        /// Every `Peripheral` this manager handed out that someone still holds, so one identifier is one object.
        /// Held weakly, as CoreBluetooth holds them: an app keeps the peripherals it cares about (a connection
        /// holds its own, below), and devices it heard once and dropped cost nothing.
        var peripherals: [UUID: WeakPeripheral] = [:]
        /// Sweep the entries of released peripherals when the table grows past this.
        var sweepAt = 1_024
        var byHandle: [ConnectionHandle: Peripheral] = [:]
        /// Kept by the system for its terminated app (state restoration): nothing is delivered to it.
        var preserved = false
        /// What happened while kept, for the manager that restores it (made from the system's notes as they are
        /// applied, `absorb`).
        var restorationEvents: [RestorationEvent] = []
        /// Peripherals asked to connect and not connected yet, by address: the system initiates toward all of
        /// them (and every other app's) at once.
        var pending: [BluetoothAddress: Peripheral] = [:]
        /// What `registerForConnectionEvents(options:)` asked for (nil: not registered).
        var connectionEvents: ConnectionEventMatchingOptions?
        /// The services each device last advertised, for matching connection events by service; kept only
        /// while registered, and for at most `advertisedServicesLimit` devices (rotating addresses would grow it
        /// without end).
        var advertisedServices: [BluetoothAddress: [BluetoothUUID]] = [:]
        /// Tasks awaiting `.poweredOn` (`waitUntilPoweredOn`).
        var poweredOnWaits = PoweredOnWaits()
        /// Set when the manager's app ended: an async wait asked later fails at once with it.
        var abandoned: BluetoothError?

        mutating func remember(_ services: [BluetoothUUID], _ address: BluetoothAddress) {
            guard !services.isEmpty else { return }
            if advertisedServices[address] == nil, advertisedServices.count >= CentralManager.advertisedServicesLimit {
                advertisedServices.removeAll(keepingCapacity: true)
            }
            advertisedServices[address] = services
        }
    }

    static let advertisedServicesLimit = 1024

    struct ScanSession {
        /// Which `scanForPeripherals` call made it (the id the system's discoveries carry): a discovery is
        /// delivered only while its session lasts.
        var id: UInt64
        var services: [BluetoothUUID]?
        var options: ScanOptions?
    }

    let locked = Mutex(State())
    let delegateCell = DelegateCell<any CentralManagerDelegate>(nil)

    /// The app this manager belongs to.
    public let app: BluetoothSystem.App
    /// The app's launch this manager was made in: after a termination nothing reaches it.
    let launch: UInt64

    /// Creates a central manager of `system`'s default app (the process default system when nil:
    /// `BLE_TRANSPORT`, or the virtual radio). `centralManagerDidUpdateState` follows once the controller is
    /// ready.
    public convenience init(
        delegate: (any CentralManagerDelegate)?, queue: DispatchQueue?, options: Options? = nil,
        system: BluetoothSystem? = nil
    ) {
        self.init(delegate: delegate, queue: queue, options: options, app: (system ?? .processDefault).defaultApp)
    }

    /// Creates a central manager of `app`.
    public init(
        delegate: (any CentralManagerDelegate)?, queue: DispatchQueue?, options: Options? = nil,
        app: BluetoothSystem.App
    ) {
        self.app = app
        self.launch = app.core.generation
        self.system = app.system
        self.queue = queue ?? .main
        self.options = options
        session.attach(self)
        delegateCell.value = delegate
        // Relaunched for state restoration: take over from the manager the system kept, before registering, so
        // that `willRestoreState` comes first, as CoreBluetooth tells it. Nothing reaches this manager until it
        // takes the kept one's place, and nothing reached the kept one since it was kept: the system noted it.
        let kept = options?.restoreIdentifier.flatMap { app.system.takeKeptCentral(of: app, restoreIdentifier: $0) }
        if options?.restoreIdentifier != nil, !app.backgroundModes.contains(.bluetoothCentral) {
            // iOS fails an assertion here; this manager works, without restoration.
            Self.apiLogger.error(
                "API MISUSE: a central manager with a restore identifier in an app without the bluetooth-central background mode: it will not be restored",
                metadata: ["app": "\(app.id)"])
        }
        if let kept {
            // In the controller's serial domain, where whatever the system was still doing for the kept manager as
            // its app ended is done: at once when this manager is made there (a relaunch's launch handler runs
            // there), else as soon as the domain is free.
            system.core.inDomain { [self] in takeOver(kept) }
        } else {
            self.system.core.register(session, app: app.core, role: .central)
            showPowerAlert()
        }
    }

    /// Made while Bluetooth is off, a central manager shows "turn on Bluetooth" unless told not (the system's rule).
    private func showPowerAlert() {
        if options?.showPowerAlert ?? true { system.core.powerAlert(for: ObjectIdentifier(session)) }
    }

    /// Takes the kept manager's place, in the controller's serial domain (what it steps is performed after it):
    /// applies the system's notes to the kept manager, takes its state and tells `willRestoreState`, then the
    /// state the kept one was last told and what happened while it was kept, each queued after the restoration;
    /// then, in the kept manager's place in one step, what the system noted for it since and what was still
    /// queued for it, before anything later. When the app ended again before the domain got to it, the notes are
    /// the kept manager's, which stays kept.
    private func takeOver(_ taken: (kept: CentralManager, notes: [SessionEvent], power: SystemPowerState)) {
        guard !isDefunct else {
            taken.kept.absorb(taken.notes)
            return system.keptAgain(
                app, role: .central, restoreIdentifier: options?.restoreIdentifier,
                wakes: taken.kept.hasRestorationEvents)
        }
        system.core.holdingDrains {
            taken.kept.absorb(taken.notes)
            let (events, scan) = restore(from: taken.kept)
            if taken.power != .unknown { powerChanged(taken.power) }
            replay(events)
            // (Unauthorized, the kept one had its scan and links ended by the system when it was told so.)
            system.core.replaceKept(taken.kept.session, with: session, app: app.core, scan: scan)
            // Registered for connection events before the system knew this manager (its delegate's
            // `willRestoreState`, on another queue): the system is told now.
            if locked.withLock({ $0.connectionEvents != nil }) { system.core.watchConnections(session) }
        }
        showPowerAlert()
    }

    /// A manager without a delegate on the main queue.
    public convenience init() {
        self.init(delegate: nil, queue: nil, options: nil, system: nil)
    }

    deinit {
        // A manager that goes away stops its scan, cancels its pending connects and lets go of its links, as
        // CoreBluetooth's does; other apps' scans and links go on. Nothing is carried on for it.
        // The system knows it by `session`, which lives until this body has run.
        if let key = preservationKey { system.forgetPreserved(key, owner: ObjectIdentifier(session)) }
        system.core.stopScan(session)
        system.core.releaseLinks(of: ObjectIdentifier(session))
        system.core.unregister(session)
    }

    public var delegate: (any CentralManagerDelegate)? {
        get { delegateCell.value }
        set { delegateCell.value = newValue }
    }

    /// Whether a scan is running.
    public var isScanning: Bool { locked.withLock { $0.scan != nil } }

    // MARK: Scanning

    /// Scans for advertising peripherals, reporting those that advertise any of `serviceUUIDs` (all when nil).
    ///
    /// Without `allowDuplicates`, one peripheral is reported once per scan and again only when its
    /// advertisement data changes; with it, every advertisement is reported. Active scanning is used, so a
    /// scannable peripheral's scan response is merged into the same report. Calling this while scanning
    /// replaces the filter and options, as CoreBluetooth does.
    ///
    /// The system scans for every app at once: this manager's filter, duplicates policy and `stopScan` are its
    /// own, and other managers' scans do not change what it sees.
    public func scanForPeripherals(withServices serviceUUIDs: [BluetoothUUID]?, options: ScanOptions? = nil) {
        guard !isDefunct else { return defunct("scanForPeripherals") }
        guard currentState == .poweredOn else { return misuse("scanForPeripherals") }
        let request = ScanRequest(
            services: serviceUUIDs, solicitedServices: options?.solicitedServiceUUIDs ?? [],
            allowDuplicates: options?.allowDuplicates == true)
        // The scan session first, so that no discovery can come before it; the system's call not under the
        // manager's lock, since the host may pass events up from inside it.
        let id = locked.withLock { s -> UInt64 in
            defer { s.nextScanID += 1 }
            s.scan = ScanSession(id: s.nextScanID, services: serviceUUIDs, options: options)
            return s.nextScanID
        }
        system.core.startScan(session, request, id: id)
        persistRestorableState()
    }

    /// Stops this manager's scan.
    public func stopScan() {
        guard !isDefunct else { return defunct("stopScan") }
        locked.withLock { $0.scan = nil }
        system.core.stopScan(session)
        persistRestorableState()
    }

    // MARK: The system's scan (its `SessionEvent`s, through `session`)

    func scanDiscovered(_ discovery: SystemDiscovery, scan id: UInt64) {
        discovered(discovery, scan: id)
    }

    private func discovered(_ discovery: SystemDiscovery, scan id: UInt64) {
        guard let scan = locked.withLock({ $0.scan }), scan.id == id else { return }
        if isPreserved { return noteForRestoration(.discovered(discovery)) }
        var decoded = AdvertisementData(decoded: discovery.data, connectable: discovery.connectable)
        // The services an iOS app advertising in the background lists only in the overflow area, as the system
        // read them for this scan.
        if !discovery.overflowServices.isEmpty { decoded.overflowServiceUUIDs = discovery.overflowServices }
        decoded.advertisingType = AdvertisingPDUType(rawValue: discovery.kind.rawValue)
        decoded.rawAdvertisement = Data(discovery.advertisement)
        decoded.rawScanResponse = discovery.scanResponse.map { Data($0) }
        let advertisement = decoded
        // Only a device that matched gets an identifier (and a row in the store) and a `Peripheral`.
        let peripheral = peripheral(for: discovery.address)
        system.core.store.noteSeen(peripheral.identifier, name: advertisement.localName)
        let rssi = discovery.rssi ?? 127
        // With duplicates allowed, a discovery repeats: one the app is too far behind to take can go.
        deliver(repeating: scan.options?.allowDuplicates == true, key: DeliveryKey(peripheral)) { manager in
            // Not after `stopScan` (or a new scan) returned on this queue.
            guard manager.locked.withLock({ $0.scan?.id == id }) else { return }
            if let name = advertisement.localName, peripheral.updateName(name) { peripheral.tell(.nameUpdated) }
            manager.tell(.discovered(peripheral, advertisement, rssi: rssi))
        }
    }

    func scanEnded(_ id: UInt64, refused: HostError?) {
        scanStopped(id, refused: refused)
    }

    private func scanStopped(_ id: UInt64, refused: HostError?) {
        // CoreBluetooth has no callback for a scan that could not start or stopped by itself; `isScanning` turns
        // false.
        // Not written to the preserved state: a scan that ends by itself (the controller going away, a start it
        // refused) is not the app's wish changing, and a restarted system starts it again.
        let current = locked.withLock { s -> Bool in
            guard s.scan?.id == id else { return false }
            s.scan = nil
            return true
        }
        // The async scan streams share this scan: one the controller refused ends them with why, on the queue
        // after what was discovered before. (One that ended with the controller ends with the power state's
        // change, which follows.)
        guard current, let refused, !isPreserved else { return }
        let error = BluetoothError(
            BluetoothError(refused).code, "the controller did not scan: \(refused.message)",
            hciStatus: refused.hciStatus)
        deliver { manager in manager.existingAsyncObserver?.scanEnded(error) }
    }

    // MARK: Connections

    /// Connects to `peripheral`. The request does not time out: it stays pending until the peripheral is
    /// found or `cancelPeripheralConnection` is called, as in CoreBluetooth. Pending requests of every app are
    /// initiated together, so a peripheral that never appears holds up no other. When another app of the system
    /// is connected to the peripheral already, the link is shared and `didConnect` follows at once.
    public func connect(_ peripheral: Peripheral, options: ConnectOptions? = nil) {
        connect(peripheral, options: options, wait: nil)
    }

    /// A connect, the delegate's or an async one's: `wait` (the async connect's) joins the attempt, started or
    /// under way, or is finished at once when the request is refused or the peripheral is connected already.
    func connect(_ peripheral: Peripheral, options: ConnectOptions?, wait: Waiter<Void>?) {
        guard !isDefunct else { return refuse(wait, Self.appTerminated, else: defunct("connect")) }
        guard currentState == .poweredOn else {
            return refuse(wait, .notPoweredOn(currentState, system: system), else: misuse("connect"))
        }
        // A bonded peer known by a private address is connected to by the identity it gave (the host finds where
        // it is now); one known by a public or static address is heard with that address again.
        if !peripheral.address.isStableOnAir,
            let identity = system.core.store.bond(for: peripheral.identifier)?.identityAddress,
            identity != peripheral.address
        {
            peripheral.readdress(identity)
        }
        // In one lock section with the power state's change (which fails what is pending then) and the app's end
        // (which fails the waits then): a request either comes before them, and is failed with the rest, or
        // sees them.
        enum Outcome {
            case asked(Peripheral.ConnectAsk)
            case refused(BluetoothError)
            case notPoweredOn(ManagerState)
        }
        let outcome = locked.withLock { s -> Outcome in
            if wait != nil, let error = s.abandoned { return .refused(error) }
            guard s.managerState == .poweredOn else { return .notPoweredOn(s.managerState) }
            let ask = peripheral.connectRequested(
                autoReconnect: options?.enableAutoReconnect == true,
                alerts: .init(
                    onConnection: options?.notifyOnConnection == true,
                    onDisconnection: options?.notifyOnDisconnection == true,
                    onNotification: options?.notifyOnNotification == true),
                wait: wait)
            if ask == .started {
                s.peripherals[peripheral.identifier] = WeakPeripheral(peripheral: peripheral)
                s.pending[peripheral.address] = peripheral
            }
            return .asked(ask)
        }
        switch outcome {
        case .refused(let error): wait?.fail(error)
        case .notPoweredOn(let state): refuse(wait, .notPoweredOn(state, system: system), else: misuse("connect"))
        case .asked(.connected): wait?.resume(.success(()))
        case .asked(.disconnecting):
            wait?.fail(
                BluetoothError(.invalidParameters, "the peripheral is still disconnecting; await disconnect(_:) first"))
        case .asked(.joined): break
        case .asked(.started):
            persistRestorableState()
            let reconnect = options?.enableAutoReconnect == true
            let alerts = ConnectionAlertWishes(
                connection: options?.notifyOnConnection == true,
                disconnection: options?.notifyOnDisconnection == true,
                notification: options?.notifyOnNotification == true)
            if let link = system.core.connect(
                session, to: peripheral.address, autoReconnect: reconnect, alerts: alerts)
            {
                joinedAtOnce(link)
            }
        }
    }

    /// An async disconnect's wait, kept with the peripheral until it is `.disconnected` (true: the caller asks
    /// the disconnection); finished at once (false) when the peripheral is disconnected already, or failed when
    /// the manager's app ended.
    func awaitDisconnection(_ peripheral: Peripheral, _ wait: Waiter<Void>) -> Bool {
        let (kept, refusal) = locked.withLock { s -> (Bool, BluetoothError?) in
            if let error = s.abandoned { return (false, error) }
            return (peripheral.awaitDisconnection(wait), nil)
        }
        if let refusal { wait.fail(refusal) } else if !kept { wait.resume(.success(())) }
        return kept
    }

    /// A refused request: an async one's wait fails with `error`; a delegate-style one is logged (`log`).
    private func refuse(_ wait: Waiter<Void>?, _ error: BluetoothError, else log: @autoclosure () -> Void) {
        if let wait { wait.fail(error) } else { log() }
    }

    /// Cancels a pending connection or disconnects. Every operation pending on the peripheral completes with
    /// an error; `didDisconnectPeripheral` follows with a nil error. A link other apps of the system use stays
    /// up for them; for this manager it is over at once.
    public func cancelPeripheralConnection(_ peripheral: Peripheral) {
        guard !isDefunct else { return defunct("cancelPeripheralConnection") }
        let asked = locked.withLock { s -> Bool in
            switch peripheral.currentState {
            case .connecting, .connected:
                // The call's own effect, at once: `.disconnecting`; `.disconnected` follows on the manager's
                // queue, just before `didDisconnectPeripheral`.
                peripheral.setState(.disconnecting)
                peripheral.setCancelled(true)
                peripheral.stopReconnecting()
                return true
            case .disconnecting, .disconnected:
                return false
            }
        }
        guard asked else { return }
        defer { persistRestorableState() }
        switch system.core.cancelConnection(session, from: peripheral.address) {
        case .nothing:
            // Not the system's any more (a link that went down as this was called): pending here only, if at all.
            guard locked.withLock({ $0.pending.removeValue(forKey: peripheral.address) }) != nil else { break }
            announceCancelled(peripheral)
        case .withdrawn:
            // A link lost as the system was reconnecting may not have been told yet: its late end finds nothing.
            locked.withLock { s in
                s.pending[peripheral.address] = nil
                for (handle, p) in s.byHandle where p === peripheral { s.byHandle[handle] = nil }
            }
            peripheral.linkDown()
            announceCancelled(peripheral)
        case .left(let handle):
            // Others stay on the link: this manager is off it now, and so are the subscriptions only it wanted (the
            // system ended them on the peer).
            locked.withLock { s in
                s.pending[peripheral.address] = nil
                s.byHandle[handle] = nil
            }
            peripheral.linkDown()
            announceCancelled(peripheral)
        case .disconnecting(let handle):
            // The last user: `linkDown` follows when the controller has disconnected. The system may have attached
            // this manager to the link before it was told (a reconnection, or a connect just made): the link is its
            // own from now on, so its end is told.
            locked.withLock { s in
                s.pending[peripheral.address] = nil
                s.byHandle[handle] = peripheral
            }
        }
    }

    /// `didDisconnectPeripheral` with no error, for a connection the application cancelled.
    private func announceCancelled(_ peripheral: Peripheral) {
        let timestamp = system.absoluteTime
        deliver { manager in
            let ended = peripheral.announceDisconnection(at: timestamp, reconnecting: false, error: nil)
            manager.tell(.disconnected(peripheral, nil))
            ended.finish()
        }
    }

    /// Known peripherals with these identifiers: ones this manager has seen, or whose identifiers the system
    /// handed out before, also before a restart on the same store (so a stored identifier can be reconnected
    /// without scanning), with the name they last advertised. Unknown identifiers are left out.
    public func retrievePeripherals(withIdentifiers identifiers: [UUID]) -> [Peripheral] {
        identifiers.compactMap { id in
            if let known = locked.withLock({ $0.peripherals[id]?.peripheral }) { return known }
            guard let stored = system.core.store.knownPeer(id) else { return nil }
            let peripheral = peripheral(for: stored.address, identifier: id)
            if let name = stored.name, peripheral.name == nil { peripheral.updateName(name) }
            return peripheral
        }
    }

    /// Peripherals connected to the system, by any of its apps, that have any of `serviceUUIDs` among the
    /// services discovered on them (by any app). Empty when `serviceUUIDs` is empty or the manager is not
    /// `.poweredOn`, as on iOS. A peripheral another app connected is `.disconnected` for this manager until it
    /// calls `connect`, which then succeeds at once.
    public func retrieveConnectedPeripherals(withServices serviceUUIDs: [BluetoothUUID]) -> [Peripheral] {
        // CoreBluetooth's answer: an empty service list returns nothing, and so does a call before `.poweredOn`.
        guard !serviceUUIDs.isEmpty, currentState == .poweredOn else { return [] }
        return system.core.connectedPeers(offering: serviceUUIDs).map { peripheral(for: $0) }.sorted {
            $0.identifier.uuidString < $1.identifier.uuidString
        }
    }

    // MARK: Internals

    static let apiLogger = Logger(label: "swift-ble.api")

    /// A call CoreBluetooth ignores unless the manager is powered on: ignored too, and logged, not dropped in
    /// silence. (The async layer waits for `.poweredOn` or fails with the state's reason instead.)
    private func misuse(_ call: String) {
        Self.apiLogger.warning(
            "API misuse: \(call) while the manager is \(currentState), not poweredOn; the call is ignored")
    }

    /// Whether this manager's app was terminated since it was made: what it asks is refused (the system may
    /// still keep its work for a restoration, which its own code must not undo).
    var isDefunct: Bool { launch != app.core.generation }

    /// Refuses a call of a terminated app's manager, logged.
    private func defunct(_ call: String) {
        Self.apiLogger.warning("API misuse: \(call) on a manager of a terminated app; the call is ignored")
    }

    var currentState: ManagerState { locked.withLock { $0.managerState } }

    func peripheral(for address: BluetoothAddress, identifier: UUID? = nil) -> Peripheral {
        let id = identifier ?? system.core.store.identifier(for: address)
        return locked.withLock { s in
            if let p = s.peripherals[id]?.peripheral {
                // Heard at another address (a bonded peer's identity, once resolved).
                if identifier == nil, p.address != address { p.readdress(address) }
                return p
            }
            let p = Peripheral(identifier: id, address: address, manager: self)
            s.peripherals[id] = WeakPeripheral(peripheral: p)
            if s.peripherals.count > s.sweepAt {
                s.peripherals = s.peripherals.filter { $0.value.peripheral != nil }
                s.sweepAt = max(1_024, 2 * s.peripherals.count)
            }
            return p
        }
    }

    private func initiationEnded(_ peripheral: Peripheral, error: HostError) {
        let failure = Self.connectFailure(error)
        deliver { manager in
            let ended = peripheral.announceDisconnected(failing: failure)
            manager.tell(.failedToConnect(peripheral, failure))
            ended.finish()
        }
    }

    // MARK: The system's links (its `SessionEvent`s, through `session`)

    /// The system attached this manager to a link it waited for (delivered in order: if the link goes down, its
    /// `linkDown` comes after this).
    func linkAttached(_ link: LinkInfo) {
        attached(link, returned: false)
    }

    /// `connect` returned a link already up (another app's): this manager is on it now, but the link may have
    /// gone down since the call returned, its `linkDown` delivered before this manager knew the handle.
    func joinedAtOnce(_ link: LinkInfo) {
        attached(link, returned: true)
    }

    private func attached(_ link: LinkInfo, returned: Bool) {
        // In one lock section with `cancelPeripheralConnection`'s: a cancel sees either the pending connect or
        // the link, never neither.
        let found = locked.withLock { s -> Peripheral? in
            guard let p = s.pending.removeValue(forKey: link.peer) else { return nil }
            s.byHandle[link.handle] = p
            p.linkUp(handle: link.handle)
            return p
        }
        // Not found: cancelled meanwhile. The system took this manager off the link then, unless the cancel
        // came between an automatic reconnection's pending entry and its request to the system: leave it now
        // (nothing happens when the manager is not on the link), so no link is held for nobody.
        guard let peripheral = found else {
            _ = system.core.cancelConnection(session, from: link.peer)
            return
        }
        // A link joined as it went down: its `linkDown` came before this manager knew the handle. (Only a link
        // `connect` returned: an attachment the system delivered comes before the link's end.)
        guard !returned || system.core.isOnLink(ObjectIdentifier(session), link.handle) else {
            // A connect that asked to reconnect was put back among the waiting by that end (the system attached it
            // at once, so it was on the link): it goes on, the app none the wiser.
            if peripheral.wantsAutoReconnect, !peripheral.isCancelled {
                locked.withLock { _ = $0.byHandle.removeValue(forKey: link.handle) }
                return reconnectionStarted(peripheral, reason: .connectionTerminatedByLocalHost, announced: false)
            }
            return handleDisconnected(link.handle, reason: .connectionTerminatedByLocalHost, reconnecting: false)
        }
        system.core.store.noteSeen(peripheral.identifier, name: nil)
        if isPreserved { return noteForRestoration(.connected(peripheral)) }
        // Held for a suspended app (not woken for it), the connection is told even if the link is gone by then.
        let held = app.core.lifecycle == .suspended && !app.core.backgroundModes.contains(.bluetoothCentral)
        deliver { manager in
            // `.connected` here, on the manager's queue, just before the callback that announces it.
            guard let ended = peripheral.announceConnected(evenIfGone: held) else { return }
            manager.tell(.connected(peripheral))
            ended.finish()
        }
    }

    func linkFailed(peer: BluetoothAddress, error: HostError) {
        failed(peer: peer, error: error)
    }

    /// The system gave up connecting to `peer` for this manager: the attempt failed, or a reconnection ended
    /// because the peer no longer has the bond's key (the system tries again by itself after any other failure).
    private func failed(peer: BluetoothAddress, error: HostError) {
        guard let peripheral = locked.withLock({ $0.pending.removeValue(forKey: peer) }) else { return }
        if peripheral.isReconnecting {
            Self.apiLogger.notice(
                "reconnection to \(peripheral.identifier) stopped: \(error.message)")
        }
        peripheral.stopReconnecting()
        persistRestorableState()
        if isPreserved { return noteForRestoration(.failedToConnect(peripheral, Self.connectFailure(error))) }
        initiationEnded(peripheral, error: error)
    }

    func linkDown(_ handle: ConnectionHandle, reason: HCIStatus, reconnecting: Bool) {
        handleDisconnected(handle, reason: reason, reconnecting: reconnecting)
    }

    /// Runs `body` on the manager's queue, through the app's delivery (in order, counted by the system's
    /// scheduler); a `repeating` event is dropped, and counted, when the app is far behind (`SystemApp`). The
    /// body changes the objects, then `tell`s the event.
    func deliver(
        repeating: Bool = false, key: DeliveryKey? = nil, _ body: @escaping @Sendable (CentralManager) -> Void
    ) {
        // A central event: the app's delivery decides whom it wakes.
        app.core.deliver(on: queue, generation: launch, repeating: repeating, wakes: .central, key: key) { [self] in
            body(self)
        }
    }

    func systemAppTerminated() {
        // As `deinit` does; the system unregisters this manager next, and nothing reaches it any more.
        system.core.stopScan(session)
        system.core.releaseLinks(of: ObjectIdentifier(session))
    }

    // MARK: Async observation

    /// Internal observers (the async layer): each event `tell` tells the delegate, they consume after it.
    let observers = ObserverList<any CentralManagerObserver>()

    // MARK: The system's events (`SystemSession`, through `session`)

    func systemPowerStateChanged(_ power: SystemPowerState) {
        powerChanged(power)
    }

    /// A change of the controller's power state, told.
    func powerChanged(_ power: SystemPowerState) {
        let new = ManagerState(power)
        let changed = locked.withLock { s -> Bool in
            guard s.managerState != new else { return false }
            s.managerState = new
            if new != .poweredOn { s.scan = nil }
            return true
        }
        guard changed else { return }
        switch new {
        case .poweredOff where system.core.isShutDown:
            failAllLinks(BluetoothError(.systemShutDown, "the system was shut down"))
        case .poweredOff:
            failAllLinks(BluetoothError(.transportClosed, "the controller went away"))
        case .resetting:
            // Every link is gone with the controller's reset; the peripherals are disconnected without a callback
            // each, as CoreBluetooth does, and what was pending on them fails.
            failAllLinks(BluetoothError(.peripheralDisconnected, "the controller was reset (a hardware error)"))
        case .unauthorized:
            // The controller still works, but this app may no longer use it: the system ended its scan and let
            // go of its links and connection attempts as it told the state.
            failAllLinks(BluetoothError(.operationNotSupported, "the application is not authorized to use Bluetooth"))
        default:
            break
        }
        deliver { manager in
            manager.tell(.stateUpdated)
            // Taken here, not at the change, a wait stays where the app's end finds it until the change is told;
            // with the state now (a later change may have come since this one), as `state` reads it.
            let (waits, now) = manager.locked.withLock { s in
                (s.poweredOnWaits.take(at: s.managerState), s.managerState)
            }
            PoweredOnWaits.finish(waits, .state(now), system: manager.system)
        }
    }

    /// A `waitUntilPoweredOn`'s wait: finished at once for a state that is final (or when the app ended), kept
    /// otherwise, in one step with the state's change.
    func awaitPoweredOn(_ waiter: Waiter<Void>) {
        let ending = locked.withLock { s in
            s.poweredOnWaits.register(waiter, state: s.managerState, abandoned: s.abandoned)
        }
        if let ending { PoweredOnWaits.finish([waiter], ending, system: system) }
    }

    /// One event from the system (through `CentralSession`), in the controller's serial domain.
    func apply(_ event: SessionEvent) {
        switch event {
        case .powerChanged(let power): systemPowerStateChanged(power)
        case .appTerminated: systemAppTerminated()
        case .discovered(let discovery, let scan): scanDiscovered(discovery, scan: scan)
        case .scanEnded(let scan, let refused): scanEnded(scan, refused: refused)
        case .linkAttached(let link): linkAttached(link)
        case .linkFailed(let peer, let error): linkFailed(peer: peer, error: error)
        case .linkDown(let handle, let reason, let reconnecting):
            linkDown(handle, reason: reason, reconnecting: reconnecting)
        case .valueUpdated(let handle, let attribute, let value, let isIndication):
            peripheralOn(handle)?.handleValueUpdate(attribute: attribute, value: value, isIndication: isIndication)
        case .readyToWrite(let handle):
            peripheralOn(handle)?.handleReadyToWrite()
        case .peerDatabaseChanged(let link):
            peripheralOn(link)?.handleDatabaseChanged()
        case .advertised(let address, let services):
            // Connection events match by advertised service: while registered, this manager remembers what each
            // device advertises (its advertisements and scan responses), whether or not it scans.
            locked.withLock { $0.remember(services, address) }
        case .connectionEvent(let handle, let peer, let up):
            connectionEvent(up ? .peerConnected : .peerDisconnected, handle: handle, peer: peer)
        case .server, .resumedServicesPublished, .resumedAdvertising, .resumedAdvertisingEnded:
            // A peripheral manager's: a central manager publishes and advertises nothing.
            break
        }
    }

    func peripheralOn(_ handle: ConnectionHandle) -> Peripheral? {
        locked.withLock { $0.byHandle[handle] }
    }

    private func handleDisconnected(_ handle: ConnectionHandle, reason: HCIStatus, reconnecting: Bool) {
        guard let peripheral = locked.withLock({ $0.byHandle.removeValue(forKey: handle) }) else { return }
        let local = peripheral.isCancelled
        if reconnecting {
            return reconnectionStarted(peripheral, reason: reason, announced: true)
        }
        if isPreserved {
            persistRestorableState()
            return noteForRestoration(.disconnected(peripheral, local ? nil : Self.disconnectError(reason)))
        }
        let error: BluetoothError? = local ? nil : Self.disconnectError(reason)
        let timestamp = system.absoluteTime
        peripheral.linkDown()
        persistRestorableState()
        deliver { manager in
            // A link that dropped before its didConnect was delivered was never announced: for the
            // application the connection failed.
            let announced = peripheral.currentState != .connecting
            if announced {
                let ended = peripheral.announceDisconnection(at: timestamp, reconnecting: false, error: error)
                manager.tell(.disconnected(peripheral, error))
                ended.finish()
            } else {
                let failure = BluetoothError(
                    .connectionFailed, "the link dropped as it came up: \(reason)", hciStatus: reason)
                let ended = peripheral.announceDisconnected(failing: failure)
                manager.tell(.failedToConnect(peripheral, failure))
                ended.finish()
            }
        }
    }

    /// The link to `peripheral` went down and the system waits for the peer again (`enableAutoReconnect`): the
    /// peripheral is pending again, and the app hears of the loss with `isReconnecting`, as on iOS. A kept
    /// manager's app hears nothing of it: it is relaunched when the link is back (a connection), and its
    /// restored peripheral reads `.connecting` meanwhile. Not `announced`: the link was never the app's (it went
    /// as it came up), so no alert either.
    private func reconnectionStarted(_ peripheral: Peripheral, reason: HCIStatus, announced: Bool) {
        peripheral.linkDown()
        // The app cancelled as the link went down: its cancel withdrew the new attempt and was announced.
        guard !peripheral.isCancelled else { return }
        peripheral.reconnectionStarted()
        locked.withLock { $0.pending[peripheral.address] = peripheral }
        if isPreserved || !announced { return }
        let error = Self.disconnectError(reason)
        let timestamp = system.absoluteTime
        // A link that dropped before its `didConnect` was delivered is not announced: the app still waits for
        // that `didConnect`, which the reconnection brings.
        deliver { manager in
            guard peripheral.currentState == .connected else { return }
            let ended = peripheral.announceDisconnection(at: timestamp, reconnecting: true, error: error)
            manager.tell(.disconnected(peripheral, error))
            ended.finish()
        }
    }

    private func failAllLinks(_ error: BluetoothError) {
        let links = locked.withLock { s -> [Peripheral] in
            defer {
                s.byHandle.removeAll()
                s.pending.removeAll()
            }
            return Array(s.byHandle.values)
                + s.pending.values.sorted { $0.identifier.uuidString < $1.identifier.uuidString }
        }
        let timestamp = system.absoluteTime
        for p in links {
            p.linkDown()
            p.stopReconnecting()
            // As CoreBluetooth does, the peripherals are disconnected without a `didDisconnectPeripheral` each (the
            // state callback that follows says it all); the async layer's observers still hear it, so that its waits
            // and streams end with `error`.
            deliver { manager in
                let ended = p.announceDisconnection(at: timestamp, reconnecting: false, error: error)
                manager.tellObservers(.disconnected(p, error))
                ended.finish()
            }
        }
    }

    /// `didFailToConnect`'s error: `.connectionFailed` unless the status says more (a connection limit, a peer
    /// that no longer has the bond's key), with the status kept.
    static func connectFailure(_ error: HostError) -> BluetoothError {
        let message = "could not connect: \(error.message)"
        guard let status = error.hciStatus else { return BluetoothError(.connectionFailed, message) }
        let mapped = BluetoothError.fromLinkStatus(status, message)
        return mapped.code == .connectionLimitReached || mapped.code == .peerRemovedPairingInformation
            ? mapped : BluetoothError(.connectionFailed, message, hciStatus: status)
    }

    /// `didDisconnectPeripheral`'s error for a link the app did not end: `.connectionTimeout` for a supervision
    /// or LL response timeout, `.peerRemovedPairingInformation` for a link the system ended because the peer no
    /// longer has the bond's key, `.peripheralDisconnected` for every other reason, the reason kept in `hciStatus`.
    static func disconnectError(_ reason: HCIStatus) -> BluetoothError {
        let mapped = BluetoothError.fromLinkStatus(reason, "the peripheral disconnected: \(reason)")
        if mapped.code == .connectionTimeout {
            return .fromLinkStatus(reason, "the connection timed out (supervision timeout)")
        }
        // The system ended the link: the peer no longer has the bond's key.
        if mapped.code == .peerRemovedPairingInformation {
            return .fromLinkStatus(reason, "the peer removed its pairing information (it no longer has the key)")
        }
        return BluetoothError(.peripheralDisconnected, "the peripheral disconnected: \(reason)", hciStatus: reason)
    }
}

extension CentralManager {
    /// The manager's state (`CBCentralManager.state`).
    public var state: ManagerState { currentState }
}

/// A `Peripheral` a manager knows of, as long as someone else holds it.
struct WeakPeripheral {
    weak var peripheral: Peripheral?
}

/// A weak reference to a delegate that any thread may read or replace.
///
/// `@unchecked Sendable`: the only state is `object`, read and written under `lock`. The delegate itself is
/// only called on the manager's queue, as CoreBluetooth's contract says, so it need not be `Sendable`.
final class DelegateCell<T>: @unchecked Sendable {
    private let lock = NSLock()
    private weak var object: AnyObject?

    init(_ value: T?) { object = value as AnyObject? }

    var value: T? {
        get { lock.withLock { object as? T } }
        set { lock.withLock { object = newValue as AnyObject? } }
    }
}
