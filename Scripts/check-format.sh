#!/usr/bin/env bash
# Checks the house style (.swift-format: 4-space indentation, 120 columns) with the toolchain's own
# `swift format lint --strict`. Formatting output differs between swift-format versions, so the check runs only
# with the toolchain the repository is formatted and tested with (FORMAT_TOOLCHAIN below); any other toolchain
# says so and skips it. To format after a change: `swift format format -i -r -p Sources Tests Fuzz Plugins Package.swift`.
set -euo pipefail
cd "$(dirname "$0")/.."

FORMAT_TOOLCHAIN="6.3.1"
version=$(swift --version 2>/dev/null | sed -n 's/.*Swift version \([0-9.]*\).*/\1/p' | head -n 1)
if [ "$version" != "$FORMAT_TOOLCHAIN" ]; then
    echo "swift format lint skipped: this is Swift ${version:-unknown}, the house style is checked with $FORMAT_TOOLCHAIN"
    exit 0
fi
swift format lint --strict --recursive --parallel Sources Tests Fuzz Plugins Package.swift
echo "swift format lint --strict: clean (Swift $version)"
