import BLEFuzzing
import Foundation
import Testing

/// Every fuzz target replays its committed corpus, `Fuzz/Corpus/NAME`, and the inputs that once failed,
/// `Fuzz/Regressions/NAME`, through the entry point libFuzzer calls (`Scripts/fuzz.sh` builds the same entry
/// points with `-sanitize=fuzzer,address`): each must still pass. This is how the test command runs the fuzz
/// targets; it takes seconds.
@Suite struct CorpusTests {
    static let fuzz = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fuzz", isDirectory: true)
    /// The inputs libFuzzer kept, minimised (`Scripts/fuzz.sh --merge`).
    static let corpus = fuzz.appendingPathComponent("Corpus", isDirectory: true)
    /// The inputs that failed once, by the name of what they found (each also has a named test of its own in the
    /// target's test suite).
    static let regressions = fuzz.appendingPathComponent("Regressions", isDirectory: true)

    /// The corpus folders of targets that are not libFuzzer targets: the `ble` tool's JSON profiles, which
    /// `bleTests` replays (an executable target's code cannot be linked into the fuzz driver).
    static let replayedElsewhere: Set<String> = ["json-profile"]

    /// The files in `folder`, by name; none when it does not exist.
    static func files(in folder: URL) -> [URL] {
        let found = (try? FileManager.default.contentsOfDirectory(at: folder, includingPropertiesForKeys: nil)) ?? []
        return found.filter { !$0.lastPathComponent.hasPrefix(".") }
            .sorted { $0.lastPathComponent < $1.lastPathComponent }
    }

    @Test(arguments: FuzzTarget.all)
    func corpusAndRegressionsPass(_ target: FuzzTarget) throws {
        let corpus = Self.files(in: Self.corpus.appendingPathComponent(target.name))
        #expect(!corpus.isEmpty, "Fuzz/Corpus/\(target.name) is empty")
        for file in corpus + Self.files(in: Self.regressions.appendingPathComponent(target.name)) {
            let bytes = [UInt8](try Data(contentsOf: file))
            #expect(throws: Never.self, "\(file.path)") { try target.run(bytes) }
        }
    }

    /// Each corpus and regression folder belongs to a target, and each target has a corpus.
    @Test func everyTargetHasACorpusAndEveryFolderATarget() throws {
        let names = Set(FuzzTarget.all.map(\.name))
        #expect(names.count == FuzzTarget.all.count, "two targets share a name")
        let corpora = Set(Self.files(in: Self.corpus).map(\.lastPathComponent))
        #expect(corpora == names.union(Self.replayedElsewhere))
        let regressions = Set(Self.files(in: Self.regressions).map(\.lastPathComponent))
        #expect(regressions.isSubset(of: names), "\(regressions.subtracting(names)) name no fuzz target")
    }
}
