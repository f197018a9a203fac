import ArgumentParser
import BLE

/// `--mtu`, `--data-length`, `--phy`, `--connection-interval`, `--latency` and `--supervision-timeout`: what this process
/// asks of its links, as nRF Connect lets one ask. They are the system's link preferences
/// (`BluetoothSystem.Configuration`), applied when a link comes up: a central asks for them in LE Create
/// Connection and the procedures after it (the ATT_MTU exchange, LE Set Data Length, LE Set PHY); the peer and
/// the controllers settle what the link gets, which `info` in the shell shows. `--mtu 23` keeps the default
/// ATT_MTU, for testing what a peer does with short writes.
struct LinkOptions: ParsableArguments {
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("The ATT_MTU to ask for, 23 to 517 (default 517).", valueName: "octets"))
    var mtu: Int?

    @Option(
        name: .customLong("data-length"), parsing: .unconditional,
        help: ArgumentHelp("The LL payload to ask for, 27 to 251 octets (default 251).", valueName: "octets"))
    var dataLength: Int?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("The PHY to ask for: 1m, 2m or coded (default: the controllers').", valueName: "phy"))
    var phy: String?

    @Option(
        name: .customLong("connection-interval"), parsing: .unconditional,
        help: ArgumentHelp(
            "The connection interval to ask for, in milliseconds: MS or MIN-MAX, 7.5 to 4000 (default 30-50).",
            valueName: "ms"))
    var interval: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Connection events the peripheral may skip, 0 to 499 (default 0).", valueName: "n"))
    var latency: Int?

    @Option(
        name: .customLong("supervision-timeout"), parsing: .unconditional,
        help: ArgumentHelp("The supervision timeout, 100 to 32000 milliseconds (default 5000).", valueName: "ms"))
    var supervisionTimeout: Double?

    func validate() throws {
        if let mtu, !(23...517).contains(mtu) { throw ValidationError("--mtu must be 23 to 517 octets, not \(mtu)") }
        if let dataLength, !(27...251).contains(dataLength) {
            throw ValidationError("--data-length must be 27 to 251 octets, not \(dataLength)")
        }
        if let phy { _ = try Self.phy(phy) }
        if let interval { _ = try Self.interval(interval) }
        if let latency, !(0...499).contains(latency) {
            throw ValidationError("--latency must be 0 to 499 connection events, not \(latency)")
        }
        if let supervisionTimeout, !(supervisionTimeout.isFinite && (100...32_000).contains(supervisionTimeout)) {
            throw ValidationError("--supervision-timeout must be 100 to 32000 milliseconds, not \(supervisionTimeout)")
        }
    }

    /// `configuration` with the preferences asked for (validated before).
    func apply(to configuration: inout BluetoothSystem.Configuration) {
        if let mtu { configuration.preferredMTU = mtu }
        if let dataLength { configuration.preferredDataLength = dataLength }
        if let phy, let parsed = try? Self.phy(phy) { configuration.preferredPHY = parsed }
        if let interval, let range = try? Self.interval(interval) { configuration.connectionInterval = range }
        if let latency { configuration.peripheralLatency = latency }
        if let supervisionTimeout {
            configuration.supervisionTimeout = .milliseconds(Int64(supervisionTimeout.rounded()))
        }
    }

    static func phy(_ text: String) throws -> LinkPHY {
        switch text.lowercased() {
        case "1m": .le1M
        case "2m": .le2M
        case "coded": .leCoded
        default: throw ValidationError("--phy must be 1m, 2m or coded, not '\(text)'")
        }
    }

    /// "30" or "30-50" (milliseconds, 7.5 to 4000, MIN not above MAX).
    static func interval(_ text: String) throws -> ClosedRange<Duration> {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map { Double($0) }
        let problem = ValidationError(
            "--connection-interval must be MS or MIN-MAX milliseconds, 7.5 to 4000 (MIN not above MAX), not '\(text)'")
        guard (1...2).contains(parts.count),
            parts.allSatisfy({ $0.map { $0.isFinite && $0 >= 7.5 && $0 <= 4000 } ?? false })
        else { throw problem }
        let low = parts[0]!
        let high = parts[parts.count - 1]!
        guard low <= high else { throw problem }
        func duration(_ ms: Double) -> Duration { .microseconds(Int64((ms * 1000).rounded())) }
        return duration(low)...duration(high)
    }
}
