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

    def ble(self, *args, timeout=COMMAND, env=None):
        return subprocess.run([BLE, *args], capture_output=True, text=True, timeout=timeout,
                              env=dict(self.env, **(env or {})))

    def start(self, *args, stdin=None):
        """A long-running `ble` process (stopped at the end)."""
        process = subprocess.Popen([BLE, *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   env=self.env)
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


def read_line(process, needle, seconds):
    """Lines of `process`'s stdout until one contains `needle`, within `seconds` (the lines read so far)."""
    import select
    deadline = time.monotonic() + seconds
    seen = []
    buffer = b""
    fd = process.stdout.fileno()
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            seen.append(line.decode())
            if needle in seen[-1]:
                return seen
    raise AssertionError(f"no line with {needle!r} within {seconds} s; got {seen} {buffer!r}")


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
        self.assertTrue(line.startswith("disconnected from Leaving HRM ("), line)
        _, err = shell.communicate(input=b"rssi\n", timeout=COMMAND)
        self.assertEqual(err.decode(), "ble: not connected: 'connect TARGET' first\n")
        self.assertEqual(shell.returncode, 8)

    def test_the_first_command_starts_the_room_and_stop_ends_it(self):
        room = Room(self)
        before = room.ble("room", "status")
        self.assertEqual(before.returncode, 1)
        self.assertIn("no room is running", before.stdout)
        scan = room.ble("scan", "--timeout", "2", "--json")
        self.assertEqual(scan.returncode, 0, scan.stderr)
        names = {json.loads(line)["name"] for line in scan.stdout.splitlines() if line.strip()}
        self.assertTrue({"HRM-Demo", "DoorLock", "Thermometer"} <= names, names)
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
        self.assertEqual(sorted(os.listdir(room.folder)), ["room.lock", "room.log"], "its sockets are gone")
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


if __name__ == "__main__":
    if not os.path.exists(BLE):
        raise SystemExit(f"{BLE} is missing: run `swift build --product ble` first")
    unittest.main(verbosity=2)
