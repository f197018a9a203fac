import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The shell's screen and keyboard. At a terminal: raw mode, the prompt and the line being edited on the last
/// row, and every line the shell prints (a command's output, a notification that arrives while the user types)
/// written above it, after which the prompt and the line are drawn again. Driven by a script (stdin not a
/// terminal): lines are read as they come and printed as they are, with no prompt.
///
/// Our own small editor rather than libedit or readline: neither is a Swift package, `swift run ble`
/// must build on a machine with nothing installed, and loading libedit at run time would give a different
/// shell where it is missing; what the shell needs (history, Tab completion, printing above the prompt) fits in
/// a few hundred lines that behave the same everywhere.
final class ShellTerminal: Sendable {
    /// What the terminal holds while the shell runs: the editor and the prompt drawn before it.
    private struct Screen {
        var editor: LineEditing
        var prompt: String
        /// Whether the prompt is on the screen (an interactive shell that has not ended).
        var drawn = false
    }

    let interactive: Bool
    private let screen: Mutex<Screen>
    private let savedMode = Mutex<termios?>(nil)

    init(interactive: Bool, prompt: String, history: [String]) {
        self.interactive = interactive
        screen = Mutex(Screen(editor: LineEditing(history: history), prompt: prompt))
    }

    /// Whether the shell talks to a person: stdin and stdout are both terminals.
    static var standardStreamsAreTerminals: Bool { isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1 }

    /// The lines entered so far, for the history file.
    var history: [String] { screen.withLock { $0.editor.history } }
    /// The lines this session added to the history.
    var addedHistory: [String] { screen.withLock { $0.editor.added } }

    // MARK: Printing

    /// Prints `text` (one or more lines) above the prompt, then draws the prompt and the line again.
    func print(_ text: String) {
        screen.withLock { s in
            guard s.drawn else {
                Output.write(text + "\n")
                return
            }
            let body = text.replacingOccurrences(of: "\n", with: "\r\n")
            Output.write("\r\u{1B}[K" + body + "\r\n" + Self.render(s, columns: Self.columns()))
        }
    }

    /// A message about a failure: at a terminal above the prompt like any line; from a script on stderr.
    func printError(_ message: String) {
        if interactive {
            print("error: \(message)")
        } else {
            Output.error(message)
        }
    }

    /// Changes the prompt (the connected device's name goes in it) and draws it.
    func setPrompt(_ prompt: String) {
        screen.withLock { s in
            s.prompt = prompt
            if s.drawn { Output.write(Self.render(s, columns: Self.columns())) }
        }
    }

    // MARK: Drawing

    /// The escape sequences that draw the prompt and the line on the current row and put the cursor where it is
    /// in the line. A line wider than the terminal scrolls sideways so the cursor stays in view.
    static func render(prompt: String, line: [Character], cursor: Int, columns: Int) -> String {
        let promptWidth = prompt.count
        let room = max(1, columns - promptWidth - 1)
        var start = 0
        if cursor > room { start = cursor - room }
        let end = min(line.count, start + room)
        let visible = String(line[start..<end])
        let column = promptWidth + cursor - start
        return "\r" + prompt + visible + "\u{1B}[K\r" + (column > 0 ? "\u{1B}[\(column)C" : "")
    }

    private static func render(_ s: Screen, columns: Int) -> String {
        render(
            prompt: s.editor.searchPrompt ?? s.prompt, line: s.editor.line, cursor: s.editor.cursor, columns: columns)
    }

    static func columns() -> Int { ScanOutput.windowSize().columns }

    /// Candidates laid out in columns, as a second Tab shows them.
    static func table(_ words: [String], columns: Int) -> String {
        let width = (words.map(\.count).max() ?? 0) + 2
        let perRow = max(1, columns / max(1, width))
        var rows: [String] = []
        var index = 0
        while index < words.count {
            let row = words[index..<min(words.count, index + perRow)]
            rows.append(
                row.map { $0.padding(toLength: width, withPad: " ", startingAt: 0) }.joined()
                    .trimmingCharacters(in: .whitespaces))
            index += perRow
        }
        return rows.joined(separator: "\n")
    }

    // MARK: Input

    /// Starts reading standard input on a thread of its own: each line entered (or read from the script) comes
    /// out of the stream, which ends at Ctrl-D or at the end of input. `completer` is asked for Tab's candidates
    /// and `onInterrupt` is called for Ctrl-C, both on the reading thread, at once (while a command runs too).
    func lines(
        completer: @escaping LineEditing.Completer, onInterrupt: @escaping @Sendable () -> Void
    ) -> AsyncStream<String> {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        let thread = Thread { [self] in
            if interactive {
                readKeys(continuation, completer: completer, onInterrupt: onInterrupt)
            } else {
                while let line = readLine(strippingNewline: true) { continuation.yield(line) }
            }
            continuation.finish()
        }
        thread.name = "ble.shell.input"
        thread.start()
        return stream
    }

