/// The line being typed at the shell's prompt, and what each key does to it: insertion at the cursor, cursor
/// and word moves, deletions, history, and completion. Pure: the terminal side (`ShellTerminal`) feeds it keys
/// and draws what it holds.
struct LineEditing: Sendable {
    /// The line, by characters (one column each on the screen).
    private(set) var line: [Character] = []
    /// Where the next character goes: 0...line.count.
    private(set) var cursor = 0
    /// Lines entered before, oldest first.
    private(set) var history: [String]
    /// The lines this session added to the history, in order (what it appends to the history file).
    private(set) var added: [String] = []
    /// Which history entry is shown while moving through it (history.count: the line being typed).
    private var historyIndex: Int
    /// The line being typed when the user went up into the history, given back when they come down again.
    private var draft: [Character] = []
    /// Set by a Tab that found several candidates and could not extend the word: a second Tab lists them.
    private var listOnNextTab = false
    /// A history search under way (Ctrl-R), as bash's reverse-i-search.
    private var search: Search?

    struct Search: Sendable {
        /// What is typed: the text looked for.
        var query: [Character] = []
        /// The history entry that matches now (nil: none yet, or none matches).
        var match: Int?
        /// Whether the last attempt found nothing.
        var failing = false
        /// The line before the search, given back by Ctrl-G.
        var original: [Character]
        var originalCursor: Int
    }

    /// What the terminal shows in place of the prompt while a history search is under way, nil otherwise.
    var searchPrompt: String? {
        search.map { "(\($0.failing ? "failing " : "")reverse-i-search)'\(String($0.query))': " }
    }

    static let historyLimit = 1000

    init(history: [String] = []) {
        self.history = Array(history.suffix(Self.historyLimit))
        historyIndex = self.history.count
    }

    var text: String { String(line) }

    /// What a key did, for the terminal to act on.
    enum Outcome: Sendable, Equatable {
        /// The line changed (or the cursor moved): redraw it.
        case redraw
        /// Nothing to do (a key the editor ignores, or a move past either end).
        case nothing
        /// Enter: this line is submitted; the editor is empty again.
        case submit(String)
        /// Ctrl-C: the line was abandoned (the terminal also interrupts a running command).
        case interrupted
        /// Ctrl-D on an empty line: the user is done.
        case endOfInput
        /// Ctrl-L.
        case clearScreen
        /// A second Tab with several candidates: show them, then redraw.
        case list([String])
        /// A sound for a Tab that found nothing.
        case bell
    }

    /// Candidates for the word that ends at the cursor: given the words before it and the word's start so far.
    typealias Completer = @Sendable (_ previousWords: [String], _ partial: String) -> [String]

    mutating func handle(_ key: Key, completer: Completer) -> Outcome {
        if key != .tab { listOnNextTab = false }
        if search != nil, let outcome = searching(key) { return outcome }
        switch key {
        case .character(let c):
            line.insert(c, at: cursor)
            cursor += 1
            return .redraw
        case .enter:
            let submitted = text
            remember(submitted)
            line = []
            cursor = 0
            draft = []
            historyIndex = history.count
            return .submit(submitted)
        case .backspace:
            guard cursor > 0 else { return .nothing }
            line.remove(at: cursor - 1)
            cursor -= 1
            return .redraw
        case .delete:
            guard cursor < line.count else { return .nothing }
            line.remove(at: cursor)
            return .redraw
        case .left:
            guard cursor > 0 else { return .nothing }
            cursor -= 1
            return .redraw
        case .right:
            guard cursor < line.count else { return .nothing }
            cursor += 1
            return .redraw
        case .home:
            cursor = 0
            return .redraw
        case .end:
            cursor = line.count
            return .redraw
        case .wordLeft:
            cursor = wordStart(before: cursor)
            return .redraw
        case .wordRight:
            var index = cursor
            while index < line.count, line[index] == " " { index += 1 }
            while index < line.count, line[index] != " " { index += 1 }
            cursor = index
            return .redraw
        case .up:
            return showHistory(historyIndex - 1)
        case .down:
            return showHistory(historyIndex + 1)
        case .killToEnd:
            line.removeSubrange(cursor...)
            return .redraw
        case .killToStart:
            line.removeSubrange(..<cursor)
            cursor = 0
            return .redraw
        case .deleteWordBefore:
            let start = wordStart(before: cursor)
            line.removeSubrange(start..<cursor)
            cursor = start
            return .redraw
        case .reverseSearch:
            search = Search(original: line, originalCursor: cursor)
            return .redraw
        case .abort:
            return .bell
        case .transpose:
            guard line.count >= 2, cursor > 0 else { return .nothing }
            let at = cursor == line.count ? cursor - 1 : cursor
            line.swapAt(at - 1, at)
            cursor = min(line.count, at + 1)
            return .redraw
        case .interrupt:
            line = []
            cursor = 0
            historyIndex = history.count
            return .interrupted
        case .endOfInput:
            if line.isEmpty { return .endOfInput }
            return handle(.delete, completer: completer)
        case .clearScreen:
            return .clearScreen
        case .tab:
            return complete(completer)
        case .ignored:
            return .nothing
        }
    }

