#!/usr/bin/env python3
"""Checks `ble shell` as its users meet it: driven by a script on standard input (one command per line, the
output and exit status a script sees), and typed at a terminal (a pseudo-terminal whose screen is read with
pyte, a terminal emulator pinned in .venv by Scripts/setup-peers.sh): the prompt, Tab completion, history,
values printed above a line being typed, Ctrl-C and Ctrl-D. Runs the already-built `.build/debug/ble` on the
private simulated radio (`virtual`); every wait is bounded, and every process started is stopped."""
import fcntl
import json
import os
import pty
import re
import select
import shutil
import signal
import struct
import subprocess
import tempfile
import termios
import time
import unittest

import pyte

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLE = os.path.join(ROOT, ".build", "debug", "ble")
NOTIFY_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z Heart Rate Measurement \(2A37\) notify [0-9a-f]+  \d+ bpm")
EXIT_DISCONNECTED = 8
EXIT_USAGE = 64


class StateFolder:
    """A private $XDG_STATE_HOME per test: no store or history of the user's is read or written."""

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="ble-shell-state-")
        self.addCleanup(shutil.rmtree, self.state, True)

    def env(self, **extra):
        return dict(os.environ, BLE_TRANSPORT="virtual", XDG_STATE_HOME=self.state, **extra)