    /// The keyboard in raw mode, one key at a time, until Ctrl-D on an empty line or the end of input.
    private func readKeys(
        _ continuation: AsyncStream<String>.Continuation, completer: LineEditing.Completer,
        onInterrupt: () -> Void
    ) {
        var decoder = KeyDecoder()
        var buffer = [UInt8](repeating: 0, count: 256)
        screen.withLock { s in
            s.drawn = true
            Output.write(Self.render(s, columns: Self.columns()))
        }
        while true {
            let count = read(STDIN_FILENO, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { break }
            var keys = decoder.feed(buffer[0..<count])
            // An escape sequence cut between reads gets a moment to finish; a lone ESC is then dropped.
            if Self.waitForInput(milliseconds: 30) == false { keys += decoder.flushPending() }
            for key in keys {
                if handle(key, continuation, completer: completer, onInterrupt: onInterrupt) == false { return }
            }
        }
    }

    /// Applies one key; false once the user is done (Ctrl-D).
    private func handle(
        _ key: Key, _ continuation: AsyncStream<String>.Continuation, completer: LineEditing.Completer,
        onInterrupt: () -> Void
    ) -> Bool {
        screen.withLock { s in
            let columns = Self.columns()
            switch s.editor.handle(key, completer: completer) {
            case .nothing:
                return true
            case .redraw:
                Output.write(Self.render(s, columns: columns))
            case .submit(let line):
                // The entered line stays on the screen with its prompt; a new prompt follows at once.
                Output.write("\r" + s.prompt + line + "\u{1B}[K\r\n" + Self.render(s, columns: columns))
                continuation.yield(line)
            case .interrupted:
                // The rest of the abandoned line is cleared, so what stays on the screen is what was before the
                // cursor and ^C (it left "ble> ^Cite 2A39 …" when the cursor was at the start).
                Output.write("\u{1B}[K^C\r\n" + Self.render(s, columns: columns))
                onInterrupt()
            case .endOfInput:
                Output.write("\r\n")
                s.drawn = false
                return false
            case .clearScreen:
                Output.write("\u{1B}[H\u{1B}[2J" + Self.render(s, columns: columns))
            case .list(let candidates):
                Output.write(
                    "\r\u{1B}[K" + Self.table(candidates, columns: columns).replacingOccurrences(of: "\n", with: "\r\n")
                        + "\r\n" + Self.render(s, columns: columns))
            case .bell:
                Output.write("\u{07}")
            }
            return true
        }
    }

    /// Whether standard input has bytes within `milliseconds`.
    private static func waitForInput(milliseconds: Int32) -> Bool {
        var descriptor = pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0)
        return poll(&descriptor, 1, milliseconds) > 0
    }

    // MARK: Raw mode

    /// Puts the terminal in raw mode (keys one at a time, no echo, Ctrl-C as a key), and arranges for it to be
    /// given back however the process ends short of SIGKILL: `restore()`, or a SIGTERM or SIGHUP.
    func enterRawMode() {
        guard interactive else { return }
        var mode = termios()
        guard tcgetattr(STDIN_FILENO, &mode) == 0 else { return }
        savedMode.withLock { $0 = mode }
        var raw = mode
        raw.c_iflag &= ~tcflag_t(BRKINT | ICRNL | INPCK | ISTRIP | IXON)
        // Output processing stays on, so a "\n" printed by anything still starts its line at the left edge.
        raw.c_lflag &= ~tcflag_t(ECHO | ICANON | IEXTEN | ISIG)
        raw.c_cflag |= tcflag_t(CS8)
        withUnsafeMutableBytes(of: &raw.c_cc) { cc in
            cc[Int(VMIN)] = 1
            cc[Int(VTIME)] = 0
        }
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw)
        // SIGTERM and SIGHUP (the terminal closed) stop the session as every command stops (Interrupt): the run
        // loop ends the flow, whose end gives the terminal back, closes the links and keeps the history.
    }

    /// Gives the terminal back as it was, the prompt line cleared (idempotent).
    func restore() {
        screen.withLock { s in
            if s.drawn { Output.write("\r\u{1B}[K") }
            s.drawn = false
        }
        savedMode.withLock { saved in
            guard var mode = saved else { return }
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &mode)
            saved = nil
        }
    }
}
