#!/usr/bin/env python3
"""Checks README.md as a newcomer reads it, after `swift build` (which compiles its Swift example: the
readme-example target, whose main.swift the ReadmeSnippets plugin extracts from the README at build time).

1. Each package manifest in a ```swift block (one that starts with `// swift-tools-version`) is evaluated by
   `swift package dump-package` in a scratch folder, and must depend on swift-ble's `BLE` product.
2. The example program, built as printed, is run: what it prints must be the ```text block that follows it.
3. Every relative link points to a file of the repository, the README stays within 12 KB, and it names no
   issue, seed or document that is not in the repository.
"""

import json
import os
import re
import shutil
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
SCRATCH = os.path.join(ROOT, ".build-readme")  # git-ignored (.build-*)
LIMIT = 12 * 1024
FORBIDDEN = [r"\bissue\s+#?\d", r"\bseed[- ]0\d\d", r"shared/", r"IOS-RULES", r"PEERS\.md"]

failures = []


def fail(message):
    failures.append(message)
    print(f"check-readme: {message}", file=sys.stderr)


def blocks(text):
    """(info string, first line number, code) of every fenced block, in order."""
    found = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = re.match(r"^\s*```(\S*)\s*$", lines[i])
        if match:
            info, start = match.group(1), i + 1
            j = start
            while j < len(lines) and lines[j].strip() != "```":
                j += 1
            if j == len(lines):
                fail(f"README.md:{i + 1}: a fenced block never ends")
                return found
            found.append((info, start + 1, "\n".join(lines[start:j])))
            i = j
        i += 1
    return found


def check_manifest(index, line, code):
    folder = os.path.join(SCRATCH, f"manifest-{index}")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    with open(os.path.join(folder, "Package.swift"), "w") as f:
        f.write(code + "\n")
    run = subprocess.run(["swift", "package", "dump-package"], cwd=folder, capture_output=True, text=True)
    if run.returncode != 0:
        fail(f"README.md:{line}: the package manifest does not evaluate:\n{run.stderr}{run.stdout}")
        return
    manifest = json.loads(run.stdout)
    urls = [d.get("sourceControl", [{}])[0].get("location", {}).get("remote", [{}])[0].get("urlString", "")
            for d in manifest.get("dependencies", []) if "sourceControl" in d]
    if not any(u.rstrip("/").removesuffix(".git").endswith("/swift-ble") for u in urls):
        fail(f"README.md:{line}: the manifest does not depend on a swift-ble repository (found {urls})")
    products = [p.get("product") for t in manifest.get("targets", []) for p in t.get("dependencies", [])
                if "product" in p]
    if not any(p and p[0] == "BLE" and p[1] == "swift-ble" for p in products):
        fail(f"README.md:{line}: no target of the manifest uses the BLE product of swift-ble")
    print(f"check-readme: README.md:{line}: the manifest evaluates and depends on swift-ble's BLE product")


def check_example(found):
    program = [(i, line) for i, (info, line, code) in enumerate(found)
               if info == "swift" and not code.startswith("// swift-tools-version")]
    if not program:
        fail("README.md has no Swift example")
        return
    last = program[-1][0]
    expected = next((code for info, line, code in found[last + 1:] if info == "text"), None)
    if expected is None:
        fail(f"README.md:{found[last][1]}: the example is not followed by a ```text block of what it prints")
        return
    binary = os.path.join(ROOT, ".build", "debug", "readme-example")
    if not os.path.exists(binary):
        fail(f"{binary} is missing: run `swift build` first (it compiles the README's example)")
        return
    run = subprocess.run([binary], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        fail(f"the README's example exited with status {run.returncode}:\n{run.stderr}")
    if run.stdout.strip() != expected.strip():
        fail("the README's example printed something else than the README says:\n"
             f"--- README.md says\n{expected.strip()}\n--- the example printed\n{run.stdout.strip()}")
    else:
        print("check-readme: the README's example builds as printed and prints what the README says")


def check_text(text):
    size = len(text.encode("utf-8"))
    if size > LIMIT:
        fail(f"README.md is {size} bytes, over its limit of {LIMIT}")
    for pattern in FORBIDDEN:
        for match in re.finditer(pattern, text, re.IGNORECASE):
            line = text.count("\n", 0, match.start()) + 1
            fail(f"README.md:{line}: names something a reader of the repository cannot see ({match.group(0)!r})")
    for match in re.finditer(r"\]\(([^)#\s]+)(#[^)]*)?\)", text):
        target = match.group(1)
        if re.match(r"^[a-z]+:", target):
            continue
        if not os.path.exists(os.path.join(ROOT, target)):
            line = text.count("\n", 0, match.start()) + 1
            fail(f"README.md:{line}: the link to {target} leads nowhere")


def main():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    check_text(text)
    found = blocks(text)
    for index, (info, line, code) in enumerate(found):
        if info == "swift" and code.startswith("// swift-tools-version"):
            check_manifest(index, line, code)
    check_example(found)
    if failures:
        print(f"check-readme: {len(failures)} problem(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
