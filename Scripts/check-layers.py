#!/usr/bin/env python3
"""Checks the layer rules of ARCHITECTURE.md against the package as SwiftPM describes it.

Reads `swift package describe --type json` (or a file given as the first argument) and each target's
sources, and fails with one line per violation:

1. Pure layers (BLECore, BLEHCI, BLEL2CAP, BLEATT, BLEGATT, BLESMP) do no I/O: they depend only on pure
   layers and on NIO's ByteBuffer and swift-collections, and their sources use no clocks, Dispatch, files,
   sockets or unseeded randomness.
2. Dependencies point downward: each target depends (by declaration or by `import`) only on targets of a
   lower layer. BLEVirtualController never sees BLEHost or anything above it; BLEHost and BLESystem never
   see BLEVirtualController.
3. Only `ble`, benchmarks and tests depend on BLETransportPosix.
4. Test support code is never a product.
5. The pure machines (sources under a `Machine/` folder of BLEHost and BLESystem) are values stepped by their
   driver: no locks, atomics, dispatch, tasks, clocks, unseeded randomness, escaping closures, weak references
   or object identities (what the driver around them owns).
6. The facades (BLE) call delegates only through their event's `send(to:from:)`, hold no recursive lock,
   cite no iOS rule (IOSRules.md): the rules are BLESystem's, and import BLEHost, BLEHCI, BLEGATT and BLESMP only
   where FACADE_IMPORTS_LEFT still lists (a list that only shrinks).
"""
import json
import os
import re
import subprocess
import sys

# Layer rank: a target may use targets of a strictly lower rank only (same rank: never).
RANK = {
    "BLECore": 0,
    "BLEHCI": 1, "BLEL2CAP": 1, "BLEATT": 1, "BLESMP": 1,
    "BLEGATT": 2, "BLETransport": 2,
    "BLETransportPosix": 3, "BLEVirtualController": 3,
    "BLEHost": 4,
    "BLESystem": 5,
    "BLE": 6,
    # The process the store's kill -9 trials kill (Tests/StoreWriter); not in a product.
    "ble-store-writer": 6,
    # The benchmarks' scenarios, on the public API (and BLECore's seeded generator); ble bench and the Benchmarks/
    # package run them.
    "BLEBench": 7,
    # The JSON profile file's model and reader (ble serve FILE), on the public API.
    "BLEProfiles": 7,
    # The fuzz targets' entry points, down to the JSON profile reader; their libFuzzer driver (and its C
    # declarations) exist only when Scripts/fuzz.sh builds with BLE_FUZZ=1.
    "BLEFuzzing": 8,
    "ble": 8,
    "CLibFuzzer": 0, "ble-fuzz": 9,
    # README.md's example as a program (its main.swift extracted at build time by the ReadmeSnippets plugin, with
    # the readme-snippets tool): a user of the public API, in no product.
    "readme-snippets": 0, "ReadmeSnippets": 1, "readme-example": 7,
}
PURE = {"BLECore", "BLEHCI", "BLEL2CAP", "BLEATT", "BLEGATT", "BLESMP"}
# Crypto and CryptoExtras (swift-crypto): AES-CMAC and, for SMP, the rest of the toolbox; computation only.
PURE_EXTERNAL = {
    "NIOCore", "DequeModule", "HeapModule", "OrderedCollections", "Synchronization", "Foundation", "Crypto",
    "CryptoExtras",
}
FORBIDDEN_PAIRS = [
    ("BLEVirtualController", "BLEHost"), ("BLEVirtualController", "BLESystem"), ("BLEVirtualController", "BLE"),
    ("BLEHost", "BLEVirtualController"), ("BLESystem", "BLEVirtualController"),
]
# What a pure layer's sources may not mention: clocks, dispatch, files, sockets, process state, randomness.
PURE_FORBIDDEN_TOKENS = [
    r"\bimport\s+(Dispatch|NIOPosix|Glibc|Darwin|SystemPackage|System|FoundationNetworking)\b",
    r"\bDispatchQueue\b", r"\bContinuousClock\b", r"\bSuspendingClock\b", r"\bDate\(\)", r"\bFileManager\b",
    r"\bFileHandle\b", r"\bProcessInfo\b", r"\bSystemRandomNumberGenerator\b", r"\.random\(", r"\bTask\.sleep\b",
    r"\bThread\b",
]


