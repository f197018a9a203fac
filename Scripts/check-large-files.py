#!/usr/bin/env python3
"""Fails when a file tracked by git is larger than 1 MiB, unless it lies in the fuzz corpora (Fuzz/Corpus,
Fuzz/Regressions), whose inputs the fuzzers make and minimise. A capture, a store, a profiler's dump or a build
product committed by mistake is caught here; .gitignore keeps the usual ones out in the first place."""

import os
import subprocess
import sys

LIMIT = 1024 * 1024
EXEMPT = ("Fuzz/Corpus/", "Fuzz/Regressions/")


def main() -> int:
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    os.chdir(root)
    listed = subprocess.run(["git", "ls-files", "-z"], check=True, capture_output=True).stdout
    too_large = []
    for raw in listed.split(b"\0"):
        if not raw:
            continue
        path = raw.decode("utf-8", "surrogateescape")
        if path.startswith(EXEMPT):
            continue
        try:
            size = os.lstat(path).st_size
        except FileNotFoundError:  # deleted in the work tree, still in the index: nothing to measure
            continue
        if size > LIMIT:
            too_large.append((path, size))
    for path, size in too_large:
        print(f"check-large-files: {path} is {size} bytes, over the 1 MiB ({LIMIT} bytes) a tracked file may have"
              " outside the fuzz corpora", file=sys.stderr)
    if too_large:
        print("check-large-files: take it out of git (git rm --cached FILE) or keep it somewhere else",
              file=sys.stderr)
        return 1
    print("check-large-files: no tracked file over 1 MiB outside the fuzz corpora")
    return 0


if __name__ == "__main__":
    sys.exit(main())
