import BLECore
import BLEHCI
import BLEHost
import BLETransport
import Testing

/// A host wired to a scripted controller on manual time, with its events recorded.
struct HostHarness {
    let scheduler = ManualScheduler()
    let controller: ScriptedController
    let host: HostDriver
    let log = EventLog()

    static let peerAddress = BluetoothAddress(bytes: [0x11, 0x22, 0x33, 0x44, 0x55, 0x66], type: .randomDevice)

    init(profile: ControllerProfile = ControllerProfile(), configure: (inout HostConfiguration) -> Void = { _ in }) {
        var configuration = HostConfiguration()
        configure(&configuration)
        controller = ScriptedController(profile: profile)
        host = HostDriver(transport: controller.transport, scheduler: scheduler, configuration: configuration)
        host.setEventHandler { [log] event in log.record(event) }
    }

    var events: [HostEvent] { log.events }

    /// Runs the start-up sequence against the default responder; returns its outcome.
    @discardableResult
    func start() -> Result<ControllerInfo, HostError>? {
        let outcome = Outcome<Result<ControllerInfo, HostError>>()
        host.start(outcome.handler)
        controller.pump()
        return outcome.value
    }

    /// Starts the host (expecting success), then forgets the start-up traffic.
    @discardableResult
    func started() throws -> ControllerInfo {
        let info = try #require(try start()?.get())
        controller.clear()
        log.clear()
        return info
    }

    /// A link comes up (LE Connection Complete).
    func connect(_ handle: UInt16, role: HCIRole, peer: BluetoothAddress = HostHarness.peerAddress) {
        controller.deliver(
            .connectionComplete(
                .init(
                    handle: ConnectionHandle(handle), role: role, peerAddress: peer,
                    connectionInterval: 24, peripheralLatency: 0, supervisionTimeout: 200)))
    }

    /// A central link comes up and the peer answers the host's Exchange MTU Request with `peerMTU`; the
    /// controller reports the MTU request's ACL packet completed. Traffic and events are then forgotten.
    func connectCentral(_ handle: UInt16, peerMTU: UInt16 = 517) {
        connect(handle, role: .central)
        controller.deliverL2CAP(handle: ConnectionHandle(handle), channel: .att, [0x03] + le16(peerMTU))
        completed(handle, controller.acl.filter { $0.handle == ConnectionHandle(handle) }.count)
        controller.clear()
        log.clear()
    }

    /// The controller reports `count` ACL packets on `handle` done (Number Of Completed Packets).
    func completed(_ handle: UInt16, _ count: Int) {
        guard count > 0 else { return }
        controller.deliver(
            .numberOfCompletedPackets(
                .init(entries: [
                    .init(handle: ConnectionHandle(handle), numCompletedPackets: UInt16(count))
                ])))
    }

    /// The link goes down (Disconnection Complete).
    func disconnected(_ handle: UInt16, reason: HCIStatus = .remoteUserTerminatedConnection) {
        controller.deliver(.disconnectionComplete(.init(handle: ConnectionHandle(handle), reason: reason)))
    }
}
