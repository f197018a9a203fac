#!/usr/bin/env python3
"""Checks the `ble` tool against its simulated world, as a user (or the external harness) sees it: command
names, JSON shapes, hex output, error lines and exit codes. Runs the already-built `.build/debug/ble` with
BLE_SIM_SPEED=fast, so virtual time runs as fast as possible; every run is bounded by a wall-clock timeout.
Standard library only."""
import atexit
import contextlib
import json
import math
import os
import re
import select
import shutil
import signal
import socket
import sqlite3
import subprocess
import tempfile
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLE = os.path.join(ROOT, ".build", "debug", "ble")
# The tool keeps each device's system store under $XDG_STATE_HOME: a folder of this run's own, removed at exit,
# so nothing of the user's state is read or written and every run starts alike.
STATE_HOME = tempfile.mkdtemp(prefix="ble-cli-state-")
atexit.register(shutil.rmtree, STATE_HOME, True)
ENV = dict(os.environ, BLE_SIM_SPEED="fast", XDG_STATE_HOME=STATE_HOME)
# The private, deterministic radio: the shared room (the default) has tests of its own (test_room.py).
ENV["BLE_TRANSPORT"] = "virtual"

DOOR_COMMAND = "8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B"
DOOR_SERVICE = "8D3E0001-5C1A-4F2B-9E6A-0C1D2E3F4A5B"
PRINT_DATA = "5E1D0002-7A3B-4C8D-9E0F-1A2B3C4D5E6F"
HEX_LINE = re.compile(r"^[0-9a-f]+$")
ISO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UUID_FORM = re.compile(r"^([0-9A-F]{4}|[0-9A-F]{8}|[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12})$")

# Exit statuses, as BLE.docc/CommandLineTool.md documents them.
EXIT_ATT_ERROR = 5
EXIT_NO_SUCH_DEVICE = 3
EXIT_NOT_CONNECTABLE = 4
EXIT_NO_SUCH_CHARACTERISTIC = 7


def ble(*args, timeout=60):
    return subprocess.run([BLE, *args], capture_output=True, text=True, timeout=timeout, env=ENV)


def serve_until(args, marker, stdin=None, seconds=30):
    """Runs `ble ARGS` until a line of its output contains `marker` (within `seconds`), then stops it with SIGINT;
    returns a CompletedProcess with everything it printed."""
    process = subprocess.Popen([BLE, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=ENV)
    try:
        if stdin is not None:
            process.stdin.write(stdin.encode())
            process.stdin.flush()
        reader = LineReader(process.stdout)
        lines = []
        while not lines or marker not in lines[-1]:
            lines.append(reader.line(seconds))
        process.send_signal(signal.SIGINT)
        rest, err = process.communicate(timeout=seconds)
        out = "\n".join(lines) + "\n" + reader.pending.decode() + rest.decode()
        return subprocess.CompletedProcess(args, process.returncode, out, err.decode())
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(10)


class LineReader:
    """Lines of a child's output, read from its file descriptor without buffering, each within a deadline
    (never an endless wait)."""

    def __init__(self, stream):
        self.fd = stream.fileno()
        self.pending = b""

    def line(self, seconds):
        deadline = time.monotonic() + seconds
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.fd], [], [], max(0, left))
            if not ready:
                raise AssertionError(f"no whole line within {seconds} s (so far: {self.pending!r})")
            chunk = os.read(self.fd, 4096)
            if not chunk:
                raise AssertionError(f"the output ended (so far: {self.pending!r})")
            self.pending += chunk
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()


class ScanTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        result = ble("scan", "--json", "--timeout", "3")
        assert result.returncode == 0, result.stderr
        cls.records = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]

    def test_every_device_of_the_world_is_listed_once(self):
        names = [r["name"] for r in self.records]
        for name in ["HRM-Demo", "Thermometer", "DoorLock", "Printer", "Camera", "Environment Hub"]:
            self.assertEqual(names.count(name), 1, names)
        self.assertEqual(names.count(None), 2, "the iBeacon and the Eddystone beacon advertise no name")
        self.assertEqual(len({r["address"] for r in self.records}), 8)

    def test_exact_keys_and_types(self):
        keys = ["address", "addressType", "identifier", "name", "rssi", "serviceUUIDs", "manufacturerData",
                "serviceData", "connectable",
                # Added by the scan detail, after the original keys.
                "advertisingType", "flags", "txPowerLevel", "scanResponseFields", "iBeacon", "eddystone",
                "rawAdvertisement", "rawScanResponse",
                # Added with the scan's time and statistics.
                "nameShortened", "time", "firstSeen", "lastSeen", "age", "packets", "rssiMin", "rssiAverage",
                "rssiMax", "rssiHistory", "advertisingInterval"]
        for r in self.records:
            self.assertEqual(list(r.keys()), keys)
            self.assertRegex(r["address"], r"^([0-9A-F]{2}:){5}[0-9A-F]{2}$")
            self.assertIn(r["addressType"], ["public", "random"])
            self.assertRegex(r["identifier"], r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")
            self.assertTrue(r["name"] is None or isinstance(r["name"], str))
            self.assertIsInstance(r["rssi"], int)
            self.assertLess(r["rssi"], 0)
            self.assertIsInstance(r["serviceUUIDs"], list)
            for uuid in r["serviceUUIDs"]:
                self.assertRegex(uuid, UUID_FORM)
            self.assertTrue(r["manufacturerData"] is None or HEX_LINE.match(r["manufacturerData"]))
            self.assertTrue(r["serviceData"] is None or isinstance(r["serviceData"], dict))
            for uuid, data in (r["serviceData"] or {}).items():
                self.assertRegex(uuid, UUID_FORM)
                self.assertRegex(data, HEX_LINE)
            self.assertIsInstance(r["connectable"], bool)
            self.assertIn(r["advertisingType"], ["ADV_IND", "ADV_DIRECT_IND", "ADV_SCAN_IND", "ADV_NONCONN_IND"])
            self.assertEqual(r["connectable"], r["advertisingType"] in ["ADV_IND", "ADV_DIRECT_IND"])
            self.assertTrue(r["flags"] is None or all(isinstance(f, str) for f in r["flags"]))
            self.assertTrue(r["txPowerLevel"] is None or isinstance(r["txPowerLevel"], int))
            self.assertIsInstance(r["scanResponseFields"], list)
            self.assertRegex(r["rawAdvertisement"], r"^([0-9a-f]{2})*$")
            self.assertTrue(r["rawScanResponse"] is None or re.match(r"^([0-9a-f]{2})*$", r["rawScanResponse"]))
            self.assertIs(r["nameShortened"], False)
            for key in ("time", "firstSeen", "lastSeen"):
                self.assertRegex(r[key], ISO_TIME)
            self.assertIsInstance(r["age"], float)
            self.assertIsInstance(r["packets"], int)
            self.assertEqual(r["packets"], 1, "each device is printed at its first report")
            self.assertEqual((r["rssiMin"], r["rssiMax"], r["rssiHistory"]), (r["rssi"], r["rssi"], [r["rssi"]]))
            self.assertIsNone(r["advertisingInterval"], "not measured from one report")

    def test_devices_differ_as_a_room_would(self):
        by_name = {r["name"]: r for r in self.records if r["name"]}
        self.assertEqual(by_name["HRM-Demo"]["serviceUUIDs"], ["180D", "180F"])
        self.assertEqual(by_name["HRM-Demo"]["addressType"], "public")
        self.assertEqual(by_name["Thermometer"]["addressType"], "random")
        self.assertEqual(by_name["DoorLock"]["serviceUUIDs"], [DOOR_SERVICE])
        self.assertFalse(by_name["Environment Hub"]["connectable"])
        self.assertTrue(by_name["HRM-Demo"]["connectable"])
        beacon = [r for r in self.records if (r["manufacturerData"] or "").startswith("4c000215")]
        self.assertEqual(len(beacon), 1, "an iBeacon with Apple's company identifier")
        self.assertFalse(beacon[0]["connectable"])
        self.assertTrue(any("FEAA" in r["serviceUUIDs"] for r in self.records), "an Eddystone beacon")
        self.assertTrue(
            any((r["serviceData"] or {}).get("FEAA", "").startswith("10") for r in self.records),
            "the Eddystone beacon's URL frame (type 0x10) in its service data")
        self.assertGreater(len({r["rssi"] for r in self.records}), 3, "devices at different distances")

    def test_service_filter(self):
        result = ble("scan", "--json", "--timeout", "3", "--service", "180D")
        self.assertEqual(result.returncode, 0, result.stderr)
        records = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual([r["name"] for r in records], ["HRM-Demo"])

    def test_beacons_are_decoded(self):
        ibeacon = [r for r in self.records if r["iBeacon"]]
        self.assertEqual(len(ibeacon), 1)
        self.assertEqual(ibeacon[0]["iBeacon"], {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 1,
                                                 "minor": 42, "measuredPower": -59})
        self.assertEqual(ibeacon[0]["advertisingType"], "ADV_NONCONN_IND")
        self.assertIsNone(ibeacon[0]["eddystone"])
        eddystone = [r for r in self.records if r["eddystone"]]
        self.assertEqual(len(eddystone), 1)
        self.assertEqual(eddystone[0]["eddystone"], {"frame": "URL", "txPower": -20, "url": "https://swift.org"})
        self.assertEqual(eddystone[0]["advertisingType"], "ADV_NONCONN_IND")
        self.assertIsNone(eddystone[0]["iBeacon"])
        self.assertIsNone(eddystone[0]["rawScanResponse"], "a non-scannable PDU has no scan response")
        self.assertIn("16aafe10ec03", eddystone[0]["rawAdvertisement"], "the service data structure, as sent")

    def test_scan_response_is_marked(self):
        hub = next(r for r in self.records if r["name"] == "Environment Hub")
        self.assertEqual(hub["advertisingType"], "ADV_SCAN_IND")
        self.assertEqual(hub["scanResponseFields"], ["name"], "the complete name came in the scan response")
        self.assertEqual(hub["rawScanResponse"], "1009" + "Environment Hub".encode().hex())
        self.assertEqual(hub["flags"], ["LE General Discoverable", "BR/EDR Not Supported"])
        hrm = next(r for r in self.records if r["name"] == "HRM-Demo")
        self.assertEqual(hrm["advertisingType"], "ADV_IND")
        self.assertEqual(hrm["scanResponseFields"], [])

    def test_a_passive_scan_hears_no_scan_response(self):
        result = ble("scan", "--timeout", "2", "--json", "--passive", "--name", "Environ")
        self.assertEqual(result.returncode, 0, result.stderr)
        hub = json.loads(result.stdout.splitlines()[0])
        self.assertEqual((hub["name"], hub["nameShortened"], hub["scanResponseFields"]), ("Environm", True, []))

    def test_text_output_shows_the_detail_in_plain_lines(self):
        result = ble("scan", "--timeout", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("\x1b", result.stdout, "no escape sequences outside a terminal")
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 8, "one line per device")
        for line, record in zip(sorted(lines, key=lambda l: l.split()[1]),
                                sorted(self.records, key=lambda r: r["address"])):
            # The time it came, the address, its type and the identifier a TARGET may be.
            time_, address, kind, identifier = line.split()[:4]
            self.assertRegex(time_, ISO_TIME)
            self.assertEqual((address, kind, identifier), (record["address"], record["addressType"],
                                                           record["identifier"]))
        hub = next(line for line in lines if "Environment Hub" in line)
        self.assertIn('"Environment Hub" (scan response)', hub)
        self.assertIn("ADV_SCAN_IND", hub)
        self.assertIn("flags: LE General Discoverable, BR/EDR Not Supported", hub)
        self.assertTrue(any("iBeacon E2C56DB5-DFFB-48D2-B060-D0F5A71096E0 major 1 minor 42" in line for line in lines))
        self.assertTrue(any("Eddystone-URL https://swift.org" in line for line in lines))

    def test_raw_prints_advertisement_and_scan_response_apart(self):
        result = ble("scan", "--timeout", "3", "--raw", "--name", "environment")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertNotIn("\x1b", result.stdout)
        lines = result.stdout.splitlines()
        self.assertIn('"Environment Hub" (scan response)', lines[0])
        self.assertEqual(lines[1], "    advertisement (ADV_SCAN_IND, 31 octets):")
        self.assertEqual(lines[2], "      len 2  Flags (0x01): 06")
        self.assertIn("      len 9  Shortened Local Name (0x08): " + "Environm".encode().hex() + "  \"Environm\"", lines)
        index = lines.index("    scan response (SCAN_RSP, 17 octets):")
        self.assertEqual(lines[index + 1], "      len 16  Complete Local Name (0x09): " + "Environment Hub".encode().hex()
                         + "  \"Environment Hub\"")

    def test_name_filter_ignores_case(self):
        result = ble("scan", "--json", "--timeout", "3", "--name", "hUb")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual([json.loads(line)["name"] for line in result.stdout.splitlines()], ["Environment Hub"])
        result = ble("scan", "--json", "--timeout", "3", "--name", "nothing like it")
        self.assertEqual((result.returncode, result.stdout), (0, ""))

    def test_rssi_filter_keeps_the_stronger_reports(self):
        result = ble("scan", "--json", "--timeout", "3", "--rssi", "-60")
        self.assertEqual(result.returncode, 0, result.stderr)
        records = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertTrue(records)
        self.assertTrue(all(r["rssi"] >= -60 for r in records), [r["rssi"] for r in records])
        names = {r["name"] for r in records}
        self.assertIn("HRM-Demo", names, "the nearest device")
        self.assertLess(len({r["address"] for r in records}), 8, "the far devices are left out")
        self.assertOneError(ble("scan", "--rssi", "-200"), "--rssi")

    def test_sort_lists_each_device_once_in_order(self):
        for order, key in [("rssi", lambda r: -r["rssi"]), ("address", lambda r: r["address"]),
                           ("name", lambda r: (r["name"] is None, (r["name"] or "").lower()))]:
            result = ble("scan", "--json", "--timeout", "3", "--sort", order)
            self.assertEqual(result.returncode, 0, result.stderr)
            records = [json.loads(line) for line in result.stdout.splitlines()]
            self.assertEqual(len(records), 8, order)
            self.assertEqual(records, sorted(records, key=key), order)
        text = ble("scan", "--timeout", "3", "--sort", "name")
        names = [re.search(r'"([^"]+)"', line) for line in text.stdout.splitlines()]
        self.assertEqual([m.group(1) for m in names if m],
                         ["Camera", "DoorLock", "Environment Hub", "HRM-Demo", "Printer", "Thermometer"])
        self.assertOneError(ble("scan", "--sort", "rssi", "--duplicates"), "--sort")

    def assertOneError(self, result, mention):
        self.assertNotEqual(result.returncode, 0)
        self.assertIn(mention, result.stderr)

    def test_live_view_uses_the_alternate_screen(self):
        """Under a pseudo-terminal: the table goes on the alternate screen, is redrawn in place (never a full
        clear), fits a window of 6 rows, and the final table is printed on the normal screen after it."""
        import fcntl
        import pty
        import struct
        import termios
        pid, fd = pty.fork()
        if pid == 0:
            os.execve(BLE, [BLE, "scan", "--timeout", "0", "--sort", "rssi"], ENV)
        try:
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 6, 100, 0, 0))
            out = b""
            start = time.monotonic()
            interrupted = False
            while time.monotonic() - start < 30:
                if not interrupted and time.monotonic() - start > 2:
                    os.kill(pid, signal.SIGINT)
                    interrupted = True
                ready, _, _ = select.select([fd], [], [], 0.2)
                if ready:
                    try:
                        chunk = os.read(fd, 65536)
                    except OSError:
                        break
                    if not chunk:
                        break
                    out += chunk
            # How long the view lived: the redraw rate is checked against it (a loaded machine delays the
            # interrupt's effect, and the view rightly goes on redrawing meanwhile).
            lived = time.monotonic() - start
            _, status = os.waitpid(pid, 0)
        finally:
            os.close(fd)
        self.assertEqual(os.waitstatus_to_exitcode(status), 0, out[-500:])
        self.assertTrue(out.startswith(b"\x1b[?1049h"), out[:100])
        self.assertNotIn(b"\x1b[2J", out, "redrawn in place, not cleared")
        leave = out.index(b"\x1b[?1049l")
        live, final = out[:leave], out[leave + len(b"\x1b[?1049l"):]
        self.assertIn(b"\x1b[?25h", live[-20:], "the cursor is shown again")
        frames = live.split(b"\x1b[H")[1:]
        self.assertGreater(len(frames), 1, "redrawn as reports come")
        self.assertLessEqual(len(frames), 2 + 10 * math.ceil(lived), f"at most ten redraws a second ({lived:.1f} s)")
        last = frames[-1].split(b"\r\n")
        self.assertTrue(last[0].startswith(b"8 devices, sorted by rssi"), last[0])
        self.assertEqual(len(last), 6, "the window's height")
        self.assertTrue(last[1].startswith(b"ADDRESS            RSSI  MIN/AVG/MAX"), last[1])
        self.assertIn(b"5 more", last[-1])
        self.assertNotIn(b"\x1b", final, "the final table is plain text")
        rows = final.decode().split("\r\n")
        self.assertEqual(rows[0], "8 devices, sorted by rssi")
        self.assertIn("HRM-Demo", rows[1], "the nearest first")
        # At the end each device in full: its identifier and what the scan measured.
        self.assertRegex(rows[1], r"  [0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}  ")
        self.assertRegex(rows[1], r"\d+ reports, rssi -\d+/-\d+/-\d+ dBm \(min/avg/max\)")

    def test_live_table_rows_fit_80_columns(self):
        """In an 80-column window each row shows the address, RSSI, its range, reports, interval and age before
        the name, without being cut; --wide shows the whole lines instead (cut at the window's edge)."""
        out = live_scan(["scan", "--timeout", "0"], rows=24, columns=80)
        frames = out[:out.index(b"\x1b[?1049l")].split(b"\x1b[H")[1:]
        last = [re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", row).rstrip(b"\r").decode() for row in frames[-1].split(b"\r\n")]
        self.assertEqual(last[1].split(), ["ADDRESS", "RSSI", "MIN/AVG/MAX", "PKTS", "INTVL", "SEEN", "NAME"])
        hrm = next(row for row in last if "HRM-Demo" in row)
        self.assertRegex(hrm, r"^00:1B:DC:0A:12:34   -\d\d  -\d\d/-\d\d/-\d\d  +\d+  +(-|\d+ ms)  \d\.\ds +HRM-Demo  180D")
        self.assertTrue(all(len(row) <= 80 for row in last), last)
        wide = live_scan(["scan", "--timeout", "0", "--wide"], rows=24, columns=80)
        frames = wide[:wide.index(b"\x1b[?1049l")].split(b"\x1b[H")[1:]
        self.assertNotIn(b"ADDRESS            RSSI", frames[-1])
        self.assertIn(b"00:1B:DC:0A:12:34  public  ", frames[-1])

    def test_statistics_of_each_device(self):
        result = ble("scan", "--json", "--timeout", "3", "--sort", "address")
        self.assertEqual(result.returncode, 0, result.stderr)
        records = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual(len(records), 8)
        for r in records:
            self.assertGreaterEqual(r["packets"], 4, r)
            self.assertLessEqual(r["rssiMin"], r["rssiAverage"])
            self.assertLessEqual(r["rssiAverage"], r["rssiMax"])
            self.assertEqual(r["rssiHistory"][-1], r["rssi"])
            self.assertLessEqual(len(r["rssiHistory"]), 16)
            self.assertLessEqual(r["firstSeen"], r["lastSeen"])
            self.assertEqual(r["time"], r["lastSeen"])
            # The world's devices advertise every 100 ms, each event delayed by up to 10 ms more.
            self.assertGreaterEqual(r["advertisingInterval"], 100, r)
            self.assertLessEqual(r["advertisingInterval"], 115, r)
            self.assertLess(r["age"], 1)
        text = ble("scan", "--timeout", "3", "--sort", "address")
        hrm = next(line for line in text.stdout.splitlines() if "HRM-Demo" in line)
        self.assertRegex(hrm, r"  \d+ reports, rssi -\d+/-\d+/-\d+ dBm \(min/avg/max\), interval 1\d\d ms, "
                              r"last seen \d\.\d s ago$")

    def test_duplicates_print_each_report_with_its_time(self):
        result = ble("scan", "--timeout", "2", "--duplicates", "--address", "00:1B:DC:0A:12:34")
        self.assertEqual(result.returncode, 0, result.stderr)
        times = [line.split()[0] for line in result.stdout.splitlines()]
        self.assertGreater(len(times), 4)
        self.assertEqual(times, sorted(times))
        self.assertEqual(len(set(times)), len(times), "each report its own time")

    def test_address_manufacturer_and_connectable_filters(self):
        def names(*args):
            result = ble("scan", "--json", "--timeout", "2", *args)
            self.assertEqual(result.returncode, 0, result.stderr)
            return sorted(json.loads(line)["address"] for line in result.stdout.splitlines())
        self.assertEqual(names("--address", "00:1b:dc"), ["00:1B:DC:0A:12:34", "00:1B:DC:0A:56:78"])
        self.assertEqual(names("--address", "00:1B:DC:0A:12:34", "--address", "00:1B:DC:0A:56"),
                         ["00:1B:DC:0A:12:34", "00:1B:DC:0A:56:78"])
        beacon = next(r for r in self.records if r["iBeacon"])
        self.assertEqual(names("--manufacturer", "0x004C"), [beacon["address"]])
        self.assertEqual(names("--manufacturer", "76"), [beacon["address"]])
        connectable = names("--connectable")
        self.assertEqual(connectable, sorted(r["address"] for r in self.records if r["connectable"]))
        for args, mention in [(["--address", "00:1G"], "--address"), (["--address", "001BDC"], "--address"),
                              (["--manufacturer", "apple"], "--manufacturer"),
                              (["--manufacturer", "0x10000"], "--manufacturer"), (["--name", ""], "--name")]:
            result = ble("scan", "--timeout", "1", *args)
            self.assertEqual(result.returncode, 64, (args, result.stderr))
            self.assertIn(mention, result.stderr)

    def test_text_output_names_the_manufacturer(self):
        result = ble("scan", "--timeout", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("HRM-Demo", result.stdout)
        self.assertIn("Apple", result.stdout)


def live_scan(args, rows, columns, interrupt_after=2, seconds=30):
    """Runs `ble ARGS` under a pseudo-terminal of `rows` by `columns`, interrupts it (SIGINT) after
    `interrupt_after` seconds and reads until it ends (within `seconds`): what it wrote."""
    import fcntl
    import pty
    import struct
    import termios
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(BLE, [BLE, *args], ENV)
    out = b""
    try:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        start = time.monotonic()
        interrupted = False
        while time.monotonic() - start < seconds:
            if not interrupted and time.monotonic() - start > interrupt_after:
                os.kill(pid, signal.SIGINT)
                interrupted = True
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        os.close(fd)
        if os.waitpid(pid, os.WNOHANG) == (0, 0):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    return out


class ExploreTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        result = ble("explore", "HRM-Demo", "--json")
        assert result.returncode == 0, result.stderr
        cls.tree = json.loads(result.stdout)

    def test_exact_shape(self):
        tree = self.tree
        self.assertEqual(list(tree.keys()), ["address", "addressType", "identifier", "name", "mtu", "services"])
        self.assertEqual(tree["addressType"], "public")
        self.assertRegex(tree["identifier"], r"^[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}$")
        self.assertEqual(tree["name"], "HRM-Demo")
        self.assertIsInstance(tree["mtu"], int)
        self.assertGreaterEqual(tree["mtu"], 23)
        for s in tree["services"]:
            self.assertEqual(list(s.keys()),
                             ["uuid", "name", "primary", "handle", "endHandle", "includedServices", "characteristics"])
            self.assertGreaterEqual(s["endHandle"], s["handle"])
            self.assertRegex(s["uuid"], UUID_FORM)
            self.assertIsInstance(s["primary"], bool)
            self.assertIsInstance(s["handle"], int)
            for c in s["characteristics"]:
                self.assertEqual(list(c.keys()),
                                 ["uuid", "name", "handle", "properties", "value", "decoded", "descriptors"])
                self.assertGreater(c["handle"], s["handle"])
                self.assertLessEqual(c["handle"], s["endHandle"])
                self.assertTrue(c["decoded"] is None or list(c["decoded"])[:3] == ["text", "value", "unit"], c)
                self.assertTrue(c["value"] is None or HEX_LINE.match(c["value"]) or c["value"] == "")
                for d in c["descriptors"]:
                    self.assertEqual(list(d.keys()), ["uuid", "name", "handle", "value", "decoded"])
                    self.assertGreater(d["handle"], c["handle"])

    def test_gap_gatt_and_heart_rate(self):
        services = {s["uuid"]: s for s in self.tree["services"]}
        for uuid in ["1800", "1801", "180D", "180F", "180A"]:
            self.assertIn(uuid, services)
        self.assertEqual(services["1800"]["name"], "Generic Access")
        name = next(c for c in services["1800"]["characteristics"] if c["uuid"] == "2A00")
        self.assertEqual(bytes.fromhex(name["value"]).decode(), "HRM-Demo")
        hr = {c["uuid"]: c for c in services["180D"]["characteristics"]}
        self.assertEqual(hr["2A37"]["properties"], ["notify"])
        self.assertEqual(hr["2A37"]["name"], "Heart Rate Measurement")
        self.assertIsNone(hr["2A37"]["value"])
        self.assertEqual(hr["2A38"]["properties"], ["read"])
        self.assertEqual(hr["2A38"]["value"], "01")
        self.assertEqual(hr["2A39"]["properties"], ["write"])
        handles = [hr[u]["handle"] for u in ["2A37", "2A38", "2A39"]]
        self.assertEqual(handles, sorted(handles))
        cccd = [d for d in hr["2A37"]["descriptors"] if d["uuid"] == "2902"]
        self.assertEqual(len(cccd), 1)
        self.assertEqual(cccd[0]["value"], "0000")
        changed = next(c for c in services["1801"]["characteristics"] if c["uuid"] == "2A05")
        self.assertEqual(changed["properties"], ["indicate"])
        self.assertEqual([d["uuid"] for d in changed["descriptors"]], ["2902"])

    def test_text_tree_decodes_values(self):
        result = ble("explore", "Thermometer")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Health Thermometer (1809)", result.stdout)
        self.assertIn("Body (general)", result.stdout)
        self.assertIn("Client Characteristic Configuration (2902)", result.stdout)

    def test_values_are_decoded_by_their_presentation_format(self):
        services = {s["uuid"]: s for s in self.tree["services"]}
        battery = next(c for c in services["180F"]["characteristics"] if c["uuid"] == "2A19")
        self.assertEqual(battery["decoded"], {"text": f"{int(battery['value'], 16)} %", "value": int(battery["value"], 16),
                                              "unit": "%"}, "a uint8 by its 2904 descriptor")
        formats = {d["uuid"]: d for d in battery["descriptors"]}
        self.assertEqual(formats["2904"]["value"], "0400ad27010000")
        self.assertEqual(formats["2904"]["name"], "Characteristic Presentation Format")
        self.assertEqual(formats["2904"]["decoded"]["text"], "format uint8, unit % (0x27AD)")
        self.assertEqual(formats["2901"]["decoded"]["value"], "Battery level in percent")
        location = next(c for c in services["180D"]["characteristics"] if c["uuid"] == "2A38")
        self.assertEqual(location["decoded"], {"text": "Chest", "value": "Chest", "unit": None},
                         "by the characteristic's SIG-assigned type")
        result = ble("explore", "HRM-Demo")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r"value: [0-9a-f]{2}  \d+ %\n")


class ValueTests(unittest.TestCase):
    def test_read_prints_hex_and_its_meaning(self):
        result = ble("read", "HRM-Demo", "2A38")
        self.assertEqual((result.returncode, result.stdout), (0, "01  Chest\n"), result.stderr)
        result = ble("read", "HRM-Demo", "2A38", "--format", "hex")
        self.assertEqual((result.returncode, result.stdout), (0, "01\n"), result.stderr)

    def test_read_decodes_by_the_presentation_format(self):
        # The battery level has a 2904 descriptor: uint8, percent.
        result = ble("read", "00:1B:DC:0A:12:34", "00002A19-0000-1000-8000-00805F9B34FB")
        self.assertEqual(result.returncode, 0, result.stderr)
        match = re.fullmatch(r"([0-9a-f]{2})  (\d+) %\n", result.stdout)
        self.assertIsNotNone(match, result.stdout)
        self.assertEqual(int(match.group(1), 16), int(match.group(2)))

    def test_read_by_identifier(self):
        scan = ble("scan", "--json", "--timeout", "3", "--service", "1809")
        identifier = json.loads(scan.stdout.splitlines()[0])["identifier"]
        result = ble("read", identifier, "2A1D")
        self.assertEqual((result.returncode, result.stdout), (0, "02  Body (general)\n"), result.stderr)

    def test_read_formats(self):
        cases = [
            (("2A38", "--format", "uint"), "1\n"),
            (("2A38", "--format", "int"), "1\n"),
            (("2A00", "--format", "utf8"), "HRM-Demo\n"),
            (("2A00", "--format", "hex"), "HRM-Demo".encode().hex() + "\n"),
            (("2A29", "--format", "utf8"), "swift-ble\n"),
        ]
        for args, expected in cases:
            with self.subTest(args=args):
                result = ble("read", "HRM-Demo", *args)
                self.assertEqual((result.returncode, result.stdout), (0, expected), result.stderr)
        value = ble("read", "HRM-Demo", "2A19", "--format", "json")
        self.assertEqual(value.returncode, 0, value.stderr)
        record = json.loads(value.stdout)
        self.assertEqual(list(record), ["uuid", "name", "hex", "decoded", "utf8", "uint", "int", "presentation"])
        self.assertEqual((record["uuid"], record["name"]), ("2A19", "Battery Level"))
        self.assertEqual(record["decoded"], {"text": f"{int(record['hex'], 16)} %", "value": int(record["hex"], 16),
                                             "unit": "%"})
        self.assertEqual(record["presentation"], {"format": "uint8", "exponent": 0, "unit": "27AD", "unitSymbol": "%",
                                                  "namespace": 1, "description": 0})
        # A value that does not fit the format asked for says so ("swift-ble" is 9 bytes).
        for fmt in ("int", "uint", "float"):
            with self.subTest(format=fmt):
                result = ble("read", "HRM-Demo", "2A29", "--format", fmt)
                self.assertEqual(result.returncode, 1, result.stdout)
                self.assertIn("Manufacturer Name String (2A29): ", result.stderr)
                self.assertIn("this value has 9 bytes", result.stderr)
        result = ble("read", "HRM-Demo", "2A38", "--format", "bogus", timeout=20)
        self.assertEqual(result.returncode, 64)
        self.assertIn("--format", result.stderr)

    def test_read_and_write_descriptors(self):
        result = ble("read", "HRM-Demo", "2A19", "--descriptor", "2901")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "Battery level in percent".encode().hex() + '  "Battery level in percent"\n')
        result = ble("read", "HRM-Demo", "2A37", "--descriptor", "2902")
        self.assertEqual((result.returncode, result.stdout), (0, "0000  notifications off, indications off\n"),
                         result.stderr)
        # The CCCD is written by subscribing, as the API does.
        result = ble("write", "HRM-Demo", "2A37", "--descriptor", "2902", "0100")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("wrote 2 bytes to Client Characteristic Configuration (2902) of Heart Rate Measurement (2A37)",
                      result.stdout)
        # Properties that do not allow it: refused before sending, as a read or a write is, with status 5.
        refused = ble("write", "HRM-Demo", "2A37", "--descriptor", "2902", "0200")
        self.assertEqual(refused.returncode, EXIT_ATT_ERROR)
        self.assertIn("does not indicate", refused.stderr)
        for args in (["subscribe", "HRM-Demo", "2A38"], ["connect", "HRM-Demo", "--subscribe", "2A38"]):
            with self.subTest(args=args):
                result = ble(*args)
                self.assertEqual(result.returncode, EXIT_ATT_ERROR, result.stderr)
                self.assertTrue(result.stderr.rstrip().endswith(
                    "so it was not sent: Request Not Supported (0x06)"), result.stderr)
        # A descriptor the peer does not let anyone write: its ATT error.
        result = ble("write", "HRM-Demo", "2A19", "--descriptor", "2901", "--text", "mine")
        self.assertEqual(result.returncode, EXIT_ATT_ERROR)
        self.assertIn("Write Not Permitted (0x03)", result.stderr)
        missing = ble("read", "HRM-Demo", "2A38", "--descriptor", "2902")
        self.assertEqual(missing.returncode, EXIT_NO_SUCH_CHARACTERISTIC)
        self.assertIn("no descriptor", missing.stderr)

    def test_read_and_write_by_handle(self):
        tree = json.loads(ble("explore", "HRM-Demo", "--json").stdout)
        heart = next(s for s in tree["services"] if s["uuid"] == "180D")
        handles = {c["uuid"]: c["handle"] for c in heart["characteristics"]}
        cccd = next(d["handle"] for c in heart["characteristics"] if c["uuid"] == "2A37" for d in c["descriptors"])
        result = ble("read", "HRM-Demo", "--handle", f"0x{handles['2A38']:04x}")
        self.assertEqual((result.returncode, result.stdout), (0, "01  Chest\n"), result.stderr)
        result = ble("read", "HRM-Demo", "--handle", str(cccd), "--format", "json")
        self.assertEqual(result.returncode, 0, result.stderr)
        record = json.loads(result.stdout)
        self.assertEqual((record["handle"], record["characteristic"], record["uuid"], record["hex"]),
                         (cccd, "2A37", "2902", "0000"))
        result = ble("write", "HRM-Demo", "--handle", f"0x{handles['2A39']:04X}", "01")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("wrote 1 byte to Heart Rate Control Point (2A39)", result.stdout)
        result = ble("write", "HRM-Demo", "--handle", str(cccd), "0100")
        self.assertEqual(result.returncode, 0, result.stderr)
        declaration = ble("read", "HRM-Demo", "--handle", str(handles["2A38"] - 1))
        self.assertEqual(declaration.returncode, EXIT_NO_SUCH_CHARACTERISTIC)
        self.assertIn(f"its value is at 0x{handles['2A38']:04X}", declaration.stderr)
        nothing = ble("read", "HRM-Demo", "--handle", "0xFFF0")
        self.assertEqual(nothing.returncode, EXIT_NO_SUCH_CHARACTERISTIC)
        self.assertIn("no attribute at handle 0xFFF0", nothing.stderr)
        both = ble("read", "HRM-Demo", "2A38", "--handle", "0x10", timeout=20)
        self.assertEqual(both.returncode, 64)

    def test_write_text_file_and_standard_input(self):
        ok = ble("write", "HRM-Demo", "2A39", "--text", "\x01")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        self.assertIn("wrote 1 byte to Heart Rate Control Point (2A39)", ok.stdout)
        refused = ble("write", "HRM-Demo", "2A39", "--text", "A")
        self.assertEqual(refused.returncode, EXIT_ATT_ERROR, "0x41 is not a control point command")
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"\x01")
            f.flush()
            result = ble("write", "HRM-Demo", "2A39", "--file", f.name)
            self.assertEqual(result.returncode, 0, result.stderr)
        for args in (["-"], ["--stdin"]):
            with self.subTest(args=args):
                result = subprocess.run([BLE, "write", "HRM-Demo", "2A39", *args], input=b"\x01",
                                        capture_output=True, timeout=60, env=ENV)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn(b"wrote 1 byte", result.stdout)
        empty = subprocess.run([BLE, "write", "HRM-Demo", "2A39", "-"], input=b"", capture_output=True, text=False,
                               timeout=60, env=ENV)
        self.assertEqual(empty.returncode, 1)
        self.assertIn(b"standard input is empty", empty.stderr)
        missing = ble("write", "HRM-Demo", "2A39", "--file", "/no/such/file", timeout=20)
        self.assertEqual(missing.returncode, 64)
        self.assertIn("--file '/no/such/file': no such file", missing.stderr)
        with tempfile.NamedTemporaryFile() as f:
            empty = ble("write", "HRM-Demo", "2A39", "--file", f.name)
            self.assertEqual(empty.returncode, 1)
            self.assertIn("is empty", empty.stderr)
        several = ble("write", "HRM-Demo", "2A39", "01", "--text", "x", timeout=20)
        self.assertEqual(several.returncode, 64)
        self.assertIn("one way", several.stderr)

    def test_write_to_read_only_is_refused_with_the_att_error(self):
        result = ble("write", "HRM-Demo", "2A38", "02")
        self.assertEqual(result.returncode, EXIT_ATT_ERROR)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn("Write Not Permitted (0x03)", lines[0])

    def test_door_lock_command(self):
        ok = ble("write", "DoorLock", DOOR_COMMAND, "00")
        self.assertEqual(ok.returncode, 0, ok.stderr)
        refused = ble("write", "DoorLock", DOOR_COMMAND, "07")
        self.assertEqual(refused.returncode, EXIT_ATT_ERROR)
        self.assertIn("0x80", refused.stderr)

    def test_heart_rate_control_point(self):
        self.assertEqual(ble("write", "HRM-Demo", "2A39", "01").returncode, 0)
        self.assertEqual(ble("write", "HRM-Demo", "2A39", "05").returncode, EXIT_ATT_ERROR)

    TIME = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"

    def test_subscribe_to_notifications(self):
        result = ble("subscribe", "HRM-Demo", "2A37", "--count", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        # Said at once, as the shell says it, before any value.
        self.assertEqual(lines.pop(0), "subscribed to Heart Rate Measurement (2A37) (notifications)")
        self.assertEqual(len(lines), 3)
        for line in lines:
            self.assertRegex(line, "^" + self.TIME + r" notify 08[0-9a-f]{6}  \d+ bpm, energy expended \d+ kJ$")

    def test_subscribe_to_indications(self):
        result = ble("subscribe", "Thermometer", "2A1C", "--count", "3")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines.pop(0), "subscribed to Temperature Measurement (2A1C) (indications)")
        self.assertEqual(len(lines), 3)
        for line in lines:
            # Flags, then a FLOAT with exponent -1.
            self.assertRegex(line, "^" + self.TIME + r" indicate 00[0-9a-f]{6}ff  \d+\.\d °C$")

    def test_subscribe_json_lines(self):
        for args in (["--json"], ["--format", "json"]):
            with self.subTest(args=args):
                result = ble("subscribe", "Thermometer", "2A1C", "--count", "2", *args)
                self.assertEqual(result.returncode, 0, result.stderr)
                records = [json.loads(line) for line in result.stdout.splitlines()]
                self.assertEqual(len(records), 2)
                for r in records:
                    self.assertEqual(list(r), ["time", "characteristic", "name", "kind", "hex", "decoded"])
                    self.assertRegex(r["time"], "^" + self.TIME + "$")
                    self.assertEqual((r["characteristic"], r["name"], r["kind"]),
                                     ("2A1C", "Temperature Measurement", "indicate"))
                    self.assertRegex(r["hex"], r"^00[0-9a-f]{6}ff$")
                    # The number and its unit apart, the text as the text output shows it.
                    self.assertEqual(r["decoded"]["unit"], "°C")
                    self.assertIsInstance(r["decoded"]["value"], float)
                    self.assertEqual(r["decoded"]["text"], f"{r['decoded']['value']} °C")
                # The notice is on stderr: standard output holds only values.
                self.assertEqual(result.stderr, "subscribed to Temperature Measurement (2A1C) (indications)\n")
                self.assertLessEqual(records[0]["time"], records[1]["time"])
        result = ble("subscribe", "HRM-Demo", "2A37", "--count", "1", "--json")
        self.assertEqual(json.loads(result.stdout)["kind"], "notify")
        result = ble("subscribe", "HRM-Demo", "2A37", "--count", "1", "--format", "hex")
        self.assertRegex(result.stdout, r"^subscribed to .*\n" + self.TIME + r" notify 08[0-9a-f]{6}\n$")

    def test_bulk_write_without_response_waits_for_room(self):
        data = bytes(range(256)) * 8
        result = ble("write", "Printer", PRINT_DATA, data.hex(), "--without-response", "--chunk")
        self.assertEqual(result.returncode, 0, result.stderr)
        waits = re.search(r"sent (\d+) writes without response, waiting for room (\d+) time", result.stdout)
        self.assertIsNotNone(waits, result.stdout)
        self.assertGreater(int(waits.group(1)), 50)
        self.assertGreater(int(waits.group(2)), 0)
        self.assertIn("wrote 2048 bytes", result.stdout)

    def test_write_without_response_too_long_for_one_write(self):
        result = ble("write", "Printer", PRINT_DATA, "00" * 100, "--without-response")
        self.assertNotEqual(result.returncode, 0)
        self.assertIn("at most 20 bytes", result.stderr)


