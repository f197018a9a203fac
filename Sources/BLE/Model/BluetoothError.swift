import BLEATT
import BLECore

/// An error from the public API, shaped like CoreBluetooth's `CBError` and `CBATTError`: a code to switch on
/// (equality is by code) and a message saying what happened.
public struct BluetoothError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        case unknown
        case invalidParameters
        case invalidHandle
        case notConnected
        case outOfSpace
        case operationCancelled
        case connectionTimeout
        case peripheralDisconnected
        case uuidNotAllowed
        case alreadyAdvertising
        case connectionFailed
        case connectionLimitReached
        case unknownDevice
        case operationNotSupported
        case encryptionTimedOut
        /// The operation did not complete within the time the caller allowed (an async call's `timeout:`).
        case timeout
        /// The peer did not answer an ATT request (or confirm an indication) within the ATT transaction timeout,
        /// 30 s (Core Spec 5.4, Vol 3, Part F, 3.3.3); the link is then dropped, as ATT requires.
        case transactionTimeout
        /// The controller did not answer an HCI command in time (the host's command timeout): the controller or its
        /// transport is not well.
        case controllerTimeout
        /// The controller or its transport went away.
        case transportClosed
        /// The peer answered with an ATT error (`CBATTError`).
        case att(ATTErrorCode)
    }

    public let code: Code
    /// What happened, in words; not part of equality.
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// The ATT error code, when the peer refused with one.
    public var attErrorCode: ATTErrorCode? {
        if case .att(let c) = code { return c }
        return nil
    }

    public var description: String { message }

    public static func == (a: BluetoothError, b: BluetoothError) -> Bool { a.code == b.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }
}
