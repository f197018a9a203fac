import BLE
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Where `ble scan` writes its devices, in one of three ways:
///
/// - `.live` (stdout is a terminal, no `--json`): a table on the terminal's alternate screen, redrawn in place at
///   most ten times a second, with a header line and as many devices as the window holds; when the scan ends
///   the alternate screen is left and the final table printed once, so it stays in the scrollback.
/// - `.lines`: one line (or JSON object) per new or changed device, or per report with `--duplicates`.
/// - `.sortedAtEnd` (`--sort` outside a terminal, or with `--json`): each device once, in that order, when the
///   scan ends.
final class ScanOutput: Sendable {
    enum Mode: Sendable { case live, lines, sortedAtEnd }

    let mode: Mode
    let json: Bool
    let raw: Bool
    let sort: ScanSort
    let duplicates: Bool

    /// The most often the live table is redrawn.
    static let redrawInterval: Duration = .milliseconds(100)

    private struct Device {
        var report: ScanReport
        /// Order of first sighting.
        var seen: Int
        /// What was last printed (`.lines`), to print only changes.
        var printed: AdvertisementData?
    }

    private struct State {
        var devices: [UUID: Device] = [:]
        var onAlternateScreen = false
        var lastDraw: ContinuousClock.Instant?
        var redrawScheduled = false
        var finished = false
    }

    private let state = Mutex(State())

    init(mode: Mode, json: Bool, raw: Bool, sort: ScanSort, duplicates: Bool) {
        self.mode = mode
        self.json = json
        self.raw = raw
        self.sort = sort
        self.duplicates = duplicates
    }

    /// The scan has started: the live view takes the alternate screen and shows its header.
    func start() {
        guard mode == .live else { return }
        state.withLock { s in
            guard !s.finished, !s.onAlternateScreen else { return }
            s.onAlternateScreen = true
            // Alternate screen on, cursor hidden.
            Output.write("\u{1B}[?1049h\u{1B}[?25l")
            draw(&s)
        }
    }

    /// One report that passed the filters.
    func received(_ report: ScanReport) {
        state.withLock { s in
            guard !s.finished else { return }
            let earlier = s.devices[report.identifier]
            var device = earlier ?? Device(report: report, seen: s.devices.count)
            device.report = report
            switch mode {
            case .lines:
                if duplicates || device.printed != report.advertisement {
                    device.printed = report.advertisement
                    Output.write(text(of: report))
                }
                s.devices[report.identifier] = device
            case .sortedAtEnd:
                s.devices[report.identifier] = device
            case .live:
                s.devices[report.identifier] = device
                redraw(&s)
            }
        }
    }

    /// The scan ended: leaves the alternate screen and prints the final table, or prints the sorted listing.
    func finish() {
        state.withLock { s in
            guard !s.finished else { return }
            s.finished = true
            leaveAlternateScreen(&s)
            switch mode {
            case .lines: return
            case .live:
                Output.write(([header(s)] + sorted(s).flatMap(lines(of:))).map { $0 + "\n" }.joined())
            case .sortedAtEnd:
                Output.write(sorted(s).map(text(of:)).joined())
            }
        }
    }

    /// The scan failed: only the terminal is put back.
    func abandon() {
        state.withLock { s in
            s.finished = true
            leaveAlternateScreen(&s)
        }
    }

    private func leaveAlternateScreen(_ s: inout State) {
        guard s.onAlternateScreen else { return }
        s.onAlternateScreen = false
        // Cursor shown again, alternate screen off (the normal screen comes back as it was).
        Output.write("\u{1B}[?25h\u{1B}[?1049l")
    }

    // MARK: Listing

    private func sorted(_ s: State) -> [ScanReport] {
        let devices = s.devices.values.sorted { a, b in
            switch sort {
            case .rssi where a.report.rssi != b.report.rssi:
                return a.report.rssi > b.report.rssi
            case .name where a.report.name?.lowercased() != b.report.name?.lowercased():
                // Named devices first, then by name.
                guard let x = a.report.name?.lowercased() else { return false }
                guard let y = b.report.name?.lowercased() else { return true }
                return x < y
            case .address where a.report.address.string != b.report.address.string:
                return a.report.address.string < b.report.address.string
            default:
                return a.seen < b.seen
            }
        }
        return devices.map(\.report)
    }

    /// The lines of one device in the table: its line, and its raw structures with `--raw`.
    private func lines(of report: ScanReport) -> [String] {
        [ScanFormat.line(report)] + (raw ? ScanFormat.rawLines(report) : [])
    }

    /// What `.lines` and `.sortedAtEnd` print for one report, newline included.
    private func text(of report: ScanReport) -> String {
        json ? ScanFormat.json(report).text + "\n" : lines(of: report).map { $0 + "\n" }.joined()
    }

    private func header(_ s: State) -> String {
        let count = s.devices.count
        return "\(count) device\(count == 1 ? "" : "s"), sorted by \(sort.rawValue)"
    }

    // MARK: Live view

    /// Draws now, or once the redraw interval since the last drawing has passed.
    private func redraw(_ s: inout State) {
        // A drawing already scheduled shows what came meanwhile. (Checked first: a report that came after the
        // interval, while the scheduled drawing was late on a loaded machine, drew at once and then the late one
        // drew again, up to twice the rate; seen as 33 frames in 2.1 s.)
        guard !s.redrawScheduled else { return }
        let now = ContinuousClock.now
        guard let last = s.lastDraw, now - last < Self.redrawInterval else { return draw(&s) }
        s.redrawScheduled = true
        let wait = Self.redrawInterval - (now - last)
        let nanoseconds =
            Int(wait.components.seconds) * 1_000_000_000 + Int(wait.components.attoseconds / 1_000_000_000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [self] in
            state.withLock { s in
                s.redrawScheduled = false
                if !s.finished { draw(&s) }
            }
        }
    }

    /// Rewrites the screen in place: cursor home, each line cleared to its end, then the rest of the screen
    /// cleared (never the whole screen first, which flickers). The header stays on the first line; the devices
    /// that do not fit the window are counted on the last.
    private func draw(_ s: inout State) {
        s.lastDraw = .now
        let (rows, columns) = Self.windowSize()
        var screen = [header(s) + " (Ctrl-C to stop)"]
        let blocks = sorted(s).map(lines(of:))
        let room = max(rows - 1, 1)
        if blocks.reduce(0, { $0 + $1.count }) <= room {
            screen += blocks.joined()
        } else {
            var shown = 0
            for block in blocks {
                guard screen.count - 1 + block.count <= room - 1 else { break }
                screen += block
                shown += 1
            }
            screen.append("... \(blocks.count - shown) more")
        }
        let fitted = screen.map { line in line.count > columns ? String(line.prefix(columns)) : line }
        Output.write("\u{1B}[H" + fitted.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
    }

    /// The terminal's rows and columns (TIOCGWINSZ), or 24 by 80 when it does not say.
    static func windowSize() -> (rows: Int, columns: Int) {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0, size.ws_col > 0 else {
            return (24, 80)
        }
        return (Int(size.ws_row), Int(size.ws_col))
    }
}
