#!/usr/bin/env bash
# The Swift test suite under ThreadSanitizer and AddressSanitizer.
#
#   Scripts/sanitizers.sh [thread|address|all] [--filter REGEX]
#
# Each sanitizer builds in a folder of its own (.build-tsan, .build-asan; git-ignored) and runs `swift test` there;
# any report fails the run (the sanitizers' exit code). Under ThreadSanitizer the code is compiled with
# -DBLE_TSAN, which gives every module a `Mutex` the sanitizer understands (BLETransport's SanitizedMutex: the
# standard library's locks with atomics in a library that is not instrumented, so the sanitizer would see every
# access under a lock as a race), and with MemberImportVisibility off (that `Mutex` comes from BLETransport, which
# not every file imports). The test command runs the thread-sanitized host, system and API tests.
set -euo pipefail
cd "$(dirname "$0")/.."

which="${1:-all}"
shift || true
filter=()
if [[ "${1:-}" == "--filter" ]]; then
    filter=(--filter "$2")
fi

run() {
    local name="$1" folder="$2"
    shift 2
    echo "== $name sanitizer: build"
    swift build --build-tests --scratch-path "$folder" "$@"
    echo "== $name sanitizer: tests ${filter[*]:-(all)}"
    swift test --skip-build --scratch-path "$folder" "$@" "${filter[@]}"
}

case "$which" in
thread)
    TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 exitcode=66}" run thread .build-tsan --sanitize=thread -Xswiftc -DBLE_TSAN \
        -Xswiftc -disable-upcoming-feature -Xswiftc MemberImportVisibility
    ;;
address)
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" run address .build-asan --sanitize=address
    ;;
all)
    "$0" thread "${@}"
    "$0" address "${@}"
    ;;
*)
    echo "usage: Scripts/sanitizers.sh [thread|address|all] [--filter REGEX]" >&2
    exit 64
    ;;
esac
