import Testing

@testable import ble

/// What the keys of `ble shell` do: the bytes a terminal in raw mode sends decoded into keys (`KeyDecoder`), and
/// each key's effect on the line being typed (`LineEditing`), with the line written as a picture, "sc|an", the
/// "|" where the cursor is.
@Suite struct ShellEditingTests {
    // MARK: Bytes to keys

    static let esc: UInt8 = 0x1B

    static func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    /// Terminal input and the key it is, for every key the decoder knows.
    static let sequences: [(String, Key)] = [
        // Arrows: xterm's normal mode (CSI) and application mode (SS3).
        ("\u{1B}[A", .up), ("\u{1B}[B", .down), ("\u{1B}[C", .right), ("\u{1B}[D", .left),
        ("\u{1B}OA", .up), ("\u{1B}OB", .down), ("\u{1B}OC", .right), ("\u{1B}OD", .left),
        // Home and End: xterm, xterm application mode, VT220 and the Linux console, rxvt, Ctrl-A and Ctrl-E.
        ("\u{1B}[H", .home), ("\u{1B}OH", .home), ("\u{1B}[1~", .home), ("\u{1B}[7~", .home), ("\u{01}", .home),
        ("\u{1B}[F", .end), ("\u{1B}OF", .end), ("\u{1B}[4~", .end), ("\u{1B}[8~", .end), ("\u{05}", .end),
        ("\u{1B}[3~", .delete),
        // Ctrl-arrows and Alt-arrows move by words, as do Alt-b and Alt-f.
        ("\u{1B}[1;5C", .wordRight), ("\u{1B}[1;5D", .wordLeft), ("\u{1B}[1;3C", .wordRight),
        ("\u{1B}[1;3D", .wordLeft), ("\u{1B}b", .wordLeft), ("\u{1B}f", .wordRight),
        // Alt-Backspace.
        ("\u{1B}\u{7F}", .deleteWordBefore),
        // Emacs controls.
        ("\u{02}", .left), ("\u{06}", .right), ("\u{10}", .up), ("\u{0E}", .down), ("\u{0B}", .killToEnd),
        ("\u{15}", .killToStart), ("\u{17}", .deleteWordBefore), ("\u{14}", .transpose), ("\u{0C}", .clearScreen),
        ("\u{03}", .interrupt), ("\u{04}", .endOfInput), ("\t", .tab), ("\u{12}", .reverseSearch),
        ("\u{07}", .abort),
        // Return (CR in raw mode) or LF; DEL or BS.
        ("\r", .enter), ("\n", .enter), ("\u{7F}", .backspace), ("\u{08}", .backspace),
        // Text: ASCII, and UTF-8 of two, three and four bytes.
        ("a", .character("a")), (" ", .character(" ")), ("é", .character("é")), ("€", .character("€")),
        ("🙂", .character("🙂")),
        // What the editor does not use: other controls, Insert, Page Up, F1, F5.
        ("\u{00}", .ignored), ("\u{1F}", .ignored), ("\u{1B}[2~", .ignored), ("\u{1B}[5~", .ignored),
        ("\u{1B}OP", .ignored), ("\u{1B}[15~", .ignored),
    ]

    @Test(arguments: sequences)
    func aSequenceIsOneKey(sequence: String, key: Key) {
        var decoder = KeyDecoder()
        #expect(decoder.feed(sequence.utf8) == [key])
        #expect(decoder.flushPending() == [])

        // The same bytes one read at a time: nothing until the last.
        var slow = KeyDecoder()
        let keys = sequence.utf8.map { slow.feed([$0]) }
        #expect(keys == Array(repeating: [], count: keys.count - 1) + [[key]])
    }

    @Test func oneReadCanHoldSeveralKeys() {
        var decoder = KeyDecoder()
        let keys = decoder.feed(Self.bytes("ls") + [Self.esc] + Self.bytes("[A") + [Self.esc] + Self.bytes("[D\r"))
        #expect(keys == [.character("l"), .character("s"), .up, .left, .enter])
    }

    @Test func aSequenceCutBetweenTwoReadsWaitsForItsEnd() {
        var decoder = KeyDecoder()
        #expect(decoder.feed([Self.esc] + Self.bytes("[1;")) == [])
        #expect(decoder.feed(Self.bytes("5Cx")) == [.wordRight, .character("x")])

        #expect(decoder.feed([Self.esc]) == [])
        #expect(decoder.feed(Self.bytes("OA")) == [.up])
    }

