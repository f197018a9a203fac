import BLE
import Synchronization

/// Prints one line per step, stamped with virtual time.
///
/// With `ordered`, the lines of one instant are held until time moves on (or `flush`) and printed in an order that
/// is the same every run: the narrator's (`user`, `phone`: the scenario's own steps) first, in the order told, then
/// the others sorted by who said them (actors whose events fall at the same instant).
final class DemoLog: Sendable {
    let radio: SimulatedRadio
    let ordered: Bool
    private let held = Mutex<(time: Duration, lines: [(String, String)])>((.zero, []))

    init(radio: SimulatedRadio, ordered: Bool = false) {
        self.radio = radio
        self.ordered = ordered
    }

    func callAsFunction(_ who: String, _ text: String) {
        guard ordered else { return print(line(who, text, at: radio.now)) }
        let now = radio.now
        let ready = held.withLock { h -> [String] in
            var out: [String] = []
            if h.time != now {
                out = Self.sorted(h.lines).map { line($0.0, $0.1, at: h.time) }
                h = (now, [])
            }
            h.lines.append((who, text))
            return out
        }
        for line in ready { print(line) }
    }

    /// Prints what an ordered log holds.
    func flush() {
        let ready = held.withLock { h -> [String] in
            defer { h.lines = [] }
            return Self.sorted(h.lines).map { line($0.0, $0.1, at: h.time) }
        }
        for line in ready { print(line) }
    }

    private static let narrators: Set<String> = ["user", "phone"]

    private static func sorted(_ lines: [(String, String)]) -> [(String, String)] {
        // Stable: one actor's lines of an instant keep their order.
        func key(_ line: (offset: Int, element: (String, String))) -> (Int, String, Int) {
            narrators.contains(line.element.0) ? (0, "", line.offset) : (1, line.element.0, line.offset)
        }
        return lines.enumerated().sorted { key($0) < key($1) }.map(\.element)
    }

    private func line(_ who: String, _ text: String, at now: Duration) -> String {
        let ms = now.components.seconds * 1000 + now.components.attoseconds / 1_000_000_000_000_000
        let seconds = ms / 1000
        let millis = ms % 1000
        let stamp = "\(seconds).\(String(repeating: "0", count: 3 - String(millis).count))\(millis)s"
        let padded = String(repeating: " ", count: max(0, 8 - stamp.count)) + stamp
        let name = who + String(repeating: " ", count: max(0, 7 - who.count))
        return "[\(padded)] \(name) \(text)"
    }
}
