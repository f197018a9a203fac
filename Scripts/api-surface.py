#!/usr/bin/env python3
"""The public API of swift-ble's library products, one line per symbol, from the symbol graphs the compiler
emits (`swift package dump-symbol-graph`): what a user can name after `import BLE` (and `import
BLETransportPosix`). Used by Scripts/check-api.sh, which compares it with the committed list
Scripts/api/public-api.txt so that a change of public API is always deliberate.

Each line: the symbol's kind, its path (Type.member), and its declaration as the compiler spells it. A
conformance of a public type to a protocol is a line too. BLE re-exports BLECore whole and some types of the
lower modules one by one (Sources/BLE/Exports.swift): those come from their own modules' graphs."""
import json
import os
import re
import sys


def load(folder, module):
    """The symbols and relationships of `module`'s graphs (its own and its extensions of other modules)."""
    symbols, relationships = [], []
    for name in sorted(os.listdir(folder)):
        if name == f"{module}.symbols.json" or name.startswith(f"{module}@"):
            with open(os.path.join(folder, name)) as file:
                graph = json.load(file)
            symbols += graph.get("symbols", [])
            relationships += graph.get("relationships", [])
    return symbols, relationships


def exports(path):
    """Modules re-exported whole, and (module, type) pairs re-exported one by one, from an Exports.swift."""
    whole, single = [], []
    with open(path) as file:
        for line in file:
            m = re.match(r"@_exported import (\w+)\s*$", line.strip())
            if m and m.group(1) not in ("Foundation", "Dispatch"):
                whole.append(m.group(1))
            m = re.match(r"@_exported import (?:struct|class|enum|protocol|typealias|actor) (\w+)\.(\w+)", line.strip())
            if m:
                single.append((m.group(1), m.group(2)))
    return whole, single


def lines(symbols, relationships, keep=lambda path: True):
    by_id = {s["identifier"]["precise"]: s for s in symbols}
    out = set()
    for s in symbols:
        if s.get("accessLevel") not in ("public", "open"):
            continue
        path = s["pathComponents"]
        if not keep(path):
            continue
        declaration = "".join(f["spelling"] for f in s.get("declarationFragments", []))
        declaration = re.sub(r"\s+", " ", declaration).strip()
        out.add(f"{s['kind']['identifier'].removeprefix('swift.')}\t{'.'.join(path)}\t{declaration}")
    for r in relationships:
        if r["kind"] != "conformsTo" or r["source"] not in by_id:
            continue
        source = by_id[r["source"]]
        if source.get("accessLevel") not in ("public", "open") or not keep(source["pathComponents"]):
            continue
        target = by_id.get(r["target"], {}).get("pathComponents")
        target = ".".join(target) if target else r.get("targetFallback", r["target"])
        out.add(f"conformance\t{'.'.join(source['pathComponents'])}\t{target}")
    return out


def main():
    folder = sys.argv[1]
    products = sys.argv[2].split(",")
    exported = sys.argv[3]
    whole, single = exports(exported)
    surface = set()
    for module in products + whole:
        surface |= {f"{module}\t{line}" for line in lines(*load(folder, module))}
    for module, type_name in single:
        surface |= {f"{module}\t{line}" for line in lines(*load(folder, module), keep=lambda p, t=type_name: p[0] == t)}
    for line in sorted(surface):
        print(line)


if __name__ == "__main__":
    main()
