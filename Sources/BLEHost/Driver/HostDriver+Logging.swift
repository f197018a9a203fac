import BLEATT
import BLECore
import BLEGATT
import BLEHCI
import BLESMP
import Logging

/// What the host noticed, in its logger: every event it passes up and every request it is given, one line each.
///
/// ### Levels
/// Routine work is `debug` and `trace`, as swift-log asks of libraries: an application that never chose a log
/// handler (swift-log's default prints `info` and above) sees nothing of it.
/// - `debug`: a link's life (connected, ATT_MTU, pairing, encryption, disconnected with its reason), advertising
///   that ended, subscriptions to this device's server; the requests that change a link (pair, encrypt,
///   disconnect) with their results.
/// - `trace`: GATT client procedures with their results (discovery, reads, writes), the peer's requests to this
///   device's server, notifications and indications, scanning, advertising and connecting, pairing prompts.
/// - `notice`: the controller reset and back.
/// Advertising reports and returning credits are not logged (`ble --trace` shows the packets).
///
/// Nothing here carries a key, a passkey or a random number: a log is pasted into bug reports.
///
/// Each line is built only when its level is enabled (swift-log's messages are autoclosures, and a request's
/// completion is wrapped only then), so a host at the default level pays one comparison per event.
extension HostDriver {
    /// Logs `event` at its level.
    func log(_ event: HostEvent) {
        guard let level = Self.level(of: event), logger.logLevel <= level else { return }
        logger.log(level: level, "\(Self.describe(event))")
    }

    /// `completion`, wrapped to log the request's result when the logger's level shows it; the request itself is
    /// logged now.
    func logged(_ request: HostRequest, _ completion: @escaping Completion) -> Completion {
        guard let level = Self.level(of: request), logger.logLevel <= level else { return completion }
        let what = Self.describe(request)
        guard Self.reportsResult(request) else {
            logger.log(level: level, "\(what)")
            return completion
        }
        // What came of a request is the line; when it began is one level below, for the requests that change a
        // link (a GATT procedure's start and end are a few milliseconds apart).
        if level == .debug { logger.log(level: .trace, "\(what)...") }
        return { [logger] result in
            logger.log(level: level, "\(what): \(Self.describe(result))")
            completion(result)
        }
    }

    // MARK: Events

    /// nil: not logged.
    static func level(of event: HostEvent) -> Logger.Level? {
        switch event {
        case .connected, .connectionFailed, .disconnected, .mtuChanged, .advertisingEnded, .transportClosed,
            .pairingStarted, .pairingCompleted, .pairingFailed, .encryptionChanged, .securityRequested,
            .subscriptionChanged:
            .debug
        case .controllerResetting, .controllerRestarted: .notice
        case .valueUpdated, .serverRead, .serverWrite, .pairingPrompt, .longTermKeyRequested: .trace
        case .advertisingReport, .readyToWriteWithoutResponse, .readyToNotify: nil
        }
    }