class TypedValueTests(unittest.TestCase):
    """Values as people read and type them: typed formats, names for characteristics, JSON with stable types."""

    def shell(self, script):
        return subprocess.run([BLE, "shell"], input=script, capture_output=True, text=True, timeout=60, env=ENV)

    def test_a_typed_write_is_read_back_in_its_type(self):
        # One process (the virtual room is private to each): write the Measurement Interval as a big-endian and a
        # little-endian u16, and read it back both ways and as JSON.
        result = self.shell('connect Thermometer\n'
                            'write "Measurement Interval" --format u16 300\n'
                            'read 2A21 --format u16\n'
                            'read "measurement interval"\n'
                            'write 0x2A21 --format u16be 60 --json\n'
                            'read interval --format u16be --json\n'
                            'read 2A21 --format u32\n')
        lines = result.stdout.splitlines()
        self.assertEqual(lines[1], "wrote 2 bytes to Measurement Interval (2A21)", result.stdout)
        self.assertEqual(lines[2], "300")
        self.assertEqual(lines[3], "2c01  300 s")
        self.assertEqual(json.loads(lines[4]), {
            "uuid": "2A21", "name": "Measurement Interval", "handle": json.loads(lines[4])["handle"],
            "characteristic": None, "values": ["003c"], "bytes": 2, "withoutResponse": False, "commands": None,
            "waits": None})
        record = json.loads(lines[5])
        self.assertEqual((record["hex"], record["format"], record["value"]), ("003c", "u16be", [60]))
        self.assertEqual(record["decoded"], {"text": "15360 s", "value": 15360, "unit": "s"},
                         "the characteristic itself is little-endian")
        # Two bytes are not a u32: the reason, and the status of the first failure.
        self.assertIn("u32 takes a multiple of 4 bytes; this value has 2 bytes (003c)", result.stderr)
        self.assertEqual(result.returncode, 1, result.stderr)

    def test_typed_values_out_of_range_or_malformed_are_usage_errors(self):
        cases = [
            (["--format", "u16", "65536"], "VALUE 65536 is out of range for u16 (0 to 65535)"),
            (["--format", "s8", "-129"], "VALUE -129 is out of range for s8 (-128 to 127)"),
            (["--format", "s8", "--", "-129"], "VALUE -129 is out of range for s8 (-128 to 127)"),
            (["01", "--witout-response"], "unknown option '--witout-response'"),
            (["--format", "u8", "ten"], "VALUE 'ten' is not a u8 (an integer, 0 to 255)"),
            (["--format", "sfloat", "36.55"], "VALUE 36.55 does not fit sfloat exactly"),
            (["--format", "uint", "1"], "--format uint does not say how many bytes to write"),
            (["--format", "u16", "--text", "x"], "--format says how VALUEs and standard input are written"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                result = ble("write", "HRM-Demo", "2A39", *args, timeout=20)
                self.assertEqual(result.returncode, 64, result.stderr)
                self.assertIn(message, result.stderr.splitlines()[0])
        result = ble("write", "HRM-Demo", "2A39", "--format", "u8", "1", "--json")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(json.loads(result.stdout)["values"], ["01"])

    def test_characteristics_by_their_names(self):
        for char in ["battery level", "Battery Level", "2A19", "0x2A19", "battery"]:
            with self.subTest(char=char):
                result = ble("read", "HRM-Demo", char)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertRegex(result.stdout, r"^[0-9a-f]{2}  \d+ %\n$")
        ambiguous = ble("read", "HRM-Demo", "heart rate")
        self.assertEqual(ambiguous.returncode, 64)
        self.assertEqual(ambiguous.stderr,
                         "ble: 'heart rate' names several characteristics of HRM-Demo (00:1B:DC:0A:12:34): Heart Rate "
                         "Measurement (2A37), Heart Rate Control Point (2A39); give one of them\n")
        unknown = ble("read", "HRM-Demo", "batery level", timeout=20)
        self.assertEqual(unknown.returncode, 64)
        self.assertIn("did you mean 'Battery Level'?", unknown.stderr)
        absent = ble("read", "HRM-Demo", "Temperature Measurement")
        self.assertEqual(absent.returncode, EXIT_NO_SUCH_CHARACTERISTIC)
        self.assertIn("has no characteristic Temperature Measurement (2A1C)", absent.stderr)
        # Descriptors and services by name too; the custom ones of the room as well.
        described = ble("read", "HRM-Demo", "Battery Level", "--descriptor", "user description")
        self.assertEqual(described.stdout, "Battery level in percent".encode().hex() + '  "Battery level in percent"\n')
        lock = ble("read", "DoorLock", "Lock State")
        self.assertEqual((lock.returncode, lock.stdout), (0, "01  locked\n"), lock.stderr)
        scan = ble("scan", "--json", "--timeout", "3", "--service", "health thermometer")
        self.assertEqual([json.loads(line)["name"] for line in scan.stdout.splitlines()], ["Thermometer"])

    def test_json_types_are_stable(self):
        record = json.loads(ble("read", "HRM-Demo", "2A19", "--json").stdout)
        self.assertIsInstance(record["decoded"]["value"], int)
        self.assertEqual(record["decoded"]["unit"], "%")
        # A 64-bit integer is an exact decimal string, whatever its size; the device name's 8 bytes too.
        name = json.loads(ble("read", "HRM-Demo", "2A00", "--json").stdout)
        self.assertEqual(name["uint"], str(int.from_bytes(b"HRM-Demo", "little")))
        self.assertEqual(name["decoded"], {"text": '"HRM-Demo"', "value": "HRM-Demo", "unit": None})
        rate = json.loads(ble("subscribe", "HRM-Demo", "heart rate measurement", "--count", "1", "--json").stdout)
        self.assertEqual(list(rate["decoded"]),
                         ["text", "value", "unit", "sensorContact", "energyExpendedKJ", "rrIntervals"])
        self.assertEqual(rate["decoded"]["unit"], "bpm")
        self.assertIsInstance(rate["decoded"]["value"], int)
        self.assertIsInstance(rate["decoded"]["energyExpendedKJ"], int)
        connect = ble("connect", "HRM-Demo", "--duration", "1", "--json")
        self.assertEqual(connect.returncode, 0, connect.stderr)
        event = json.loads(connect.stdout.splitlines()[0])
        self.assertEqual(list(event), ["time", "device", "identifier", "address", "event", "mtu"])
        self.assertEqual((event["device"], event["event"], event["mtu"]), ("HRM-Demo", "connected", 517))
        with tempfile.NamedTemporaryFile() as f:
            f.write(bytes(36))
            f.flush()
            sent = ble("send", "Camera", "camera command", f.name, "--chunk", "18", "--json")
        self.assertEqual(sent.returncode, 0, sent.stderr)
        summary = json.loads(sent.stdout)
        self.assertEqual((summary["uuid"], summary["name"], summary["bytes"]), ("CA3E0002", "Camera Command", 36))
        self.assertIsInstance(summary["seconds"], float)

    def test_text_that_is_not_utf8_is_refused(self):
        result = subprocess.run([BLE.encode(), b"write", b"HRM-Demo", b"2A39", b"--text", b"bad\xff\xfe"],
                                capture_output=True, timeout=20, env=ENV)
        self.assertEqual(result.returncode, 64, result.stderr)
        self.assertIn(b"--text is not valid UTF-8 text: give its bytes as hex instead (626164fffe)", result.stderr)

    def test_hex_from_standard_input(self):
        for args, text in ((["--format", "hex", "-"], "01\n\n01\n"), (["--format", "hex", "--stdin"], "0 1\n01"),
                           (["--format", "u8", "-"], "1\n1\n")):
            with self.subTest(args=args):
                result = subprocess.run([BLE, "write", "HRM-Demo", "2A39", *args], input=text,
                                        capture_output=True, text=True, timeout=60, env=ENV)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("wrote 2 bytes to Heart Rate Control Point (2A39)", result.stdout)
        bad = subprocess.run([BLE, "write", "HRM-Demo", "2A39", "--format", "hex", "-"], input="01\nzz\n",
                             capture_output=True, text=True, timeout=60, env=ENV)
        self.assertEqual(bad.returncode, 64)
        self.assertEqual(bad.stderr, "ble: standard input line 2: 'zz' is not hex digits\n")
        # Without --format, standard input is its bytes, as before.
        raw = subprocess.run([BLE, "write", "HRM-Demo", "2A39", "-"], input=b"\x01", capture_output=True,
                             timeout=60, env=ENV)
        self.assertIn(b"wrote 1 byte", raw.stdout)

    def test_subscribe_indications_on_request(self):
        result = ble("subscribe", "Thermometer", "2A1C", "--indicate", "--count", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.splitlines()[0], "subscribed to Temperature Measurement (2A1C) (indications)")
        self.assertIn(" indicate ", result.stdout.splitlines()[1])
        refused = ble("subscribe", "HRM-Demo", "2A37", "--indicate", "--count", "1")
        # Its properties do not allow it: status 5, as every such refusal.
        self.assertEqual(refused.returncode, EXIT_ATT_ERROR)
        self.assertEqual(refused.stderr,
                         "ble: Heart Rate Measurement (2A37) does not indicate (its properties: notify), so it was "
                         "not sent: Request Not Supported (0x06)\n")

    def test_subscribe_reads_first_and_says_it_is_subscribed_at_once(self):
        # The battery level notifies only when it changes: the two lines come before any notification.
        result = serve_until(["subscribe", "HRM-Demo", "Battery Level", "--read-first"], "subscribed to")
        lines = result.stdout.splitlines()
        self.assertRegex(lines[0], "^" + ValueTests.TIME + r" read [0-9a-f]{2}  \d+ %$")
        self.assertEqual(lines[1], "subscribed to Battery Level (2A19) (notifications)")


class ErrorTests(unittest.TestCase):
    def assertOneLine(self, result, code, text):
        self.assertEqual(result.returncode, code, result.stderr)
        lines = result.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, result.stderr)
        self.assertIn(text, lines[0])

    def test_connect_stays_for_its_duration_and_says_when_it_connected(self):
        for extra in ([], ["--reconnect"]):
            with self.subTest(extra=extra):
                result = ble("connect", "HRM-Demo", "--duration", "2", *extra)
                self.assertEqual(result.returncode, 0, result.stderr)
                lines = result.stdout.splitlines()
                self.assertEqual(len(lines), 1, result.stdout)
                # ISO time, as subscribe, serve and the shell print it; the MTU once exchanged.
                self.assertRegex(lines[0], "^" + ValueTests.TIME +
                                 r" connected to HRM-Demo \(00:1B:DC:0A:12:34\) \(ATT_MTU 517\)$")

    def test_connect_keeps_several_devices_and_prints_their_values(self):
        result = ble("connect", "HRM-Demo", "Thermometer", "DoorLock", "--subscribe", "2A1C", "--duration", "6",
                     "--timeout", "5")
        # The thermometer indicates 2A1C; the others have no such characteristic: each is named, and the
        # thermometer's values come.
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stderr.splitlines(), [
            "ble: HRM-Demo (00:1B:DC:0A:12:34) has no characteristic Temperature Measurement (2A1C); not subscribing there",
            "ble: DoorLock (00:1B:DC:0A:56:78) has no characteristic Temperature Measurement (2A1C); not subscribing there"])
        self.assertRegex(result.stdout, r"Z Thermometer: 2A1C [0-9a-f]+  \d+\.\d °C\n")
        result = ble("connect", "HRM-Demo", "Thermometer", "--duration", "5")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(len(lines), 2, result.stdout)
        self.assertRegex(lines[0], "^" + ValueTests.TIME + r" connected to HRM-Demo \(")
        self.assertRegex(lines[1], "^" + ValueTests.TIME + r" connected to Thermometer \(")
        # One device named twice is one link (and the command still ends by its duration).
        result = ble("connect", "HRM-Demo", "00:1B:DC:0A:12:34", "--duration", "2")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(result.stdout.splitlines()), 1, result.stdout)
        # The documentation's example: the heart rate comes, the thermometer is named as having none.
        result = ble("connect", "HRM-Demo", "Thermometer", "--subscribe", "2A37", "--duration", "5")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("ble: Thermometer (F7:C0:80:29:FD:EA) has no characteristic Heart Rate Measurement (2A37); "
                      "not subscribing there", result.stderr)
        self.assertRegex(result.stdout, r"Z HRM-Demo: 2A37 08[0-9a-f]+  \d+ bpm")
        # No device has it: nothing to do, status 7.
        result = ble("connect", "Thermometer", "DoorLock", "--subscribe", "2A37", "--duration", "5")
        self.assertEqual(result.returncode, EXIT_NO_SUCH_CHARACTERISTIC, result.stderr)
        self.assertEqual(result.stderr, "ble: Thermometer (F7:C0:80:29:FD:EA) has no characteristic Heart Rate "
                                        "Measurement (2A37)\n")
        result = ble("connect", "Thermometer", "--subscribe", "2A1C", "--duration", "5")
        self.assertEqual(result.returncode, 0, result.stderr)
        values = [line for line in result.stdout.splitlines() if re.search(r"Z 2A1C [0-9a-f]+  \d+\.\d °C$", line)]
        self.assertGreaterEqual(len(values), 1, result.stdout)

    def test_an_empty_target_is_a_usage_error(self):
        for args in (["read", "", "2A19"], ["connect", "HRM-Demo", ""], ["explore", ""]):
            result = ble(*args)
            self.assertEqual(result.returncode, 64, (args, result.stderr))
            self.assertIn("TARGET is empty", result.stderr)

    def test_send_a_file_to_the_camera_and_report_the_rate(self):
        with tempfile.NamedTemporaryFile() as f:
            f.write(bytes(range(256)) * 2)
            f.flush()
            for extra in (["--chunk", "18"], ["--without-response", "--chunk", "18", "--interval", "40"]):
                with self.subTest(extra=extra):
                    result = ble("send", "Camera", "CA3E0002-0000-1000-8000-00805F9B34FB", f.name, *extra)
                    self.assertEqual(result.returncode, 0, result.stderr)
                    self.assertRegex(result.stdout,
                                     r"^sent 512 bytes to Camera Command \(CA3E0002\) in \d+\.\d{3} s \(\d+ B/s\)\n$")
                    # Not a terminal: no progress bar on stderr.
                    self.assertNotIn("[#", result.stderr)

    def test_send_to_a_characteristic_that_takes_no_writes_is_refused(self):
        with tempfile.NamedTemporaryFile() as f:
            f.write(b"\x01")
            f.flush()
            result = ble("send", "HRM-Demo", "2A38", f.name)
        self.assertEqual(result.returncode, EXIT_ATT_ERROR, result.stderr)
        self.assertIn("2A38", result.stderr)

    def test_send_of_nothing_is_refused_before_connecting_as_write_refuses_it(self):
        with tempfile.NamedTemporaryFile() as f:
            sent = ble("send", "Camera", "CA3E0002-0000-1000-8000-00805F9B34FB", f.name)
            written = ble("write", "Camera", "CA3E0002-0000-1000-8000-00805F9B34FB", "--file", f.name)
        self.assertEqual((sent.returncode, sent.stdout, sent.stderr),
                         (1, "", f"ble: FILE '{f.name}' is empty: nothing to send\n"))
        self.assertEqual(written.returncode, 1)

    def test_a_failed_write_of_several_values_says_which_were_written(self):
        # DoorLock's command characteristic takes 00 and 01 and refuses anything else with an application error.
        result = ble("write", "DoorLock", DOOR_COMMAND, "00", "02", "01")
        self.assertEqual(result.returncode, EXIT_ATT_ERROR, result.stderr)
        self.assertEqual(result.stderr.splitlines()[-1],
                         f"ble: writing {DOOR_COMMAND}: the peer refused with Application Error (0x80), "
                         "at value 2 of 3 (02); value 1 (00) was written before it")
        first = ble("write", "DoorLock", DOOR_COMMAND, "07", "00")
        self.assertTrue(first.stderr.rstrip().endswith("at value 1 of 2 (07); nothing was written before it"),
                        first.stderr)

    def test_a_send_that_fails_or_is_stopped_says_how_much_was_acknowledged(self):
        with tempfile.NamedTemporaryFile() as f:
            f.write(bytes(100))
            f.flush()
            # Write Requests longer than the camera's 18-byte buffer are refused: none of the first is taken.
            refused = ble("send", "Camera", "CA3E0002-0000-1000-8000-00805F9B34FB", f.name, "--chunk", "50")
            self.assertEqual(refused.returncode, EXIT_ATT_ERROR, refused.stderr)
            self.assertRegex(refused.stderr, r"Invalid Attribute Value Length \(0x0D\) \(0 of 100 bytes acknowledged before\)\n$")
            # In wall-clock time the camera takes 18 bytes every 36 ms: the stop comes part way.
            env = dict(ENV)
            env.pop("BLE_SIM_SPEED", None)
            big = os.path.join(os.path.dirname(f.name), f"{os.path.basename(f.name)}.big")
            with open(big, "wb") as out:
                out.write(bytes(20000))
            try:
                process = subprocess.Popen([BLE, "send", "Camera", "CA3E0002-0000-1000-8000-00805F9B34FB", big,
                                            "--chunk", "18", "--btsnoop", big + ".log"],
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                try:
                    # The transfer is under way once the capture holds a Write Request's answer or two.
                    deadline = time.monotonic() + 30
                    while time.monotonic() < deadline and (not os.path.exists(big + ".log")
                                                           or os.path.getsize(big + ".log") < 12000):
                        time.sleep(0.05)
                    process.send_signal(signal.SIGINT)
                    out, err = process.communicate(timeout=10)
                finally:
                    if process.poll() is None:
                        process.kill()
                        process.wait(10)
                self.assertEqual(process.returncode, 130, err)
                self.assertRegex(err.decode(), r"^ble: interrupted: \d+ of 20000 bytes acknowledged\n$")
            finally:
                for path in (big, big + ".log"):
                    if os.path.exists(path):
                        os.remove(path)

    def test_connect_to_nothing_fails_as_read_does(self):
        self.assertOneLine(ble("connect", "NoSuchDevice", "--timeout", "2"), EXIT_NO_SUCH_DEVICE, "NoSuchDevice")

    def test_unknown_target(self):
        self.assertOneLine(ble("read", "NoSuchDevice", "2A00", "--timeout", "2"), EXIT_NO_SUCH_DEVICE, "NoSuchDevice")

    def test_not_connectable(self):
        self.assertOneLine(ble("explore", "Environment Hub"), EXIT_NOT_CONNECTABLE, "does not accept connections")

    def test_no_such_characteristic(self):
        self.assertOneLine(ble("read", "HRM-Demo", "2A1C"), EXIT_NO_SUCH_CHARACTERISTIC, "2A1C")

    def test_names_match_without_regard_to_case(self):
        result = ble("read", "hrm-demo", "2A38")
        self.assertEqual((result.returncode, result.stdout), (0, "01  Chest\n"), result.stderr)

    def test_a_near_miss_is_suggested(self):
        self.assertOneLine(ble("read", "HRM-Dem", "2A38", "--timeout", "2"), EXIT_NO_SUCH_DEVICE, "did you mean 'HRM-Demo'?")

    def test_a_bad_transport_is_blamed_on_the_variable_that_gave_it(self):
        env = dict(ENV, BLE_TRANSPORT="garbage")
        result = subprocess.run([BLE, "scan"], capture_output=True, text=True, timeout=20, env=env)
        self.assertOneLine(result, 2, "BLE_TRANSPORT: 'garbage' is not a transport kind")

    def test_a_refused_connection_says_so_once(self):
        result = ble("scan", "--transport", "tcp-client:127.0.0.1:1", timeout=20)
        self.assertOneLine(result, 2, "cannot connect to 127.0.0.1:1: Connection refused")
        self.assertEqual(result.stderr.count("tcp-client:127.0.0.1:1"), 1, result.stderr)

    def test_a_second_host_on_ble_controller_hears_busy(self):
        with tempfile.TemporaryFile() as errors:
            controller = subprocess.Popen([BLE, "controller", "tcp-server:127.0.0.1:0"], stdout=subprocess.PIPE,
                                          stderr=errors, env=ENV)
            try:
                lines = LineReader(controller.stdout)
                first_line = lines.line(20)
                match = re.search(r"listening on tcp-server:127\.0\.0\.1:(\d+)", first_line)
                self.assertIsNotNone(match, first_line)
                port = int(match.group(1))
                # The first host holds the controller (a plain connection is enough: it is attached at once).
                with socket.create_connection(("127.0.0.1", port), timeout=10):
                    self.assertRegex(lines.line(20), r"^host connected from 127\.0\.0\.1:\d+")
                    result = ble("scan", "--transport", f"tcp-client:127.0.0.1:{port}", "--timeout", "3", timeout=20)
                self.assertOneLine(result, 2, "the controller is busy (another host is using it)")
                self.assertIn("Controller Busy (0x3A)", result.stderr)
            finally:
                controller.terminate()
                try:
                    controller.wait(10)
                except subprocess.TimeoutExpired:
                    controller.kill()
                    controller.wait(10)
                controller.stdout.close()

    def test_ble_controller_stops_within_a_second_of_sigint_or_sigterm(self):
        for number, status in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
            with self.subTest(signal=number):
                controller = subprocess.Popen([BLE, "controller", "tcp-server:127.0.0.1:0"], stdout=subprocess.PIPE,
                                              stderr=subprocess.DEVNULL, env=ENV)
                try:
                    lines = LineReader(controller.stdout)
                    self.assertIn("listening on tcp-server:127.0.0.1:", lines.line(20))
                    controller.send_signal(number)
                    self.assertEqual(controller.wait(5), status)
                    self.assertIn("stopped (SIG", lines.line(5))
                finally:
                    if controller.poll() is None:
                        controller.kill()
                        controller.wait(10)
                    controller.stdout.close()

    def test_a_reconnecting_command_ends_when_its_controllers_transport_closes(self):
        # A closed transport is never opened again: `connect --reconnect` must not retry for ever.
        controller = subprocess.Popen([BLE, "controller", "tcp-server:127.0.0.1:0"], stdout=subprocess.PIPE,
                                      stderr=subprocess.DEVNULL, env=ENV)
        connect = None
        try:
            lines = LineReader(controller.stdout)
            match = re.search(r"listening on tcp-server:127\.0\.0\.1:(\d+)", lines.line(20))
            self.assertIsNotNone(match)
            connect = subprocess.Popen(
                [BLE, "connect", "HRM-Demo", "--reconnect", "--transport", f"tcp-client:127.0.0.1:{match.group(1)}"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
            reader = LineReader(connect.stdout)
            seen = [reader.line(30)]
            while "connected" not in seen[-1]:
                seen.append(reader.line(30))
            controller.terminate()
            controller.wait(10)
            _, err = connect.communicate(timeout=30)
            self.assertEqual(connect.returncode, 2, err)
            self.assertIn("the controller went away (its transport closed)", err.decode())
        finally:
            for process in (connect, controller):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait(10)
            controller.stdout.close()
            if connect is not None:
                connect.stdout.close()
                connect.stderr.close()

    def test_unavailable_transport(self):
        self.assertOneLine(ble("scan", "--transport", "nonsense"), 2, "not a transport")

    def test_an_unusable_store_is_named_and_left_alone(self):
        state = tempfile.mkdtemp(prefix="ble-cli-broken-state-")
        self.addCleanup(shutil.rmtree, state, True)
        os.makedirs(os.path.join(state, "swift-ble"))
        path = os.path.join(state, "swift-ble", "ble.sqlite")
        with open(path, "wb") as f:
            f.write(b"not a database " * 512)
        env = dict(ENV, XDG_STATE_HOME=state)
        result = subprocess.run([BLE, "scan", "--timeout", "1"], capture_output=True, text=True, timeout=20, env=env)
        self.assertOneLine(result, 2, f"the system store {path} cannot be used")
        self.assertIn("move the file aside or delete it", result.stderr)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"not a database " * 512)

    def test_the_tools_store_keeps_what_it_reported(self):
        state = tempfile.mkdtemp(prefix="ble-cli-state-")
        self.addCleanup(shutil.rmtree, state, True)
        env = dict(ENV, XDG_STATE_HOME=state)
        result = subprocess.run([BLE, "scan", "--timeout", "2", "--json"], capture_output=True, text=True,
                                timeout=30, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        printed = {(d["identifier"], d["address"]) for d in map(json.loads, result.stdout.splitlines())}
        self.assertGreaterEqual(len(printed), 5, result.stdout)
        # Every identifier printed is in the store with its address, as a later run will find it.
        with contextlib.closing(sqlite3.connect(os.path.join(state, "swift-ble", "ble.sqlite"))) as db:
            stored = {(identifier, ":".join(f"{b:02X}" for b in address))
                      for identifier, address in db.execute("SELECT identifier, address FROM peer")}
        self.assertLessEqual(printed, stored)
        # `ble devices` lists them from the store, with the names the scan saw.
        result = subprocess.run([BLE, "devices", "--json"], capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        listed = {(d["identifier"], d["address"], d["name"]) for d in map(json.loads, result.stdout.splitlines())}
        self.assertIn("HRM-Demo", {name for _, _, name in listed})
        self.assertLessEqual(printed, {(identifier, address) for identifier, address, _ in listed})
        # The text form has a header, as `bonds` has.
        table = subprocess.run([BLE, "devices"], capture_output=True, text=True, timeout=30, env=env).stdout
        self.assertEqual(table.splitlines()[0].split(), ["IDENTIFIER", "ADDRESS", "LAST", "SEEN", "NAME"])
        self.assertEqual(len(table.splitlines()), len(listed) + 1)
        # `ble devices forget` by name: that device alone goes, and the next scan gives it a new identifier.
        hrm = next(identifier for identifier, _, name in listed if name == "HRM-Demo")
        def run(*args):
            return subprocess.run([BLE, *args], capture_output=True, text=True, timeout=30, env=env)
        result = run("devices", "forget", "hrm-demo")
        self.assertEqual((result.returncode, result.stdout), (0, f"forgot {hrm} (00:1B:DC:0A:12:34) HRM-Demo\n"),
                         result.stderr)
        left = [json.loads(line) for line in run("devices", "--json").stdout.splitlines()]
        self.assertEqual(len(left), len(listed) - 1)
        self.assertNotIn("HRM-Demo", [d["name"] for d in left])
        result = run("devices", "forget", hrm)
        self.assertEqual(result.returncode, EXIT_NO_SUCH_DEVICE, result.stderr)
        self.assertEqual(result.stderr, f"ble: the tool knows no device {hrm} (ble devices lists them)\n")
        again = run("scan", "--timeout", "2", "--json", "--name", "HRM-Demo")
        self.assertNotEqual(json.loads(again.stdout.splitlines()[0])["identifier"], hrm)
        result = run("devices", "forget", "--all")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(result.stdout.splitlines()), len(left) + 1)
        self.assertEqual(run("devices").stdout, "")
        self.assertEqual(run("devices", "forget").returncode, 64)


class BadInputTests(unittest.TestCase):
    """Numbers and values a new user might type: each ends at once with a usage error (status 64) that names the
    option and shows the subcommand's usage; none traps, none runs for ever."""

    CASES = [
        (("scan", "--timeout", "inf"), "--timeout"),
        (("scan", "--timeout", "1e18"), "--timeout"),
        (("scan", "--timeout=-1"), "--timeout"),
        (("scan", "--timeout", "-1"), "--timeout"),
        (("scan", "--timeout", "nan"), "--timeout"),
        (("read", "HRM-Demo", "2A38", "--timeout", "1e300"), "--timeout"),
        (("read", "HRM-Demo", "2A38", "--timeout", "0"), "--timeout"),
        (("explore", "HRM-Demo", "--timeout", "inf"), "--timeout"),
        (("serve", "heart-rate", "--duration", "nan"), "--duration"),
        (("serve", "heart-rate", "--duration", "inf"), "--duration"),
        (("serve", "heart-rate", "--duration", "1e300"), "--duration"),
        (("serve", "heart-rate", "--duration=-1"), "--duration"),
        (("subscribe", "HRM-Demo", "2A37", "--count=-1"), "--count"),
        (("serve", "heart-rate", "--duration", "0.0004"), "--duration"),
        (("demo", "--measurements", "0"), "--measurements"),
        (("connect", "HRM-Demo", "--duration", "inf"), "--duration"),
        (("send", "Camera", "CA3E0002", "/dev/null", "--chunk", "0"), "--chunk"),
        (("send", "Camera", "CA3E0002", "/dev/null", "--chunk", "513"), "--chunk"),
        (("send", "Camera", "CA3E0002", "/dev/null", "--interval", "nan"), "--interval"),
        (("send", "Camera", "CA3E0002", "/dev/null", "--interval=-5"), "--interval"),
        (("send", "Camera", "CA3E0002", "/no/such/file"), "FILE"),
        (("connect", "HRM-Demo", "--duration=-1"), "--duration"),
        (("read", "HRM-Demo", "notauuid"), "CHAR"),
        (("write", "HRM-Demo", "2A39", "zz"), "HEX"),
        (("write", "HRM-Demo", "2A39"), "VALUE"),
        (("write", "HRM-Demo", "2A39", "--text", ""), "--text"),
        (("read", "HRM-Demo", "--handle", "0x10000"), "--handle"),
        (("read", "HRM-Demo", "--handle", "0"), "--handle"),
        (("read", "HRM-Demo", "--handle", "-1"), "--handle '-1' is not an attribute handle"),
        (("write", "HRM-Demo", "2A39", "0"), "has an odd number of digits"),
        (("read", "HRM-Demo", "2A38", "--descriptor", "xyz"), "--descriptor"),
        (("serve", "heart-rate", "--updates", "/no/such/file"), "--updates"),
        (("demo", "phone-restart", "--phase", "before"), "--phase"),
        (("demo", "door-lock", "--store", "/tmp/phone.sqlite"), "--store"),
        (("pair", "DoorLock", "--timeout", "nan"), "--timeout"),
        (("pair", "DoorLock", "--timeout", "inf"), "--timeout"),
        (("pair", "DoorLock", "--timeout=-1"), "--timeout"),
        (("pair", "DoorLock", "--io-capability", "keyboard", "--passkey", "12345"), "--passkey"),
        (("pair", "DoorLock", "--io-capability", "keyboard", "--passkey", "1234567"), "--passkey"),
        (("pair", "DoorLock", "--io-capability", "keyboard", "--passkey", "12a456"), "--passkey"),
        (("pair", "DoorLock", "--passkey", "123456"), "--passkey"),
        (("pair", "DoorLock", "--io-capability", "display", "--passkey", "123456"), "--passkey"),
        (("pair", "DoorLock", "--io-capability", "keyboard", "--yes"), "--yes"),
        (("pair", "DoorLock", "--io-capability", "display-yes-no", "--yes", "--no"), "--yes"),
        (("pair", "DoorLock", "--io-capability", "telepathy"), "--io-capability"),
        (("serve", "secure-lock", "--passkey", "-", "--updates", "-", "--io-capability", "keyboard"), "--passkey"),
        (("shell", "--passkey", "-", "--io-capability", "keyboard"), "--passkey"),
        (("bonds", "remove"), "--all"),
        (("bonds", "remove", "not-a-peer"), "not-a-peer"),
        (("bonds", "remove", "--all", "00:11:22:33:44:55"), "--all"),
        (("soak", "--hours", "nan"), "--hours"),
        (("soak", "--hours", "inf"), "--hours"),
        (("soak", "--hours", "-1"), "--hours"),
        (("soak", "--hours", "0"), "--hours"),
        (("soak", "--centrals", "0"), "--centrals"),
        (("soak", "--peripherals", "41"), "--peripherals"),
    ]

    def test_bad_numbers_and_values_are_usage_errors_naming_the_option(self):
        for args, option in self.CASES:
            with self.subTest(args=" ".join(args)):
                result = ble(*args, timeout=20)
                self.assertEqual(result.returncode, 64, result.stderr)
                first = result.stderr.strip().splitlines()[0]
                self.assertIn(option, first)
                self.assertIn("Usage: ble " + args[0], result.stderr)


class StatusTests(unittest.TestCase):
    """One status and one line for each kind of failure, whichever command meets it (CommandLineTool.md)."""

    def test_an_unknown_subcommand_is_a_usage_error_with_a_suggestion(self):
        for args, line in ((["scna"], "ble: no command 'scna'; did you mean scan? ('ble --help' lists them)"),
                           (["help", "nope"], "ble: no command 'nope' ('ble --help' lists them)")):
            with self.subTest(args=args):
                result = ble(*args)
                self.assertEqual((result.returncode, result.stdout, result.stderr), (64, "", line + "\n"))

    def test_a_bad_environment_variable_is_a_usage_error_naming_it(self):
        for name, value in (("BLE_SIM_SPEED", "bogus"), ("BLE_PRIVACY", "bogus"), ("BLE_ROOM_IDLE_TIMEOUT", "-3"),
                            ("BLE_LOG_LEVEL", "loud")):
            with self.subTest(variable=name):
                result = subprocess.run([BLE, "devices"], capture_output=True, text=True, timeout=60,
                                        env=dict(ENV, **{name: value}))
                self.assertEqual(result.returncode, 64, result.stderr)
                self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
                self.assertTrue(result.stderr.startswith(f"ble: {name}={value}: expected "), result.stderr)

    def test_a_port_in_use_is_the_transports_failure_in_one_line(self):
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            result = ble("controller", f"tcp-server:127.0.0.1:{port}", timeout=30)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertTrue(result.stderr.startswith(f"ble: tcp-server:127.0.0.1:{port}: "), result.stderr)

    def test_a_corrupt_store_is_status_2_for_every_command(self):
        state = tempfile.mkdtemp(prefix="ble-corrupt-")
        try:
            folder = os.path.join(state, "swift-ble")
            os.makedirs(folder)
            with open(os.path.join(folder, "ble.sqlite"), "wb") as file:
                file.write(b"this is not a database" * 100)
            env = dict(ENV, XDG_STATE_HOME=state)
            for args in (["devices"], ["bonds"], ["read", "HRM-Demo", "2A19"]):
                with self.subTest(args=args):
                    result = subprocess.run([BLE, *args], capture_output=True, text=True, timeout=60, env=env)
                    self.assertEqual(result.returncode, 2, result.stderr)
                    self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
                    self.assertIn("ble.sqlite", result.stderr)
        finally:
            shutil.rmtree(state, True)

    def test_a_command_leaves_its_store_closed_without_a_write_ahead_log(self):
        state = tempfile.mkdtemp(prefix="ble-wal-")
        try:
            env = dict(ENV, XDG_STATE_HOME=state)
            for args in (["read", "HRM-Demo", "2A19"], ["serve", "battery", "--name", "Wal", "--duration", "1"]):
                with self.subTest(args=args):
                    result = subprocess.run([BLE, *args], capture_output=True, text=True, timeout=60, env=env)
                    self.assertEqual(result.returncode, 0, result.stderr)
            files = sorted(os.listdir(os.path.join(state, "swift-ble")))
            self.assertEqual([f for f in files if f.endswith(".sqlite")], ["Wal.sqlite", "ble.sqlite"])
            self.assertEqual([f for f in files if f.endswith("-wal") or f.endswith("-shm")], [], files)
        finally:
            shutil.rmtree(state, True)

    def test_the_transport_error_lists_the_tools_own_kinds(self):
        result = ble("read", "X", "2A19", "--transport", "garbage")
        self.assertEqual(result.returncode, 2)
        self.assertIn("Use room (the default), virtual, tcp-client", result.stderr)

    def test_serve_names_every_built_in_profile(self):
        result = ble("serve", "nonexistent.json")
        self.assertEqual(result.returncode, 64)
        self.assertIn("printer, camera", result.stderr)


class IdentitiesTests(unittest.TestCase):
    """`ble identities`: the tool's own devices' stores (the central's, and one per name served), listed and
    forgotten; a store a running process holds is shown in use and kept."""

    def test_stores_are_listed_and_forgotten_and_one_in_use_is_kept(self):
        state = tempfile.mkdtemp(prefix="ble-identities-")
        self.addCleanup(shutil.rmtree, state, True)
        env = dict(ENV, XDG_STATE_HOME=state)

        def run(*args):
            return subprocess.run([BLE, *args], capture_output=True, text=True, timeout=60, env=env)

        self.assertEqual(run("serve", "battery", "--name", "Ident", "--duration", "1").returncode, 0)
        self.assertEqual(run("read", "HRM-Demo", "2A19").returncode, 0)
        listed = [json.loads(line) for line in run("identities", "--json").stdout.splitlines()]
        self.assertEqual(sorted(s["name"] for s in listed), ["Ident", "ble"])
        self.assertEqual(list(listed[0].keys()), ["name", "file", "bonds", "bytes", "lastUsed", "inUse"])
        self.assertTrue(all(s["inUse"] is False and s["bonds"] == 0 and s["bytes"] > 0 for s in listed), listed)
        # A store in use (a served device running, in wall-clock time) is shown so and kept.
        live_env = dict(env)
        live_env.pop("BLE_SIM_SPEED", None)
        serve = subprocess.Popen([BLE, "serve", "battery", "--name", "Busy", "--duration", "60"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=live_env)
        try:
            self.assertIn("advertising", LineReader(serve.stdout).line(30))
            busy = {s["name"]: s for s in map(json.loads, run("identities", "--json").stdout.splitlines())}["Busy"]
            self.assertEqual((busy["inUse"], busy["bonds"]), (True, None))
            refused = run("identities", "forget", "Busy")
            self.assertEqual((refused.returncode, refused.stderr),
                             (2, "ble: 'Busy' is in use by a running process: stop it first\n"))
        finally:
            serve.send_signal(signal.SIGINT)
            serve.wait(20)
            serve.stdout.close()
        # The tool's central store, used by any command running (here a connect), is kept too.
        connect = subprocess.Popen([BLE, "connect", "HRM-Demo"], stdout=subprocess.PIPE,
                                   stderr=subprocess.DEVNULL, env=live_env)
        try:
            self.assertIn("connected to HRM-Demo", LineReader(connect.stdout).line(30))
            kept = run("identities", "forget", "ble")
            self.assertEqual(kept.returncode, 2, kept.stderr)
        finally:
            connect.send_signal(signal.SIGINT)
            connect.wait(20)
            connect.stdout.close()
        forgot = run("identities", "forget", "Ident")
        self.assertEqual(forgot.returncode, 0, forgot.stderr)
        self.assertTrue(forgot.stdout.startswith("forgot Ident ("), forgot.stdout)
        self.assertEqual(sorted(s["name"] for s in map(json.loads, run("identities", "--json").stdout.splitlines())),
                         ["Busy", "ble"])
        self.assertEqual(run("identities", "forget", "Ident").returncode, 3)
        self.assertEqual(run("identities", "forget").returncode, 64)


class PairAndBondsTests(unittest.TestCase):
    """`ble pair` and `ble bonds` on the private room, each test with a store of its own (a bond must not reach the
    other tests' links). The world's devices pair with Just Works only; the encrypted lock, passkeys and numeric
    comparison are in test_room.py, where `ble serve secure-lock` runs beside the pairing process."""

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="ble-cli-pair-")
        self.addCleanup(shutil.rmtree, self.state, True)
        self.env = dict(ENV, XDG_STATE_HOME=self.state)

    def run_ble(self, *args, input_text=None):
        return subprocess.run([BLE, *args], capture_output=True, text=True, timeout=60, env=self.env,
                              input=input_text)

    def test_pair_prints_what_was_agreed_and_bonds_lists_and_removes_it(self):
        self.assertEqual(self.run_ble("bonds").stdout, "", "no bond before pairing")
        pair = self.run_ble("pair", "DoorLock")
        self.assertEqual(pair.returncode, 0, pair.stderr)
        lines = pair.stdout.splitlines()
        self.assertRegex(lines[0], r"^paired with DoorLock \(([0-9A-F]{2}:){5}[0-9A-F]{2}\), its identity address$")
        self.assertRegex(lines[1], r"^identifier: [0-9A-F-]{36}$")
        self.assertEqual(lines[2:], ["method: Just Works", "security: Secure Connections, unauthenticated, key size 16",
                                     "bonded: yes"])
        identifier = lines[1].split(": ")[1]
        bonds = [json.loads(line) for line in self.run_ble("bonds", "--json").stdout.splitlines()]
        self.assertEqual([(b["identifier"], b["name"], b["authenticated"], b["secureConnections"], b["keySize"])
                          for b in bonds], [(identifier, "DoorLock", False, True, 16)])
        self.assertRegex(bonds[0]["created"], r"^2026-01-01T\d\d:\d\d:\d\dZ$", "virtual time")
        # `ble devices` knows the same identifier.
        devices = [json.loads(line) for line in self.run_ble("devices", "--json").stdout.splitlines()]
        self.assertIn(identifier, [d["identifier"] for d in devices])
        removed = self.run_ble("bonds", "remove", identifier)
        self.assertEqual((removed.returncode, removed.stdout),
                         (0, f"removed the bond with {identifier} ({bonds[0]['address']})\n"), removed.stderr)
        self.assertEqual(self.run_ble("bonds", "--json").stdout, "")
        unknown = self.run_ble("bonds", "remove", identifier)
        self.assertEqual(unknown.returncode, 10)
        self.assertEqual(unknown.stderr, f"ble: no bond with {identifier} (ble bonds lists them)\n")

    def test_pair_json_and_remove_all(self):
        first = self.run_ble("pair", "DoorLock", "--json")
        self.assertEqual(first.returncode, 0, first.stderr)
        record = json.loads(first.stdout)
        self.assertEqual(list(record.keys()), ["identifier", "address", "identityAddress", "name", "method", "secureConnections",
                                               "authenticated", "bonded", "keySize"])
        self.assertEqual((record["name"], record["method"], record["bonded"]), ("DoorLock", "Just Works", True))
        second = self.run_ble("pair", "HRM-Demo", "--json")
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(len(self.run_ble("bonds", "--json").stdout.splitlines()), 2)
        removed = self.run_ble("bonds", "remove", "--all")
        self.assertEqual(removed.returncode, 0, removed.stderr)
        self.assertEqual(len(removed.stdout.splitlines()), 2, removed.stdout)
        self.assertEqual(self.run_ble("bonds").stdout, "")
        # Nothing left to remove is not an error for --all.
        self.assertEqual(self.run_ble("bonds", "remove", "--all").returncode, 0)

    def test_a_pairing_that_cannot_protect_against_a_man_in_the_middle_fails_with_status_9(self):
        # The lock has no display and no keyboard: only Just Works, which --mitm refuses.
        result = self.run_ble("pair", "DoorLock", "--io-capability", "keyboard-display", "--mitm")
        self.assertEqual(result.returncode, 9, result.stdout + result.stderr)
        self.assertEqual(len(result.stderr.splitlines()), 1, result.stderr)
        self.assertRegex(result.stderr, r"^ble: pairing with DoorLock \(.*\): pairing failed here: the requirements "
                                        r"cannot be met .*\(Authentication Requirements, 0x03\)\n$")
        self.assertEqual(self.run_ble("bonds").stdout, "", "no bond from a failed pairing")

    def test_a_device_that_lost_the_bond_is_a_pairing_failure_that_says_what_to_do(self):
        # The private room is made anew by each process: the door lock of the next one has no bond with us.
        self.assertEqual(self.run_ble("pair", "DoorLock").returncode, 0)
        lost = self.run_ble("read", "DoorLock", "2A19")
        self.assertEqual(lost.returncode, 9, lost.stderr)
        advice = re.search(r"`ble bonds remove ([0-9A-F-]{36})`", lost.stderr)
        self.assertIsNotNone(advice, lost.stderr)
        self.assertIn("no longer has the keys of its bond", lost.stderr)
        self.assertEqual(self.run_ble("bonds", "remove", advice.group(1)).returncode, 0)
        self.assertEqual(self.run_ble("read", "DoorLock", "2A19").returncode, 0)

    def test_a_pairing_without_a_device_is_status_3(self):
        result = self.run_ble("pair", "NoSuchLock", "--timeout", "1")
        self.assertEqual(result.returncode, EXIT_NO_SUCH_DEVICE, result.stderr)

    def test_the_shell_pairs_once_and_reads_on_the_encrypted_link(self):
        shell = self.run_ble("shell", input_text="connect DoorLock\npair\nread 8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B\n")
        self.assertEqual(shell.returncode, 0, shell.stdout + shell.stderr)
        lines = shell.stdout.splitlines()
        self.assertIn("method: Just Works", lines)
        self.assertIn("bonded: yes", lines)
        self.assertEqual(lines[-1].split()[0], "01", shell.stdout)

    def test_serve_lists_and_runs_the_secure_lock(self):
        self.assertIn("secure-lock", ble("serve", "--help").stdout)
        served = serve_until(["serve", "secure-lock", "--duration", "5"], "advertising")
        self.assertIn('advertising "SecureLock" as ', served.stdout)
        self.assertIn("5EC10001-2B7D-4E8A-9C3F-6A1B2C3D4E5F", served.stdout)


class AirCaptureTests(unittest.TestCase):
    """`ble demo --air-capture`: the link layer as a sniffer shows it, read by tshark (installed by
    Scripts/setup-peers.sh, which Scripts/test.sh runs first)."""

    def tshark(self, *args):
        tshark = shutil.which("tshark")
        self.assertIsNotNone(tshark, "tshark is missing: Scripts/setup-peers.sh installs it")
        result = subprocess.run([tshark, *args], capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        return result.stdout

    def test_demo_air_capture_reads_cleanly_in_tshark(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "air.pcap")
            result = ble("demo", "--air-capture", path)
            self.assertEqual(result.returncode, 0, result.stderr)
            infos = self.tshark("-r", path, "-T", "fields", "-e", "_ws.col.Info").splitlines()
            for kind in ("ADV_IND", "SCAN_REQ", "SCAN_RSP", "CONNECT_IND", "Empty PDU", "LL_LENGTH_REQ",
                         "Exchange MTU Request", "Handle Value Notification"):
                self.assertTrue(any(kind in info for info in infos), f"no {kind} in the capture")
            # Nothing malformed, no wrong CRC, no error (a procedure out of order is one).
            flagged = self.tshark("-r", path, "-Y", "_ws.malformed || btle.crc.incorrect || _ws.expert.severity >= 0x800000")
            self.assertEqual(flagged.strip(), "", flagged)
            # Connection events: the central's packets of one event share a channel, and the next event hops.
            rows = [line.split("\t") for line in self.tshark(
                "-r", path, "-Y", "btle.data_header", "-T", "fields", "-e", "btle_rf.channel",
                "-e", "frame.time_relative").splitlines()]
            self.assertGreater(len({row[0] for row in rows}), 10, "data channels do not hop")


class DemoScenarioTests(unittest.TestCase):
    def test_background_demo_applies_the_rules_and_repeats(self):
        first, second = ble("demo", "background"), ble("demo", "background")
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout, "the same seed gives the same run")
        lines = [re.sub(r"^\[ *[0-9.]+s\] ", "", line) for line in first.stdout.splitlines()]
        suspended = next(i for i, l in enumerate(lines) if l.startswith("phone   suspended heart and notes"))
        opened = lines.index("user    opens notes again")
        between = lines[suspended + 1:opened]
        # The app with bluetooth-central is woken for each measurement; the foreground-only one hears nothing.
        self.assertGreaterEqual(len([l for l in between if re.match(r"heart +heard \d+ bpm while background$", l)]), 3)
        self.assertFalse([l for l in between if l.startswith("notes")], between)
        self.assertIn("phone   held 1 event(s) for notes, which heard 0 meanwhile", between)
        # Back in the foreground it gets the latest value only, at once.
        self.assertRegex(lines[opened + 1], r"^notes +heard \d+ bpm while foreground$")
        self.assertIn("phone   scan by name: nothing in 3 s", lines)
        self.assertIn("phone   scan for its service: found it, name none, overflow [\"7A6E0001\"]", lines)

    def test_door_lock_demo_restores_the_app_and_unlocks_within_its_budget(self):
        first, second = ble("demo", "door-lock"), ble("demo", "door-lock")
        self.assertEqual(first.returncode, 0, first.stderr)
        self.assertEqual(first.stdout, second.stdout, "the same run every time")
        lines = [re.sub(r"^\[ *[0-9.]+s\] ", "", line) for line in first.stdout.splitlines()]
        self.assertIn("phone   the lock app is suspended, its connection request pending", lines)
        self.assertIn('phone   ended the lock app to free memory; kept its work for ["door-lock"]', lines)
        relaunched = lines.index('app     relaunched in the background for ["door-lock"]')
        # willRestoreState, then the state, then the connection, then the work (IOSRules.md 5.8, 5.10).
        self.assertEqual(lines[relaunched + 1:relaunched + 4], [
            "app     restored: DoorLock connected", "app     state poweredOn",
            "app     connected to DoorLock while background"])
        self.assertIn("lock    write 8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B 00", lines[relaunched:])
        self.assertIn("app     unlocked, still background", lines[relaunched:])
        seconds = float(re.search(r"the door unlocked ([0-9.]+) s after the relaunch", first.stdout).group(1))
        self.assertLess(seconds, 10)

    @staticmethod
    def untimed(text):
        return [re.sub(r"^\[ *[0-9.]+s\] ", "", line) for line in text.splitlines()]

    def check_restarted_phone(self, after, identifier):
        """The second process: the system keeps the app's work, relaunches it when the lock is back, and the
        restored manager hears willRestoreState, the state and the connection, then unlocks the same lock."""
        self.assertIn('phone   starts again on its store: the lock app is notRunning, its work kept for ["door-lock"]',
                      after)
        relaunched = after.index('app     relaunched in the background for ["door-lock"]')
        self.assertEqual(after[relaunched + 1:relaunched + 4], [
            "app     restored: DoorLock connected", "app     state poweredOn",
            "app     connected to DoorLock while background"])
        self.assertIn("app     unlocked, still background", after[relaunched:])
        self.assertRegex(after[-1], r"^phone +the door unlocked [0-9.]+ s after the relaunch; the lock is "
                         + re.escape(identifier) + "$")

    @staticmethod
    def lock_identifier(before):
        return next(l for l in before if l.startswith("phone   the lock is ")).split()[-1]

    def test_phone_restart_demo_kills_the_phone_and_the_restarted_one_unlocks(self):
        # In a session of its own, so that the phases it starts go with it if it overruns.
        process = subprocess.Popen([BLE, "demo", "phone-restart"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=ENV, start_new_session=True)
        try:
            stdout, stderr = process.communicate(timeout=120)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.communicate(timeout=20)
        self.assertEqual(process.returncode, 0, stderr)
        lines = self.untimed(stdout)
        killed = next(i for i, l in enumerate(lines) if re.match(r"^---- the phone's process \d+ was killed with SIGKILL", l))
        before, after = lines[:killed], lines[killed + 1:]
        self.assertIn("phone   the lock app is suspended, its connection request pending and kept in the store", before)
        self.assertRegex(before[-1], r"^phone +process \d+ waiting to be killed$")
        self.check_restarted_phone(after, self.lock_identifier(before))

    def test_phone_restart_phases_survive_a_kill_9_by_hand(self):
        with tempfile.TemporaryDirectory() as folder:
            store = os.path.join(folder, "phone.sqlite")
            errors = open(os.path.join(folder, "before.stderr"), "w+")
            process = subprocess.Popen([BLE, "demo", "phone-restart", "--phase", "before", "--store", store],
                                       stdout=subprocess.PIPE, stderr=errors, env=ENV)
            before = []
            try:
                reader = LineReader(process.stdout)
                while not before or "waiting to be killed" not in before[-1]:
                    before.append(reader.line(60))
                os.kill(process.pid, signal.SIGKILL)
                process.wait(timeout=20)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait(timeout=20)
                process.stdout.close()
                errors.seek(0)
                logged = errors.read()
                errors.close()
            self.assertEqual(process.returncode, -signal.SIGKILL, logged)
            # What the killed process left: the lock app's pending connection, committed.
            with contextlib.closing(sqlite3.connect(store)) as db:
                rows = db.execute("SELECT app, role, restoreIdentifier, backgroundModes FROM preservedManager").fetchall()
            self.assertEqual(rows, [("com.example.lock", "central", "door-lock", "bluetooth-central")])
            after = ble("demo", "phone-restart", "--phase", "after", "--store", store, timeout=120)
            self.assertEqual(after.returncode, 0, after.stderr)
            self.check_restarted_phone(self.untimed(after.stdout), self.lock_identifier(self.untimed("\n".join(before))))

    def test_an_unknown_scenario_is_refused(self):
        result = ble("demo", "nowhere")
        self.assertEqual(result.returncode, 64)
        self.assertIn("background", result.stderr)


class BenchTests(unittest.TestCase):
    def test_bench_link_json_rows_match_the_model(self):
        result = ble("bench", "link", "--kind", "notifications", "--seconds", "1", "--json", timeout=300)
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = [json.loads(line) for line in result.stdout.splitlines()]
        self.assertEqual(len(rows), 2 * 2 * 5)  # PHYs x LL payloads x intervals
        for row in rows:
            self.assertEqual(list(row), ["kind", "phy", "llPayload", "intervalMs", "measuredKbps", "modelKbps"])
            self.assertEqual(row["kind"], "notifications")
            self.assertIn(row["phy"], ("1M", "2M"))
            self.assertAlmostEqual(row["measuredKbps"], row["modelKbps"], delta=0.02 * row["modelKbps"])

    def test_bench_link_refuses_an_unknown_kind(self):
        result = ble("bench", "link", "--kind", "bulk", timeout=20)
        self.assertEqual(result.returncode, 64, result.stderr)
        self.assertIn("--kind", result.stderr.splitlines()[0])


class SoakTests(unittest.TestCase):
    """`ble soak` for half a simulated hour (the 24-hour run is the documentation's)."""

    def test_a_soak_accounts_for_every_acknowledged_write_and_repeats_with_its_seed(self):
        runs = []
        for _ in range(2):
            result = ble("soak", "--hours", "0.5", "--seed", "11", "--json", timeout=300)
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
            runs.append(json.loads(result.stdout))
        report = runs[0]
        self.assertTrue(report["passed"], report)
        self.assertEqual((report["lostWrites"], report["hung"]), ([], []))
        kinds = {o["kind"]: o for o in report["operations"]}
        for kind in ["connect", "discover", "read", "write", "long write", "transfer", "subscribe", "unsubscribe"]:
            self.assertGreater(kinds[kind]["ok"], 0, kind)
        self.assertGreater(report["acknowledgedWrites"], 50)
        self.assertEqual(report["acknowledgedWrites"], kinds["write"]["ok"] + kinds["long write"]["ok"])
        self.assertEqual(len(report["residentBytesPerHour"]), 1)
        self.assertEqual(len(report["anonymousBytesPerHour"]), 1)
        self.assertTrue(0 < report["anonymousBytesPerHour"][0] < report["residentBytesPerHour"][0], report)
        # The same seed, the same run (virtual time): what happened, not how long it took.
        for key in ["operations", "connections", "linksLost", "outOfRange", "acknowledgedWrites"]:
            self.assertEqual(runs[0][key], runs[1][key], key)


class ServeTests(unittest.TestCase):
    def test_serve_door_lock(self):
        result = ble("serve", "door-lock", "--duration", "2")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertRegex(result.stdout, r'advertising "DoorLock" as ([0-9A-F]{2}:){5}[0-9A-F]{2} with services \[' + DOOR_SERVICE)
        # Every line of the log starts with its time, the first and the last too.
        lines = result.stdout.splitlines()
        stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "
        self.assertRegex(lines[0], stamp + 'advertising "DoorLock"')
        self.assertRegex(lines[-1], stamp + "stopped$")

    def test_serve_heart_rate_with_a_name(self):
        result = ble("serve", "heart-rate", "--name", "My HRM", "--duration", "1")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('advertising "My HRM"', result.stdout)
        self.assertIn("180D, 180F", result.stdout)

    def test_serve_json_profile(self):
        profile = {"name": "Custom", "services": [{"uuid": "181A", "characteristics": [
            {"uuid": "2A6E", "properties": ["read", "notify"], "value": "e803",
             "descriptors": [{"uuid": "2901", "text": "Temperature"}]}]}]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(profile, f)
        try:
            result = ble("serve", f.name, "--duration", "1")
        finally:
            os.unlink(f.name)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn('advertising "Custom"', result.stdout)
        self.assertIn("[181A]", result.stdout)

    def test_a_secondary_service_no_primary_includes_is_not_advertised(self):
        profile = {"name": "Sec", "advertise": ["180F", "181A"], "services": [
            {"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read"], "value": "57"}]},
            {"uuid": "181A", "primary": False,
             "characteristics": [{"uuid": "2A6E", "properties": ["read"], "value": "e803"}]}]}
        result = self.serve_profile(json.dumps(profile))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("[180F]", result.stdout)
        self.assertEqual(result.stderr, "ble: service Environmental Sensing (181A) is secondary and no primary service "
                                        "includes it: centrals cannot discover it; not advertising it\n")
        # Included by the primary: reachable, advertised as listed.
        profile["services"].reverse()
        profile["services"][1]["includes"] = ["181A"]
        result = self.serve_profile(json.dumps(profile))
        self.assertEqual((result.returncode, result.stderr), (0, ""))
        self.assertIn("[180F, 181A]", result.stdout)

    def test_advertising_fields_are_checked_and_the_unavailable_ones_explained(self):
        battery = '{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read"], "value": "57"}]}'
        for extra, message in [
                ('"appearance": 832', '"appearance" cannot be set: PeripheralManager.startAdvertising takes no '
                                      'appearance'),
                ('"interval": 100', '"interval" cannot be set'),
                ('"scanResponse": {}', '"scanResponse" cannot be set'),
                ('"manufacturerData": "4c"', "manufacturerData is the company identifier (2 octets"),
                ('"manufacturerData": "zz"', "manufacturerData is not hex"),
                ('"txPower": 40', "txPower must be a whole number from -127 to 20"),
                ('"serviceData": {"FEAA": "' + "00" * 28 + '"}', "serviceData.FEAA is 28 octets; at most 27 fit"),
                ('"iBeacon": {"uuid": "nope", "major": 1, "minor": 2, "measuredPower": -59}', "iBeacon.uuid"),
                ('"iBeacon": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 70000, "minor": 2, '
                 '"measuredPower": -59}', "iBeacon.major must be a whole number from 0 to 65535")]:
            result = self.serve_profile('{"name": "F", ' + extra + ', "services": [' + battery + ']}')
            self.assertEqual(result.returncode, 64, (extra, result.stderr))
            self.assertIn(message, result.stderr, extra)
        result = self.serve_profile('{"name": "F", "txPower": -8, "connectable": false, "manufacturerData": "4c0001", '
                                    '"services": [' + battery + ']}')
        self.assertEqual(result.returncode, 0, result.stderr)

    def serve_profile(self, text):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            f.write(text)
        try:
            return ble("serve", f.name, "--duration", "1", timeout=20)
        finally:
            os.unlink(f.name)

    def test_json_profiles_are_checked_strictly(self):
        battery = '{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read"], "value": "57"}]}'
        cases = [
            ('{"services": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": ["read"], '
             '"valu": "57"}]}]}', 'unknown key "valu"'),
            ('{"services": [{"uuid": "180D", "includes": ["180F"], "characteristics": []}]}', "includes names 180F"),
            ('{"services": [%s, %s]}' % (battery, battery), "listed twice"),
            ('{"services": [{"uuid": "180F", "characteristics": [{"uuid": "2A19", "properties": []}]}]}',
             "at least one property"),
            ('{"services": [{"uuid": "181A", "characteristics": [{"uuid": "2A6E", "properties": ["read"], '
             '"descriptors": [{"uuid": "2904", "value": "0e0000272701"}]}]}]}', "7 bytes"),
            ('{"services": [\n  {"uuid": "180D",, }\n]}', "line 2, column"),
            ('{"services": [%s], "advertise": ["180F", "180F"]}' % battery, "twice"),
        ]
        for text, expected in cases:
            with self.subTest(expected=expected):
                result = self.serve_profile(text)
                self.assertEqual(result.returncode, 64, result.stderr)
                self.assertIn(expected, result.stderr.strip().splitlines()[0])
                self.assertIn("Usage: ble serve", result.stderr)

    def test_null_means_absent_in_a_profile(self):
        result = self.serve_profile(
            '{"name": null, "advertise": null, "services": [{"uuid": "180F", "primary": null, "includes": null, '
            '"characteristics": [{"uuid": "2A19", "properties": ["read"], "permissions": null, "value": "57", '
            '"descriptors": [{"uuid": "2901", "text": "Level", "value": null}]}]}]}')
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_the_documented_profile_example_is_served(self):
        readme = open(os.path.join(ROOT, "Sources", "BLE", "BLE.docc", "CommandLineTool.md")).read()
        start = readme.index("The JSON file:")
        block = readme[readme.index("```json", start) + len("```json"):readme.index("```", readme.index("```json", start) + 7)]
        result = self.serve_profile(block)
        self.assertEqual(result.returncode, 0, result.stderr)

    def test_serve_updates_from_a_file_and_standard_input(self):
        """`--updates`: each good line sets the value (no central is subscribed in this process's private room,
        so none is sent: the subscriber's side is `ServeLogTests` in `swift test`); each bad line is reported on
        stderr with its number and skipped."""
        lines = ["# a heart rate", "2A37 0640", "not a line", "2A99 00", "2A38 02", "sleep 0.1", "2A19 text:hi",
                 "2A37 zz", "# the end"]
        with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
            f.write("\n".join(lines))
        # Waited for, then stopped with Ctrl-C: on the fast clock a --duration could end before the lines are read.
        try:
            result = serve_until(["serve", "heart-rate", "--updates", f.name], "updates ended after")
        finally:
            os.unlink(f.name)
        self.assertEqual(result.returncode, 0, result.stderr)
        time = r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z"
        out = result.stdout.splitlines()
        self.assertRegex(out[1], "^" + time + r" \* set 2A37 0640 \(no central is subscribed: reads see it\)$")
        self.assertRegex(out[2], "^" + time + r" \* set 2A19 6869 ")
        self.assertRegex(out[3], "^" + time + " updates ended after 9 lines$")
        errors = result.stderr.strip().splitlines()
        self.assertEqual([e.split(":")[0:2] for e in errors],
                         [["ble", " --updates line 3"], ["ble", " --updates line 4"], ["ble", " --updates line 5"],
                          ["ble", " --updates line 8"]], result.stderr)
        self.assertIn("no characteristic 2A99", errors[1])
        self.assertIn("2A38 has a fixed value", errors[2])
        self.assertTrue(all(e.endswith("; skipped") for e in errors), errors)
        piped = serve_until(["serve", "battery", "--updates", "-"], "* set 2A19 10", stdin="2A19 10\n")
        self.assertEqual(piped.returncode, 0, piped.stderr)
        self.assertRegex(piped.stdout, r"\* set 2A19 10 \(no central")

    def test_serve_rejects_unknown_profile(self):
        self.assertNotEqual(ble("serve", "no-such-profile").returncode, 0)


class BTSnoopTests(unittest.TestCase):
    """`ble btsnoop FILE` on a capture the tool itself recorded (`--btsnoop`), checked against tshark's reading
    of the same file, and on files that are not btsnoop or are cut short."""

    def capture(self, folder):
        path = os.path.join(folder, "read.btsnoop")
        result = ble("read", "HRM-Demo", "2A38", "--btsnoop", path)
        self.assertEqual(result.returncode, 0, result.stderr)
        return path

    def test_every_record_of_a_capture_is_listed_as_tshark_reads_it(self):
        tshark = shutil.which("tshark")
        self.assertIsNotNone(tshark, "tshark is missing: Scripts/setup-peers.sh installs it")
        with tempfile.TemporaryDirectory() as folder:
            path = self.capture(folder)
            result = ble("btsnoop", path, "--json")
            self.assertEqual(result.returncode, 0, result.stderr)
            records = [json.loads(line) for line in result.stdout.splitlines()]
            self.assertEqual([r["record"] for r in records], list(range(len(records))))
            self.assertEqual(records[0]["time"], 0)
            self.assertTrue(all(a["time"] <= b["time"] for a, b in zip(records, records[1:])))
            self.assertEqual((records[0]["from"], records[0]["kind"], records[0]["summary"], records[0]["handle"]),
                             ("host", "command", "HCI Command Reset", None))
            self.assertIn({"from": "controller", "kind": "event",
                           "summary": "HCI Event Command Complete Reset status=Success (0x00)"},
                          [{k: r[k] for k in ("from", "kind", "summary")} for r in records])
            # Decoded down to ATT: the read of 2A38's value and its answer, on the link's handle.
            summaries = [(r["from"], r["summary"]) for r in records if r["kind"] == "acl"]
            self.assertTrue(any(f == "host" and re.fullmatch(r"ATT Read Request handle 0x[0-9A-F]{4}", t)
                                for f, t in summaries), summaries)
            self.assertIn(("controller", "ATT Read Response value 01"), summaries)
            connected = next(r for r in records if r["summary"].startswith("HCI Event LE Connection Complete"))
            self.assertRegex(connected["summary"], r"status=Success \(0x00\) handle 0x[0-9A-F]{4} role=central "
                                                   r"peer=00:1B:DC:0A:12:34 \(public\) interval=\d+(\.\d+)? ms")
            self.assertIsNotNone(connected["handle"])
            self.assertTrue(any(r["summary"].startswith("HCI Event Disconnection Complete") and "reason=" in r["summary"]
                                for r in records))
            # The ATT Read Request for 2A38's handle went out and its response came back, inside ACL packets.
            acl = [r for r in records if r["kind"] == "acl"]
            self.assertTrue(any(r["from"] == "host" and r["hex"][4:8] == "0400" and r["hex"][8:10] == "0a"
                                for r in acl), acl)
            self.assertTrue(any(r["from"] == "controller" and r["hex"][8:10] == "0b" for r in acl), acl)
            self.assertNotIn("undecodable", {r["kind"] for r in records})
            # tshark reads the same records, in the same order, the same way round.
            rows = subprocess.run(
                [tshark, "-r", path, "-T", "fields", "-e", "hci_h4.direction", "-e", "hci_h4.type"],
                capture_output=True, text=True, timeout=120)
            self.assertEqual(rows.returncode, 0, rows.stderr)
            kinds = {"0x01": "command", "0x02": "acl", "0x04": "event"}
            theirs = [("host" if d == "0x00" else "controller", kinds.get(t, t))
                      for d, t in (line.split("\t") for line in rows.stdout.splitlines())]
            self.assertEqual(theirs, [(r["from"], r["kind"]) for r in records])
            # The text form: one line per record, the same records.
            text = ble("btsnoop", path)
            self.assertEqual(text.returncode, 0, text.stderr)
            lines = text.stdout.splitlines()
            self.assertEqual(len(lines), len(records))
            self.assertRegex(lines[0], r"^\s+0\s+0\.000000  H>C        HCI Command Reset$")
            self.assertTrue(any(re.search(r"  C>H 0x[0-9A-F]{4} ATT Read Response value 01$", line) for line in lines))
            # --hex adds the bytes after each line: the read response's ACL data (L2CAP length, channel, ATT).
            hexed = ble("btsnoop", path, "--hex").stdout.splitlines()
            self.assertEqual(len(hexed), len(lines))
            self.assertTrue(any(line.endswith("ATT Read Response value 01  020004000b01") for line in hexed), hexed)

    def test_a_pairing_is_decoded_with_its_keys_redacted_unless_asked(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "pair.btsnoop")
            # A store of its own: the bond made here must not follow the other tests to a DoorLock that lost it.
            paired = subprocess.run([BLE, "pair", "DoorLock", "--btsnoop", path], capture_output=True, text=True,
                                    timeout=60, env=dict(ENV, XDG_STATE_HOME=folder))
            self.assertEqual(paired.returncode, 0, paired.stderr)
            lines = ble("btsnoop", path).stdout.splitlines()
            self.assertTrue(any(re.search(r" H>C 0x[0-9A-F]{4} SMP Pairing Request io=NoInputNoOutput oob=absent "
                                          r"auth=bond,sc max_key_size=16 initiator_keys=enc,id", line)
                                for line in lines), lines)
            randoms = [line for line in lines if " SMP Pairing Random " in line]
            self.assertEqual(len(randoms), 2, lines)
            self.assertTrue(all(line.endswith("value=<redacted>") for line in randoms), randoms)
            self.assertTrue(any(re.search(r"LE Enable Encryption handle 0x[0-9A-F]{4} .* ltk=<redacted>$", line)
                                for line in lines))
            # --hex does not give away what the line hides; --secrets shows both.
            hexed = ble("btsnoop", path, "--hex").stdout.splitlines()
            self.assertTrue(all(line.endswith("value=<redacted>  <redacted>") for line in hexed
                                if " SMP Pairing Random " in line))
            shown = ble("btsnoop", path, "--secrets").stdout.splitlines()
            self.assertTrue(all(re.search(r"value=[0-9a-f]{32}$", line) for line in shown if " SMP Pairing Random " in line))
            records = [json.loads(line) for line in ble("btsnoop", path, "--json").stdout.splitlines()]
            secret = [r for r in records if "<redacted>" in r["summary"]]
            self.assertTrue(secret and all(r["hex"] is None for r in secret), secret)

    def test_a_capture_cut_part_way_lists_what_it_has_then_fails(self):
        with tempfile.TemporaryDirectory() as folder:
            path = self.capture(folder)
            whole = ble("btsnoop", path).stdout.splitlines()
            with open(path, "rb") as file:
                data = file.read()
            cut = os.path.join(folder, "cut.btsnoop")
            # Past the header and the first record (16 + 24 + 4 octets: HCI Reset), part way into the second.
            with open(cut, "wb") as file:
                file.write(data[:16 + 28 + 10])
            result = ble("btsnoop", cut)
            self.assertEqual(result.returncode, 1)
            self.assertEqual(result.stdout.splitlines(), whole[:1])
            self.assertEqual(result.stderr,
                             f"ble: {cut}: the capture ends inside record 1 (at byte 44): the rest of it is missing\n")

    def test_a_file_that_is_not_btsnoop_is_refused(self):
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "profile.json")
            with open(path, "w") as file:
                file.write('{"services": []}\n')
            result = ble("btsnoop", path)
            self.assertEqual((result.returncode, result.stdout), (1, ""))
            self.assertIn("not a btsnoop capture", result.stderr)
            # A file that is not there is a usage error, as for every command given a file.
            missing = ble("btsnoop", os.path.join(folder, "missing.log"))
            self.assertEqual(missing.returncode, 64)
            self.assertIn("is not a readable file", missing.stderr)


class LogAndTraceTests(unittest.TestCase):
    """-v and -vv print what the stack notices and --trace every packet decoded, on stderr, each line with its
    time; stdout keeps the command's own output."""

    STAMP = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z "

    def own(self, stderr):
        """The lines about the tool's own device (the private room's devices log in the same process)."""
        return [line for line in stderr.splitlines() if "[ble]" in line]

    def test_quiet_by_default(self):
        result = ble("read", "HRM-Demo", "2A19")
        self.assertEqual((result.returncode, result.stderr), (0, ""))

    def test_v_shows_the_link_and_vv_the_gatt_requests(self):
        result = ble("read", "HRM-Demo", "2A19", "-v")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split()[0], "57")
        lines = self.own(result.stderr)
        self.assertTrue(all(re.match(self.STAMP + r"debug host\[ble\]: ", line) for line in lines), lines)
        said = [line.split(": ", 1)[1] for line in lines]
        self.assertTrue(any(re.fullmatch(r"0x[0-9A-F]{4} connected to 00:1B:DC:0A:12:34 \(public\) as central .*", s)
                            for s in said), said)
        self.assertTrue(any(re.fullmatch(r"0x[0-9A-F]{4} ATT_MTU \d+", s) for s in said), said)
        self.assertTrue(any(re.fullmatch(r"0x[0-9A-F]{4} disconnected: .* \(0x[0-9A-F]{2}\)", s) for s in said), said)
        self.assertFalse(any("GATT" in s for s in said), said)
        detailed = ble("read", "HRM-Demo", "2A19", "-vv")
        self.assertEqual(detailed.returncode, 0, detailed.stderr)
        self.assertTrue(any(re.search(r"trace host\[ble\]: 0x[0-9A-F]{4} GATT read 0x[0-9A-F]{4}: 1 octet 57$", line)
                            for line in self.own(detailed.stderr)), detailed.stderr)
        # BLE_LOG_LEVEL sets the same levels.
        by_variable = subprocess.run([BLE, "read", "HRM-Demo", "2A19"], capture_output=True, text=True, timeout=60,
                                     env=dict(ENV, BLE_LOG_LEVEL="debug"))
        self.assertTrue(any(" connected to 00:1B:DC:0A:12:34" in line for line in self.own(by_variable.stderr)),
                        by_variable.stderr)

    def test_trace_shows_the_read_request_and_its_response(self):
        result = ble("read", "HRM-Demo", "2A19", "--trace")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.split()[0], "57", "the value stays alone on stdout")
        lines = result.stderr.splitlines()
        self.assertTrue(all(re.match(self.STAMP + r"(H>C|C>H) (0x[0-9A-F]{4}|      ) \S", line) for line in lines),
                        lines)
        request = [i for i, line in enumerate(lines)
                   if re.search(r" H>C 0x[0-9A-F]{4} ATT Read Request handle 0x[0-9A-F]{4}$", line)]
        response = [i for i, line in enumerate(lines) if line.endswith(" ATT Read Response value 57")]
        self.assertTrue(request and response and request[0] < response[0], lines)
        self.assertTrue(any(" HCI Command Reset" in line for line in lines))
        self.assertTrue(any(re.search(r"HCI Event LE Advertising Report ADV_IND 00:1B:DC:0A:12:34 \(public\) "
                                      r"rssi=-\d+ dBm .*Complete Local Name \"HRM-Demo\"", line) for line in lines))
        # -vvv is -vv with the trace.
        both = ble("read", "HRM-Demo", "2A19", "-vvv")
        self.assertTrue(any(line.endswith(" ATT Read Response value 57") for line in both.stderr.splitlines()))
        self.assertIn("GATT read", both.stderr)


