import Foundation

extension StringProtocol {
    /// The Levenshtein distance to `other`, by characters: how many insertions, deletions and substitutions
    /// make one the other. What a "did you mean" hint ranks names by.
    public func editDistance(to other: some StringProtocol) -> Int {
        let a = Array(self)
        let b = Array(other)
        guard !a.isEmpty else { return b.count }
        guard !b.isEmpty else { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                current[j] = Swift.min(
                    previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}

extension Data {
    /// Parses hex a person typed: digits, optionally separated by spaces, colons, dashes or underscores, with an
    /// optional "0x" prefix; `nil` for anything else or an odd count of digits.
    public init?(lenientHex text: String) {
        var digits = text.filter { $0 != "_" }
        if digits.hasPrefix("0x") || digits.hasPrefix("0X") { digits.removeFirst(2) }
        guard let bytes = [UInt8](hex: digits) else { return nil }
        self.init(bytes)
    }
}