    @Test func aCharacterCutBetweenTwoReadsWaitsForItsEnd() {
        var decoder = KeyDecoder()
        let euro = Self.bytes("€")
        #expect(decoder.feed(euro.prefix(2)) == [])
        // No more bytes in this read: the start of a character is kept, not dropped.
        #expect(decoder.flushPending() == [])
        #expect(decoder.feed(euro.suffix(1) + Self.bytes("!")) == [.character("€"), .character("!")])
    }

    @Test func anUnknownSequenceIsSkippedAndTheKeysAfterItKept() {
        var decoder = KeyDecoder()
        // Bracketed paste's start, a device attributes answer, then text and an arrow.
        let keys = decoder.feed(
            [Self.esc] + Self.bytes("[200~") + [Self.esc] + Self.bytes("[?1;2cab") + [Self.esc] + Self.bytes("[C"))
        #expect(keys == [.ignored, .ignored, .character("a"), .character("b"), .right])
        // ESC before a key that makes no sequence with it: the ESC alone is dropped.
        #expect(decoder.feed([Self.esc] + Self.bytes("x")) == [.ignored, .character("x")])
        // A control key typed after ESC [ (Ctrl-C, Return) is not taken as the sequence's end: it is a key.
        #expect(decoder.feed([Self.esc] + Self.bytes("[") + [0x03]) == [.ignored, .interrupt])
        #expect(decoder.feed([Self.esc] + Self.bytes("[1;\r")) == [.ignored, .enter])
    }

    @Test func aByteThatStartsNoCharacterDoesNotHoldUpTheKeysAfterIt() {
        var decoder = KeyDecoder()
        // Bytes that are never the start of a character.
        #expect(decoder.feed([0xFF, 0x80, 0xC0] + Self.bytes("a")) == [.ignored, .ignored, .ignored, .character("a")])
        // The start of a longer character that the next key does not continue: the key shows at once.
        #expect(decoder.feed([0xE2] + Self.bytes("a")) == [.ignored, .character("a")])
        #expect(decoder.feed([0xF0]) == [])
        #expect(decoder.flushPending() == [])
        #expect(decoder.feed(Self.bytes("\r")) == [.ignored, .enter])
        #expect(decoder.feed([0xE2] + Self.bytes("ab")) == [.ignored, .character("a"), .character("b")])
    }

    @Test func aLoneEscapeIsDroppedWhenNothingFollowsInTheSameRead() {
        var decoder = KeyDecoder()
        #expect(decoder.feed([Self.esc]) == [])
        #expect(decoder.flushPending() == [.ignored])
        // The next key is itself, not Alt with it.
        #expect(decoder.feed(Self.bytes("b")) == [.character("b")])
        // So is an unfinished sequence.
        #expect(decoder.feed([Self.esc] + Self.bytes("[1;")) == [])
        #expect(decoder.flushPending() == [.ignored])
        #expect(decoder.feed([Self.esc] + Self.bytes("[A")) == [.up])
        #expect(decoder.flushPending() == [])
    }

    // MARK: Editing

    static let noCandidates: LineEditing.Completer = { _, _ in [] }

