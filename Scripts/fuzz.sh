#!/usr/bin/env bash
# Builds the libFuzzer driver (Fuzz/Driver, with -sanitize=fuzzer,address, in .build-fuzz) and runs fuzz targets,
# each from its committed corpus (Fuzz/Corpus/TARGET) and the inputs that once failed (Fuzz/Regressions/TARGET).
# Any crash, trap, leak, timeout or broken contract fails the run and names the target; the input that did it is
# written to Fuzz/Crashes/TARGET/ (git-ignored).
#
#   Scripts/fuzz.sh [--runs N] [--seconds S] [--jobs J] [--merge] [TARGET...]
#
#   --runs N      each target runs N inputs (default 100000)
#   --seconds S   each target runs for S seconds instead; with --runs too, whichever ends first (the
#                 reliability budget, 10^7 executions or an hour for the slow targets: --runs 10000000 --seconds 3600)
#   --jobs J      run J targets at once (default 1)
#   --merge       afterwards, minimise each target's corpus (the committed one and what the run found) back
#                 into Fuzz/Corpus/TARGET (libFuzzer's -merge=1: the fewest, smallest inputs with all coverage);
#                 the hand-written seeds (any input not named by its SHA-1) are kept under their names
#   TARGET...     the targets to run (default: all; `BLE_FUZZ_TARGET=list` on the driver names them)
#
# New inputs a run finds go to .build-fuzz/corpus/TARGET, so the committed corpus changes only with --merge.
# A crash replays with: BLE_FUZZ_TARGET=TARGET .build-fuzz/release/ble-fuzz Fuzz/Crashes/TARGET/crash-...
set -euo pipefail
cd "$(dirname "$0")/.."

runs=100000
runs_given=0
seconds=""
jobs=1
merge=0
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="$2"; runs_given=1; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --jobs) jobs="$2"; shift 2 ;;
        --merge) merge=1; shift ;;
        -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        *) targets+=("$1"); shift ;;
    esac
done

build=(swift build -c release --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address)
echo "== building the fuzz driver (.build-fuzz)"
BLE_FUZZ=1 "${build[@]}" --product ble-fuzz
driver="$(BLE_FUZZ=1 "${build[@]}" --show-bin-path)/ble-fuzz"

known=$(BLE_FUZZ_TARGET=list "$driver")
if [ ${#targets[@]} -eq 0 ]; then
    read -r -a targets <<< "$(echo $known)"
fi
for target in "${targets[@]}"; do
    if ! grep -qx "$target" <<< "$known"; then
        echo "fuzz.sh: no fuzz target '$target'; the targets are: $(echo $known)" >&2
        exit 2
    fi
done

mkdir -p .build-fuzz/logs
# The Swift runtime's backtracer would catch a crash before libFuzzer does; libFuzzer and ASan report it.
export SWIFT_BACKTRACE=enable=no
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}"
if [ -z "$seconds" ]; then
    budget=(-runs="$runs")
elif [ "$runs_given" -eq 1 ]; then
    budget=(-runs="$runs" -max_total_time="$seconds")
else
    budget=(-max_total_time="$seconds")
fi

# libFuzzer looks for leaks after any input that allocated more than it freed while it ran. Every system-store
# input does (SQLite's and GRDB's work ends on other threads), so it would run LeakSanitizer after each one, six
# times slower; it fuzzes without, then replays its whole corpus once with leak detection.
leaks_after_the_run=" system-store "

# Runs one target; its summary line goes to .build-fuzz/logs/TARGET.summary.
fuzz_one() {
    local target="$1" log=".build-fuzz/logs/$1.log" work=".build-fuzz/corpus/$1"
    mkdir -p "$work" "Fuzz/Crashes/$target" "Fuzz/Corpus/$target"
    local start status=0 leaks=()
    start=$(date +%s)
    mkdir -p "Fuzz/Regressions/$target"
    local inputs=("$work" "Fuzz/Corpus/$target" "Fuzz/Regressions/$target")
    local common=(-max_len=4096 -timeout=30 -artifact_prefix="Fuzz/Crashes/$target/")
    if [[ "$leaks_after_the_run" == *" $target "* ]]; then leaks=(-detect_leaks=0); fi
    BLE_FUZZ_TARGET="$target" "$driver" "${inputs[@]}" "${budget[@]}" "${common[@]}" "${leaks[@]}" \
        -print_final_stats=1 > "$log" 2>&1 || status=$?
    if [ "$status" -eq 0 ] && [ ${#leaks[@]} -gt 0 ]; then
        BLE_FUZZ_TARGET="$target" "$driver" "${inputs[@]}" -runs=0 "${common[@]}" > "$log.leaks" 2>&1 || status=$?
    fi
    local elapsed=$(( $(date +%s) - start ))
    local executed rate
    executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
    if [ "$status" -eq 0 ]; then
        echo "ok      $target: ${executed:-?} executions in ${elapsed}s (${rate:-?} exec/s)" > "$log.summary"
    else
        echo "FAILED  $target: exit $status after ${elapsed}s; see $log* and Fuzz/Crashes/$target/" > "$log.summary"
    fi
    cat "$log.summary"
}

echo "== fuzzing ${#targets[@]} target(s): ${targets[*]}"
running=0
for target in "${targets[@]}"; do
    fuzz_one "$target" &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
done
wait || true

failed=()
for target in "${targets[@]}"; do
    grep -q '^ok ' ".build-fuzz/logs/$target.log.summary" || failed+=("$target")
done

if [ "$merge" -eq 1 ]; then
    echo "== minimising the corpora"
    for target in "${targets[@]}"; do
        merged=".build-fuzz/merged/$target"
        rm -rf "$merged" && mkdir -p "$merged"
        if ! BLE_FUZZ_TARGET="$target" "$driver" -merge=1 "$merged" "Fuzz/Corpus/$target" ".build-fuzz/corpus/$target" \
            -max_len=4096 -timeout=30 -detect_leaks=0 > ".build-fuzz/logs/$target.merge.log" 2>&1; then
            echo "$target: the merge failed; see .build-fuzz/logs/$target.merge.log" >&2
            failed+=("$target")
            continue
        fi
        # The hand-written seeds keep their names (tests read some of them by name; a merge names inputs by
        # their SHA-1): each goes back beside the merged inputs, and its hashed copy, if the merge kept it, goes.
        for seed in "Fuzz/Corpus/$target"/*; do
            name=$(basename "$seed")
            [[ "$name" =~ ^[0-9a-f]{40}$ ]] && continue
            rm -f "$merged/$(sha1sum < "$seed" | cut -c1-40)"
            cp "$seed" "$merged/$name"
        done
        rm -rf "Fuzz/Corpus/$target" && mv "$merged" "Fuzz/Corpus/$target"
        echo "$target: $(ls "Fuzz/Corpus/$target" | wc -l) inputs, $(du -sk "Fuzz/Corpus/$target" | cut -f1) KiB"
    done
fi

if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz.sh: failed: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz.sh: every target passed"