class InterruptTests(unittest.TestCase):
    """Ctrl-C ends a command that runs until interrupted with 0 once it does what it was asked (scanning,
    subscribed, every link up), and with 130 before that, as every other command: nothing was found yet. SIGTERM
    and SIGQUIT (Ctrl-\\) stop a command as Ctrl-C does, with 143 and 131 where Ctrl-C gives 130."""

    STOPS = ((signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGQUIT, 131))

    def interrupted(self, args, after_line, number=signal.SIGINT):
        # In wall-clock time, so that the interrupt comes while the command still looks for its device.
        env = dict(ENV)
        env.pop("BLE_SIM_SPEED", None)
        process = subprocess.Popen([BLE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            if after_line:
                LineReader(process.stdout).line(30)
            else:
                # Nothing will be printed: the command is still scanning for a name nobody advertises.
                ready, _, _ = select.select([process.stdout], [], [], 1.5)
                self.assertEqual(ready, [], "it printed something")
            process.send_signal(number)
            status = process.wait(10)
            self.assertNotIn(b"crash", process.stderr.read().lower())
            return status
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)
            process.stdout.close()
            process.stderr.close()

    def test_before_anything_happened_it_is_128_plus_the_signal(self):
        for args in (["subscribe", "Nope", "2A19", "--timeout", "60"], ["connect", "Nope", "--timeout", "60"]):
            for number, status in self.STOPS:
                with self.subTest(args=args, signal=number):
                    self.assertEqual(self.interrupted(args, after_line=False, number=number), status)

    def test_once_it_runs_it_is_0(self):
        for args in (["subscribe", "HRM-Demo", "2A37"], ["connect", "HRM-Demo"], ["scan", "--timeout", "0"]):
            for number, _ in self.STOPS:
                with self.subTest(args=args, signal=number):
                    self.assertEqual(self.interrupted(args, after_line=True, number=number), 0)

    def test_a_stopped_command_closes_its_link_before_it_exits(self):
        # The tool's own capture shows the link asked to close and closed, not a process that vanished with it up.
        for number in (signal.SIGINT, signal.SIGTERM):
            with self.subTest(signal=number), tempfile.TemporaryDirectory() as folder:
                capture = os.path.join(folder, "stop.btsnoop")
                status = self.interrupted(["connect", "HRM-Demo", "--btsnoop", capture], after_line=True,
                                          number=number)
                self.assertEqual(status, 0)
                listing = ble("btsnoop", capture)
                self.assertEqual(listing.returncode, 0, listing.stderr)
                self.assertRegex(listing.stdout, r"H>C 0x[0-9a-f]{4} HCI Command Disconnect handle ",
                                 listing.stdout[-2000:])
                self.assertIn("HCI Event Disconnection Complete status=Success", listing.stdout,
                              listing.stdout[-2000:])

    def test_waiting_for_a_controller_ends_at_the_timeout_or_a_signal(self):
        # Nothing connects to this tcp-server transport: --timeout bounds the wait, and a signal ends it.
        started = time.monotonic()
        result = ble("read", "HRM-Demo", "2A19", "--timeout", "1", "--transport", "tcp-server:127.0.0.1:0",
                     timeout=30)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertLess(time.monotonic() - started, 20)
        self.assertRegex(result.stderr.splitlines()[-1],
                         r"^ble: --transport tcp-server:127\.0\.0\.1:0: no controller connected within 1 s$")
        for number, status in self.STOPS:
            with self.subTest(signal=number):
                process = subprocess.Popen([BLE, "scan", "--transport", "tcp-server:127.0.0.1:0"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
                try:
                    self.assertIn("waiting for a controller", LineReader(process.stderr).line(20))
                    process.send_signal(number)
                    self.assertEqual(process.wait(5), status)
                finally:
                    if process.poll() is None:
                        process.kill()
                        process.wait(10)
                    process.stderr.close()


class ClosedOutputTests(unittest.TestCase):
    """A command whose output closes (its reader, `head -1`, has what it wanted) ends quietly and soon, as Unix
    tools do: status 141 (128 + SIGPIPE), nothing on stderr, no crash report."""

    def first_line_then_close(self, *args):
        process = subprocess.Popen([BLE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV)
        try:
            first = LineReader(process.stdout).line(30)
            process.stdout.close()
            status = process.wait(30)
            return first, status, process.stderr.read().decode()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(10)

    def test_streaming_commands_end_quietly_when_their_reader_leaves(self):
        for args in (["scan", "--timeout", "30", "--duplicates"], ["subscribe", "HRM-Demo", "2A37", "--count", "60"],
                     ["connect", "HRM-Demo", "--subscribe", "2A37", "--duration", "60"],
                     ["serve", "battery", "--duration", "60"]):
            with self.subTest(args=args):
                first, status, err = self.first_line_then_close(*args)
                self.assertTrue(first, args)
                self.assertEqual(status, 141, err)
                self.assertEqual(err, "", args)

    def test_a_quiet_command_ends_when_its_reader_leaves_without_writing_again(self):
        # In wall-clock time and with no --duration: the served battery and the controller print nothing after
        # their first line, so only looking at the pipe (not a failed write) can end them.
        env = dict(ENV)
        env.pop("BLE_SIM_SPEED", None)
        for args in (["serve", "battery", "--name", "Quiet"], ["controller", "tcp-server:127.0.0.1:0"]):
            with self.subTest(args=args):
                process = subprocess.Popen([BLE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
                try:
                    self.assertTrue(LineReader(process.stdout).line(30))
                    process.stdout.close()
                    self.assertEqual(process.wait(10), 141)
                    self.assertEqual(process.stderr.read().decode(), "")
                finally:
                    if process.poll() is None:
                        process.kill()
                        process.wait(10)
                    process.stderr.close()

    def test_a_listing_ends_when_its_reader_leaves(self):
        with tempfile.TemporaryDirectory() as folder:
            capture = os.path.join(folder, "c.btsnoop")
            # Twice a pipe's buffer of lines (about 120 kB), so the listing cannot end before its reader leaves.
            self.assertEqual(ble("subscribe", "HRM-Demo", "2A37", "--count", "1000", "--btsnoop", capture).returncode, 0)
            process = subprocess.Popen([BLE, "btsnoop", capture], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       env=ENV)
            try:
                self.assertTrue(LineReader(process.stdout).line(30))
                process.stdout.close()
                self.assertEqual(process.wait(30), 141)
                self.assertEqual(process.stderr.read().decode(), "")
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
                process.stderr.close()


if __name__ == "__main__":
    if not os.path.exists(BLE):
        raise SystemExit(f"{BLE} is missing: run `swift build --product ble` first")
    unittest.main(verbosity=2)
