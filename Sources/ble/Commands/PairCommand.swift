import ArgumentParser
import BLE
import Foundation
import Synchronization

/// `ble pair`: connect and pair now, as a user does in a phone's settings.
struct PairCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pair",
        abstract: "Connect to a device, pair with it (and bond), and print what was agreed.",
        discussion: """
            The tool's device pairs as --io-capability says its user can (none by default: Just Works, what every \
            other command does when a value needs encryption). With --mitm the pairing must protect against a man \
            in the middle (Passkey Entry or Numeric Comparison, which need a capability on both sides); --sc-only \
            refuses LE legacy pairing.

            A passkey to show is printed ('passkey: 123456 (type it on the other device)'). A passkey to type is \
            --passkey's six digits; with --passkey - it is the next line of standard input (for scripts that learn \
            it meanwhile); without --passkey it is asked for when standard input is a terminal, and refused \
            otherwise. A numeric comparison prints the digits, then takes --yes or --no; without either it is asked \
            (y/N) at a terminal and refused otherwise. Just Works needs no answer.

            On success the lines are:
              paired with NAME (ADDRESS)[, identity address IDENTITY | , its identity address]
              identifier: UUID        (the identifier the tool's store keeps the device, and its bond, under)
              method: Just Works | Passkey Entry | Numeric Comparison
              security: Secure Connections | LE legacy, authenticated | unauthenticated, key size N
              bonded: yes | no
            With --json, one object instead: {"identifier", "address", "identityAddress", "name", "method", "secureConnections", \
            "authenticated", "bonded", "keySize"}. 'ble bonds' lists the bonds kept.

            A pairing that fails exits with status 9 and says why (refused by a user or the peer, a wrong passkey, \
            the peer does not pair, requirements that cannot both be met); one that times out (30 s without the \
            next step) with status 6.
            """)

    @OptionGroup var target: TargetOptions

    @OptionGroup var pairing: PairingOptions

    @Flag(help: "Print one JSON object.")
    var json = false

    @OptionGroup var transport: TransportOptions

    func run() async throws {
        let target = target
        let json = json
        var configuration = BluetoothSystem.Configuration()
        configuration.pairing = pairing.configuration
        let agent = PairingAgent(options: pairing, asking: .promptAtTerminal, log: { Output.line($0) })
        try await CommandRun.flow(
            transport, controllerWait: target.timeoutDuration, configuration: configuration
        ) { tool in
            // The system holds its delegate weakly: this flow keeps the agent (it names it below).
            tool.system.pairingDelegate = agent
            let peripheral = try await tool.connect(to: target)
            try await tool.using(peripheral) {
                let result: PairingResult
                do {
                    result = try await peripheral.pair(timeout: nil)
                } catch is CancellationError {
                    throw CancellationError()
                } catch let error as BluetoothError {
                    throw Self.failure(error, agent: agent, peripheral: peripheral)
                }
                let identity = tool.system.bonds.first { $0.identifier == result.peer }?.identityAddress
                for line in Self.lines(result, peripheral: peripheral, identity: identity, json: json) {
                    Output.line(line)
                }
            }
        }
    }

    /// The tool's error for a pairing that failed; a refusal made here (no answer to give) says what was missing.
    static func failure(_ error: BluetoothError, agent: PairingAgent?, peripheral: Peripheral) -> ToolError {
        let what = "pairing with \(CentralTool.describe(peripheral))"
        if let why = agent?.refusal.withLock({ $0 }), error.code == .pairingFailed {
            agent?.refusal.withLock { $0 = nil }
            return ToolError(.pairingFailed, "\(what): \(why)")
        }
        if error.code == .operationNotSupported {
            return ToolError(.pairingFailed, "\(what): \(error)")
        }
        return ToolError(error, doing: what)
    }

    /// What a pairing agreed. The address is the one the link uses (a private one changes); the identity address
    /// the peer gave, when it gave one, is said beside it, the same in every run (one run printed the identity,
    /// another the private address, with nothing to tell them apart).
    static func lines(_ result: PairingResult, peripheral: Peripheral, identity: BluetoothAddress?, json: Bool)
        -> [String]
    {
        if json {
            let object: JSON = .object([
                ("identifier", .string(result.peer.uuidString)), ("address", .string(peripheral.address.string)),
                ("identityAddress", .optional(identity?.string)),
                ("name", .optional(peripheral.name)), ("method", .string(result.method.description)),
                ("secureConnections", .bool(result.secureConnections)), ("authenticated", .bool(result.authenticated)),
                ("bonded", .bool(result.bonded)), ("keySize", .number(result.keySize)),
            ])
            return [object.text]
        }
        return [
            "paired with \(CentralTool.describe(peripheral))"
                + (identity.map {
                    $0 == peripheral.address ? ", its identity address" : ", identity address \($0.string)"
                } ?? ""),
            "identifier: \(result.peer.uuidString)",
            "method: \(result.method)",
            "security: \(result.secureConnections ? "Secure Connections" : "LE legacy"), "
                + "\(result.authenticated ? "authenticated" : "unauthenticated"), key size \(result.keySize)",
            "bonded: \(result.bonded ? "yes" : "no")",
        ]
    }
}