    static func describe(_ event: HostEvent) -> String {
        switch event {
        case .advertisingReport(let report):
            return
                "advertising report from \(report.address)\(report.rssi.map { ", \($0) dBm" } ?? ""), \(report.data.count) octets"
        case .connected(let link):
            return "\(link.handle) connected to \(link.peer) as \(link.role == .central ? "central" : "peripheral")"
                + " (interval \(milliseconds(link.interval, unit: 1.25)) ms, latency \(link.latency),"
                + " supervision timeout \(Int(link.supervisionTimeout) * 10) ms)"
        case .connectionFailed(let peer, let error):
            return "connecting to \(peer) failed: \(error)"
        case .disconnected(let handle, let reason):
            return "\(handle) disconnected: \(reason)"
        case .mtuChanged(let handle, let mtu):
            return "\(handle) ATT_MTU \(mtu)"
        case .valueUpdated(let handle, let attribute, let value, let isIndication):
            return "\(handle) \(isIndication ? "indication" : "notification") of \(attribute): \(octets(value))"
        case .readyToWriteWithoutResponse(let handle):
            return "\(handle) room for Write Commands again"
        case .serverRead(let id, let handle, let attribute, let offset):
            return "\(handle) the peer reads \(attribute)\(offset == 0 ? "" : " at offset \(offset)") (request \(id))"
        case .serverWrite(let id, let handle, let writes):
            let parts = writes.map { "\($0.attribute)\($0.offset == 0 ? "" : "@\($0.offset)") \(octets($0.value))" }
            let kind = id == nil ? "writes (command)" : "writes"
            return "\(handle) the peer \(kind) \(parts.joined(separator: ", "))"
        case .subscriptionChanged(let handle, let attribute, let notify, let indicate):
            let what = [notify ? "notifications" : nil, indicate ? "indications" : nil].compactMap { $0 }
            return "\(handle) the peer "
                + (what.isEmpty
                    ? "unsubscribed from \(attribute)"
                    : "subscribed to \(attribute) \(what.joined(separator: " and "))")
        case .readyToNotify:
            return "room for notifications again"
        case .advertisingEnded:
            return "advertising ended (a central connected)"
        case .transportClosed(let reason):
            return "the controller's transport closed\(reason.map { ": \($0)" } ?? "")"
        case .controllerResetting(let reason):
            return "the controller is being reset: \(reason)"
        case .controllerRestarted(.success(let info)):
            return "the controller is back (\(info.address))"
        case .controllerRestarted(.failure(let error)):
            return "the controller could not be initialised again: \(error)"
        case .pairingPrompt(let handle, let prompt):
            switch prompt {
            case .displayPasskey: return "\(handle) pairing: a passkey to show the user"
            case .enterPasskey: return "\(handle) pairing: the user is asked for the peer's passkey"
            case .confirm(nil): return "\(handle) pairing: Just Works, asking whether to pair"
            case .confirm: return "\(handle) pairing: numeric comparison, asking the user to compare"
            }
        case .securityRequested(let handle, let requirements):
            return "\(handle) the peripheral asks for security (\(requirements))"
        case .pairingStarted(let handle, let byPeer):
            return "\(handle) pairing started by \(byPeer ? "the peer" : "this device")"
        case .pairingCompleted(let handle, let result):
            return "\(handle) paired: \(describe(result))"
        case .pairingFailed(let handle, let failure):
            return "\(handle) pairing failed: \(failure)"
        case .encryptionChanged(let handle, let encrypted, let status):
            guard status == .success else { return "\(handle) encryption failed: \(status)" }
            return "\(handle) encryption \(encrypted ? "on" : "off")"
        case .longTermKeyRequested(let handle, let ediv, _):
            return "\(handle) the central encrypts with a kept key (EDIV 0x\(String(ediv, radix: 16)))"
        }
    }

    static func describe(_ result: SMPPairing.Result) -> String {
        var words = ["\(result.method)", result.secureConnections ? "LE Secure Connections" : "legacy"]
        words.append(result.authenticated ? "authenticated" : "unauthenticated")
        words.append("key size \(result.keySize)")
        words.append(result.bonded ? "bonded" : "not bonded")
        if let identity = result.peerIdentity { words.append("peer identity \(identity.address)") }
        return words.joined(separator: ", ")
    }

    // MARK: Requests

    /// nil: not logged.
    static func level(of request: HostRequest) -> Logger.Level? {
        switch request {
        case .start, .disconnect, .pair, .encrypt: .debug
        case .gatt, .startScan, .stopScan, .startAdvertising, .stopAdvertising, .setConnectTargets, .readRSSI,
            .answerPairing, .replyLongTermKey, .setResolvingList:
            .trace
        case .command: nil
        }
    }

    /// Whether a request's result is worth its own line (not for those that complete at once).
    static func reportsResult(_ request: HostRequest) -> Bool {
        switch request {
        case .setConnectTargets, .answerPairing, .replyLongTermKey, .setResolvingList, .disconnect: false
        default: true
        }
    }

