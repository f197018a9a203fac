import BLE
import Foundation
import Synchronization

/// The tool's user at a pairing: shows a passkey, types one (from `--passkey`, a line of standard input, or a
/// prompt at a terminal) and answers a numeric comparison (`--yes`/`--no`, a prompt at a terminal, or the
/// command's default). Every step is one line through `log`.
final class PairingAgent: PairingDelegate {
    /// Whether questions may be asked at the terminal (standard input and standard error are terminals).
    enum Asking: Sendable {
        /// `ble pair`: at a terminal, prompt; otherwise a question without its option is refused.
        case promptAtTerminal
        /// `ble serve`, `ble shell`: never prompt (standard input is theirs); a numeric comparison without
        /// `--yes`/`--no` gets `unanswered`.
        case never(unanswered: Bool)
    }

    let options: PairingOptions
    let asking: Asking
    let log: @Sendable (String) -> Void
    /// Why a question was refused here, for the command's error (nil: none was).
    let refusal = Mutex<String?>(nil)

    init(options: PairingOptions, asking: Asking, log: @escaping @Sendable (String) -> Void) {
        self.options = options
        self.asking = asking
        self.log = log
    }

    private var atTerminal: Bool {
        guard case .promptAtTerminal = asking else { return false }
        return isatty(STDIN_FILENO) == 1 && isatty(STDERR_FILENO) == 1
    }

    func bluetoothSystem(_ system: BluetoothSystem, shouldPairWith peer: UUID?, numericValue: UInt32?) async -> Bool {
        guard let value = numericValue else { return true }  // Just Works: pairing is what was asked for.
        let digits = passkeyDigits(value)
        log("numeric comparison: \(digits) (both devices must show the same digits)")
        if let answer = options.confirmation {
            log("numeric comparison \(answer ? "confirmed" : "refused") (--\(answer ? "yes" : "no"))")
            return answer
        }
        switch asking {
        case .never(let unanswered):
            log("numeric comparison \(unanswered ? "confirmed" : "refused") (no --yes or --no)")
            return unanswered
        case .promptAtTerminal:
            guard atTerminal else {
                refuse("a numeric comparison needs an answer: give --yes or --no, or run at a terminal")
                return false
            }
            let answer = await Self.ask("Does the other device show \(digits)? [y/N] ")
            let accepted = ["y", "yes"].contains(answer?.trimmingCharacters(in: .whitespaces).lowercased() ?? "")
            if !accepted { refuse("the numeric comparison was not confirmed") }
            return accepted
        }
    }

    func bluetoothSystem(_ system: BluetoothSystem, display passkey: UInt32, for peer: UUID?) {
        log("passkey: \(passkeyDigits(passkey)) (type it on the other device)")
    }

    func bluetoothSystem(_ system: BluetoothSystem, passkeyFor peer: UUID?) async -> UInt32? {
        switch options.passkey {
        case let text? where text != "-":
            log("passkey asked: typing --passkey")
            return PairingOptions.passkeyValue(text)
        case "-"?:
            let line = await Self.readLine()
            guard let line, let value = PairingOptions.passkeyValue(line.trimmingCharacters(in: .whitespaces)) else {
                refuse(
                    line == nil
                        ? "a passkey was asked for and standard input ended"
                        : "the passkey read from standard input is not six digits")
                return nil
            }
            log("passkey asked: typing the one read from standard input")
            return value
        default:
            guard atTerminal else {
                if case .never = asking {
                    refuse("a passkey was asked for and none was given (--passkey)")
                } else {
                    refuse("a passkey was asked for: give --passkey DIGITS (or '-' to read it), or run at a terminal")
                }
                return nil
            }
            // A user may mistype: three tries before cancelling.
            for _ in 0..<3 {
                guard let answer = await Self.ask("Passkey shown on the other device: ") else { break }
                if let value = PairingOptions.passkeyValue(answer.trimmingCharacters(in: .whitespaces)) {
                    return value
                }
                Output.stderr("ble: a passkey is six digits\n")
            }
            refuse("no passkey was typed")
            return nil
        }
    }

    /// Records why this side refused. `ble pair` says it once, in its error line; the others (serve, shell) go on
    /// and log it, since no error line of theirs will.
    private func refuse(_ why: String) {
        if case .never = asking { log("pairing: \(why)") }
        refusal.withLock { if $0 == nil { $0 = why } }
    }

    /// Writes `prompt` to standard error and reads the answer, on a thread of its own (a blocking read must not
    /// hold a thread of the cooperative pool, nor the simulated radio's executor).
    static func ask(_ prompt: String) async -> String? {
        Output.stderr(prompt)
        return await readLine()
    }

    /// One line of standard input, read on a thread of its own; nil at its end.
    static func readLine() async -> String? {
        await withCheckedContinuation { continuation in
            let thread = Thread { continuation.resume(returning: Swift.readLine(strippingNewline: true)) }
            thread.start()
        }
    }
}
