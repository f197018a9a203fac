/// A key as the shell's line editor understands it, decoded from the bytes a terminal in raw mode sends (VT100
/// and xterm escape sequences, UTF-8 text).
enum Key: Sendable, Equatable {
    case character(Character)
    case enter
    case backspace
    /// Delete the character under the cursor (the Delete key).
    case delete
    case left, right, up, down, home, end
    case wordLeft, wordRight
    case tab
    /// Ctrl-C.
    case interrupt
    /// Ctrl-D.
    case endOfInput
    /// Ctrl-K.
    case killToEnd
    /// Ctrl-U.
    case killToStart
    /// Ctrl-W.
    case deleteWordBefore
    /// Ctrl-L.
    case clearScreen
    /// Ctrl-T.
    case transpose
    /// Ctrl-R: search the history backwards for what is typed next.
    case reverseSearch
    /// Ctrl-G: leave a history search, giving back the line as it was.
    case abort
    /// A sequence or control the editor does not use; it is ignored.
    case ignored
}

/// Turns the bytes of a raw terminal into keys: feed bytes as they arrive, take the keys that are complete. A
/// sequence cut between two reads waits for its end; a lone ESC is a key of its own only when nothing follows in
/// the same read (`flushPending`).
struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    /// The keys `bytes` completes, in order.
    mutating func feed(_ bytes: some Sequence<UInt8>) -> [Key] {
        pending.append(contentsOf: bytes)
        var keys: [Key] = []
        while let (key, used) = Self.decode(pending[...]) {
            keys.append(key)
            pending.removeFirst(used)
        }
        return keys
    }

    /// Whatever is left when no more bytes came in this read: an ESC alone (the Escape key) is ignored, as is an
    /// unfinished sequence, so a stray byte never holds up the keys after it.
    mutating func flushPending() -> [Key] {
        guard !pending.isEmpty else { return [] }
        // An unfinished UTF-8 character may complete with the next read; anything else is dropped.
        if pending[0] >= 0x80 && pending.count < Self.utf8Length(pending[0]) { return [] }
        pending.removeAll()
        return [.ignored]
    }

    /// The first key in `bytes` and how many bytes it took, or nil when more bytes are needed.
    static func decode(_ bytes: ArraySlice<UInt8>) -> (Key, Int)? {
        guard let first = bytes.first else { return nil }
        switch first {
        case 0x0D, 0x0A: return (.enter, 1)
        case 0x7F, 0x08: return (.backspace, 1)
        case 0x09: return (.tab, 1)
        case 0x01: return (.home, 1)  // Ctrl-A
        case 0x05: return (.end, 1)  // Ctrl-E
        case 0x02: return (.left, 1)  // Ctrl-B
        case 0x06: return (.right, 1)  // Ctrl-F
        case 0x10: return (.up, 1)  // Ctrl-P
        case 0x0E: return (.down, 1)  // Ctrl-N
        case 0x03: return (.interrupt, 1)
        case 0x04: return (.endOfInput, 1)
        case 0x0B: return (.killToEnd, 1)
        case 0x15: return (.killToStart, 1)
        case 0x17: return (.deleteWordBefore, 1)
        case 0x0C: return (.clearScreen, 1)
        case 0x14: return (.transpose, 1)
        case 0x12: return (.reverseSearch, 1)
        case 0x07: return (.abort, 1)
        case 0x1B: return escape(bytes)
        case 0x00..<0x20: return (.ignored, 1)
        case 0x80...:
            let length = utf8Length(first)
            guard length > 1 else { return (.ignored, 1) }
            guard bytes.dropFirst().prefix(length - 1).allSatisfy({ (0x80...0xBF).contains($0) }) else {
                return (.ignored, 1)
            }
            guard bytes.count >= length else { return nil }
            let scalarBytes = Array(bytes.prefix(length))
            guard let text = String(validating: scalarBytes, as: UTF8.self), let c = text.first else {
                return (.ignored, 1)
            }
            return (.character(c), length)
        default:
            return (.character(Character(Unicode.Scalar(first))), 1)
        }
    }

    /// How many bytes a UTF-8 sequence starting with `lead` has (1 for a byte that cannot start one).
    static func utf8Length(_ lead: UInt8) -> Int {
        switch lead {
        case 0xC2...0xDF: return 2
        case 0xE0...0xEF: return 3
        case 0xF0...0xF4: return 4
        default: return 1
        }
    }

    /// ESC [ ... (CSI) and ESC O ... (SS3) sequences, and Alt-b / Alt-f (word moves).
    private static func escape(_ bytes: ArraySlice<UInt8>) -> (Key, Int)? {
        let start = bytes.startIndex
        guard bytes.count >= 2 else { return nil }
        let second = bytes[start + 1]
        switch second {
        case UInt8(ascii: "["):
            // Parameters and intermediates (0x20-0x3F), then one final byte (0x40-0x7E).
            var index = start + 2
            while index < bytes.endIndex, (0x20...0x3F).contains(bytes[index]) { index += 1 }
            guard index < bytes.endIndex else { return bytes.count > 16 ? (.ignored, bytes.count) : nil }
            let final = bytes[index]
            // A byte that cannot end a sequence (a control key typed after ESC [) ends the sequence before it and
            // is a key of its own.
            guard (0x40...0x7E).contains(final) else { return (.ignored, index - start) }
            let parameters = String(decoding: bytes[(start + 2)..<index], as: UTF8.self)
            let used = index - start + 1
            switch (final, parameters) {
            case (UInt8(ascii: "A"), ""): return (.up, used)
            case (UInt8(ascii: "B"), ""): return (.down, used)
            case (UInt8(ascii: "C"), ""): return (.right, used)
            case (UInt8(ascii: "D"), ""): return (.left, used)
            case (UInt8(ascii: "C"), "1;5"), (UInt8(ascii: "C"), "1;3"): return (.wordRight, used)
            case (UInt8(ascii: "D"), "1;5"), (UInt8(ascii: "D"), "1;3"): return (.wordLeft, used)
            case (UInt8(ascii: "H"), ""): return (.home, used)
            case (UInt8(ascii: "F"), ""): return (.end, used)
            case (UInt8(ascii: "~"), "1"), (UInt8(ascii: "~"), "7"): return (.home, used)
            case (UInt8(ascii: "~"), "4"), (UInt8(ascii: "~"), "8"): return (.end, used)
            case (UInt8(ascii: "~"), "3"): return (.delete, used)
            default: return (.ignored, used)
            }
        case UInt8(ascii: "O"):
            guard bytes.count >= 3 else { return nil }
            switch bytes[start + 2] {
            case UInt8(ascii: "A"): return (.up, 3)
            case UInt8(ascii: "B"): return (.down, 3)
            case UInt8(ascii: "C"): return (.right, 3)
            case UInt8(ascii: "D"): return (.left, 3)
            case UInt8(ascii: "H"): return (.home, 3)
            case UInt8(ascii: "F"): return (.end, 3)
            default: return (.ignored, 3)
            }
        case UInt8(ascii: "b"): return (.wordLeft, 2)
        case UInt8(ascii: "f"): return (.wordRight, 2)
        case 0x7F: return (.deleteWordBefore, 2)
        default: return (.ignored, 1)
        }
    }
}