    /// Adds a submitted line to the history: not an empty one, nor one equal to the last.
    private mutating func remember(_ submitted: String) {
        guard !submitted.allSatisfy(\.isWhitespace), history.last != submitted else { return }
        history.append(submitted)
        added.append(submitted)
        if history.count > Self.historyLimit { history.removeFirst(history.count - Self.historyLimit) }
    }

    /// A key during a history search: typing refines it, Ctrl-R looks further back, Backspace shortens it,
    /// Ctrl-G gives back the line as it was; any other key ends the search with the match on the line and then
    /// does what it does (Enter runs it). Nil: the key is handled as usual.
    private mutating func searching(_ key: Key) -> Outcome? {
        guard var current = search else { return nil }
        switch key {
        case .character(let c):
            current.query.append(c)
            search = current
            return find(from: current.match ?? history.count - 1)
        case .reverseSearch:
            guard let match = current.match else { return find(from: history.count - 1) }
            return find(from: match - 1)
        case .backspace:
            guard !current.query.isEmpty else { return .nothing }
            current.query.removeLast()
            search = current
            return find(from: history.count - 1)
        case .abort:
            line = current.original
            cursor = current.originalCursor
            search = nil
            return .redraw
        default:
            search = nil
            historyIndex = history.count
            return key == .ignored ? .redraw : nil
        }
    }

    /// The newest history entry at or before `index` that holds the query; the line shows it with the cursor at
    /// the match. None: the line stays and the search is marked as failing.
    private mutating func find(from index: Int) -> Outcome {
        guard var current = search else { return .nothing }
        let query = String(current.query)
        var at = min(index, history.count - 1)
        while at >= 0 {
            if query.isEmpty || history[at].contains(query) {
                let entry = Array(history[at])
                line = entry
                if !query.isEmpty, let range = history[at].firstRange(of: query) {
                    cursor = history[at].distance(from: history[at].startIndex, to: range.lowerBound)
                } else {
                    cursor = entry.count
                }
                current.match = at
                current.failing = false
                search = current
                return .redraw
            }
            at -= 1
        }
        current.failing = true
        search = current
        return .redraw
    }

    private mutating func showHistory(_ index: Int) -> Outcome {
        guard index >= 0, index <= history.count, index != historyIndex else { return .nothing }
        if historyIndex == history.count { draft = line }
        historyIndex = index
        line = index == history.count ? draft : Array(history[index])
        cursor = line.count
        return .redraw
    }

    /// The start of the word before `index` (spaces before it skipped).
    private func wordStart(before index: Int) -> Int {
        var start = index
        while start > 0, line[start - 1] == " " { start -= 1 }
        while start > 0, line[start - 1] != " " { start -= 1 }
        return start
    }

    /// Tab: one candidate completes the word (and adds a space); several extend it to their common start, or,
    /// when that adds nothing, are listed on a second Tab.
    private mutating func complete(_ completer: Completer) -> Outcome {
        let before = String(line[..<cursor])
        let (words, partial) = ShellWords.completionContext(before)
        let candidates = Array(Set(completer(words, partial.text))).sorted()
        guard !candidates.isEmpty else { return .bell }
        if candidates.count == 1 {
            replacePartial(partial, with: ShellWords.quoted(candidates[0]) + " ")
            return .redraw
        }
        let common = Self.commonPrefix(candidates)
        if common.count > partial.text.count {
            // Left open (no closing quote) so typing goes on within the word.
            var quoted = ShellWords.quoted(common)
            if quoted.hasSuffix("\""), quoted.count > 1 { quoted.removeLast() }
            replacePartial(partial, with: quoted)
            return .redraw
        }
        guard listOnNextTab else {
            listOnNextTab = true
            return .bell
        }
        listOnNextTab = false
        return .list(candidates)
    }

    private mutating func replacePartial(_ partial: ShellWords.Partial, with replacement: String) {
        let start = partial.start
        line.replaceSubrange(start..<cursor, with: Array(replacement))
        cursor = start + replacement.count
    }

    static func commonPrefix(_ words: [String]) -> String {
        // Characters, said outright: with every module's extensions in sight (the sanitizer build), `Array.init`
        // of a String can also mean its UTF-8 octets.
        guard let first = words.first else { return "" }
        var prefix: [Character] = Array(first)
        for word in words.dropFirst() {
            let chars: [Character] = Array(word)
            var n = 0
            while n < prefix.count, n < chars.count, prefix[n] == chars[n] { n += 1 }
            prefix.removeSubrange(n...)
        }
        return String(prefix)
    }
}
