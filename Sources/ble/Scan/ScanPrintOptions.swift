import ArgumentParser

/// `--sort`, `--duplicates`, `--raw` and `--json`: how `ble scan` and the shell's `scan` print what they find.
struct ScanPrintOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Order of the devices: rssi (strongest first), name, address or seen (first seen first); outside a live table each device is listed once, at the end, in that order.",
            valueName: "order"))
    var sort: ScanSort?

    @Flag(help: "Report every advertisement instead of each device once (and again when its data changes).")
    var duplicates = false

    @Flag(help: "Also print the raw AD structures of the advertisement and the scan response.")
    var raw = false

    @Flag(help: "One JSON object per line.")
    var json = false

    /// The options' names, for the shell's Tab.
    static let names = ["--sort", "--duplicates", "--raw", "--json"]

    func validate() throws {
        if sort != nil, duplicates {
            throw ValidationError("--sort lists each device once, so it cannot be used with --duplicates")
        }
    }
}
