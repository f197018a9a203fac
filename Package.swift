// swift-tools-version: 6.2
//
// swift-ble: a Bluetooth Low Energy host stack, a virtual controller on a simulated radio, and a
// CoreBluetooth-shaped public API. Layers and their allowed directions are drawn in docs/ARCHITECTURE.md;
// `Scripts/check-layers.py` enforces them from `swift package describe --type json`.
//
// Swift 6.2 is the oldest compiler that builds the code (`Peripheral.manager` is a `weak let`, SE-0481).
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let nioCore: Target.Dependency = .product(name: "NIOCore", package: "swift-nio")
let collections: Target.Dependency = .product(name: "DequeModule", package: "swift-collections")
let heap: Target.Dependency = .product(name: "HeapModule", package: "swift-collections")
let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")

let package = Package(
    name: "swift-ble",
    // The versions that bring `Synchronization.Mutex` and task executors, which every library target uses. The
    // `BLE` product (and everything below it) builds for all of them: it does no socket, serial or process work,
    // and its platform code is behind `#if canImport(...)`. The `ble` tool and `BLETransportPosix` (sockets,
    // termios, the Linux HCI user channel) are for Linux and macOS.
    platforms: [.macOS(.v15), .iOS(.v18), .tvOS(.v18), .watchOS(.v11), .visionOS(.v2)],
    products: [
        .library(name: "BLE", targets: ["BLE"]),
        // Real controllers for Linux and macOS (TCP, UART, Unix sockets, the Linux HCI user channel): an application
        // calls `PosixTransports.install()` once, then names them by spec, as the `ble` tool does.
        .library(name: "BLETransportPosix", targets: ["BLETransportPosix"]),
        .executable(name: "ble", targets: ["ble"]),
        // The benchmarks' scenarios, for `ble bench` and the ordo-one/benchmark package in Benchmarks/.
        .library(name: "BLEBench", targets: ["BLEBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.80.0"),
        .package(url: "https://github.com/apple/swift-collections", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        // `swift package generate-documentation`: builds every target's DocC catalogue (the test command does,
        // with warnings as errors). A plugin only: nothing of it is linked into a product.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // Pure layers: no I/O, no clocks, no un-injected randomness.
        .target(name: "BLECore", dependencies: [nioCore], swiftSettings: strict),
        .target(name: "BLEHCI", dependencies: ["BLECore", nioCore], swiftSettings: strict),
        .target(name: "BLEL2CAP", dependencies: ["BLECore", nioCore, collections], swiftSettings: strict),
        .target(name: "BLEATT", dependencies: ["BLECore", nioCore, collections], swiftSettings: strict),
        // AES-CMAC (the Database Hash; SMP's toolbox later) is computation, so a pure layer may use swift-crypto.
        .target(
            name: "BLEGATT",
            dependencies: [
                "BLECore", "BLEATT", nioCore, collections, .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict),

        // The Security Manager: SMP's PDUs, its pairing machines and its cryptographic toolbox (swift-crypto).
        .target(
            name: "BLESMP",
            dependencies: [
                "BLECore", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict),

        // The seam between a host and a controller.
        .target(
            name: "BLETransport", dependencies: ["BLECore", "BLEHCI", nioCore, collections], swiftSettings: strict),

        // The host: composes the pure machines, owns credits, buffers, timers.
        .target(
            name: "BLEHost",
            dependencies: [
                "BLECore", "BLEHCI", "BLEL2CAP", "BLEATT", "BLEGATT", "BLESMP", "BLETransport", nioCore, collections,
                logging,
            ],
            swiftSettings: strict),
        // The daemon: apps, arbitration, delivery, and the store (SQLite through GRDB; BLESMP's `ah` resolves
        // bonded peers' private addresses).
        .target(
            name: "BLESystem",
            dependencies: [
                "BLECore", "BLEATT", "BLEGATT", "BLEHost", "BLESMP", "BLETransport", logging,
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "OrderedCollections", package: "swift-collections"),
            ],
            swiftSettings: strict),

        // Real controllers: TCP, UART (termios), Linux HCI user channel. Only `ble`, benchmarks and tests use it.
        .target(
            name: "BLETransportPosix",
            dependencies: [
                "BLECore", "BLEHCI", "BLETransport", nioCore, .product(name: "NIOPosix", package: "swift-nio"), logging,
            ],
            swiftSettings: strict),

        // The controller side: speaks HCI bytes only. swift-crypto's AES block is its link-layer encryption (CCM).
        .target(
            name: "BLEVirtualController",
            dependencies: [
                "BLECore", "BLEHCI", "BLETransport", nioCore, collections, heap,
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strict),

        // Public API.
        .target(
            name: "BLE",
            dependencies: [
                "BLECore", "BLESystem", "BLEHost", "BLEGATT", "BLEATT", "BLESMP", "BLETransport",
                "BLEVirtualController",
                logging,
            ],
            swiftSettings: strict),

        // GATT databases described in JSON (`ble serve FILE`): the file's model and its reader, a library so that the
        // libFuzzer driver links the same reader the tool runs.
        .target(name: "BLEProfiles", dependencies: ["BLE", "BLECore"], swiftSettings: strict),

        // The fuzz targets' entry points: each decoder that bytes from a peer or a file reach, fed one input.
        // Fuzz/Driver runs them under libFuzzer (Scripts/fuzz.sh); BLEFuzzingTests replays their corpora.
        .target(
            name: "BLEFuzzing",
            dependencies: [
                "BLECore", "BLEHCI", "BLEL2CAP", "BLEATT", "BLESMP", "BLEGATT", "BLETransport", "BLESystem", "BLE",
                "BLEProfiles", nioCore, logging, .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict),

        // The benchmarks' scenarios on the public API (their seeded draws from BLECore): `ble bench` runs them, and so
        // does Benchmarks/ (a package of its own, so that neither the main build nor `swift test` builds
        // ordo-one/benchmark).
        .target(name: "BLEBench", dependencies: ["BLE", "BLECore"], swiftSettings: strict),

        .executableTarget(
            name: "ble",
            dependencies: [
                "BLE", "BLEBench", "BLEProfiles", "BLETransportPosix",
                .product(name: "ArgumentParser", package: "swift-argument-parser"), logging,
                nioCore, .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),

        // The process the store's kill -9 trials kill (StoreKillTrials in BLESystemTests, Scripts/kill-trials.sh):
        // it changes a store and prints each committed change. Only those trials run it.
        .executableTarget(
            name: "ble-store-writer", dependencies: ["BLESystem", "BLECore", logging], path: "Tests/StoreWriter",
            swiftSettings: strict),

        // README.md's Swift code as a program: the ReadmeSnippets plugin writes its main.swift from the README at build
        // time (readme-snippets does the extracting), so an example that stops compiling fails the build, and
        // Scripts/check-readme.py runs it and checks what it prints. Built as a user's package would build it: the
        // default settings of this tools version, `BLE` only.
        .executableTarget(name: "readme-snippets", path: "Plugins/ReadmeSnippetsTool"),
        .plugin(name: "ReadmeSnippets", capability: .buildTool(), dependencies: ["readme-snippets"]),
        .executableTarget(
            name: "readme-example", dependencies: ["BLE"], path: "Tests/ReadmeExample", exclude: ["README.md"],
            plugins: ["ReadmeSnippets"]),

        .testTarget(name: "BLECoreTests", dependencies: ["BLECore", nioCore], swiftSettings: strict),
        .testTarget(name: "BLEHCITests", dependencies: ["BLEHCI", "BLECore", nioCore], swiftSettings: strict),
        .testTarget(name: "BLEL2CAPTests", dependencies: ["BLEL2CAP", "BLECore", nioCore], swiftSettings: strict),
        .testTarget(name: "BLEATTTests", dependencies: ["BLEATT", "BLECore", nioCore], swiftSettings: strict),
        .testTarget(name: "BLESMPTests", dependencies: ["BLESMP", "BLECore"], swiftSettings: strict),
        .testTarget(
            name: "BLEGATTTests", dependencies: ["BLEGATT", "BLEATT", "BLECore", nioCore], swiftSettings: strict),
        .testTarget(
            name: "BLEVirtualControllerTests",
            dependencies: ["BLEVirtualController", "BLEHCI", "BLETransport", "BLECore", nioCore],
            swiftSettings: strict),
        .testTarget(
            name: "BLEHostTests",
            dependencies: ["BLEHost", "BLETransport", "BLEHCI", "BLEL2CAP", "BLEATT", "BLEGATT", "BLECore", nioCore],
            swiftSettings: strict),
        .testTarget(
            name: "BLESystemTests",
            dependencies: ["BLESystem", "BLESMP", "BLECore", logging, .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict),
        .testTarget(
            name: "BLETests",
            dependencies: [
                "BLE", "BLETransport", "BLEHCI", "BLEHost", "BLESMP", "BLESystem", "BLEVirtualController", "BLEGATT",
                "BLEATT",
            ],
            // Stores an earlier version wrote, read from the source tree (PreservedFixtureTests).
            exclude: ["Fixtures"],
            swiftSettings: strict),
        .testTarget(
            name: "BLETransportTests", dependencies: ["BLETransport", "BLEHCI", "BLECore", nioCore],
            swiftSettings: strict),
        .testTarget(
            name: "BLETransportPosixTests",
            dependencies: [
                "BLETransportPosix", "BLETransport", "BLEHCI", "BLECore", nioCore,
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(name: "BLEFuzzingTests", dependencies: ["BLEFuzzing"], swiftSettings: strict),
        // The tool's own parts (profiles, served devices, target matching), tested in process on a simulated radio;
        // Scripts/tests/test_cli.py checks the built tool from outside.
        .testTarget(
            name: "bleTests",
            dependencies: [
                "ble", "BLE", "BLEBench", "BLEProfiles", nioCore,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
    ]
)

// The libFuzzer driver, only for Scripts/fuzz.sh, which sets BLE_FUZZ=1: it links only with `-sanitize=fuzzer`,
// whose runtime supplies LLVMFuzzerRunDriver, so an ordinary build leaves it out.
if Context.environment["BLE_FUZZ"] == "1" {
    package.targets += [
        .systemLibrary(name: "CLibFuzzer", path: "Fuzz/CLibFuzzer"),
        .executableTarget(
            name: "ble-fuzz", dependencies: ["BLEFuzzing", "CLibFuzzer"], path: "Fuzz/Driver", swiftSettings: strict),
    ]
}
