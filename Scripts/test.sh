#!/usr/bin/env bash
# Runs every test of swift-ble: the layer rules, the Swift test suite, the demo's output, and the `ble` tool.
# This is the command the README gives and .ci/run calls; it needs only Swift and Python 3.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== layer rules"
python3 Scripts/check-layers.py

echo "== swift test"
swift build --build-tests
swift test --skip-build

echo "== ble demo"
python3 Scripts/check-demo.py
python3 Scripts/tests/test_cli.py
