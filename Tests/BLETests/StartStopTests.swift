import BLE
import BLEHCI
import BLEVirtualController
import Foundation
import Synchronization
import Testing

/// Scanning and advertising started and stopped in quick succession, in every order, checked against what the
/// controller was told (the HCI trace): once the calls settle, the controller does what the API says.
@Suite struct StartStopTests {
    enum Call: CaseIterable, CustomStringConvertible {
        case scanAll, scanFiltered, stop, settle
        var description: String {
            switch self {
            case .scanAll: "scan(nil)"
            case .scanFiltered: "scan([service])"
            case .stop: "stopScan"
            case .settle: "run(1 ms)"
            }
        }
    }

    /// Every sequence of up to four calls (with a millisecond of virtual time as one of the "calls"), made back
    /// to back on one phone; after each sequence the radio runs until every command is answered.
    @Test func afterAnyBurstOfScanAndStopCallsTheControllerScansExactlyWhenIsScanningSaysSo() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let controller = ControllerView(device: "phone", opcode: .leSetScanEnable)
        rig.radio.setTraceHandler { _, device, direction, packet in controller.saw(device, direction, packet) }
        defer { rig.radio.setTraceHandler(nil) }

        var checked = 0
        for sequence in everySequence(of: Call.allCases, upTo: 4) {
            for call in sequence {
                switch call {
                case .scanAll: rig.central.scanForPeripherals(withServices: nil)
                case .scanFiltered: rig.central.scanForPeripherals(withServices: [Profile.service])
                case .stop: rig.central.stopScan()
                case .settle: try await rig.run(.milliseconds(1))
                }
            }
            try await rig.run(.milliseconds(50))
            #expect(controller.pending == 0, "\(sequence): a command still unanswered")
            #expect(
                controller.enabled == rig.central.isScanning,
                "\(sequence): the controller scans: \(controller.enabled), isScanning: \(rig.central.isScanning)")
            checked += 1
        }
        #expect(checked == 4 + 16 + 64 + 256)

        // And what the application sees agrees: stopped means no more discoveries.
        rig.central.stopScan()
        try await rig.run(.milliseconds(50))
        let before = rig.phone.discoveries.count
        try await rig.run(.seconds(1))
        #expect(rig.phone.discoveries.count == before)
    }

    @Test func scanThenStopAtOncePutsNoScanEnableOnTheWire() async throws {
        let rig = Rig()
        try await rig.startSensor()
        let controller = ControllerView(device: "phone", opcode: .leSetScanEnable)
        rig.radio.setTraceHandler { _, device, direction, packet in controller.saw(device, direction, packet) }
        defer { rig.radio.setTraceHandler(nil) }
        rig.central.scanForPeripherals(withServices: nil)
        rig.central.stopScan()
        try await rig.run(.seconds(1))
        #expect(!rig.central.isScanning)
        #expect(controller.commands.isEmpty)
        #expect(!controller.enabled)
        #expect(rig.phone.discoveries.isEmpty)
    }

    @Test func afterAnyBurstOfAdvertisingCallsTheControllerAdvertisesExactlyWhenIsAdvertisingSaysSo() async throws {
        let rig = Rig()
        try await rig.run(until: { rig.sensor.manager.state == .poweredOn }, "power on")
        rig.sensor.publish()
        let controller = ControllerView(device: "sensor", opcode: .leSetAdvertisingEnable)
        rig.radio.setTraceHandler { _, device, direction, packet in controller.saw(device, direction, packet) }
        defer { rig.radio.setTraceHandler(nil) }
        let manager = rig.sensor.manager
        let other = AdvertisementData(localName: "other")
        for sequence in everySequence(of: Array(0..<4), upTo: 4) {
            for call in sequence {
                switch call {
                case 0: manager.startAdvertising(Sensor.advertisement)
                case 1: manager.startAdvertising(other)
                case 2: manager.stopAdvertising()
                default: try await rig.run(.milliseconds(1))
                }
            }
            try await rig.run(.milliseconds(50))
            #expect(controller.pending == 0, "\(sequence): a command still unanswered")
            #expect(
                controller.enabled == manager.isAdvertising,
                "\(sequence): the controller advertises: \(controller.enabled), isAdvertising: \(manager.isAdvertising)"
            )
        }
    }
}

/// Every sequence of 1 to `length` elements of `elements`, shortest first.
func everySequence<T>(of elements: [T], upTo length: Int) -> [[T]] {
    var all: [[T]] = []
    var layer: [[T]] = [[]]
    for _ in 0..<length {
        layer = layer.flatMap { sequence in elements.map { sequence + [$0] } }
        all += layer
    }
    return all
}

/// What one device's controller was told to do with one enable command (LE Set Scan Enable or LE Set
/// Advertising Enable), from the HCI trace: the last such command it accepted.
final class ControllerView: Sendable {
    private struct State {
        var enabled = false
        var pendingValue: [Bool] = []
        var commands: [Bool] = []
    }
    private let state = Mutex(State())
    let device: String
    let opcode: HCIOpcode

    init(device: String, opcode: HCIOpcode) {
        self.device = device
        self.opcode = opcode
    }

    func saw(_ device: String, _ direction: HCITraceDirection, _ packet: HCIPacket) {
        guard device == self.device else { return }
        switch (direction, packet) {
        case (.hostToController, .command(let command)) where command.opcode == opcode:
            let value = command.parameters.first == 1
            state.withLock {
                $0.pendingValue.append(value)
                $0.commands.append(value)
            }
        case (.controllerToHost, .event(let event)):
            guard case .commandComplete(let complete)? = try? HCIEvent(event), complete.opcode == opcode else { return }
            state.withLock {
                guard !$0.pendingValue.isEmpty else { return }
                let value = $0.pendingValue.removeFirst()
                if complete.status == HCIStatus.success { $0.enabled = value }
            }
        default:
            break
        }
    }

    /// Whether the controller does it now, as far as its answers say.
    var enabled: Bool { state.withLock { $0.enabled } }
    /// Commands sent and not yet answered.
    var pending: Int { state.withLock { $0.pendingValue.count } }
    /// Every enable value sent.
    var commands: [Bool] { state.withLock { $0.commands } }
}
