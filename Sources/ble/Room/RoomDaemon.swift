import BLE
import BLETransport
import BLETransportPosix
import Foundation
import NIOCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shared room (`ble room`): the simulated room of `World` on a radio that runs in real time, in a process of
/// its own, where every `ble` process of the user (and any host stack over H4 on TCP) attaches as a device with a
/// controller of its own. The devices of the room keep their state for as long as the room runs; a device that
/// attaches is powered off, in order, when its connection closes (its peers hear the links end). The room stops
/// by itself once no device has been attached and nobody has asked it anything for `idleTimeout`.
final class RoomDaemon: Sendable {
    struct Device: Sendable {
        var index: Int
        var address: BluetoothAddress
        var via: String
        var since: Date
        var controller: VirtualController
    }

    private struct State {
        var devices: [Int: Device] = [:]
        var next = 1
        var lastActivity = ContinuousClock.now
        var stop: String?
        var listeners: [String] = []
    }

    let world: World
    let paths: RoomPaths
    let idleTimeout: Duration?
    let started = Date()
    /// Where the attached devices' addresses start: random per room, so that a device attaching to a later room is
    /// not taken (by an identifier in a store) for a different one that attached to an earlier room.
    private let addressBase = UInt16.random(in: 0...0xFFFF)
    private let state = Mutex(State())

    init(seed: UInt64, paths: RoomPaths, idleTimeout: Duration?) {
        world = World(seed: seed)
        self.paths = paths
        self.idleTimeout = idleTimeout
    }

    /// A host connected: it gets a controller of its own, powered on, at its own place near the middle of the room.
    func attach(_ link: H4StreamTransport, via: String) {
        let index = state.withLock { s -> Int? in
            guard s.stop == nil else { return nil }
            defer { s.next += 1 }
            s.lastActivity = .now
            return s.next
        }
        guard let index else { return link.close() }
        let number = addressBase &+ UInt16(truncatingIfNeeded: index)
        let address = BluetoothAddress(bytes: [0x5A, 0x11, 0xB1, 0xE0, UInt8(number >> 8), UInt8(number & 0xFF)])
        // On a spiral round the middle (the golden angle apart), so no two stand in the same place.
        let angle = Double(index) * 2.399_963
        let radius = 1 + 0.25 * Double(index % 8)
        let controller = world.radio.addController(
            name: "room device \(index)", address: address,
            position: RadioPosition(x: radius * cos(angle), y: radius * sin(angle)))
        let device = Device(index: index, address: address, via: via, since: Date(), controller: controller)
        // Checked again in the section that records it: a stop that came meanwhile has already let the others go.
        let admitted = state.withLock { s -> Bool in
            guard s.stop == nil else { return false }
            s.devices[index] = device
            return true
        }
        guard admitted else {
            controller.powerOff(reason: "the room is stopping")
            return link.close()
        }
        let hostEnd = controller.hostTransport
        hostEnd.setReceiver { event in
            switch event {
            case .packet(let packet): link.send(packet)
            case .closed: link.close()
            }
        }
        link.setReceiver { [weak self] event in
            switch event {
            case .packet(let packet): hostEnd.send(packet)
            case .closed(let reason): self?.detach(index, reason: reason)
            }
        }
        roomLog("device \(index) attached (\(via)) as \(address)")
    }

    private func detach(_ index: Int, reason: String?) {
        let device = state.withLock { s -> Device? in
            s.lastActivity = .now
            return s.devices.removeValue(forKey: index)
        }
        guard let device else { return }
        device.controller.powerOff(reason: "its host left the room")
        // The transport's reasons speak from a host's side; a host that simply left needs no reason.
        let failure = reason.flatMap { $0.hasSuffix("closed the connection") ? nil : $0 }
        roomLog("device \(index) left\(failure.map { " (\($0))" } ?? "")")
    }

    func listening(on spec: String) {
        state.withLock { $0.listeners.append(spec) }
    }

    /// The answer to a control request.
    func answer(_ request: String) -> String {
        state.withLock { $0.lastActivity = .now }
        switch request.trimmingCharacters(in: .whitespaces) {
        case "status":
            return status().text
        case "stop":
            requestStop("asked to stop")
            return JSON.object([("stopping", .bool(true))]).text
        default:
            return JSON.object([("error", .string("unknown request '\(request)': status or stop"))]).text
        }
    }

    func status() -> JSON {
        let s = state.withLock { $0 }
        let iso = ISO8601DateFormatter()
        // A room that is stopping takes no more devices: it says so, and a command starts a new one.
        if let stop = s.stop {
            return .object([("running", .bool(false)), ("stopping", .string(stop)), ("pid", .number(Int(getpid())))])
        }
        return .object([
            ("running", .bool(true)),
            ("pid", .number(Int(getpid()))),
            ("socket", .string(TransportSpec.unix(path: paths.socket).description)),
            ("listening", .array(s.listeners.map(JSON.string))),
            ("started", .string(iso.string(from: started))),
            ("uptime", .number(Int(Date().timeIntervalSince(started)))),
            ("idleTimeout", idleTimeout.map { .number(Int($0.components.seconds)) } ?? .null),
            ("world", .array(WorldDevices.all.map { .string($0.profile.deviceName) })),
            (
                "devices",
                .array(
                    s.devices.values.sorted { $0.index < $1.index }.map { d in
                        .object([
                            ("index", .number(d.index)), ("address", .string(d.address.string)),
                            ("via", .string(d.via)), ("since", .string(iso.string(from: d.since))),
                        ])
                    })
            ),
        ])
    }

    func requestStop(_ reason: String) {
        state.withLock { s in if s.stop == nil { s.stop = reason } }
    }

    /// Runs the radio in real time until asked to stop or idle; returns why it stopped.
    func run() async throws -> String {
        while true {
            let signal = StopSignal.received
            if signal != 0 { requestStop(StopSignal.name(signal)) }
            let reason = state.withLock { s -> String? in
                if let stop = s.stop { return stop }
                guard let idleTimeout, s.devices.isEmpty, ContinuousClock.now - s.lastActivity >= idleTimeout else {
                    return nil
                }
                s.stop = "idle for \(idleTimeout.components.seconds) s"
                return s.stop
            }
            if let reason { return reason }
            // Short steps while hosts are attached: a host's packet waits at most this long for the radio to look
            // at it. With nobody attached, longer ones (a new host's first command waits up to 50 ms once).
            let attached = state.withLock { !$0.devices.isEmpty }
            try await world.radio.run(for: .milliseconds(attached ? 2 : 50), pacing: .realtime)
        }
    }

    /// Powers off every attached device (their hosts' transports close).
    func detachAll() {
        let devices = state.withLock { s -> [Device] in
            defer { s.devices = [:] }
            return Array(s.devices.values)
        }
        for device in devices { device.controller.powerOff(reason: "the room stopped") }
    }
}

/// One line on standard output at once, stamped with the wall-clock time (the room's log).
func roomLog(_ line: String) {
    let stamp = ISO8601DateFormatter.string(
        from: Date(), timeZone: .current, formatOptions: [.withInternetDateTime, .withFractionalSeconds])
    // A log that cannot be written (a closed pipe, a full disk) loses the line, not the room.
    try? FileHandle.standardOutput.write(contentsOf: Data("\(stamp) \(line)\n".utf8))
}
