#!/usr/bin/env bash
# Runs every test of swift-ble: the layer rules, the Swift test suite, the demo's output, the ble tool's
# commands, and the interop tests against Bumble and RootCanal. It installs what they need first (a Python
# virtual environment in .venv with the pinned peers, and tshark), so a fresh clone passes as it is.
# This is the command the README gives and .ci/run calls.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== peers (Bumble, RootCanal, tshark)"
Scripts/setup-peers.sh

echo "== house style"
Scripts/check-format.sh

echo "== layer rules"
python3 Scripts/check-layers.py

echo "== swift test"
swift build --build-tests
swift test --skip-build

echo "== ble demo"
python3 Scripts/check-demo.py

echo "== ble tool"
python3 Scripts/tests/test_cli.py
python3 Scripts/tests/test_room.py
.venv/bin/python Scripts/tests/test_shell.py

echo "== interop with Bumble and RootCanal"
Scripts/interop/run.sh
