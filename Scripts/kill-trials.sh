#!/usr/bin/env bash
# The system store under kill -9: StoreKillTrials (Tests/BLESystemTests) with 100 trials, or
# as many as --trials says, their kill moments drawn from --seed. Each trial starts ble-store-writer on a store
# file (new, or the one the trials before left), kills it with SIGKILL at a random moment, then opens the store
# as the next process would and checks that it opens cleanly and holds every change the writer printed as
# committed. The test command runs the same test with its defaults (100 trials, seed 18); this script runs it
# alone, with another count or seed, and --verbose prints a line per trial.
#
#     Scripts/kill-trials.sh [--trials N] [--seed S] [--verbose] [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."

trials=100
seed=18
build=1
while [ $# -gt 0 ]; do
    case "$1" in
        --trials) trials="$2"; shift 2 ;;
        --seed) seed="$2"; shift 2 ;;
        --skip-build) build=0; shift ;;
        --verbose) export BLE_KILL_VERBOSE=1; shift ;;
        *) echo "usage: Scripts/kill-trials.sh [--trials N] [--seed S] [--verbose] [--skip-build]" >&2; exit 2 ;;
    esac
done

if [ "$build" = 1 ]; then swift build --build-tests; fi
BLE_KILL_TRIALS="$trials" BLE_KILL_SEED="$seed" \
    swift test --skip-build --filter 'StoreKillTrials'
