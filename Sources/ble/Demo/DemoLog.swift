import BLE

/// Prints one line per step, stamped with virtual time.
final class DemoLog: Sendable {
    let radio: SimulatedRadio

    init(radio: SimulatedRadio) { self.radio = radio }

    func callAsFunction(_ who: String, _ text: String) {
        let ms = radio.now.components.seconds * 1000 + radio.now.components.attoseconds / 1_000_000_000_000_000
        let seconds = ms / 1000
        let millis = ms % 1000
        let stamp = "\(seconds).\(String(repeating: "0", count: 3 - String(millis).count))\(millis)s"
        let padded = String(repeating: " ", count: max(0, 8 - stamp.count)) + stamp
        let name = who + String(repeating: " ", count: max(0, 7 - who.count))
        print("[\(padded)] \(name) \(text)")
    }
}
