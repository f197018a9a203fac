import BLECore
import BLETransport

/// One simulated Bluetooth LE controller on a `SimulatedRadio`.
///
/// It speaks only HCI: a host talks to it through `hostTransport` (commands and ACL data in; events and ACL
/// data out), exactly as it would talk to silicon over UART or USB. Everything it does on the air goes through
/// its radio. Create it with `SimulatedRadio.addController(name:address:position:txPower:)`.
public final class VirtualController: Sendable {
    /// The radio this controller is on.
    public let radio: SimulatedRadio
    /// Its name in traces.
    public let name: String
    /// Its identity address (public, or a random static one).
    public let address: BluetoothAddress
    /// The in-memory HCI link between this controller and its host.
    public let pipe: HCIPipe
    let index: Int

    init(radio: SimulatedRadio, index: Int, name: String, address: BluetoothAddress, pipe: HCIPipe) {
        self.radio = radio
        self.index = index
        self.name = name
        self.address = address
        self.pipe = pipe
    }

    /// The transport a host uses to reach this controller.
    public var hostTransport: any HCITransport { pipe.hostEnd }

    /// Where the controller currently is.
    public var position: RadioPosition { radio.position(of: index) }

    /// Whether the controller is still powered (false after `vanish`).
    public var isPowered: Bool { radio.isPowered(index) }

    /// Powers the controller off for good: it stops advertising, scanning and answering; its peers see their
    /// links time out (supervision timeout); its host's transport closes with `reason`.
    public func vanish(reason: String = "the virtual controller was powered off") {
        radio.vanish(index, reason: reason)
    }

    /// The controller's hardware fails and recovers, as silicon whose firmware restarts: at once it forgets its
    /// links (its peers' links time out), stops advertising, scanning and initiating, restores its defaults, and
    /// sends its host a Hardware Error event with `code`; it answers again at once (the host resets it).
    public func failHardware(code: UInt8 = 0x01) {
        radio.failHardware(index, code: code)
    }

    /// The controller's firmware hangs, as silicon stuck in a loop: at once it forgets its links (its peers'
    /// links time out), stops advertising, scanning and initiating, and from then on drops every command and
    /// data packet its host sends and sends nothing back, not even a Hardware Error. After `duration` its
    /// firmware restarts (a watchdog) and it answers again, from its defaults, still without telling its host;
    /// nil: it never comes back. The host finds out by its silence (`HostMachine.commandTimedOut`).
    public func hang(for duration: Duration?) {
        radio.hang(index, for: duration)
    }

    /// Powers the controller off for good, in order, as a phone whose Bluetooth is switched off: it stops
    /// advertising, scanning and answering; its peers hear each link end at once (Disconnection Complete with
    /// Remote Device Terminated due to Power Off, 0x15); its host's transport closes with `reason`.
    public func powerOff(reason: String) {
        radio.vanish(index, reason: reason, terminatingLinks: true)
    }
}
