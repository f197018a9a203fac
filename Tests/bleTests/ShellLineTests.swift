import Testing

@testable import ble

/// The line at `ble shell`'s prompt as words: what Tab puts in it, how it splits into a command's words, and the
/// row the terminal shows for it. Lines are pictures as in `ShellEditingTests`: "sc|an", the "|" at the cursor.
@Suite struct ShellLineTests {
    // MARK: Tab completion

    /// Commands for the first word; device names after `connect`, matched without regard to case as the shell
    /// does.
    static let completer: LineEditing.Completer = { words, partial in
        let names: [String]
        switch words {
        case []: names = ["connect", "disconnect", "devices", "exit", "explore", "scan", "subscribe"]
        case ["connect"]: names = ["Environment Hub", "Environment Sensor", "Lamp", "Living Room", "Lamp"]
        default: names = []
        }
        return names.filter { $0.lowercased().hasPrefix(partial.lowercased()) }
    }

    /// One Tab: before, after.
    static let completions: [(String, String)] = [
        // One candidate: the word is finished and a space follows.
        ("sub|", "subscribe |"), ("|", "|"), ("sub| Lamp", "subscribe | Lamp"), ("connect Lam|", "connect Lamp |"),
        ("connect lam|", "connect Lamp |"),
        // Several: the word grows to what they have in common.
        ("e|", "ex|"), ("d|", "d|"),
        // A name with a space goes in quotes; left open while it is not the whole name.
        ("connect Liv|", "connect \"Living Room\" |"), ("connect En|", "connect \"Environment |"),
        ("connect \"Environment S|", "connect \"Environment Sensor\" |"),
        // Inside an open quote, or after a backslash-escaped space, the word is what the quotes hold.
        ("connect \"Liv|", "connect \"Living Room\" |"), ("connect 'Liv|", "connect \"Living Room\" |"),
        ("connect Living\\ R|", "connect \"Living Room\" |"),
        // Nothing to offer: the line stays.
        ("connect Lamp |", "connect Lamp |"), ("quit|", "quit|"),
    ]

    @Test(arguments: completions)
    func tabCompletesTheWordBeforeTheCursor(before: String, after: String) {
        var editor = LineEditing(picture: before)
        let outcome = editor.handle(.tab, completer: Self.completer)
        #expect(editor.picture == after)
        #expect(outcome == (before == after ? .bell : .redraw))
    }

    @Test func aSecondTabListsTheCandidatesWhenTheWordCannotGrow() {
        var editor = LineEditing(picture: "d|")
        #expect(editor.handle(.tab, completer: Self.completer) == .bell)
        #expect(editor.handle(.tab, completer: Self.completer) == .list(["devices", "disconnect"]))
        #expect(editor.picture == "d|")
        // And a third starts over.
        #expect(editor.handle(.tab, completer: Self.completer) == .bell)
        #expect(editor.handle(.tab, completer: Self.completer) == .list(["devices", "disconnect"]))
    }

    @Test func aKeyBetweenTheTabsStartsOver() {
        var editor = LineEditing(picture: "d|")
        #expect(editor.handle(.tab, completer: Self.completer) == .bell)
        _ = editor.handle(.left, completer: Self.completer)
        _ = editor.handle(.right, completer: Self.completer)
        #expect(editor.handle(.tab, completer: Self.completer) == .bell)
    }

    @Test func noCandidateRingsTheBellEveryTime() {
        var editor = LineEditing(picture: "quit|")
        #expect(editor.handle(.tab, completer: Self.completer) == .bell)
        #expect(editor.handle(.tab, completer: Self.completer) == .bell)
    }

    // MARK: Words

    /// A line and its words.
    static let splits: [(String, [String])] = [
        ("read 2A19", ["read", "2A19"]), ("  connect   Lamp  ", ["connect", "Lamp"]), ("", []), ("   ", []),
        ("read\t2A19\t--format\tutf8", ["read", "2A19", "--format", "utf8"]),
        ("connect \"Environment Hub\"", ["connect", "Environment Hub"]),
        ("connect 'Environment Hub'", ["connect", "Environment Hub"]),
        ("connect Environment\\ Hub", ["connect", "Environment Hub"]),
        ("connect En\"vironment H\"ub", ["connect", "Environment Hub"]),
        // Empty quotes are an empty word.
        ("write 2A00 \"\"", ["write", "2A00", ""]), ("write 2A00 ''", ["write", "2A00", ""]),
        // In double quotes a backslash escapes; in single quotes it is itself.
        ("write 2A00 \"say \\\"hi\\\"\"", ["write", "2A00", "say \"hi\""]),
        ("write 2A00 'C:\\temp'", ["write", "2A00", "C:\\temp"]),
        ("write 2A00 \"it's\"", ["write", "2A00", "it's"]), ("write 2A00 \\'", ["write", "2A00", "'"]),
    ]

    @Test(arguments: splits)
    func aLineSplitsIntoWords(line: String, words: [String]) throws {
        #expect(try ShellWords.split(line) == words)
    }

    @Test(arguments: [
        ("connect \"Environment Hub", "a \" quote is not closed"), ("connect 'Lamp", "a ' quote is not closed"),
        ("write 2A00 \"a\\\"", "a \" quote is not closed"), ("read 2A19\\", "the line ends with a backslash"),
    ])
    func anUnfinishedLineSaysWhatIsOpen(line: String, message: String) {
        #expect(throws: ShellWords.Unbalanced(message: message)) { try ShellWords.split(line) }
    }

