#!/usr/bin/env bash
# Runs every test of swift-ble: the house style, the layer rules, the size of tracked files, the Swift test suite
# (and its host, system and API tests under ThreadSanitizer), the public API against its committed list, the
# README's manifest and example, the DocC
# documentation (warnings are errors), the demo's output, the ble tool's commands, and the interop tests against
# Bumble and RootCanal. It installs what they need first (a Python
# virtual environment in .venv with the pinned peers, and tshark), so a fresh clone passes as it is.
# This is the command the README gives and .ci/run calls; BLE.docc/Testing.md describes each stage.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each stage's wall time, printed at the end (and as far as it got, on a failure).
stage_names=()
stage_seconds=()
stage_started=$SECONDS
stage() {
    if ((${#stage_names[@]} > 0)); then stage_seconds+=($((SECONDS - stage_started))); fi
    stage_names+=("$1")
    stage_started=$SECONDS
    echo "== $1"
}
report() {
    stage_seconds+=($((SECONDS - stage_started)))
    echo "== stage times"
    for i in "${!stage_names[@]}"; do
        printf '%6d s  %s\n' "${stage_seconds[$i]}" "${stage_names[$i]}"
    done
    printf '%6d s  in all\n' "$SECONDS"
}
trap report EXIT

stage "peers (Bumble, RootCanal, tshark)"
Scripts/setup-peers.sh

stage "house style"
Scripts/check-format.sh

stage "layer rules"
python3 Scripts/check-layers.py

stage "no tracked file over 1 MiB outside the fuzz corpora"
python3 Scripts/check-large-files.py

stage "swift test"
swift build --build-tests
swift test --skip-build

stage "public API: the library products' symbols against the committed list"
Scripts/check-api.sh

stage "README: the manifest evaluated, the example built as printed and run"
python3 Scripts/check-readme.py

stage "documentation (DocC, every module, warnings as errors)"
Scripts/check-docs.sh

stage "swift test under ThreadSanitizer (host, system and API)"
Scripts/sanitizers.sh thread --filter 'BLEHostTests|BLESystemTests|BLETests'

stage "ble demo"
python3 Scripts/check-demo.py

stage "ble tool"
python3 Scripts/tests/test_cli.py
python3 Scripts/tests/test_room.py
.venv/bin/python Scripts/tests/test_shell.py

stage "interop with Bumble and RootCanal"
Scripts/interop/run.sh