class ScriptedShellTests(StateFolder, unittest.TestCase):
    """The shell driven by a script on stdin: no prompt, each command run to its end before the next."""

    def shell(self, script, timeout=90):
        return subprocess.run([BLE, "shell"], input=script, capture_output=True, text=True, timeout=timeout,
                              env=self.env(BLE_SIM_SPEED="fast"))

    def test_one_connection_serves_every_command(self):
        result = self.shell("\n".join([
            "# a comment, then a blank line",
            "",
            "connect HRM-Demo",
            "read 2A19",
            "read 2A19 --format uint",
            "read 2A37 --descriptor 2902",
            "mtu",
            "rssi",
            "info",
            "disconnect",
        ]) + "\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertRegex(lines[0], r"^connected to HRM-Demo \(00:1B:DC:0A:12:34\), ATT MTU \d+; 5 services, "
                                   r"\d+ characteristics$")
        self.assertRegex(lines[1], r"^[0-9a-f]{2}  \d+ %$")
        self.assertEqual(int(lines[2]), int(lines[1][:2], 16))
        self.assertEqual(lines[3], "0000  notifications off, indications off")
        self.assertRegex(lines[4], r"^ATT MTU \d+: a write without response carries up to \d+ bytes, "
                                   r"a write with response up to 512$")
        self.assertRegex(lines[5], r"^-\d+ dBm$")
        self.assertRegex(lines[6], r"^connected to HRM-Demo \(00:1B:DC:0A:12:34\), identifier [0-9A-F-]{36}$")
        self.assertEqual(lines[-1], "disconnected from HRM-Demo (00:1B:DC:0A:12:34)")
        self.assertEqual(result.stderr, "")

    def test_info_shows_the_link_the_options_asked_for(self):
        result = subprocess.run([BLE, "shell", "--mtu", "23", "--connection-interval", "15", "--latency", "2",
                                 "--supervision-timeout", "2000"], input="connect HRM-Demo\ninfo\n",
                                capture_output=True, text=True, timeout=90, env=self.env(BLE_SIM_SPEED="fast"))
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[2:7], ["ATT MTU 23", "interval 15 ms, latency 2, supervision timeout 2000 ms",
                                      "PHY LE 1M (tx) / LE 1M (rx), LL payload 251 (tx) / 251 (rx) octets",
                                      "not encrypted", "not bonded"])
        bad = subprocess.run([BLE, "shell", "--connection-interval", "2"], input="", capture_output=True, text=True,
                             timeout=30, env=self.env())
        self.assertEqual(bad.returncode, EXIT_USAGE)
        self.assertIn("--connection-interval must be MS or MIN-MAX milliseconds", bad.stderr)

    def test_a_written_value_is_read_back_on_the_same_link(self):
        # The door lock's command characteristic takes a byte; its state follows it.
        result = self.shell("connect DoorLock\nread 8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B --format hex\n"
                            "write 8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B 00\n"
                            "read 8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B --format hex\n"
                            "write 8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B 01\n"
                            "read 8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B --format hex\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[2], "wrote 1 byte to Lock Command (8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B)")
        self.assertEqual(lines[3], "00")
        self.assertEqual(lines[5], "01")

    def test_values_arrive_while_the_script_waits_and_stop_after_unsubscribe(self):
        result = self.shell("connect HRM-Demo\nsubscribe 2A37\nwait 3.5\nunsubscribe 2A37\nwait 3\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[1], "subscribed to Heart Rate Measurement (2A37) (notifications)")
        unsubscribed = lines.index("unsubscribed from Heart Rate Measurement (2A37)")
        values = [line for line in lines[2:unsubscribed] if NOTIFY_LINE.match(line)]
        # The sensor notifies once a second: three or four in 3.5 s (the first may come at once).
        self.assertIn(len(values), (3, 4), result.stdout)
        self.assertEqual(lines[2:unsubscribed], values)
        # Nothing after the unsubscription, though the script waited three more seconds.
        self.assertEqual(lines[unsubscribed + 1:], [])

    def test_explore_and_write_without_response_on_the_kept_link(self):
        result = self.shell("connect Printer\nexplore\n"
                            "write 5E1D0002-7A3B-4C8D-9E0F-1A2B3C4D5E6F --without-response --text hello\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("Primary service Printer (5E1D0001-7A3B-4C8D-9E0F-1A2B3C4D5E6F)", result.stdout)
        self.assertIn("wrote 5 bytes to Print Data (5E1D0002-7A3B-4C8D-9E0F-1A2B3C4D5E6F)", result.stdout)

    def test_each_scan_lists_what_it_found_and_devices_keeps_the_latest(self):
        result = self.shell("scan 2\nscan 2 --name hrm\ndevices\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        first_end = next(i for i, line in enumerate(lines) if line.startswith("scan done:"))
        first = lines[:first_end]
        self.assertEqual(lines[first_end], f"scan done: {len(first)} devices found")
        self.assertGreaterEqual(len(first), 6, result.stdout)
        # The time each came, then the address: one line per device.
        self.assertEqual(len({line.split()[1] for line in first}), len(first), "one line per device")
        # The second scan shows its devices again (the name filter: HRM-Demo alone).
        second_end = next(i for i, line in enumerate(lines) if i > first_end and line.startswith("scan done:"))
        second = lines[first_end + 1:second_end]
        self.assertEqual(len(second), 1, result.stdout)
        self.assertIn('"HRM-Demo"', second[0])
        self.assertEqual(lines[second_end], "scan done: 1 device found")
        devices = lines[second_end + 1:]
        self.assertEqual(len(devices), len(first), result.stdout)
        self.assertTrue(any(re.match(r'^00:1B:DC:0A:12:34  [0-9A-F-]{36}  -\d+ dBm  "HRM-Demo"$', line)
                            for line in devices), devices)

    def test_scan_takes_the_filters_and_formats_of_ble_scan(self):
        result = self.shell("scan 2 --address 00:1b:dc --json\nscan --timeout 2 --manufacturer 0x004C --sort rssi\n"
                            "scan 1 --name ''\n")
        self.assertEqual(result.returncode, 64, result.stderr)
        lines = result.stdout.splitlines()
        first_end = next(i for i, line in enumerate(lines) if line.startswith("scan done:"))
        records = [json.loads(line) for line in lines[:first_end]]
        self.assertEqual(sorted(r["address"] for r in records), ["00:1B:DC:0A:12:34", "00:1B:DC:0A:56:78"])
        self.assertEqual(lines[first_end], "scan done: 2 devices found")
        beacon = lines[first_end + 1]
        self.assertIn("iBeacon", beacon)
        self.assertRegex(beacon, r"\d+ reports, rssi ")
        self.assertEqual(lines[first_end + 2], "scan done: 1 device found")
        self.assertIn("--name", result.stderr)

    def test_a_failure_is_said_and_the_script_goes_on_then_exits_with_its_status(self):
        result = self.shell("read 2A19\nfrobnicate\nconnect HRM-Demo\nread 2A19\nquit\nread 2A19\n")
        self.assertEqual(result.returncode, EXIT_DISCONNECTED, result.stderr)
        errors = result.stderr.splitlines()
        # Each error names the script's line, as a compiler's does.
        self.assertEqual(errors[0], "ble: line 1: not connected: 'connect TARGET' first")
        self.assertEqual(errors[1], "ble: line 2: no command 'frobnicate' ('help' lists them)")
        lines = result.stdout.splitlines()
        self.assertTrue(lines[0].startswith("connected to HRM-Demo"), result.stdout)
        # 'quit' ends the script: the read after it does not run.
        self.assertEqual(len([line for line in lines if line.endswith(" %")]), 1, result.stdout)

    def test_a_line_that_cannot_be_parsed_is_a_usage_error(self):
        result = self.shell('read --format roman 2A19\nconnect "HRM-Demo\n')
        self.assertEqual(result.returncode, EXIT_USAGE)
        errors = result.stderr.splitlines()
        self.assertTrue(errors[0].startswith("ble: line 1: read: "), result.stderr)
        self.assertIn("roman", errors[0])
        self.assertIn("ble: line 2: a \" quote is not closed", result.stderr)

    def test_several_devices_stay_connected_and_use_chooses_among_them(self):
        result = self.shell("\n".join([
            "connect HRM-Demo", "connect Thermometer", "links", "subscribe 2A1C", "use hrm-demo", "subscribe 2A37",
            "wait 3", "read 2A19", "disconnect Thermometer", "links", "use Thermometer",
        ]) + "\n")
        self.assertEqual(result.returncode, 3, result.stderr)
        lines = result.stdout.splitlines()
        self.assertRegex(lines[2], r"^  HRM-Demo \(00:1B:DC:0A:12:34\)  [0-9A-F-]{36}$")
        self.assertRegex(lines[3], r"^\* Thermometer \(F7:C0:80:29:FD:EA\)  [0-9A-F-]{36}$")
        self.assertIn("using HRM-Demo (00:1B:DC:0A:12:34)", lines)
        # Values of both devices, each line naming its device; the read went to the device in use.
        self.assertTrue(any(re.match(r"^\S+Z Thermometer: Temperature Measurement \(2A1C\) indicate ", line)
                            for line in lines), result.stdout)
        self.assertTrue(any(re.match(r"^\S+Z HRM-Demo: Heart Rate Measurement \(2A37\) notify ", line)
                            for line in lines), result.stdout)
        self.assertTrue(any(re.match(r"^[0-9a-f]{2}  \d+ %$", line) for line in lines), result.stdout)
        self.assertIn("disconnected from Thermometer (F7:C0:80:29:FD:EA)", lines)
        self.assertRegex(lines[-1], r"^\* HRM-Demo \(00:1B:DC:0A:12:34\)  [0-9A-F-]{36}$")
        self.assertEqual(result.stderr.splitlines(),
                         ["ble: line 11: 'Thermometer' is none of the connected devices: HRM-Demo (00:1B:DC:0A:12:34)"])

    def test_rssi_watch_prints_a_reading_per_period_with_its_time(self):
        result = self.shell("connect HRM-Demo\nrssi --watch 0.5 --count 3\nrssi --count 2\n")
        self.assertEqual(result.returncode, EXIT_USAGE, result.stderr)
        readings = [line for line in result.stdout.splitlines() if line.endswith(" dBm")]
        self.assertEqual(len(readings), 3, result.stdout)
        for line in readings:
            self.assertRegex(line, r"^\d{4}-\d\d-\d\dT[\d:.]+Z -\d+ dBm$")
        self.assertIn("--count goes with --watch", result.stderr)

    def test_a_negative_number_is_refused_by_the_commands_own_check(self):
        # ArgumentParser took "-1" for an option ("Missing expected argument", "Unknown option '-1'").
        result = self.shell("wait -1\nscan -1\n")
        self.assertEqual(result.returncode, EXIT_USAGE)
        errors = [line for line in result.stderr.splitlines() if line.startswith("ble: ")]
        self.assertEqual(errors, ["ble: line 1: wait: SECONDS must be 0 or more seconds, not -1",
                                  "ble: line 2: scan: SECONDS must be more than 0 seconds, not -1"])

    def test_help_lists_every_command_and_one_commands_options(self):
        result = self.shell("help\nhelp write\n")
        self.assertEqual(result.returncode, 0, result.stderr)
        for command in ("scan", "connect", "explore", "read", "write", "subscribe", "unsubscribe", "mtu", "rssi",
                        "disconnect", "quit"):
            self.assertRegex(result.stdout, rf"(?m)^  {command}\b")
        self.assertIn("--without-response", result.stdout)


class Terminal:
    """`ble shell` on a pseudo-terminal of 100 columns by 30 rows, its screen kept by pyte."""

    COLUMNS, ROWS = 100, 30

    def __init__(self, env, args=("shell",)):
        self.screen = pyte.Screen(self.COLUMNS, self.ROWS)
        self.stream = pyte.ByteStream(self.screen)
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", self.ROWS, self.COLUMNS, 0, 0))
        # The terminal is the child's controlling terminal, so Ctrl-C typed there is SIGINT, echoed as ^C.
        self.process = subprocess.Popen([BLE, *args], stdin=slave, stdout=slave, stderr=slave, env=env,
                                        start_new_session=True,
                                        preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
        os.close(slave)

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        os.close(self.master)

    def pump(self, seconds):
        """Reads what the shell draws for `seconds` (or until it ends)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.stream.feed(data)

    def wait_for(self, predicate, what, seconds=20):
        """Reads until `predicate(self)` holds; fails naming `what` and showing the screen after `seconds`."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if predicate(self):
                return
            self.pump(0.1)
        raise AssertionError(f"{what} did not appear within {seconds} s; the screen:\n" + "\n".join(self.lines()))

    def type(self, keys):
        os.write(self.master, keys.encode() if isinstance(keys, str) else keys)

    def lines(self):
        return [line.rstrip() for line in self.screen.display]

    def cursor_line(self):
        return self.screen.display[self.screen.cursor.y].rstrip()

    def shows(self, text):
        return any(text in line for line in self.lines())


class InteractiveShellTests(StateFolder, unittest.TestCase):
    def start(self):
        terminal = Terminal(self.env())
        self.addCleanup(terminal.close)
        terminal.wait_for(lambda t: t.cursor_line() == "ble>", "the prompt")
        return terminal

    def connect_to_heart_rate_sensor(self, t):
        t.type("scan 2\r")
        t.wait_for(lambda t: t.shows("scan done:"), "the end of the scan")
        t.type("connect HRM\t")
        t.wait_for(lambda t: t.cursor_line() == "ble> connect HRM-Demo", "the completed device name")
        t.type("\r")
        t.wait_for(lambda t: t.cursor_line() == "ble [HRM-Demo]>", "the connected prompt")

    def test_tab_completes_commands_names_and_uuids(self):
        t = self.start()
        t.type("sub\t")
        t.wait_for(lambda t: t.cursor_line() == "ble> subscribe", "'subscribe' completed")
        t.type("\x15scan 2\r")
        t.wait_for(lambda t: t.shows("scan done:"), "the end of the scan")
        # A name with a space is completed in quotes.
        t.type('connect Env\t')
        t.wait_for(lambda t: t.cursor_line() == 'ble> connect "Environment Hub"', "the quoted name")
        t.type("\x15")
        self.connect_to_heart_rate_sensor_after_scan(t)
        # Several characteristics start with 2A3: the first Tab rings, the second lists them above the prompt.
        t.type("read 2A3\t\t")
        t.wait_for(lambda t: t.shows("2A37  2A38  2A39"), "the list of candidates")
        self.assertEqual(t.cursor_line(), "ble [HRM-Demo]> read 2A3")
        t.type("7 --for\t")
        t.wait_for(lambda t: t.cursor_line() == "ble [HRM-Demo]> read 2A37 --format", "the option completed")
        # Characteristics by name too, in any case, quoted.
        t.type("\x15read batt\t")
        t.wait_for(lambda t: t.cursor_line() == 'ble [HRM-Demo]> read "Battery Level"', "the completed name")
        t.type("\r")
        t.wait_for(lambda t: t.shows(" %"), "the value read by its name")

    def connect_to_heart_rate_sensor_after_scan(self, t):
        t.type("connect HRM\t\r")
        t.wait_for(lambda t: t.cursor_line() == "ble [HRM-Demo]>", "the connected prompt")

    def test_values_arrive_above_the_line_being_typed(self):
        t = self.start()
        self.connect_to_heart_rate_sensor(t)
        t.type("subscribe 2A37\r")
        t.wait_for(lambda t: t.shows("subscribed to Heart Rate Measurement (2A37)"), "the subscription")
        t.type("read 2A")
        count = lambda t: sum(1 for line in t.lines() if NOTIFY_LINE.match(line))
        before = count(t)
        t.wait_for(lambda t: count(t) >= before + 2, "two more values")
        # The half-typed line is still there, on the last line drawn, with the cursor after it.
        self.assertEqual(t.cursor_line(), "ble [HRM-Demo]> read 2A")
        self.assertEqual(t.screen.cursor.x, len("ble [HRM-Demo]> read 2A"))
        self.assertTrue(NOTIFY_LINE.match(t.lines()[t.screen.cursor.y - 1]), t.lines())
        t.type("19\r")
        t.wait_for(lambda t: any(re.match(r"^[0-9a-f]{2}  \d+ %$", line) for line in t.lines()), "the read value")

    def test_history_ctrl_c_and_ctrl_d(self):
        t = self.start()
        t.type("help mtu\r")
        t.wait_for(lambda t: t.shows("USAGE: mtu"), "the help for mtu")
        t.type("wait 60\r")
        t.wait_for(lambda t: t.shows("ble> wait 60"), "the wait command entered")
        started = time.monotonic()
        t.type("\x03")
        t.wait_for(lambda t: t.shows("interrupted"), "the interrupted command", seconds=10)
        self.assertLess(time.monotonic() - started, 10)
        # Up twice: the commands entered, newest first.
        t.type("\x1b[A")
        t.wait_for(lambda t: t.cursor_line() == "ble> wait 60", "the last command from the history")
        t.type("\x1b[A")
        t.wait_for(lambda t: t.cursor_line() == "ble> help mtu", "the one before it")
        t.type("\x1b[B\x1b[B")
        t.wait_for(lambda t: t.cursor_line() == "ble>", "the empty line again")
        # Ctrl-D on an empty line leaves, with status 0, and the history is kept for the next session.
        t.type("\x04")
        self.assertEqual(t.process.wait(20), 0)
        with open(os.path.join(self.state, "swift-ble", "shell_history")) as history:
            self.assertEqual(history.read().splitlines(), ["help mtu", "wait 60"])
        again = self.start()
        again.type("\x1b[A")
        again.wait_for(lambda t: t.cursor_line() == "ble> wait 60", "the history of the last session")

    def test_two_shells_at_once_both_keep_their_history_and_ctrl_r_finds_it(self):
        first, second = self.start(), self.start()
        first.type("help mtu\r")
        first.wait_for(lambda t: t.shows("USAGE: mtu"), "the first shell's help")
        second.type("help rssi\r")
        second.wait_for(lambda t: t.shows("USAGE: rssi"), "the second shell's help")
        # The first leaves first; the second, leaving after, used to write its own history over the first's.
        first.type("\x04")
        self.assertEqual(first.process.wait(20), 0)
        second.type("\x04")
        self.assertEqual(second.process.wait(20), 0)
        with open(os.path.join(self.state, "swift-ble", "shell_history")) as history:
            self.assertEqual(history.read().splitlines(), ["help mtu", "help rssi"])
        # Ctrl-R finds an older entry by what it holds; Enter runs it.
        again = self.start()
        again.type("\x12mt")
        again.wait_for(lambda t: t.cursor_line() == "(reverse-i-search)'mt': help mtu", "the entry found")
        again.type("\r")
        again.wait_for(lambda t: t.shows("USAGE: mtu"), "the found command run")

    def test_sigterm_ends_the_session_as_quit_would_and_keeps_its_history(self):
        t = self.start()
        t.type("help mtu\r")
        t.wait_for(lambda t: t.shows("USAGE: mtu"), "the help for mtu")
        self.connect_to_heart_rate_sensor(t)
        t.process.send_signal(signal.SIGTERM)
        self.assertEqual(t.process.wait(20), 143)
        t.pump(0.5)
        # The link was closed politely before it left, and the history kept.
        with open(os.path.join(self.state, "swift-ble", "shell_history")) as history:
            self.assertEqual(history.read().splitlines(), ["help mtu", "scan 2", "connect HRM-Demo "])


class CtrlCAtATerminalTests(StateFolder, unittest.TestCase):
    def test_what_a_command_prints_after_ctrl_c_starts_a_line_of_its_own(self):
        # The terminal echoes ^C where the cursor is; "stopped" used to follow on the same line ("^Cstopped").
        t = Terminal(self.env(), args=("serve", "battery", "--name", "CtrlC"))
        self.addCleanup(t.close)
        t.wait_for(lambda t: t.shows('advertising "CtrlC"'), "the served device")
        t.type("\x03")
        self.assertEqual(t.process.wait(20), 0)
        t.pump(0.5)
        lines = [line for line in t.lines() if line]
        self.assertEqual(lines[-2], "^C", lines)
        self.assertRegex(lines[-1], r"^\d{4}-\d\d-\d\dT[\d:.]+Z stopped$")

    def test_a_command_stopped_by_ctrl_c_leaves_the_cursor_at_the_start_of_a_line(self):
        # What the shell prints next (its prompt, `echo rc=$?`) went after the ^C ("^Crc=130").
        t = Terminal(self.env(), args=("connect", "Nobody", "--timeout", "60"))
        self.addCleanup(t.close)
        # Started (its handlers are in place within milliseconds) and still looking for a name nobody has.
        t.pump(1.5)
        t.type("\x03")
        self.assertEqual(t.process.wait(20), 130)
        t.pump(0.5)
        self.assertIn("^C", t.lines())
        self.assertEqual(t.screen.cursor.x, 0, t.lines())


if __name__ == "__main__":
    unittest.main(verbosity=2)
