#!/usr/bin/env bash
# Runs the interop tests: our `ble` tool against Bumble 0.0.236 and RootCanal 1.10.0 (both pinned, installed
# into .venv by Scripts/setup-peers.sh), over loopback TCP ports the tests pick. Bounded: the whole run is
# stopped after INTEROP_TIMEOUT seconds (default 600). INTEROP_VERBOSE=1 echoes every peer's output.
# Extra arguments go to unittest (e.g. a test name: test_interop.BumbleHostOnOurController).
set -euo pipefail
cd "$(dirname "$0")/../.."

Scripts/setup-peers.sh
swift build --product ble
export BLE_EXECUTABLE="$(swift build --show-bin-path)/ble"

cd Scripts/interop
exec timeout --signal=TERM --kill-after=10 "${INTEROP_TIMEOUT:-600}" \
    ../../.venv/bin/python -W ignore::ResourceWarning -m unittest "${@:-test_interop}" -v
