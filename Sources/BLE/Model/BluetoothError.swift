import BLEATT
import BLECore

/// An error from the public API, shaped like CoreBluetooth's `CBError` and `CBATTError`: a code to compare with
/// (`error.code == .connectionTimeout`), the peer's ATT code when a peer refused, the controller's HCI status when
/// the controller or the link's end gave one, and a description that says what happened in words.
///
/// Two errors are equal when their codes are equal (an ATT refusal's code includes its ATT code); the
/// description and where the error was made are diagnostics, not part of equality.
public struct BluetoothError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong. An open set: later versions may add codes, so a `switch` over codes needs a `default`.
    /// The names are `CBError.Code`'s; the ones CoreBluetooth lacks say which cause a `CBError` would blur.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case unknown, invalidParameters, invalidHandle, notConnected, outOfSpace, operationCancelled
            case connectionTimeout, peripheralDisconnected, uuidNotAllowed, alreadyAdvertising, connectionFailed
            case connectionLimitReached, unknownDevice, operationNotSupported, peerRemovedPairingInformation
            case encryptionTimedOut, tooManyLEPairedDevices, pairingFailed
            case timeout, transactionTimeout, controllerTimeout, transportClosed, systemShutDown, storeUnavailable
            case att(ATTErrorCode)
        }
        private let base: Base
        private init(_ base: Base) { self.base = base }

        /// Nothing more specific is known; the description and ``BluetoothError/hciStatus`` say what is.
        public static let unknown = Code(.unknown)
        /// An argument is out of range or does not fit the call.
        public static let invalidParameters = Code(.invalidParameters)
        /// The attribute is not (or no longer) on the peer.
        public static let invalidHandle = Code(.invalidHandle)
        /// The peripheral is not connected.
        public static let notConnected = Code(.notConnected)
        /// The device has no room for what was asked (an attribute database full).
        public static let outOfSpace = Code(.outOfSpace)
        /// The operation was cancelled: by the application, or because the connection it needed was cancelled.
        public static let operationCancelled = Code(.operationCancelled)
        /// The link's supervision timeout expired: the peer went out of range or stopped answering.
        public static let connectionTimeout = Code(.connectionTimeout)
        /// The peripheral ended the connection.
        public static let peripheralDisconnected = Code(.peripheralDisconnected)
        /// The UUID is one the system reserves.
        public static let uuidNotAllowed = Code(.uuidNotAllowed)
        /// The peripheral manager is already advertising.
        public static let alreadyAdvertising = Code(.alreadyAdvertising)
        /// The connection could not be established.
        public static let connectionFailed = Code(.connectionFailed)
        /// The controller has no room for another link (HCI Connection Limit Exceeded).
        public static let connectionLimitReached = Code(.connectionLimitReached)
        /// The device is not known to the system.
        public static let unknownDevice = Code(.unknownDevice)
        /// The controller or the peer does not support the operation.
        public static let operationNotSupported = Code(.operationNotSupported)
        /// The peer no longer has the keys of its bond with this device.
        public static let peerRemovedPairingInformation = Code(.peerRemovedPairingInformation)
        /// Encryption of the link did not complete in time.
        public static let encryptionTimedOut = Code(.encryptionTimedOut)
        /// The system holds as many bonds as it can.
        public static let tooManyLEPairedDevices = Code(.tooManyLEPairedDevices)
        /// Pairing failed: a user refused or typed a wrong passkey, the peer does not pair, or the two devices'
        /// requirements cannot both be met. ``BluetoothError/pairingFailureReason`` gives the Security Manager's
        /// reason, and the description says which side failed it. A swift-ble extension: iOS pairs out of the
        /// app's sight, and its app sees only the peer's refusal that follows. (A pairing that times out is
        /// ``encryptionTimedOut``, as on iOS.)
        public static let pairingFailed = Code(.pairingFailed)
        /// The operation did not complete within the time the caller allowed (an async call's `timeout:`).
        public static let timeout = Code(.timeout)
        /// The peer did not answer an ATT request (or confirm an indication) within the ATT transaction timeout,
        /// 30 s (Core Spec 5.4, Vol 3, Part F, 3.3.3); the link is then dropped, as ATT requires.
        public static let transactionTimeout = Code(.transactionTimeout)
        /// The controller did not answer an HCI command in time (the host's command timeout): the controller or
        /// its transport is not well.
        public static let controllerTimeout = Code(.controllerTimeout)
        /// The controller or its transport went away.
        public static let transportClosed = Code(.transportClosed)
        /// The system was shut down (`BluetoothSystem.shutDown()`) while the operation was pending, or the
        /// call came after it.
        public static let systemShutDown = Code(.systemShutDown)
        /// The system's store cannot be used (corrupt, unreadable, written by a newer version); the description
        /// names the file.
        public static let storeUnavailable = Code(.storeUnavailable)
        /// The peer answered with this ATT error (`CBATTError`); ``BluetoothError/attErrorCode`` gives it back.
        public static func att(_ code: ATTErrorCode) -> Code { Code(.att(code)) }

        /// The ATT code of an ``att(_:)`` code.
        public var attErrorCode: ATTErrorCode? {
            if case .att(let code) = base { return code }
            return nil
        }

        public var description: String {
            switch base {
            case .att(let code): return "att(\(code))"
            default: return "\(base)"
            }
        }
    }

    public let code: Code
    /// The controller's HCI status when the failure came from the controller or from the link's end (a
    /// disconnection's reason, a refused command). Not part of equality.
    public let hciStatus: HCIStatus?
    /// The Security Manager's reason when a pairing failed (``Code-swift.struct/pairingFailed``), sent by either
    /// side (Core Spec 5.4, Vol 3, Part H, 3.5.5). Not part of equality.
    public let pairingFailureReason: SMPFailureReason?
    private let diagnostics: Diagnostics

    /// Where and why an error was made; shown by ``description``, not part of equality.
    private struct Diagnostics: Sendable {
        var message: String
        var file: String
        var line: UInt
    }

    public init(
        _ code: Code, _ message: String, hciStatus: HCIStatus? = nil, pairingFailureReason: SMPFailureReason? = nil,
        file: String = #fileID, line: UInt = #line
    ) {
        self.code = code
        self.hciStatus = hciStatus
        self.pairingFailureReason = pairingFailureReason
        self.diagnostics = Diagnostics(message: message, file: file, line: line)
    }

    /// The ATT error code, when the peer refused with one (`CBATTError.code`).
    public var attErrorCode: ATTErrorCode? { code.attErrorCode }

    /// What happened, in words, without the code or where it was made: for a user interface.
    public var message: String { diagnostics.message }

    /// What happened, in words; with the HCI status when there is one and it is not already in the words.
    public var description: String {
        guard let hciStatus, !diagnostics.message.contains("\(hciStatus)") else { return diagnostics.message }
        return "\(diagnostics.message) (HCI status \(hciStatus))"
    }

    /// The code, the message, and where in the library the error was made: for a bug report.
    public var debugDescription: String {
        var text = "BluetoothError.\(code): \(diagnostics.message)"
        if let hciStatus { text += " [HCI status \(hciStatus)]" }
        if let pairingFailureReason { text += " [SMP reason \(pairingFailureReason)]" }
        return text + " [\(diagnostics.file):\(diagnostics.line)]"
    }

    public static func == (a: BluetoothError, b: BluetoothError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}

