import BLEFuzzing
import CLibFuzzer
import Foundation

// The libFuzzer driver for every target in `FuzzTarget.all`. BLE_FUZZ_TARGET names the one to fuzz (`list` prints
// their names); libFuzzer's own arguments follow as usual (corpus folders, -runs=N, -max_total_time=S, -merge=1,
// or a crash file to replay).
// It is read from the environment, not the arguments, because libFuzzer starts child processes (for -merge and
// -fork) with its own arguments, and they inherit the environment.
//
// Built only by Scripts/fuzz.sh (BLE_FUZZ=1, -sanitize=fuzzer,address): SwiftPM names this module's entry point
// and links `main` to it, so libFuzzer's own main is never used and this one hands over to LLVMFuzzerRunDriver.

enum Selected {
    static let target: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["BLE_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget.named(name) else {
            fatalError("BLE_FUZZ_TARGET is '\(name)'; the targets are \(FuzzTarget.all.map(\.name))")
        }
        return target
    }()
}

/// One input: a contract that does not hold is a crash, as a trap is.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    do {
        try Selected.target.run(input)
    } catch {
        fatalError("\(Selected.target.name): \(error)")
    }
    return 0
}

if ProcessInfo.processInfo.environment["BLE_FUZZ_TARGET"] == "list" {
    for target in FuzzTarget.all { print(target.name) }
    exit(0)
}
_ = Selected.target
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
