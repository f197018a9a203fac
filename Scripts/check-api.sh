#!/usr/bin/env bash
# Checks that the public API of the library products (BLE, with what it re-exports, and BLETransportPosix) is the
# one committed in Scripts/api/public-api.txt, so that a change of public API is always deliberate: a change
# shows here as a diff, and `Scripts/check-api.sh --update` writes the new list, to commit with the change.
# The symbol graphs come from `swift package dump-symbol-graph` (a build, then the compiler's extraction).
set -euo pipefail
cd "$(dirname "$0")/.."

swift package dump-symbol-graph --minimum-access-level public --skip-synthesized-members > .build/dump-symbol-graph.log 2>&1 || {
    cat .build/dump-symbol-graph.log >&2
    exit 1
}
folder=$(sed -n 's/^Files written to //p' .build/dump-symbol-graph.log | tail -1)
if [ -z "$folder" ]; then folder=$(find .build -type d -name symbolgraph | head -1); fi
# The compiler spells declarations (and adds marker conformances) its own way: the list says which made it.
version=$(swift --version 2>/dev/null | sed -n 's/.*Swift version \([0-9.]*\).*/\1/p' | head -n 1)
{
    echo "# The public API of swift-ble's library products (Scripts/check-api.sh), made with Swift $version."
    python3 Scripts/api-surface.py "$folder" BLE,BLETransportPosix Sources/BLE/Exports.swift
} > .build/public-api.txt
if [ "${1:-}" = "--update" ]; then
    cp .build/public-api.txt Scripts/api/public-api.txt
    echo "public API list updated: $(wc -l < Scripts/api/public-api.txt) lines in Scripts/api/public-api.txt"
    exit 0
fi
if ! diff -u Scripts/api/public-api.txt .build/public-api.txt; then
    echo "check-api: the public API changed (above: - removed, + added). If that is deliberate, run" >&2
    echo "Scripts/check-api.sh --update and commit Scripts/api/public-api.txt with the change." >&2
    exit 1
fi
echo "check-api: the public API is the committed one ($(wc -l < Scripts/api/public-api.txt) symbols and conformances)"
