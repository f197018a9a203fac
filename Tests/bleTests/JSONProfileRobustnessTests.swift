import ArgumentParser
import BLECore
import Foundation
import Testing

@testable import ble

/// The JSON profile reader (`ble serve FILE`) given the committed corpus (`Fuzz/Corpus/json-profile`) and
/// thousands of damaged copies of it: each file loads or is refused with a `ValidationError` that names it, and
/// never traps. The reader itself (`BLEProfiles.ProfileFile`) is the libFuzzer target `json-profile`; this suite
/// checks the tool's loader around it (the file read, the refusal a `ValidationError` with the tool's usage).
@Suite struct JSONProfileRobustnessTests {
    /// A small deterministic generator (BLECore's LinearCongruential, a byte from each draw), so a failure replays.
    struct Generator {
        private var source: LinearCongruential
        init(seed: UInt64) { source = LinearCongruential(seed: seed) }
        mutating func next() -> UInt8 { UInt8(truncatingIfNeeded: source.nextHighBits()) }
        mutating func below(_ bound: Int) -> Int { (Int(next()) << 8 | Int(next())) % bound }
    }

    static let corpus = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz/Corpus/json-profile", isDirectory: true)

    static func corpusFiles() throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: corpus, includingPropertiesForKeys: nil)
            .filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    /// Loads `path`: a profile, or a refusal that names the file.
    static func load(_ path: String) -> Bool {
        do {
            _ = try JSONProfile.load(path: path, name: nil)
            return true
        } catch let error as ValidationError {
            #expect(error.message.contains(path), "\(error.message)")
            return false
        } catch {
            Issue.record("\(path): not a ValidationError: \(error)")
            return false
        }
    }

    @Test func corpusLoadsOrIsRefused() throws {
        let files = try Self.corpusFiles()
        #expect(files.count >= 4)
        let loaded = files.filter { Self.load($0.path) }.map(\.lastPathComponent)
        #expect(Set(loaded).isSuperset(of: ["heart-rate.json", "includes.json"]))
    }

    /// Fragments a damaged profile is made of: JSON's own tokens, and values the format checks.
    static let tokens: [String] = [
        "{", "}", "[", "]", "\"", ":", ",", "null", "true", "false", "0", "-1", "1e999", "\"\"", "\"\\u0000\"",
        "\"\\uD800\"", "\"2A37\"", "\"0000180D-0000-1000-8000-00805F9B34FB\"", "\"read\"", "\"0x\"", "\"zz\"",
        "\"services\"", "\"characteristics\"", "\"descriptors\"", "\"includes\"", "\"uuid\"", "\"value\"",
        "\"text\"", "\"2904\"", "\"é\"", "\u{FEFF}", String(repeating: "[", count: 600),
    ]

    @Test func damagedProfilesLoadOrAreRefused() throws {
        let seeds = try Self.corpusFiles().map { [UInt8](try Data(contentsOf: $0)) }
        var g = Generator(seed: 0x150F)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("json-profile-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("profile.json").path
        for _ in 0..<2000 {
            var bytes = seeds[g.below(seeds.count)]
            for _ in 0..<(1 + g.below(4)) {
                let at = g.below(bytes.count + 1)
                switch g.below(5) {
                case 0 where at < bytes.count: bytes[at] = g.next()
                case 1 where at < bytes.count: bytes.removeSubrange(at..<min(bytes.count, at + 1 + g.below(12)))
                case 2:
                    let token = Self.tokens[g.below(Self.tokens.count)]
                    bytes.insert(contentsOf: Array(token.utf8), at: at)
                case 3:
                    // A slice of the file repeated where it is: nesting and lists grow.
                    let end = min(bytes.count, at + g.below(40))
                    bytes.insert(contentsOf: bytes[at..<end], at: at)
                default: bytes = Array(bytes.prefix(at))
                }
            }
            _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
            _ = Self.load(path)
        }
    }
}
