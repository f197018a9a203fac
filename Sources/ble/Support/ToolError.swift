import ArgumentParser
import BLE
import Foundation

/// Why a command failed, and the exit status that says so. Every failure prints one line to stderr
/// (`ble: <message>`) and exits with the status of its kind; BLE.docc/CommandLineTool.md lists them.
struct ToolError: Error, CustomStringConvertible {
    enum Kind: Int32 {
        /// Anything not listed below.
        case failure = 1
        /// The transport spec is unknown or not available, `--btsnoop` cannot record, or the controller did not
        /// power on.
        case transport = 2
        /// No advertiser matched TARGET within `--timeout`.
        case noSuchDevice = 3
        /// The target does not accept connections (non-connectable advertising) or the connection failed.
        case notConnectable = 4
        /// The peer refused an operation with an ATT error; the line names the error and its code.
        case attError = 5
        /// An operation did not complete in time.
        case timeout = 6
        /// CHAR is not in the target's database, or it does not allow the operation asked for.
        case noSuchCharacteristic = 7
        /// The link dropped before the command finished.
        case disconnected = 8
        /// Pairing failed: refused (by a user, or by the peer), a wrong passkey, the peer does not pair, the two
        /// sides' requirements cannot both be met, or the peer removed its pairing information.
        case pairingFailed = 9
        /// `bonds remove`: no bond with that identifier or address.
        case noSuchBond = 10
        /// Bad arguments or environment: found before anything was done (ArgumentParser's usage errors have this
        /// status too), or only once connected (a characteristic's name that fits several on the device).
        case usage = 64
    }

    let kind: Kind
    let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    var description: String { message }

    /// A system store that cannot be used (`.storeUnavailable`): its message names the file; the tool says what to
    /// do about it.
    static func storeUnavailable(_ error: BluetoothError) -> ToolError {
        ToolError(.transport, "\(error.message) (move the file aside or delete it to start afresh)")
    }

    /// Maps an error from the public API: ATT refusals name their code; the rest keep their message.
    init(_ error: any Error, doing what: String) {
        guard let error = error as? BluetoothError else {
            self.init(.failure, "\(what): \(error)")
            return
        }
        if let code = error.attErrorCode {
            self.init(.attError, "\(what): the peer refused with \(Self.describe(code))")
            return
        }
        switch error.code {
        case .timeout, .connectionTimeout, .transactionTimeout, .controllerTimeout:
            self.init(.timeout, "\(what): timed out (\(error))")
        case .peripheralDisconnected, .notConnected, .operationCancelled:
            self.init(.disconnected, "\(what): the link dropped (\(error))")
        case .connectionFailed:
            self.init(.notConnectable, "\(what): \(error)")
        case .transportClosed:
            self.init(.transport, "\(what): \(error)")
        case .pairingFailed, .peerRemovedPairingInformation:
            self.init(.pairingFailed, "\(what): \(error)")
        case .encryptionTimedOut:
            self.init(.timeout, "\(what): timed out (\(error))")
        default:
            self.init(.failure, "\(what): \(error)")
        }
    }

    /// "Write Not Permitted (0x03)", "Application Error (0x80)".
    static func describe(_ code: ATTErrorCode) -> String {
        let hex = String(format: "0x%02X", code.rawValue)
        if let name = code.name { return "\(name) (\(hex))" }
        return code.isApplicationError ? "Application Error (\(hex))" : "ATT error \(hex)"
    }

    /// Prints the one-line message to stderr and returns the exit status to throw.
    func report() -> ExitCode {
        Output.error(message)
        return ExitCode(kind.rawValue)
    }
}
