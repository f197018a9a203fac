import BLECore

extension CentralManager {
    /// Options for creating a central manager (`CBCentralManagerOption...Key`).
    public struct Options: Sendable, Hashable {
        /// Ask the user to power on Bluetooth when it is off (`ShowPowerAlertKey`); recorded, there is no UI.
        public var showPowerAlert: Bool?
        /// Opts in to state preservation and restoration under this identifier (`RestoreIdentifierKey`).
        public var restoreIdentifier: String?
        public init(showPowerAlert: Bool? = nil, restoreIdentifier: String? = nil) {
            self.showPowerAlert = showPowerAlert
            self.restoreIdentifier = restoreIdentifier
        }
    }

    /// Options for `scanForPeripherals(withServices:options:)` (`CBCentralManagerScanOption...Key`).
    public struct ScanOptions: Sendable, Hashable {
        /// Report every advertisement instead of coalescing them per peripheral (`AllowDuplicatesKey`).
        public var allowDuplicates: Bool?
        /// Also report peripherals soliciting any of these services (`SolicitedServiceUUIDsKey`).
        public var solicitedServiceUUIDs: [BluetoothUUID]?
        public init(allowDuplicates: Bool? = nil, solicitedServiceUUIDs: [BluetoothUUID]? = nil) {
            self.allowDuplicates = allowDuplicates
            self.solicitedServiceUUIDs = solicitedServiceUUIDs
        }
    }

    /// Options for `connect(_:options:)` (`CBConnectPeripheralOption...Key`). The notify options concern
    /// alerts a suspended app shows; they are recorded for the background rules of a later layer.
    public struct ConnectOptions: Sendable, Hashable {
        public var notifyOnConnection: Bool?
        public var notifyOnDisconnection: Bool?
        public var notifyOnNotification: Bool?
        /// iOS 17's `EnableAutoReconnectKey`: once connected, when the link is lost (not cancelled by the app),
        /// the system connects again by itself. The disconnection is reported with `isReconnecting` true (the
        /// five-argument `didDisconnectPeripheral`), the peripheral reads `.connecting` meanwhile, and
        /// `didConnect` follows when the link is back; `cancelPeripheralConnection` ends the attempt. It tries
        /// for as long as the system runs, as iOS documents no limit (<doc:IOSRules>), except after a bonded peer
        /// answers with PIN or Key Missing (it lost the bond): no attempt can succeed until the user forgets the
        /// device, so the system stops and reports `didFailToConnect` with `.peerRemovedPairingInformation`.
        public var enableAutoReconnect: Bool?
        public init(
            notifyOnConnection: Bool? = nil, notifyOnDisconnection: Bool? = nil,
            notifyOnNotification: Bool? = nil, enableAutoReconnect: Bool? = nil
        ) {
            self.notifyOnConnection = notifyOnConnection
            self.notifyOnDisconnection = notifyOnDisconnection
            self.notifyOnNotification = notifyOnNotification
            self.enableAutoReconnect = enableAutoReconnect
        }
    }

    /// What `centralManager(_:willRestoreState:)` hands back (`CBCentralManagerRestoredState...Key`).
    public struct RestoredState: Sendable {
        public var peripherals: [Peripheral]?
        public var scanServices: [BluetoothUUID]?
        public var scanOptions: ScanOptions?
        public init(
            peripherals: [Peripheral]? = nil, scanServices: [BluetoothUUID]? = nil, scanOptions: ScanOptions? = nil
        ) {
            self.peripherals = peripherals
            self.scanServices = scanServices
            self.scanOptions = scanOptions
        }
    }
}

extension PeripheralManager {
    /// Options for creating a peripheral manager (`CBPeripheralManagerOption...Key`).
    public struct Options: Sendable, Hashable {
        public var showPowerAlert: Bool?
        public var restoreIdentifier: String?
        public init(showPowerAlert: Bool? = nil, restoreIdentifier: String? = nil) {
            self.showPowerAlert = showPowerAlert
            self.restoreIdentifier = restoreIdentifier
        }
    }

    /// What `peripheralManager(_:willRestoreState:)` hands back.
    public struct RestoredState: Sendable {
        public var services: [MutableService]?
        public var advertisementData: AdvertisementData?
        public init(services: [MutableService]? = nil, advertisementData: AdvertisementData? = nil) {
            self.services = services
            self.advertisementData = advertisementData
        }
    }
}
