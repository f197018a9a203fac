#!/usr/bin/env bash
# Installs what the interop tests need, idempotently, so a fresh clone on a fresh machine passes:
#   - a Python virtual environment in .venv (git-ignored) with the independent peers, pinned:
#     Bumble (Google's Python Bluetooth stack) and RootCanal 1.10.0 (Android's virtual controller;
#     later versions need a newer C library than Debian 12 has);
#   - pyte (a terminal emulator), which the shell's keystroke tests read the screen with;
#   - tshark (Debian's package), which reads our btsnoop captures;
#   - SQLite's development files (Debian's libsqlite3-dev), which GRDB, the system store's SQLite layer, links.
set -euo pipefail
cd "$(dirname "$0")/.."

BUMBLE_VERSION=0.0.236
ROOTCANAL_VERSION=1.10.0
PYTE_VERSION=0.8.2

if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
want="bumble==$BUMBLE_VERSION rootcanal==$ROOTCANAL_VERSION pyte==$PYTE_VERSION"
if ! .venv/bin/python -c "import importlib.metadata as m; assert m.version('bumble')=='$BUMBLE_VERSION' and m.version('rootcanal')=='$ROOTCANAL_VERSION' and m.version('pyte')=='$PYTE_VERSION'" 2>/dev/null; then
    .venv/bin/pip install --quiet --disable-pip-version-check $want
fi

missing=""
command -v tshark >/dev/null 2>&1 || missing="$missing tshark"
[ -f /usr/include/sqlite3.h ] || missing="$missing libsqlite3-dev"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ]; then sudo=""; else sudo="sudo"; fi
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq >/dev/null
    $sudo apt-get install -y -qq $missing >/dev/null
fi
echo "peers: bumble $BUMBLE_VERSION, rootcanal $ROOTCANAL_VERSION, pyte $PYTE_VERSION in .venv; $(tshark --version 2>/dev/null | head -1)"