extension BluetoothError: CustomDebugStringConvertible {}

extension BluetoothError {
    /// The public error for a link's end or a connection's failure, from the controller's reason: the `CBError`
    /// code iOS gives for it, the status kept in ``hciStatus``.
    static func fromLinkStatus(_ status: HCIStatus, _ message: String, file: String = #fileID, line: UInt = #line)
        -> BluetoothError
    {
        let code: Code
        switch status {
        case .connectionTimeout, .llResponseTimeout: code = .connectionTimeout
        case .connectionLimitExceeded: code = .connectionLimitReached
        case .pinOrKeyMissing: code = .peerRemovedPairingInformation
        case .connectionFailedToBeEstablished, .connectionRejectedLimitedResources,
            .connectionRejectedSecurityReasons, .connectionRejectedUnacceptableAddress,
            .connectionAcceptTimeoutExceeded, .connectionAlreadyExists:
            code = .connectionFailed
        case .unknownConnectionIdentifier: code = .notConnected
        case .unsupportedRemoteFeature, .unsupportedFeatureOrParameterValue: code = .operationNotSupported
        case .operationCancelledByHost: code = .operationCancelled
        case .remoteUserTerminatedConnection, .remoteDeviceTerminatedConnectionLowResources,
            .remoteDeviceTerminatedConnectionPowerOff, .connectionTerminatedMICFailure:
            code = .peripheralDisconnected
        default: code = .unknown
        }
        return BluetoothError(code, message, hciStatus: status, file: file, line: line)
    }
}