    /// Each key from each place worth trying, the ends of the line above all: before, key, after.
    static let edits: [(String, Key, String)] = [
        // Typing goes in at the cursor.
        ("|", .character("a"), "a|"), ("|can", .character("s"), "s|can"), ("sc|n", .character("a"), "sca|n"),
        ("scan|", .character("é"), "scané|"),
        ("sc|an", .left, "s|can"), ("|scan", .left, "|scan"), ("|", .left, "|"),
        ("sc|an", .right, "sca|n"), ("scan|", .right, "scan|"), ("|", .right, "|"),
        ("sc|an", .home, "|scan"), ("|scan", .home, "|scan"), ("sc|an", .end, "scan|"), ("scan|", .end, "scan|"),
        ("read batt|ery", .wordLeft, "read |battery"), ("read |battery", .wordLeft, "|read battery"),
        ("read  |battery", .wordLeft, "|read  battery"), ("|read", .wordLeft, "|read"), ("|", .wordLeft, "|"),
        ("re|ad battery", .wordRight, "read| battery"), ("read| battery", .wordRight, "read battery|"),
        ("read battery|", .wordRight, "read battery|"), ("|", .wordRight, "|"),
        ("sc|an", .backspace, "s|an"), ("scan|", .backspace, "sca|"), ("|scan", .backspace, "|scan"),
        ("|", .backspace, "|"),
        ("sc|an", .delete, "sc|n"), ("|scan", .delete, "|can"), ("scan|", .delete, "scan|"), ("|", .delete, "|"),
        // Ctrl-D on a line that has text deletes, like Delete.
        ("sc|an", .endOfInput, "sc|n"), ("scan|", .endOfInput, "scan|"),
        ("sc|an", .killToEnd, "sc|"), ("|scan", .killToEnd, "|"), ("scan|", .killToEnd, "scan|"),
        ("sc|an", .killToStart, "|an"), ("scan|", .killToStart, "|"), ("|scan", .killToStart, "|scan"),
        ("read batt|ery", .deleteWordBefore, "read |ery"), ("read battery |", .deleteWordBefore, "read |"),
        ("read| battery", .deleteWordBefore, "| battery"), ("|read", .deleteWordBefore, "|read"),
        ("|", .deleteWordBefore, "|"),
        // Ctrl-T swaps the characters either side of the cursor, or the last two at the end.
        ("a|bc", .transpose, "ba|c"), ("ab|c", .transpose, "acb|"), ("abc|", .transpose, "acb|"),
        ("|abc", .transpose, "|abc"), ("a|", .transpose, "a|"), ("|", .transpose, "|"),
        // Ctrl-L redraws the screen; the line stays.
        ("sc|an", .clearScreen, "sc|an"), ("sc|an", .ignored, "sc|an"),
    ]

    @Test(arguments: edits)
    func aKeyChangesTheLine(before: String, key: Key, after: String) {
        var editor = LineEditing(picture: before)
        _ = editor.handle(key, completer: Self.noCandidates)
        #expect(editor.picture == after)
    }

    /// Keys that cannot go further leave the screen alone.
    @Test(arguments: [
        ("|", Key.left), ("|", .right), ("|", .backspace), ("|", .delete), ("|a", .left), ("a|", .right),
        ("|a", .backspace), ("a|", .delete), ("a|", .endOfInput), ("|ab", .transpose), ("sc|an", .ignored),
    ])
    func aKeyThatCannotGoFurtherDrawsNothing(before: String, key: Key) {
        var editor = LineEditing(picture: before)
        #expect(editor.handle(key, completer: Self.noCandidates) == .nothing)
    }

    @Test func enterSubmitsTheWholeLineWhereverTheCursorIs() {
        var editor = LineEditing(picture: "read 2A|19")
        #expect(editor.handle(.enter, completer: Self.noCandidates) == .submit("read 2A19"))
        #expect(editor.picture == "|")
        #expect(editor.history == ["read 2A19"])
        #expect(editor.handle(.enter, completer: Self.noCandidates) == .submit(""))
    }

    @Test func ctrlCAbandonsTheLine() {
        var editor = LineEditing(picture: "conn|ect Lamp")
        #expect(editor.handle(.interrupt, completer: Self.noCandidates) == .interrupted)
        #expect(editor.picture == "|")
        #expect(editor.history == [])
        #expect(editor.handle(.interrupt, completer: Self.noCandidates) == .interrupted)
    }

    @Test func ctrlDOnAnEmptyLineEndsTheInput() {
        var editor = LineEditing()
        #expect(editor.handle(.endOfInput, completer: Self.noCandidates) == .endOfInput)
        #expect(editor.handle(.clearScreen, completer: Self.noCandidates) == .clearScreen)
    }

    // MARK: History

    /// Ctrl-R as in bash: each character refines the search, the newest entry holding it is shown with the
    /// cursor at the match, Ctrl-R again looks further back, a query nothing holds is marked failing, Ctrl-G
    /// gives back the line as it was, and Enter runs what was found.
    @Test func ctrlRSearchesTheHistoryBackwards() {
        var editor = LineEditing(history: ["read 2A19", "connect Lamp", "read 2A37", "scan"])
        editor.type("wr")
        func press(_ key: Key) -> String {
            _ = editor.handle(key, completer: Self.noCandidates)
            return "\(editor.searchPrompt ?? "> ")\(editor.picture)"
        }
        #expect(press(.reverseSearch) == "(reverse-i-search)'': wr|")
        #expect(press(.character("r")) == "(reverse-i-search)'r': |read 2A37")
        #expect(press(.character("e")) == "(reverse-i-search)'re': |read 2A37")
        #expect(press(.reverseSearch) == "(reverse-i-search)'re': |read 2A19")
        #expect(press(.reverseSearch) == "(failing reverse-i-search)'re': |read 2A19")
        #expect(press(.backspace) == "(reverse-i-search)'r': |read 2A37")
        #expect(press(.character("L")) == "(failing reverse-i-search)'rL': |read 2A37")
        #expect(press(.abort) == "> wr|")
        _ = press(.reverseSearch)
        _ = press(.character("L"))
        #expect(editor.picture == "connect |Lamp")
        #expect(editor.handle(.enter, completer: Self.noCandidates) == .submit("connect Lamp"))
        #expect(editor.searchPrompt == nil)
        // Another key ends the search with the match on the line, then does what it does.
        _ = press(.reverseSearch)
        _ = press(.character("s"))
        #expect(press(.end) == "> scan|")
    }

