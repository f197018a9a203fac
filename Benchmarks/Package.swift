// swift-tools-version: 6.1
//
// The benchmarks of swift-ble with ordo-one/benchmark (its malloc counter needs the MallocInterposer trait): a
// package of its own, depending on swift-ble by path, so that neither swift-ble's build nor `swift test` builds
// ordo-one/benchmark. Run from this folder: `swift package benchmark` (BLE.docc/Performance.md).
import PackageDescription

let package = Package(
    name: "swift-ble-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "swift-ble", path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        .executableTarget(
            name: "BLEBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "BLE", package: "swift-ble"),
                .product(name: "BLEBench", package: "swift-ble"),
            ],
            path: "Benchmarks/BLEBenchmarks",
            swiftSettings: [
                .enableUpcomingFeature("ExistentialAny"), .enableUpcomingFeature("MemberImportVisibility"),
            ],
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        )
    ]
)