    static func describe(_ request: HostRequest) -> String {
        switch request {
        case .start: return "initialising the controller"
        case .command(let packet): return "command \(packet.opcode)"
        case .startScan(let p):
            return "scanning (\(p.active ? "active" : "passive"), window \(milliseconds(p.window, unit: 0.625)) ms"
                + " every \(milliseconds(p.interval, unit: 0.625)) ms)"
        case .stopScan: return "stopping the scan"
        case .startAdvertising(let p, let data, let response):
            return "advertising every \(milliseconds(p.intervalMin, unit: 0.625)) ms"
                + " (\(data.count) octets of data, \(response.count) of scan response)"
        case .stopAdvertising: return "stopping advertising"
        case .setConnectTargets(let peers, _):
            return peers.isEmpty
                ? "no connection to initiate"
                : "initiating connections to \(peers.map(\.description).joined(separator: ", "))"
        case .disconnect(let handle, let reason): return "\(handle) disconnecting (\(reason))"
        case .readRSSI(let handle): return "\(handle) reading the RSSI"
        case .gatt(let operation, let handle): return "\(handle) GATT \(describe(operation))"
        case .pair(let handle): return "\(handle) pairing"
        case .encrypt(let handle, _): return "\(handle) encrypting with a kept key"
        case .answerPairing(let handle, .accept(let yes)): return "\(handle) pairing \(yes ? "accepted" : "refused")"
        case .answerPairing(let handle, .passkey(let value)):
            return "\(handle) pairing: \(value == nil ? "no passkey given" : "passkey given")"
        case .replyLongTermKey(let handle, let key):
            return
                "\(handle) \(key == nil ? "no kept key for the central (negative reply)" : "answering with a kept key")"
        case .setResolvingList(let identities): return "resolving the addresses of \(identities.count) bonded peers"
        }
    }

    static func describe(_ operation: GATTOperation) -> String {
        switch operation {
        case .exchangeMTU(let mtu): return "exchange MTU (offering \(mtu))"
        case .discoverAllPrimaryServices: return "discover all primary services"
        case .discoverPrimaryServices(let uuid): return "discover primary services \(uuid)"
        case .findIncludedServices(let service): return "find included services of \(service)"
        case .discoverCharacteristics(let service, let uuid):
            return "discover characteristics\(uuid.map { " \($0)" } ?? "") of \(service)"
        case .discoverDescriptors(let characteristic): return "discover descriptors of \(characteristic)"
        case .read(let handle): return "read \(handle)"
        case .readUsingCharacteristicUUID(let uuid, let range):
            return "read \(uuid) in \(range.lowerBound)...\(range.upperBound)"
        case .write(let handle, let value): return "write \(handle) \(octets(value))"
        case .setClientConfiguration(let handle, let configuration):
            return "write \(handle) (Client Characteristic Configuration) \(octets(configuration.bytes))"
        }
    }

    static func describe(_ result: Result<HostOutput, HostError>) -> String {
        switch result {
        case .failure(let error): return "failed: \(error)"
        case .success(.done): return "done"
        case .success(.controller(let info)): return "ready, address \(info.address)"
        case .success(.command): return "answered"
        case .success(.rssi(let rssi)): return "\(rssi) dBm"
        case .success(.paired(let result)): return describe(result)
        case .success(.gatt(let output)):
            switch output {
            case .mtu(let mtu): return "ATT_MTU \(mtu)"
            case .services(let services), .includedServices(let services):
                return list(
                    services.map { "\($0.uuid.uuidString) \($0.handleRange.lowerBound)...\($0.handleRange.upperBound)" }
                )
            case .characteristics(let characteristics):
                return list(characteristics.map { "\($0.uuid.uuidString) value \($0.valueHandle)" })
            case .descriptors(let descriptors): return list(descriptors.map { "\($0.uuid.uuidString) \($0.handle)" })
            case .value(let value): return octets(value)
            case .handleValues(let values): return list(values.map { "\($0.handle) \(octets($0.value))" })
            case .written: return "written"
            }
        }
    }

    // MARK: Words

    private static func list(_ items: [String]) -> String {
        items.isEmpty ? "none" : "\(items.count): " + items.joined(separator: ", ")
    }

    /// "2 octets 0801" (at most 64 shown).
    static func octets(_ value: [UInt8]) -> String {
        let shown = value.prefix(64).map { hex($0) }.joined()
        return "\(value.count) octet\(value.count == 1 ? "" : "s")\(value.isEmpty ? "" : " ")\(shown)"
            + (value.count > 64 ? "..." : "")
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = String(byte, radix: 16)
        return byte < 0x10 ? "0" + digits : digits
    }

    /// A count of `unit` milliseconds, as "7.5" or "30".
    private static func milliseconds(_ count: UInt16, unit: Double) -> String {
        let value = Double(count) * unit
        return value == value.rounded() ? String(Int(value)) : String(value)
    }
}