    @Test func upAndDownWalkTheHistoryAndGiveBackTheLineBeingTyped() {
        var editor = LineEditing(history: ["scan", "connect Lamp"])
        editor.type("rea")
        let keys: [Key] = [.up, .up, .up, .down, .down, .down]
        let pictures = keys.map { key in
            let outcome = editor.handle(key, completer: Self.noCandidates)
            return "\(editor.picture) \(outcome)"
        }
        #expect(
            pictures == [
                "connect Lamp| redraw", "scan| redraw", "scan| nothing", "connect Lamp| redraw", "rea| redraw",
                "rea| nothing",
            ])
    }

    @Test func anEmptyHistoryGoesNowhere() {
        var editor = LineEditing(picture: "sc|an")
        #expect(editor.handle(.up, completer: Self.noCandidates) == .nothing)
        #expect(editor.handle(.down, completer: Self.noCandidates) == .nothing)
        #expect(editor.picture == "sc|an")
    }

    @Test func aLineFromTheHistoryCanBeEditedAndEntered() {
        var editor = LineEditing(history: ["read 2A19", "scan"])
        _ = editor.handle(.up, completer: Self.noCandidates)
        _ = editor.handle(.up, completer: Self.noCandidates)
        editor.type(" --format hex")
        #expect(editor.handle(.enter, completer: Self.noCandidates) == .submit("read 2A19 --format hex"))
        #expect(editor.history == ["read 2A19", "scan", "read 2A19 --format hex"])
        // After Enter, Up starts again from the newest line, and Down gives back an empty line.
        _ = editor.handle(.up, completer: Self.noCandidates)
        #expect(editor.picture == "read 2A19 --format hex|")
        _ = editor.handle(.down, completer: Self.noCandidates)
        #expect(editor.picture == "|")
    }

    @Test func theHistoryKeepsNeitherRepeatsNorBlankLines() {
        var editor = LineEditing()
        for line in ["scan", "scan", "", "   ", "info", "scan", "scan"] {
            editor.type(line)
            #expect(editor.handle(.enter, completer: Self.noCandidates) == .submit(line))
        }
        #expect(editor.history == ["scan", "info", "scan"])
        // Up then Enter on the newest line does not repeat it either.
        _ = editor.handle(.up, completer: Self.noCandidates)
        _ = editor.handle(.enter, completer: Self.noCandidates)
        #expect(editor.history == ["scan", "info", "scan"])
    }

    @Test func theHistoryKeepsTheNewestThousandLines() {
        let old = (1...1001).map { "read \($0)" }
        var editor = LineEditing(history: old)
        #expect(editor.history.count == LineEditing.historyLimit)
        #expect(editor.history.first == "read 2")
        editor.type("info")
        _ = editor.handle(.enter, completer: Self.noCandidates)
        #expect(editor.history.count == 1000)
        #expect(editor.history.first == "read 3")
        #expect(editor.history.last == "info")
    }
}

extension LineEditing {
    /// An editor holding `picture`'s text, with the cursor where its "|" is.
    init(picture: String, history: [String] = []) {
        self.init(history: history)
        let parts = picture.split(separator: "|", omittingEmptySubsequences: false)
        type(parts.joined())
        for _ in parts[1] { _ = handle(.left, completer: ShellEditingTests.noCandidates) }
    }

    /// The line with a "|" where the cursor is.
    var picture: String { String(line[..<cursor]) + "|" + String(line[cursor...]) }

    mutating func type(_ text: String) {
        for c in text { _ = handle(.character(c), completer: ShellEditingTests.noCandidates) }
    }
}
