#!/usr/bin/env python3
"""Runs `ble demo` and checks that it shows every step of the central flow, in order, and that the same
seed prints the same run twice."""
import re
import subprocess
import sys

STEPS = [
    ("state", r"phone\s+state poweredOn"),
    ("scan", r"phone\s+scanning for peripherals advertising Heart Rate \(180D\)"),
    ("discovered", r"phone\s+discovered HRM-Demo rssi -\d+ dBm services \[180D, 180F\]"),
    ("stop scan", r"phone\s+stopped scanning"),
    ("connected", r"phone\s+connected to HRM-Demo"),
    ("services", r"phone\s+services: .*Heart Rate \(180D\).*Battery \(180F\).*Device Information \(180A\)"),
    ("characteristics", r"phone\s+characteristics of Heart Rate: .*2A37.*\[notify\].*2A38.*\[read\].*2A39.*\[write\]"),
    ("body sensor location", r"phone\s+body sensor location: Chest"),
    ("subscribed", r"phone\s+subscribed to Heart Rate Measurement"),
    ("measurement", r"phone\s+heart rate \d+ bpm"),
    ("wrote", r"phone\s+wrote 01 .* to Heart Rate Control Point"),
    ("unsubscribed", r"phone\s+unsubscribed from Heart Rate Measurement"),
    ("disconnected", r"phone\s+disconnected$"),
]


def run():
    result = subprocess.run(["swift", "run", "--skip-build", "ble", "demo"], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        print(result.stdout + result.stderr)
        sys.exit(f"ble demo exited with {result.returncode}")
    return [l for l in result.stdout.splitlines() if l.startswith("[")]


def main():
    subprocess.run(["swift", "build", "--product", "ble"], check=True, capture_output=True)
    lines = run()
    stamp = re.compile(r"^\[\s*\d+\.\d{3}s\] ")
    position = 0
    for name, pattern in STEPS:
        regex = re.compile(pattern)
        found = next((i for i in range(position, len(lines)) if regex.search(lines[i]) and stamp.match(lines[i])), None)
        if found is None:
            print("\n".join(lines))
            sys.exit(f"the demo does not show the step '{name}' after line {position}")
        position = found + (0 if name == "measurement" else 1)
    measurements = [l for l in lines if re.search(r"phone\s+heart rate \d+ bpm", l)]
    if len(measurements) < 5:
        sys.exit(f"the demo shows {len(measurements)} measurements; at least 5 expected")
    if run() != lines:
        sys.exit("the same seed printed a different run")
    print(f"ble demo shows all {len(STEPS)} steps ({len(lines)} lines, {len(measurements)} measurements), identically twice")


if __name__ == "__main__":
    main()
