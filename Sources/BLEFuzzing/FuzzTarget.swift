/// One fuzz target: a decoder (or a machine that decodes) that bytes from a peer or a file reach, and the entry
/// point that feeds it one input.
///
/// The same entry point serves three callers: the libFuzzer driver (`Fuzz/Driver`, built by `Scripts/fuzz.sh`
/// with `-sanitize=fuzzer,address`), the test that replays each target's committed corpus
/// (`Fuzz/Corpus/NAME`, in `BLEFuzzingTests`), and a person reproducing a crash. An input must never trap; what
/// the target also checks (round trips, answers counted, contracts of the machine) is reported as a
/// ``Violation``, which the driver turns into a crash and the test into a failure.
public struct FuzzTarget: Sendable, CustomStringConvertible {
    /// A contract the code under test broke for some input.
    public struct Violation: Error, CustomStringConvertible {
        public var description: String
        public init(_ description: String) { self.description = description }
    }

    /// The target's name: its corpus folder and what `Scripts/fuzz.sh` is given.
    public let name: String
    /// What it feeds, in a line.
    public let summary: String
    private let body: @Sendable ([UInt8]) throws(Violation) -> Void

    init(_ name: String, _ summary: String, _ body: @escaping @Sendable ([UInt8]) throws(Violation) -> Void) {
        self.name = name
        self.summary = summary
        self.body = body
    }

    /// Feeds one input; throws when a checked contract does not hold.
    public func run(_ input: [UInt8]) throws(Violation) {
        try body(input)
    }

    public var description: String { name }

    /// Every target, in the order of the layers they exercise.
    public static let all: [FuzzTarget] = [
        h4Framer, hciEvent, hciCommand, aclRecombiner, l2capSignaling, att, gattServer, gattClient,
        gattCacheRecord, advertisingData, smpPDU, smpPairing, systemStore, btsnoopReader, jsonProfile,
    ]

    /// The target called `name`, if there is one.
    public static func named(_ name: String) -> FuzzTarget? {
        all.first { $0.name == name }
    }
}

/// Fails the input with `message` unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzTarget.Violation) {
    guard condition else { throw FuzzTarget.Violation(message()) }
}