# What a pure machine's sources may not mention (rule 5).
MACHINE_TARGETS = {"BLEHost", "BLESystem"}
MACHINE_FORBIDDEN_TOKENS = [
    r"\bimport\s+(Dispatch|Synchronization|NIOPosix|Glibc|Darwin)\b", r"\bMutex\b", r"\bAtomic\b",
    r"\bNS(Recursive)?Lock\b", r"\bDispatch\w*\b", r"\bTask\s*[.({]", r"\b(Continuous|Suspending)Clock\b",
    r"\bDate\(\)", r"\bSystemRandomNumberGenerator\b", r"\.random\(", r"@escaping\b", r"\bweak\s+(var|let)\b",
    r"\bObjectIdentifier\b", r"\bFile(Manager|Handle)\b", r"\bThread\b",
]


# The facades (BLE) are to see the lower layers only through BLESystem and the types Exports.swift re-exports
# (SystemMachinePlan.md, step 14). BLEHCI is there already; these files still import the others, each for the
# types named, until the system gives values of its own for them. The list only shrinks: a new import is refused,
# and an entry whose import is gone must leave the list.
LOWER_LAYERS = ("BLEHost", "BLEHCI", "BLEGATT", "BLESMP")
FACADE_IMPORTS_LEFT = {
    # HostError (requests' replies), LinkInfo, HostDriver (GATT requests go to the host), HostEvent.
    "Central/CentralManager.swift": {"BLEHost"},
    "Central/Peripheral+Pairing.swift": {"BLEHost", "BLESMP"},
    "Central/Peripheral+Requests.swift": {"BLEGATT", "BLEHost"},
    "Central/Peripheral.swift": {"BLEGATT", "BLEHost"},
    # The remote attributes' GATT values; pairing's IO capabilities and key distribution; bonds' keys; a link's
    # parameters (LinkInfo); queued writes.
    "Model/Attributes.swift": {"BLEGATT"},
    "Model/Bond.swift": {"BLESMP"},
    "Model/LinkParameters.swift": {"BLEHost"},
    "Model/Pairing.swift": {"BLESMP"},
    "Model/Peers.swift": {"BLEGATT", "BLEHost"},
    # The GATT server's definitions and requests (GATTServiceDefinition, GATTServerRequestID), HostEvent.
    "PeripheralRole/PeripheralManager+Restoration.swift": {"BLEHost"},
    "PeripheralRole/PeripheralManager.swift": {"BLEGATT", "BLEHost"},
    # HostConfiguration (a system's configuration).
    "Simulation/BluetoothSystem.swift": {"BLEHost"},
}

# An import line: `import M`, `@_exported import M`, `import struct M.T` (the module is the group). Within one line
# only: `\s` would let an optional kind swallow the line's end and take the next line's first word for the module.
IMPORT = r"^[ \t]*(?:@_exported[ \t]+|@testable[ \t]+)?import[ \t]+(?:(?:struct|class|enum|protocol|typealias|func|var|let)[ \t]+)?(\w+)"

CONSOLE_TOKENS = [r"FileHandle\.standard(Error|Output)", r"\bprint\(", r"\bfputs\(", r"\bputs\(",
                  r"STD(ERR|OUT)_FILENO", r"\bwrite\(\s*[12]\s*,", r"\bdebugPrint\(", r"\bfwrite\(",
                  r"\bfprintf\(", r"\bNSLog\(", r"FileHandle\(fileDescriptor:\s*[12]\b",
                  r"FileDescriptor\.standard(Error|Output)"]


def describe(path):
    if path:
        with open(path) as f:
            return json.load(f)
    out = subprocess.run(["swift", "package", "describe", "--type", "json"], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out[out.index("{"):])


