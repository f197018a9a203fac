#!/usr/bin/env python3
"""Checks the shared room (`ble room`, the `room` transport, the tool's default) as users see it: several `ble`
processes meeting in one room, a value written by one command read by the next, the room started by the first
command, its status, its stop and its idle stop, what a command says when the room goes away under it or cannot
start, the room's own session, and its control socket with idle clients. Each test has a room of its own (a
private XDG_RUNTIME_DIR), stopped at the end even when the test fails. The room runs in real time; every wait is
bounded. Standard library only."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BLE = os.path.join(ROOT, ".build", "debug", "ble")
DOOR_STATE = "8D3E0002-5C1A-4F2B-9E6A-0C1D2E3F4A5B"
DOOR_COMMAND = "8D3E0003-5C1A-4F2B-9E6A-0C1D2E3F4A5B"
COMMAND = 60  # one command, start to end


class Room:
    """A room folder of a test's own, and the commands run against it."""

    def __init__(self, test):
        # Short: the socket's path must fit the system's 108 bytes.
        self.runtime = tempfile.mkdtemp(prefix="ble-room-", dir="/tmp")
        self.state = tempfile.mkdtemp(prefix="ble-room-state-")
        self.env = dict(os.environ, XDG_RUNTIME_DIR=self.runtime, XDG_STATE_HOME=self.state)
        for name in ("BLE_TRANSPORT", "BLE_SIM_SPEED", "BLE_ROOM_IDLE_TIMEOUT"):
            self.env.pop(name, None)
        self.folder = os.path.join(self.runtime, "swift-ble")
        self.processes = []
        test.addCleanup(self.close)

    def ble(self, *args, timeout=COMMAND, env=None, input_text=None):
        return subprocess.run([BLE, *args], capture_output=True, text=True, timeout=timeout, input=input_text,
                              env=dict(self.env, **(env or {})))

    def start(self, *args, stdin=None, env=None):
        """A long-running `ble` process (stopped at the end)."""
        process = subprocess.Popen([BLE, *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=dict(self.env, **(env or {})))
        self.processes.append(process)
        return process

    def went_away(self):
        """What a command attached to this room says when the room goes away under it."""
        return f"ble: the shared room went away (log: {os.path.join(self.folder, 'room.log')})"

    def pid(self):
        try:
            with open(os.path.join(self.folder, "room.pid")) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def close(self):
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
            for stream in (process.stdin, process.stdout, process.stderr):
                if stream:
                    stream.close()
        pid = self.pid()
        subprocess.run([BLE, "room", "stop"], capture_output=True, timeout=30, env=self.env)
        if pid is not None:
            with_timeout(lambda: not alive(pid), 10)
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.runtime, True)
        shutil.rmtree(self.state, True)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie of ours counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def with_timeout(condition, seconds):
    """Polls `condition` until it holds or `seconds` pass; returns whether it held."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def scan_until(room, wanted, *args, seconds=30):
    """The JSON records of a `ble scan --json` (with `args`) that runs until `wanted` holds of the records so far,
    within `seconds`, and is then interrupted: a scan of a fixed length may end before a loaded machine has let it
    hear anything. A failure says what the scan printed on stderr."""
    scan = room.start("scan", "--timeout", "0", "--json", *args)
    records = []
    try:
        for line in read_lines(scan, seconds):
            records.append(json.loads(line))
            if wanted(records):
                return records
        raise AssertionError(f"the scan ended first, having printed {records}")
    except AssertionError as failure:
        scan.kill()
        _, err = scan.communicate(timeout=COMMAND)
        raise AssertionError(f"{failure}; its stderr: {err.decode()!r}") from None
    finally:
        if scan.poll() is None:
            scan.send_signal(signal.SIGINT)
            scan.communicate(timeout=COMMAND)


def read_lines(process, seconds):
    """The lines of `process`'s stdout as they come, until it ends or `seconds` pass (then an AssertionError)."""
    import select
    deadline = time.monotonic() + seconds
    buffer = b""
    fd = process.stdout.fileno()
    while True:
        ready, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
        if not ready:
            raise AssertionError(f"no line within {seconds} s (partial: {buffer!r})")
        chunk = os.read(fd, 4096)
        if not chunk:
            return
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode()