    /// The text before the cursor: the words before the one being typed, that word, and where it starts.
    static let contexts: [(String, [String], String, Int)] = [
        ("", [], "", 0), ("con", [], "con", 0), ("connect", [], "connect", 0), ("connect ", ["connect"], "", 8),
        ("connect Li", ["connect"], "Li", 8), ("connect \"Living R", ["connect"], "Living R", 8),
        ("connect 'Living R", ["connect"], "Living R", 8), ("connect Living\\ R", ["connect"], "Living R", 8),
        ("connect \"\"", ["connect"], "", 8), ("read --format u", ["read", "--format"], "u", 14),
        ("connect \"Living Room\" --ti", ["connect", "Living Room"], "--ti", 22), ("read\t2A", ["read"], "2A", 5),
    ]

    @Test(arguments: contexts)
    func theWordBeingTypedIsTheLastOne(before: String, words: [String], partial: String, start: Int) {
        let context = ShellWords.completionContext(before)
        #expect(context.words == words)
        #expect(context.partial == ShellWords.Partial(text: partial, start: start))
    }

    @Test(arguments: [
        ("Lamp", "Lamp"), ("Living Room", "\"Living Room\""), ("tab\there", "\"tab\there\""),
        ("say \"hi\"", "\"say \\\"hi\\\"\""), ("C:\\temp", "\"C:\\\\temp\""), ("it's", "\"it's\""),
    ])
    func aWordIsQuotedOnlyWhenItMustBe(word: String, typed: String) throws {
        #expect(ShellWords.quoted(word) == typed)
        #expect(try ShellWords.split(typed) == [word])
    }

    // MARK: Drawing

    /// Prompt, line, terminal width: the row the terminal shows (trailing spaces aside) and the cursor's column.
    static let rows: [(String, String, Int, String, Int)] = [
        ("ble> ", "scan|", 80, "ble> scan", 9), ("ble> ", "sc|an", 80, "ble> scan", 7),
        ("ble> ", "|scan", 80, "ble> scan", 5), ("", "|scan", 80, "scan", 0), ("", "|", 80, "", 0),
        // Wider than the terminal: the row keeps its last column free and scrolls so the cursor stays in view.
        ("ble> ", "|abcdefghijklmnopqrstuvwxyz0123", 20, "ble> abcdefghijklmn", 5),
        ("ble> ", "abcdefghijklmn|opqrstuvwxyz0123", 20, "ble> abcdefghijklmn", 19),
        ("ble> ", "abcdefghijklmno|pqrstuvwxyz0123", 20, "ble> bcdefghijklmno", 19),
        ("ble> ", "abcdefghijklmnopqrstuvwxyz0123|", 20, "ble> qrstuvwxyz0123", 19),
        ("ble [Lamp]> ", "read 2A19 --format u|tf8", 24, "ble [Lamp]>  --format u", 23),
    ]

    @Test(arguments: rows)
    func theLineIsDrawnOnOneRow(prompt: String, picture: String, columns: Int, row: String, cursor: Int) throws {
        let editor = LineEditing(picture: picture)
        let output = ShellTerminal.render(prompt: prompt, line: editor.line, cursor: editor.cursor, columns: columns)
        let shown = try #require(Self.screenRow(output, columns: columns), "the line wraps")
        #expect(shown.row == row)
        #expect(shown.cursor == cursor)
    }

    @Test func theCursorIsPutBackFromTheLeftEdge() {
        let line = Array("scan")
        #expect(
            ShellTerminal.render(prompt: "ble> ", line: line, cursor: 2, columns: 80)
                == "\rble> scan\u{1B}[K\r\u{1B}[7C")
        // At column 0 there is no move: ESC [ 0 C would move one column.
        #expect(ShellTerminal.render(prompt: "", line: line, cursor: 0, columns: 80) == "\rscan\u{1B}[K\r")
    }

    /// What a terminal `columns` wide shows on the cursor's row after `output` (carriage return, text, erase to
    /// the end of the line, cursor forward), and the cursor's column; nil if the text would reach the right edge.
    static func screenRow(_ output: String, columns: Int) -> (row: String, cursor: Int)? {
        var row = [Character](repeating: " ", count: columns)
        var column = 0
        var rest = Substring(output)
        while let c = rest.popFirst() {
            switch c {
            case "\r":
                column = 0
            case "\u{1B}":
                guard rest.popFirst() == "[" else { return nil }
                let parameter = rest.prefix(while: \.isNumber)
                rest = rest.dropFirst(parameter.count)
                switch rest.popFirst() {
                case "K": row.replaceSubrange(column..., with: repeatElement(" ", count: columns - column))
                case "C": column = min(columns - 1, column + (Int(parameter) ?? 1))
                default: return nil
                }
            default:
                guard column < columns - 1 else { return nil }
                row[column] = c
                column += 1
            }
        }
        return (String(row.reversed().drop { $0 == " " }.reversed()), column)
    }

    @Test(arguments: [
        (["connect", "disconnect", "help", "mtu", "read"], 40, "connect     disconnect  help\nmtu         read"),
        (["connect", "disconnect", "help", "mtu", "read"], 80, "connect     disconnect  help        mtu         read"),
        (["connect", "disconnect", "help"], 10, "connect\ndisconnect\nhelp"),
        (["Environment Hub", "Lamp", "Living Room"], 40, "Environment Hub  Lamp\nLiving Room"),
        ([], 80, ""),
    ])
    func aListOfCandidatesIsLaidOutInColumns(words: [String], columns: Int, table: String) {
        #expect(ShellTerminal.table(words, columns: columns) == table)
    }
}