def main():
    package = describe(sys.argv[1] if len(sys.argv) > 1 else None)
    root = package.get("path", os.getcwd())
    targets = {t["name"]: t for t in package["targets"]}
    problems = []

    def uses(target):
        """Project targets a target declares or imports, and external modules it declares."""
        declared = set(target.get("target_dependencies", []))
        external = set(target.get("product_dependencies", []))
        imported = set()
        for source in target.get("sources", []):
            with open(os.path.join(root, target["path"], source), encoding="utf-8") as f:
                text = f.read()
            for m in re.finditer(IMPORT, text, re.M):
                imported.add(m.group(1))
        return declared | (imported & set(RANK)), external, imported

    def scan_code(target, patterns, who, why, only=lambda source: True, comments=False):
        """Reports each use of one of `patterns` in a target's code (comments after // are left out unless
        `comments`), in the sources `only` admits."""
        for source in target.get("sources", []):
            if not only(source):
                continue
            with open(os.path.join(root, target["path"], source), encoding="utf-8") as f:
                lines = f.read().splitlines()
            for number, line in enumerate(lines, 1):
                code = line if comments else line.split("//", 1)[0]
                for pattern in patterns:
                    found = re.search(pattern, code)
                    if found:
                        problems.append(f"{target['path']}/{source}:{number}: {who}; '{found.group(0)}' {why}")

    for name, target in sorted(targets.items()):
        is_test = target.get("type") == "test"
        project, external, imported = uses(target)
        if not is_test and name not in RANK:
            problems.append(f"{name}: a target that ARCHITECTURE.md does not place in a layer")
            continue
        if is_test:
            continue
        for dep in sorted(project):
            if dep not in RANK:
                continue
            if RANK[dep] >= RANK[name]:
                problems.append(f"{name} (layer {RANK[name]}) uses {dep} (layer {RANK[dep]}): dependencies must point downward")
        for a, b in FORBIDDEN_PAIRS:
            if name == a and b in project:
                problems.append(f"{a} must not use {b}")
        if "BLETransportPosix" in project and name != "ble":
            problems.append(f"{name} uses BLETransportPosix: only ble, benchmarks and tests may")
        if name in PURE:
            for dep in sorted(project):
                if dep not in PURE:
                    problems.append(f"{name} is a pure layer but uses {dep}")
            for ext in sorted(external):
                if ext not in PURE_EXTERNAL:
                    problems.append(f"{name} is a pure layer but depends on {ext}")
            scan_code(target, PURE_FORBIDDEN_TOKENS, f"{name} is a pure layer", "is I/O, time or randomness")

        if name in MACHINE_TARGETS:
            scan_code(target, MACHINE_FORBIDDEN_TOKENS, f"{name}'s machines are pure values",
                      "belongs to the driver around the machine", only=lambda source: source.startswith("Machine/"))

        # One event stream: a manager or a peripheral tells its delegate only through its event's
        # `send(to:from:)` (Async/Observation.swift), so the async layer's observers hear all the delegate does.
        if name == "BLE":
            scan_code(target, [r"\b(?:delegate|d)\??\.(?:centralManager|peripheral)\w*\(",
                               r"\b(?:delegate|d)\??\.announce\w*\("],
                      "BLE calls a delegate method directly", "(tell an event instead: tell(_:))",
                      only=lambda source: source not in ("Async/Observation.swift", "Model/Delegates.swift"))

        # Restoration takes a kept manager over in the controller's serial domain, with no lock the event path
        # takes: no recursive lock in the facades (the review found one held across the hand-over).
        if name == "BLE":
            scan_code(target, [r"\bNSRecursiveLock\b"], "BLE holds a recursive lock",
                      "(take over in the serial domain: HostScheduler.execute)")

        # The facades hold no iOS policy: the rules the system applies are BLESystem's, cited there. A public
        # doc comment says the behaviour in words and links the article (<doc:IOSRules>), which stays.
        if name == "BLE":
            scan_code(target, [r"IOSRules\.md", r"IOS-RULES"], "BLE cites an iOS rule",
                      "(the rule belongs in BLESystem; say the behaviour in words, link <doc:IOSRules>)",
                      only=lambda source: source.endswith(".swift"), comments=True)

        # The facades reach the lower layers through BLESystem and Exports.swift only (the list above shrinks).
        if name == "BLE":
            found = {}
            for source in target.get("sources", []):
                if source == "Exports.swift":
                    continue
                with open(os.path.join(root, target["path"], source), encoding="utf-8") as f:
                    for m in re.finditer(IMPORT, f.read(), re.M):
                        if m.group(1) in LOWER_LAYERS:
                            found.setdefault(source, set()).add(m.group(1))
            for source, modules in sorted(found.items()):
                for module in sorted(modules - FACADE_IMPORTS_LEFT.get(source, set())):
                    problems.append(f"{target['path']}/{source}: BLE imports {module} (reach it through BLESystem, "
                                    "or re-export the one type in Exports.swift)")
            for source, modules in sorted(FACADE_IMPORTS_LEFT.items()):
                for module in sorted(modules - found.get(source, set())):
                    problems.append(f"{target['path']}/{source} no longer imports {module}: take it out of "
                                    "FACADE_IMPORTS_LEFT in Scripts/check-layers.py")

        # The library never writes to stdout or stderr itself: it logs through swift-log, and the application
        # (the ble tool) picks where logs go.
        if name not in ("ble", "ble-fuzz", "ble-store-writer", "readme-snippets", "readme-example"):
            scan_code(target, CONSOLE_TOKENS, f"{name} is a library", "writes to the console (log instead)")

    test_targets = {n for n, t in targets.items() if t.get("type") == "test"}
    for product in package.get("products", []):
        for t in product.get("targets", []):
            if t in test_targets or "Support" in t or "Testing" in t:
                problems.append(f"product {product['name']} exposes test support target {t}")

    if problems:
        print("Layer rules violated (see ARCHITECTURE.md, 'Layers and targets'):")
        for p in problems:
            print("  - " + p)
        return 1
    names = ", ".join(sorted(n for n in targets if n in RANK))
    print(f"Layer rules hold for {len(targets)} targets ({names}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