def read_line(process, needle, seconds):
    """Lines of `process`'s stdout until one contains `needle`, within `seconds` (the lines read so far)."""
    seen = []
    ended = "the output ended"
    try:
        for line in read_lines(process, seconds):
            seen.append(line)
            if needle in line:
                return seen
    except AssertionError as timeout:
        ended = str(timeout)
    raise AssertionError(f"no line with {needle!r} within {seconds} s ({ended}); got {seen}")


class SharedRoomTests(unittest.TestCase):
    def test_a_served_device_is_found_from_another_process(self):
        room = Room(self)
        serve = room.start("serve", "heart-rate", "--name", "My HRM", "--duration", "120")
        read_line(serve, "advertising \"My HRM\"", 30)
        explore = room.ble("explore", "My HRM", "--json")
        self.assertEqual(explore.returncode, 0, explore.stderr)
        tree = json.loads(explore.stdout)
        self.assertEqual(tree["name"], "My HRM")
        self.assertIn("180D", [s["uuid"] for s in tree["services"]])
        # The serving process saw the other one's request for the battery level.
        lines = read_line(serve, " read 2A19 ", 10)
        self.assertTrue(lines)

    def test_a_written_value_is_read_by_the_next_command(self):
        room = Room(self)
        for command, state in (("01", "01"), ("00", "00"), ("01", "01")):
            write = room.ble("write", "DoorLock", DOOR_COMMAND, command)
            self.assertEqual(write.returncode, 0, write.stderr)
            read = room.ble("read", "DoorLock", DOOR_STATE)
            self.assertEqual(read.returncode, 0, read.stderr)
            self.assertEqual(read.stdout.split()[0], state, read.stdout)

    def test_three_processes_share_the_room(self):
        room = Room(self)
        serve = room.start("serve", "heart-rate", "--name", "Shared HRM", "--duration", "120")
        read_line(serve, "advertising", 30)
        subscribe = room.start("subscribe", "Shared HRM", "2A37", "--count", "3")
        # Meanwhile a third process reads the same device.
        read = room.ble("read", "Shared HRM", "2A38")
        self.assertEqual(read.returncode, 0, read.stderr)
        self.assertEqual(read.stdout.split()[0], "01", "the body sensor location: chest")
        out, err = subscribe.communicate(timeout=COMMAND)
        self.assertEqual(subscribe.returncode, 0, err.decode())
        values = [line for line in out.decode().splitlines() if line.strip()]
        self.assertGreaterEqual(len(values), 3, out)
        status = json.loads(room.ble("room", "status", "--json").stdout)
        self.assertTrue(status["running"])
        self.assertGreaterEqual(len(status["devices"]), 1, "the serving process is still attached")

    def test_a_shell_keeps_its_link_and_hears_the_peer_leave(self):
        room = Room(self)
        serve = room.start("serve", "heart-rate", "--name", "Leaving HRM", "--duration", "120")
        read_line(serve, "advertising", 30)
        shell = room.start("shell", stdin=subprocess.PIPE)
        shell.stdin.write(b"connect \"Leaving HRM\"\nread 2A38\n")
        shell.stdin.flush()
        read_line(shell, "connected to Leaving HRM", 30)
        self.assertEqual(read_line(shell, "01", 10)[-1], "01  Chest")
        # The served device leaves: the shell says so at once, without being asked.
        serve.send_signal(signal.SIGINT)
        serve.wait(10)
        line = read_line(shell, "disconnected from", 10)[-1]
        self.assertRegex(line, r"^\S+Z disconnected from Leaving HRM \(", "an event, with its time")
        _, err = shell.communicate(input=b"rssi\n", timeout=COMMAND)
        self.assertRegex(err.decode(), r"^ble: line \d+: not connected: 'connect TARGET' first\n$")
        self.assertEqual(shell.returncode, 8)

    def test_the_first_command_starts_the_room_and_stop_ends_it(self):
        room = Room(self)
        before = room.ble("room", "status")
        self.assertEqual(before.returncode, 1)
        self.assertIn("no room is running", before.stdout)
        demo = {"HRM-Demo", "DoorLock", "Thermometer"}
        scan_until(room, lambda records: demo <= {record["name"] for record in records})
        status = room.ble("room", "status", "--json")
        self.assertEqual(status.returncode, 0, status.stderr)
        record = json.loads(status.stdout)
        self.assertEqual(record["devices"], [], "the scanning process left when it ended")
        self.assertEqual(record["pid"], room.pid())
        self.assertEqual(record["idleTimeout"], 600)
        pid = room.pid()
        stop = room.ble("room", "stop")
        self.assertEqual((stop.returncode, stop.stdout.strip()), (0, "room stopped"), stop.stderr)
        self.assertTrue(with_timeout(lambda: not alive(pid), 10), "the room's process ended")
        # The stores' lock files stay in their folder of the runtime directory; the room's sockets are gone.
        self.assertEqual(sorted(os.listdir(room.folder)), ["locks", "room.lock", "room.log"], "its sockets are gone")
        self.assertEqual(room.ble("room", "stop").stdout.strip(), "no room is running")

    def test_an_idle_room_stops_by_itself(self):
        room = Room(self)
        start = room.ble("room", "start", "--idle-timeout", "1")
        self.assertEqual(start.returncode, 0, start.stderr)
        self.assertRegex(start.stdout, r"^room started \(pid \d+\) on unix:/")
        pid = room.pid()
        self.assertTrue(with_timeout(lambda: not alive(pid), 15), "the room stopped after a second with nobody in it")
        with open(os.path.join(room.folder, "room.log")) as f:
            self.assertIn("room stopped (idle for 1 s)", f.read())

    def test_one_room_per_user(self):
        room = Room(self)
        first = room.ble("room", "start")
        self.assertEqual(first.returncode, 0, first.stderr)
        again = room.ble("room", "start")
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertRegex(again.stdout, r"^room already running \(pid \d+\)")
        second = room.ble("room", "run", "--idle-timeout", "5", timeout=30)
        self.assertEqual(second.returncode, 2, second.stdout + second.stderr)
        self.assertIn("a room is already running", second.stderr)

    def test_a_folder_others_can_write_is_refused(self):
        room = Room(self)
        os.makedirs(room.folder)
        os.chmod(room.folder, 0o777)
        result = room.ble("scan", "--timeout", "1")
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn("can be written by others", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_a_command_says_when_the_room_is_stopped_under_it(self):
        room = Room(self)
        serve = room.start("serve", "heart-rate", "--name", "Short-lived HRM", "--duration", "120")
        read_line(serve, "advertising", 30)
        subscribe = room.start("subscribe", "Short-lived HRM", "2A37")
        read_line(subscribe, " notify ", 30)
        # One that would try again and again for ever: the room will not come back.
        connect = room.start("connect", "HRM-Demo", "--reconnect")
        read_line(connect, "connected to HRM-Demo", 30)
        stop = room.ble("room", "stop")
        self.assertEqual(stop.returncode, 0, stop.stderr)
        for process in (serve, subscribe, connect):
            _, err = process.communicate(timeout=COMMAND)
            self.assertEqual(process.returncode, 2, err.decode())
            self.assertEqual(err.decode().strip().splitlines()[-1], room.went_away(), err.decode())

    def test_a_command_says_when_the_room_is_killed_under_it(self):
        room = Room(self)
        subscribe = room.start("subscribe", "HRM-Demo", "2A37")
        read_line(subscribe, " notify ", 30)
        os.kill(room.pid(), signal.SIGKILL)
        _, err = subscribe.communicate(timeout=COMMAND)
        self.assertEqual(subscribe.returncode, 2, err.decode())
        self.assertEqual(err.decode().strip().splitlines()[-1], room.went_away(), err.decode())
        # The next command starts a new room over what the killed one left.
        read = room.ble("read", "HRM-Demo", "2A38")
        self.assertEqual(read.returncode, 0, read.stderr)

    def test_a_failed_start_quotes_only_what_that_room_wrote(self):
        room = Room(self)
        os.makedirs(room.folder, mode=0o700)
        with open(os.path.join(room.folder, "room.log"), "w") as f:
            f.write("2026-01-01T00:00:00.000Z room stopped (an earlier room's last words)\n")
        busy = socket.socket()
        self.addCleanup(busy.close)
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        result = room.ble("room", "start", "--h4", f"tcp-server:127.0.0.1:{port}")
        self.assertEqual(result.returncode, 2, result.stdout + result.stderr)
        self.assertIn("ble: the shared room did not start: the room cannot listen", result.stderr)
        self.assertNotIn("earlier room", result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)

    def test_the_room_runs_in_a_session_of_its_own(self):
        room = Room(self)
        extra_path = os.path.join(room.runtime, "extra")
        with open(extra_path, "w") as extra:
            # A file the starting command holds (and would hand down if nothing closed it).
            start = subprocess.run([BLE, "room", "start"], capture_output=True, text=True, timeout=COMMAND,
                                   env=room.env, pass_fds=(extra.fileno(),))
        self.assertEqual(start.returncode, 0, start.stderr)
        pid = room.pid()
        # Out of reach of this terminal's Ctrl-C and hang-up from its first instruction: it leads its own session.
        self.assertEqual(os.getsid(pid), pid)
        self.assertEqual(os.getpgid(pid), pid)
        self.assertNotEqual(os.getsid(pid), os.getsid(0))
        fds = f"/proc/{pid}/fd"
        if os.path.isdir(fds):
            targets = {int(fd): os.readlink(os.path.join(fds, fd)) for fd in os.listdir(fds)}
            log = os.path.join(room.folder, "room.log")
            self.assertEqual((targets[0], targets[1], targets[2]), ("/dev/null", log, log))
            self.assertNotIn(extra_path, targets.values())

    def test_idle_control_connections_are_let_go(self):
        room = Room(self)
        self.assertEqual(room.ble("room", "start").returncode, 0)
        control = os.path.join(room.folder, "room.ctl")
        idle = []
        for _ in range(100):
            client = socket.socket(socket.AF_UNIX)
            self.addCleanup(client.close)
            client.connect(control)
            idle.append(client)
        status = room.ble("room", "status", "--json", timeout=30)
        self.assertEqual(status.returncode, 0, status.stderr)
        self.assertTrue(json.loads(status.stdout)["running"])
        # The newest of them, which said nothing, is closed after a few seconds.
        last = idle[-1]
        last.settimeout(15)
        started = time.monotonic()
        self.assertEqual(last.recv(1), b"")
        self.assertLess(time.monotonic() - started, 10)

    def test_bad_idle_timeouts_are_refused(self):
        room = Room(self)
        for value in ("inf", "nan", "-1"):
            result = room.ble("room", "start", "--idle-timeout", value)
            self.assertEqual(result.returncode, 64, result.stderr)
            self.assertIn("--idle-timeout", result.stderr)
        self.assertEqual(room.ble("room", "start", "--h4", "tcp-client:127.0.0.1:1").returncode, 64)


class NamesAndReconnectionTests(unittest.TestCase):
    """Served names too long for an advertisement, names two devices share, devices that leave a scan, and a
    connection that comes back when its device does."""

    def test_a_name_too_long_to_advertise_is_found_by_its_complete_name(self):
        room = Room(self)
        name = "x" * 40
        serve = room.start("serve", "battery", "--name", name, "--duration", "120")
        read_line(serve, "advertising", 30)
        read = room.ble("read", name, "2A19", "--timeout", "5")
        self.assertEqual(read.returncode, 0, read.stderr)
        self.assertRegex(read.stdout, r"^[0-9a-f]{2}  \d+ %\n$")
        # The device advertises again once the read's link has ended in the room, which a loaded machine may take a
        # moment to get to: each scan is asked again, within a bound, until it hears it.
        def scan(*extra):
            deadline = time.monotonic() + 30
            while True:
                result = room.ble("scan", "--timeout", "2", "--name", "xxxx", *extra)
                if result.returncode != 0 or result.stdout.strip() or time.monotonic() > deadline:
                    return result
        found = scan()
        self.assertEqual(found.returncode, 0, found.stderr)
        self.assertIn('"' + "x" * 22 + '" (shortened)', found.stdout)
        found = scan("--json")
        record = json.loads(found.stdout.splitlines()[0])
        self.assertEqual((record["name"], record["nameShortened"]), ("x" * 22, True))
        serve.send_signal(signal.SIGINT)
        _, err = serve.communicate(timeout=COMMAND)
        self.assertIn(f'ble: the name is 40 bytes, longer than an advertisement or a scan response holds (29): it is '
                      f'advertised shortened, as "{"x" * 22}"', err.decode())

    def test_a_name_that_fits_the_scan_response_is_advertised_complete_there(self):
        room = Room(self)
        name = "A-Battery-Of-25-Letters-X"
        serve = room.start("serve", "battery", "--name", name, "--duration", "120")
        read_line(serve, "advertising", 30)
        record = scan_until(room, bool, "--name", name)[0]
        self.assertEqual((record["name"], record["nameShortened"], record["scanResponseFields"]),
                         (name, False, ["name"]))
        self.assertEqual(room.ble("read", name, "2A19").returncode, 0)

    def test_two_devices_of_one_name_are_named_and_one_store_serves_once(self):
        room = Room(self)
        first = room.start("serve", "battery", "--name", "Dup", "--duration", "120")
        read_line(first, "advertising", 30)
        # The same name from the same state folder: the same identity, refused.
        again = room.ble("serve", "battery", "--name", "Dup", "--duration", "5")
        self.assertEqual(again.returncode, 2, again.stderr)
        self.assertIn('ble: another process serves "Dup" (its store ', again.stderr)
        # From another state folder it is another device of that name.
        other_state = tempfile.mkdtemp(prefix="ble-room-state-")
        self.addCleanup(shutil.rmtree, other_state, True)
        second = room.start("serve", "battery", "--name", "Dup", "--duration", "120",
                            env={"XDG_STATE_HOME": other_state})
        read_line(second, "advertising", 30)
        # Told while the link is up (a look for others goes on for a second after it is made).
        read = room.ble("connect", "Dup", "--duration", "2")
        self.assertEqual(read.returncode, 0, read.stderr)
        self.assertRegex(read.stderr, r"^ble: 2 devices match 'Dup': using Dup \(([0-9A-F]{2}:){5}[0-9A-F]{2}\), not "
                                      r"([0-9A-F]{2}:){5}[0-9A-F]{2} \(give an address or an identifier to choose\)\n$")

    def test_a_json_profile_advertises_a_beacon_tx_power_and_service_data(self):
        profile = {"name": "Bcn", "connectable": False, "txPower": -8, "serviceData": {"FEAA": "10ec00"},
                   "iBeacon": {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 7, "minor": 9,
                               "measuredPower": -59},
                   "services": [{"uuid": "180F", "characteristics": [
                       {"uuid": "2A19", "properties": ["read"], "value": "57"}]}]}
        room = Room(self)
        path = os.path.join(room.state, "beacon.json")
        with open(path, "w") as f:
            json.dump(profile, f)
        serve = room.start("serve", path, "--duration", "120")
        read_line(serve, "advertising", 30)
        record = scan_until(room, bool, "--manufacturer", "0x004C", "--name", "Bcn")[0]
        self.assertEqual(record["iBeacon"], {"uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "major": 7, "minor": 9,
                                             "measuredPower": -59})
        self.assertEqual((record["txPowerLevel"], record["serviceData"], record["connectable"]),
                         (-8, {"FEAA": "10ec00"}, False))
        self.assertEqual(record["advertisingType"], "ADV_SCAN_IND", "the rest came in the scan response")

    def test_a_device_that_stops_advertising_is_shown_gone(self):
        room = Room(self)
        serve = room.start("serve", "battery", "--name", "Ghost", "--duration", "120")
        read_line(serve, "advertising", 30)
        # The device stops only once the scan has heard it (its trace shows the report on stderr), however long
        # the scan took to start: a 2 s device and a 9 s scan started after it found nothing on a loaded machine.
        scan = room.start("scan", "--timeout", "0", "--trace", "--name", "Ghost", "--sort", "seen")
        heard = threading.Event()
        trace = []

        def drain():
            # Read to the end, so the trace never fills the pipe and holds the scan up. Once: a device heard once,
            # whose scan response may not have come before it stopped, is still reported (when the wait for
            # responses ends).
            for line in scan.stderr:
                trace.append(line)
                if b"Advertising Report" in line and b'"Ghost"' in line:
                    heard.set()

        reader = threading.Thread(target=drain, daemon=True)
        reader.start()
        self.assertTrue(heard.wait(30), b"".join(trace[-20:]).decode(errors="replace"))
        serve.send_signal(signal.SIGINT)
        serve.communicate(timeout=COMMAND)
        # A device is gone after 5 s without a report: the scan is stopped (Ctrl-C) when more than that has passed
        # since the device's process ended.
        time.sleep(7)
        scan.send_signal(signal.SIGINT)
        self.assertEqual(scan.wait(COMMAND), 0, b"".join(trace[-20:]).decode(errors="replace"))
        reader.join(COMMAND)
        stdout = scan.stdout.read().decode()
        self.assertRegex(stdout, r'"Ghost".*  \d+ reports?, .*gone, last seen \d+\.\d s ago\n$',
                         b"".join(trace).decode(errors="replace"))

    def test_connect_reconnect_comes_back_as_soon_as_the_device_does(self):
        """The device returns under a new private address (a new identifier): the scan for its name runs beside
        the direct connection, so the link is back well before the 10 s the direct attempt alone took."""
        room = Room(self)
        serve = room.start("serve", "battery", "--name", "RC1", "--duration", "120")
        read_line(serve, "advertising", 30)
        connect = room.start("connect", "RC1", "--reconnect")
        read_line(connect, " connected to RC1", 30)
        serve.send_signal(signal.SIGINT)
        serve.wait(10)
        read_line(connect, " disconnected", 10)
        serve = room.start("serve", "battery", "--name", "RC1", "--duration", "120")
        read_line(serve, "advertising", 30)
        back = time.monotonic()
        read_line(connect, " connected to RC1", 30)
        # Usually within half a second; the bound is generous for a loaded machine, and still well short of
        # the 9 s the direct attempt alone took before the scan began.
        self.assertLess(time.monotonic() - back, 5)


LOCK_STATE = "5EC10002-2B7D-4E8A-9C3F-6A1B2C3D4E5F"
LOCK_COMMAND = "5EC10003-2B7D-4E8A-9C3F-6A1B2C3D4E5F"


class PairingRoomTests(unittest.TestCase):
    """`ble serve secure-lock` in one process; `ble pair`, `ble shell` and `ble bonds` in others. Each `ble` process
    gets a controller address of its own from the room, but the tool's devices keep their identity in their store
    and use resolvable private addresses: a bond made by one process is used by the next."""

    def serve_lock(self, room, *options):
        serve = room.start("serve", "secure-lock", "--duration", "180", *options)
        read_line(serve, "advertising \"SecureLock\"", 30)
        return serve

    def test_a_shell_pairs_then_reads_and_writes_the_encrypted_lock_and_the_bond_is_listed_and_removed(self):
        room = Room(self)
        serve = self.serve_lock(room)
        script = (f"connect SecureLock\npair\nread {LOCK_STATE}\nwrite {LOCK_COMMAND} 00\nread {LOCK_STATE}\n"
                  "info\n")
        shell = room.ble("shell", input_text=script)
        self.assertEqual(shell.returncode, 0, shell.stdout + shell.stderr)
        lines = shell.stdout.splitlines()
        self.assertIn("method: Just Works", lines)
        self.assertIn("security: Secure Connections, unauthenticated, key size 16", lines)
        self.assertIn("bonded: yes", lines)
        # info: the link encrypted and the bond made.
        self.assertIn("encrypted", lines)
        self.assertIn("bonded: Secure Connections, unauthenticated, key size 16", lines)
        values = [line.split()[0] for line in lines if line[:2] in ("00", "01") and len(line.split()[0]) == 2]
        self.assertEqual(values, ["01", "00"], shell.stdout)
        identifier = next(line.split(": ")[1] for line in lines if line.startswith("identifier: "))
        # The lock answered the reads and the write only on the encrypted link.
        seen = read_line(serve, f"write {LOCK_COMMAND} 00", 10)
        self.assertFalse(any("->" in line for line in seen), seen)

        listed = room.ble("bonds", "--json")
        self.assertEqual(listed.returncode, 0, listed.stderr)
        bonds = [json.loads(line) for line in listed.stdout.splitlines()]
        self.assertEqual([b["identifier"] for b in bonds], [identifier])
        self.assertEqual(list(bonds[0].keys()), ["identifier", "address", "addressType", "name", "secureConnections",
                                                 "authenticated", "keySize", "resolvesPrivateAddresses", "created"])
        self.assertEqual((bonds[0]["name"], bonds[0]["secureConnections"], bonds[0]["authenticated"],
                          bonds[0]["keySize"]), ("SecureLock", True, False, 16))
        table = room.ble("bonds")
        self.assertEqual(table.stdout.splitlines()[0].split(), ["IDENTIFIER", "ADDRESS", "SECURITY", "KEY",
                                                               "CREATED", "NAME"])
        self.assertIn(identifier, table.stdout)
        self.assertIn("SC, unauthenticated", table.stdout)

        removed = room.ble("bonds", "remove", bonds[0]["address"])
        self.assertEqual(removed.returncode, 0, removed.stderr)
        self.assertEqual(removed.stdout, f"removed the bond with {identifier} ({bonds[0]['address']})\n")
        self.assertEqual(room.ble("bonds").stdout, "")
        again = room.ble("bonds", "remove", identifier)
        self.assertEqual(again.returncode, 10, again.stderr)
        self.assertEqual(again.stderr, f"ble: no bond with {identifier} (ble bonds lists them)\n")

    def test_a_read_from_a_new_process_pairs_by_itself_and_the_next_process_uses_the_bond(self):
        room = Room(self)
        serve = self.serve_lock(room)
        read = room.ble("read", "SecureLock", LOCK_STATE)
        self.assertEqual(read.returncode, 0, read.stderr)
        self.assertEqual(read.stdout.split()[0], "01")
        bonds = room.ble("bonds", "--json").stdout.splitlines()
        self.assertEqual(len(bonds), 1, "the pairing bonded")
        seen = read_line(serve, " disconnected ", 10)
        first = [line for line in seen if " connected from " in line]
        # The lock's log tells the pairing and the encryption, each a line with its time and the central's identifier.
        identifier = first[0].split()[1]
        security = [line.split(" ", 2)[2] for line in seen if line.split()[1:2] == [identifier]][1:-1]
        self.assertIn("pairing started", security, seen)
        self.assertTrue(any(line.startswith("paired (Just Works, LE Secure Connections, unauthenticated, key size 16)")
                            for line in security), seen)
        self.assertIn("bonded", security, seen)
        self.assertIn("encrypted", security, seen)
        self.assertRegex(first[0], r" connected from ([0-9A-F]{2}:){5}[0-9A-F]{2} \((public|random)\)$")
        # Another process, with another controller address: the lock knows it by the identity its private address
        # resolves to (the same identifier), the link is encrypted with the kept key, and nobody pairs again.
        again = room.ble("read", "SecureLock", LOCK_STATE)
        self.assertEqual(again.returncode, 0, again.stderr)
        self.assertEqual(again.stdout.split()[0], "01")
        self.assertEqual(room.ble("bonds", "--json").stdout.splitlines(), bonds, "the same bond, not a new one")
        seen = read_line(serve, " disconnected ", 10)
        second = [line for line in seen if " connected from " in line]
        # Encrypted with the bond's key: no pairing this time.
        self.assertTrue(any(line.endswith(" encrypted") for line in seen), seen)
        self.assertFalse(any("pairing" in line for line in seen), seen)
        self.assertEqual(len(first), 1, first)
        self.assertEqual(len(second), 1, second)
        self.assertEqual(first[0].split()[1], second[0].split()[1], "the lock knew the second process as the first")

    def test_pair_with_a_passkey_both_users_type(self):
        room = Room(self)
        self.serve_lock(room, "--io-capability", "keyboard", "--passkey", "123456", "--mitm")
        pair = room.ble("pair", "SecureLock", "--io-capability", "keyboard", "--passkey", "123456", "--mitm",
                        "--json")
        self.assertEqual(pair.returncode, 0, pair.stdout + pair.stderr)
        result = json.loads(pair.stdout.splitlines()[-1])
        self.assertEqual(list(result.keys()), ["identifier", "address", "identityAddress", "name", "method", "secureConnections",
                                               "authenticated", "bonded", "keySize"])
        self.assertEqual((result["name"], result["method"], result["authenticated"], result["bonded"]),
                         ("SecureLock", "Passkey Entry", True, True))
        # A later process reads without typing anything: the authenticated key is kept on both sides.
        read = room.ble("read", "SecureLock", LOCK_STATE)
        self.assertEqual((read.returncode, read.stdout.split()[:1]), (0, ["01"]), read.stderr)
        # Another user, in a store of their own, types the wrong digits.
        other = tempfile.mkdtemp(prefix="ble-room-other-")
        self.addCleanup(shutil.rmtree, other, True)
        wrong = room.ble("pair", "SecureLock", "--io-capability", "keyboard", "--passkey", "654321", "--mitm",
                         env={"XDG_STATE_HOME": other})
        self.assertEqual(wrong.returncode, 9, wrong.stdout + wrong.stderr)
        self.assertIn("the passkeys did not match", wrong.stderr)
        self.assertEqual(len(wrong.stderr.splitlines()), 1, wrong.stderr)

    def test_a_passkey_the_lock_shows_is_typed_from_standard_input(self):
        room = Room(self)
        serve = self.serve_lock(room, "--io-capability", "display", "--mitm")
        pair = room.start("pair", "SecureLock", "--io-capability", "keyboard", "--mitm", "--passkey", "-",
                          stdin=subprocess.PIPE)
        shown = read_line(serve, "* passkey: ", 30)[-1]
        digits = shown.split("* passkey: ")[1].split()[0]
        self.assertRegex(digits, r"^[0-9]{6}$")
        pair.stdin.write(digits.encode() + b"\n")
        pair.stdin.flush()
        out, err = pair.communicate(timeout=COMMAND)
        self.assertEqual(pair.returncode, 0, out.decode() + err.decode())
        self.assertIn("method: Passkey Entry", out.decode().splitlines())
        self.assertIn("security: Secure Connections, authenticated, key size 16", out.decode().splitlines())

    def test_a_read_that_needs_more_security_than_pairing_by_itself_gives_says_what_to_try(self):
        # The lock wants protection against a man in the middle; a read pairs by itself as iOS does, by Just Works,
        # which cannot give it: a pairing failure (9) that names the command to pair with, which then works.
        room = Room(self)
        serve = self.serve_lock(room, "--io-capability", "display", "--mitm")
        read = room.ble("read", "SecureLock", LOCK_STATE)
        self.assertEqual(read.returncode, 9, read.stdout + read.stderr)
        self.assertEqual(len(read.stderr.splitlines()), 1, read.stderr)
        self.assertIn("Insufficient Authentication (0x05)", read.stderr)
        self.assertIn("`ble pair SecureLock --io-capability keyboard`", read.stderr)
        pair = room.start("pair", "SecureLock", "--io-capability", "keyboard", "--mitm", "--passkey", "-",
                          stdin=subprocess.PIPE)
        digits = read_line(serve, "* passkey: ", 30)[-1].split("* passkey: ")[1].split()[0]
        pair.stdin.write(digits.encode() + b"\n")
        pair.stdin.flush()
        out, err = pair.communicate(timeout=COMMAND)
        self.assertEqual(pair.returncode, 0, out.decode() + err.decode())
        again = room.ble("read", "SecureLock", LOCK_STATE)
        self.assertEqual((again.returncode, again.stdout.split()[:1]), (0, ["01"]), again.stderr)

    def test_numeric_comparison_answered_by_yes_and_by_no(self):
        room = Room(self)
        serve = self.serve_lock(room, "--io-capability", "display-yes-no", "--mitm")
        pair = room.ble("pair", "SecureLock", "--io-capability", "display-yes-no", "--mitm", "--yes")
        self.assertEqual(pair.returncode, 0, pair.stdout + pair.stderr)
        self.assertIn("method: Numeric Comparison", pair.stdout.splitlines())
        digits = next(line.split(": ")[1].split()[0] for line in pair.stdout.splitlines()
                      if line.startswith("numeric comparison: "))
        self.assertIn(f"* numeric comparison: {digits}", "\n".join(read_line(serve, "numeric comparison: ", 10)))
        other = tempfile.mkdtemp(prefix="ble-room-other-")
        self.addCleanup(shutil.rmtree, other, True)
        refused = room.ble("pair", "SecureLock", "--io-capability", "display-yes-no", "--mitm", "--no",
                           env={"XDG_STATE_HOME": other})
        self.assertEqual(refused.returncode, 9, refused.stdout + refused.stderr)
        self.assertIn("numbers were not confirmed", refused.stderr)


if __name__ == "__main__":
    if not os.path.exists(BLE):
        raise SystemExit(f"{BLE} is missing: run `swift build --product ble` first")
    unittest.main(verbosity=2)
