import ArgumentParser
import BLE
import Foundation

/// TARGET and how long to look for it, shared by the commands that connect.
struct TargetOptions: ParsableArguments {
    @Argument(
        help: ArgumentHelp(
            "The device: an address (AA:BB:CC:DD:EE:FF), a peripheral identifier (UUID), or an advertised name.",
            valueName: "target"))
    var target: String

    @Option(help: ArgumentHelp("Seconds to scan for the target before giving up.", valueName: "seconds"))
    var timeout: Double = 10

    var timeoutDuration: Duration { .milliseconds(Int64(max(0, timeout) * 1000)) }
}

/// Matches advertisements against a TARGET string.
struct TargetMatcher {
    let text: String

    func matches(_ peripheral: Peripheral, _ advertisement: AdvertisementData) -> Bool {
        if let address = BluetoothAddress(string: text), address.bytes == peripheral.address.bytes { return true }
        if let id = UUID(uuidString: text), id == peripheral.identifier { return true }
        return advertisement.localName == text || peripheral.name == text
    }
}

extension ToolCentral {
    /// Scans until an advertiser matches `target`, then connects to it (failing clearly when it advertises
    /// non-connectably). A connected peripheral that later drops fails `outcome`.
    func connect(to options: TargetOptions, outcome: Outcome, _ completion: @escaping (Peripheral) -> Void) {
        let matcher = TargetMatcher(text: options.target)
        whenReady { [self] ready in
            if case .failure(let error) = ready { return outcome.fail(error) }
            var found = false
            let timer = after(options.timeoutDuration) { [self] in
                guard !found else { return }
                found = true
                stopScan()
                outcome.fail(
                    ToolError(
                        .noSuchDevice,
                        "no device matching '\(options.target)' found within \(Self.seconds(options.timeoutDuration))"))
            }
            scan(services: nil, duplicates: false) { [self] peripheral, advertisement, _ in
                guard !found, matcher.matches(peripheral, advertisement) else { return }
                found = true
                timer.cancel()
                stopScan()
                guard advertisement.isConnectable != false else {
                    return outcome.fail(
                        ToolError(
                            .notConnectable,
                            "\(Self.describe(peripheral)) does not accept connections (it advertises non-connectably)"))
                }
                linkLost = { _, error in outcome.fail(error) }
                connect(peripheral, timeout: .seconds(10)) { result in
                    switch result {
                    case .success: completion(peripheral)
                    case .failure(let error): outcome.fail(error)
                    }
                }
            }
        }
    }

    /// Discovers the services and characteristics and finds the first characteristic of type `uuid`.
    func findCharacteristic(
        _ uuid: BluetoothUUID, on peripheral: Peripheral, outcome: Outcome,
        _ completion: @escaping (Characteristic) -> Void
    ) {
        discoverCharacteristicsOfAllServices(peripheral) { [self] result in
            if case .failure(let error) = result { return finish(peripheral, outcome, .failure(error)) }
            for service in peripheral.services ?? [] {
                if let c = service.characteristics?.first(where: { $0.uuid == uuid }) { return completion(c) }
            }
            finish(
                peripheral, outcome,
                .failure(
                    ToolError(
                        .noSuchCharacteristic,
                        "\(Self.describe(peripheral)) has no characteristic \(uuid.labelled)")))
        }
    }

    /// Disconnects (politely, the link's loss no longer being an error) and then reports `result`.
    func finish(_ peripheral: Peripheral, _ outcome: Outcome, _ result: Result<Void, ToolError>) {
        linkLost = nil
        disconnect(peripheral) {
            switch result {
            case .success: outcome.succeed()
            case .failure(let error): outcome.fail(error)
            }
        }
    }
}

/// Parses a CHAR or `--service` argument: a 16-bit ("2A37"), 32-bit or 128-bit UUID.
func parseUUID(_ text: String, what: String) throws -> BluetoothUUID {
    guard let uuid = BluetoothUUID(string: text) else {
        throw ValidationError("\(what) '\(text)' is not a UUID: give 4 hex digits (2A37), 8, or the long form")
    }
    return uuid
}
