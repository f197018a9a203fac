/// Splitting a shell line into words as a POSIX shell would for simple cases: spaces separate words; "double"
/// and 'single' quotes keep spaces in a word ("Environment Hub"); a backslash takes the next character as it is.
enum ShellWords {
    struct Unbalanced: Error, Equatable {
        var message: String
    }

    /// The words of `line`.
    static func split(_ line: String) throws(Unbalanced) -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var quote: Character?
        var escaped = false
        for c in line {
            if escaped {
                current.append(c)
                escaped = false
                continue
            }
            if let open = quote {
                if c == open {
                    quote = nil
                } else if c == "\\" && open == "\"" {
                    escaped = true
                } else {
                    current.append(c)
                }
                continue
            }
            switch c {
            case "\\":
                escaped = true
                inWord = true
            case "\"", "'":
                quote = c
                inWord = true
            case " ", "\t":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            default:
                current.append(c)
                inWord = true
            }
        }
        if let open = quote { throw Unbalanced(message: "a \(open) quote is not closed") }
        if escaped { throw Unbalanced(message: "the line ends with a backslash") }
        if inWord { words.append(current) }
        return words
    }

    /// The word being completed: its text so far (unquoted) and where it starts in the line, in characters.
    struct Partial: Sendable, Equatable {
        var text: String
        var start: Int
    }

    /// For the text before the cursor: the complete words before the one being typed, and that one.
    static func completionContext(_ before: String) -> (words: [String], partial: Partial) {
        let characters = Array(before)
        // The start of the last word: after the last space outside quotes.
        var start = 0
        var quote: Character?
        var escaped = false
        for (index, c) in characters.enumerated() {
            if escaped {
                escaped = false
                continue
            }
            if let open = quote {
                if c == open { quote = nil } else if c == "\\" && open == "\"" { escaped = true }
                continue
            }
            switch c {
            case "\\": escaped = true
            case "\"", "'": quote = c
            case " ", "\t": start = index + 1
            default: break
            }
        }
        let head = String(characters[..<start])
        let tail = String(characters[start...])
        let words = (try? split(head)) ?? head.split(separator: " ").map(String.init)
        // An open quote is part of what was typed: its text is the word without it.
        let partial = (try? split(tail + (quote.map { String($0) } ?? "")))?.first ?? ""
        return (words, Partial(text: partial, start: start))
    }

    /// `word` as typed at the prompt: in double quotes when it has a space, a quote or a backslash.
    static func quoted(_ word: String) -> String {
        guard word.contains(where: { $0 == " " || $0 == "\t" || $0 == "\"" || $0 == "'" || $0 == "\\" }) else {
            return word
        }
        var out = "\""
        for c in word {
            if c == "\"" || c == "\\" { out.append("\\") }
            out.append(c)
        }
        return out + "\""
    }
}
