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
///   most ten times a second (and every second, so that ages move), with a header line and as many devices as
///   the window holds, one row each that fits 80 columns (`--wide`: each device's whole line); a device not
///   heard for a while is marked gone. When the scan ends the alternate screen is left and the devices printed
///   once in full (line and statistics), so they stay in the scrollback.
/// - `.lines`: one line (or JSON object) per new or changed device, or per report with `--duplicates`, each
///   with the time it came.
/// - `.sortedAtEnd` (`--sort` outside a terminal, or with `--json`): each device once, in that order, with its
///   statistics, when the scan ends.
final class ScanOutput: Sendable {
    enum Mode: Sendable { case live, lines, sortedAtEnd }

    let mode: Mode
    let json: Bool
    let raw: Bool
    let sort: ScanSort
    let duplicates: Bool
    /// The live table shows each device's whole line instead of a row of 80 columns.
    let wide: Bool
    /// The system's time (the reports' clock).
    let now: @Sendable () -> Duration
    /// Where the text goes.
    let write: @Sendable (String) -> Void

    /// The most often the live table is redrawn.
    static let redrawInterval: Duration = .milliseconds(100)
    /// How often the live table is redrawn when nothing comes (ages move on).
    static let tickInterval: DispatchTimeInterval = .seconds(1)

    private struct Device {
        var report: ScanReport
        /// Order of first sighting.
        var seen: Int
        /// What was last printed (`.lines`), to print only changes.
        var printed: AdvertisementData?
        var statistics: ScanStatistics
    }

    private struct State {
        var devices: [UUID: Device] = [:]
        var onAlternateScreen = false
        var lastDraw: ContinuousClock.Instant?
        var redrawScheduled = false
        var finished = false
    }

    private let state = Mutex(State())

    init(
        mode: Mode, json: Bool, raw: Bool, sort: ScanSort, duplicates: Bool, wide: Bool = false,
        now: @escaping @Sendable () -> Duration, write: @escaping @Sendable (String) -> Void = { Output.write($0) }
    ) {
        self.mode = mode
        self.json = json
        self.raw = raw
        self.sort = sort
        self.duplicates = duplicates
        self.wide = wide
        self.now = now
        self.write = write
    }

    /// How many devices passed the filters.
    var count: Int { state.withLock { $0.devices.count } }

    /// The scan has started: the live view takes the alternate screen and shows its header.
    func start() {
        guard mode == .live else { return }
        state.withLock { s in
            guard !s.finished, !s.onAlternateScreen else { return }
            s.onAlternateScreen = true
            // Alternate screen on, cursor hidden.
            write("\u{1B}[?1049h\u{1B}[?25l")
            draw(&s)
        }
        tick()
    }

    /// Redraws the live table every `tickInterval` until the scan ends.
    private func tick() {
        DispatchQueue.global().asyncAfter(deadline: .now() + Self.tickInterval) { [self] in
            let going = state.withLock { s in
                guard !s.finished else { return false }
                redraw(&s)
                return true
            }
            if going { tick() }
        }
    }

    /// One report that passed the filters.
    func received(_ report: ScanReport) {
        state.withLock { s in
            guard !s.finished else { return }
            var device: Device
            if var earlier = s.devices[report.identifier] {
                earlier.statistics.record(at: report.time, rssi: report.rssi)
                device = earlier
            } else {
                device = Device(
                    report: report, seen: s.devices.count,
                    statistics: ScanStatistics(at: report.time, rssi: report.rssi))
            }
            device.report = report
            switch mode {
            case .lines:
                if duplicates || device.printed != report.advertisement {
                    device.printed = report.advertisement
                    write(text(of: device, at: report.time, timed: true))
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
                let time = now()
                write(
                    ([header(s)] + sorted(s).flatMap { detailLines(of: $0, at: time) }).map { $0 + "\n" }.joined())
            case .sortedAtEnd:
                let time = now()
                write(sorted(s).map { text(of: $0, at: time, timed: false) }.joined())
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
        write("\u{1B}[?25h\u{1B}[?1049l")
    }

    // MARK: Listing

    private func sorted(_ s: State) -> [Device] {
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
        return devices
    }

    /// The lines of one device: its line, and its raw structures with `--raw`.
    private func lines(of report: ScanReport) -> [String] {
        [ScanFormat.line(report)] + (raw ? ScanFormat.rawLines(report) : [])
    }

    /// One device in full, at `time`: its line with what the scan measured, then its raw structures with `--raw`.
    private func detailLines(of device: Device, at time: Duration) -> [String] {
        var all = lines(of: device.report)
        all[0] += "  " + ScanFormat.statistics(device.statistics, now: time)
        return all
    }

    /// What `.lines` and `.sortedAtEnd` print for one device, newline included: as JSON, or its line after the
    /// time of its latest report, with its statistics when not `timed` (a listing at the end).
    private func text(of device: Device, at time: Duration, timed: Bool) -> String {
        if json { return ScanFormat.json(device.report, device.statistics, now: time).text + "\n" }
        var all = timed ? lines(of: device.report) : detailLines(of: device, at: time)
        all[0] = Timestamp.format(device.report.date) + "  " + all[0]
        return all.map { $0 + "\n" }.joined()
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
        let time = now()
        if !wide { screen.append(ScanFormat.tableHeader) }
        let blocks = sorted(s).map { device in
            wide
                ? detailLines(of: device, at: time)
                : [ScanFormat.row(device.report, device.statistics, now: time)]
                    + (raw ? ScanFormat.rawLines(device.report) : [])
        }
        // The rows left for devices under the header lines.
        let room = max(rows - screen.count, 1)
        if blocks.reduce(0, { $0 + $1.count }) <= room {
            screen += blocks.joined()
        } else {
            var used = 0
            var shown = 0
            // One row stays for the count of the others.
            for block in blocks {
                guard used + block.count <= room - 1 else { break }
                screen += block
                used += block.count
                shown += 1
            }
            screen.append("... \(blocks.count - shown) more")
        }
        let fitted = screen.map { line in line.count > columns ? String(line.prefix(columns)) : line }
        write("\u{1B}[H" + fitted.map { $0 + "\u{1B}[K" }.joined(separator: "\r\n") + "\u{1B}[J")
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
