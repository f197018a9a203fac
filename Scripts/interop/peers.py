"""Starting and stopping the peers of the interop tests, with every wait bounded.

Nothing here sleeps to let a race pass: readiness is a line a process prints or a TCP port that accepts,
polled until a deadline. Every process started through `Processes` is terminated (then killed after a bound)
when the test's cleanups run, pass or fail.
"""
import atexit
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON = os.path.join(ROOT, ".venv", "bin", "python")
BLE = os.environ.get("BLE_EXECUTABLE", os.path.join(ROOT, ".build", "debug", "ble"))
VERBOSE = os.environ.get("INTEROP_VERBOSE") == "1"

# `ble` keeps each device's system store under $XDG_STATE_HOME: every process started here uses a folder of this
# run's own, removed at exit, so the user's state is neither read nor written.
STATE_HOME = tempfile.mkdtemp(prefix="ble-interop-state-")
atexit.register(shutil.rmtree, STATE_HOME, True)
os.environ["XDG_STATE_HOME"] = STATE_HOME


class PeerError(AssertionError):
    pass


def free_port():
    """A TCP port on 127.0.0.1 that nothing listens on now (the system picks it; we read it back)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout, process=None):
    """Polls until 127.0.0.1:port accepts a connection (closed at once), or fails after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        if process is not None and process.poll() is not None:
            raise PeerError(f"{process.name} exited ({process.returncode}) before port {port} opened:\n{process.output()}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise PeerError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")
            time.sleep(0.05)  # polling interval of a bounded readiness check, not a race


class Process:
    """A child process whose stdout lines are collected by a thread, so that waits can be bounded."""

    def __init__(self, name, argv, stdin=False, env=None):
        self.name = name
        self.argv = argv
        self.lines = []
        self.queue = queue.Queue()
        self.cursor = 0
        # Processes this one depends on (the link's controllers): a failed wait says how they were doing.
        self.companions = []
        merged = dict(os.environ, **(env or {}))
        if VERBOSE:
            print(f"[start {name}] {' '.join(argv)}", file=sys.stderr)
        self.popen = subprocess.Popen(
            argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, bufsize=1, env=merged, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.popen.stdout:
            line = line.rstrip("\n")
            if VERBOSE:
                print(f"[{self.name}] {line}", file=sys.stderr)
            self.queue.put(line)
        self.queue.put(None)

    @property
    def returncode(self):
        return self.popen.returncode

    def poll(self):
        return self.popen.poll()

    def _drain(self, timeout):
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            return False
        if line is None:
            self.queue.put(None)
            return None
        self.lines.append(line)
        return True

    def expect(self, predicate, timeout, what):
        """Returns the first line not yet consumed for which `predicate(line)` is truthy (its value)."""
        deadline = time.monotonic() + timeout
        while True:
            while self.cursor < len(self.lines):
                line = self.lines[self.cursor]
                self.cursor += 1
                result = predicate(line)
                if result:
                    return result
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PeerError(f"{self.name}: no {what} within {timeout} s; output so far:\n{self.output()}"
                                f"{self.companions_state()}")
            got = self._drain(remaining)
            if got is None:
                self.popen.wait(timeout=5)
                raise PeerError(f"{self.name} exited ({self.popen.returncode}) before {what}; output:\n{self.output()}"
                                f"{self.companions_state()}")

    def expect_regex(self, pattern, timeout, what=None):
        regex = re.compile(pattern)
        return self.expect(lambda line: regex.search(line), timeout, what or f"line matching {pattern!r}")

    def expect_event(self, event, timeout, **fields):
        """For children printing JSON lines: the next {"event": event, ...} whose fields match."""
        def match(line):
            try:
                record = json.loads(line)
            except ValueError:
                return None
            if not isinstance(record, dict) or record.get("event") != event:
                return None
            if all(record.get(k) == v for k, v in fields.items()):
                return record
            return None
        return self.expect(match, timeout, f"event {event} {fields or ''}".strip())

    def events(self, event):
        """Every JSON event of that kind seen so far (consumed or not)."""
        self._collect_available()
        found = []
        for line in self.lines:
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("event") == event:
                found.append(record)
        return found

    def _collect_available(self):
        while self._drain(0) is True:
            pass

    def send(self, line):
        self.popen.stdin.write(line + "\n")
        self.popen.stdin.flush()

    def wait(self, timeout):
        """Waits for the process to exit by itself; returns its exit status."""
        try:
            self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise PeerError(f"{self.name} did not exit within {timeout} s; output:\n{self.output()}"
                            f"{self.companions_state()}")
        self.reader.join(timeout=5)
        self._collect_available()
        return self.popen.returncode

    def companions_state(self):
        """Whether each companion still runs (its exit status otherwise), with its last lines."""
        parts = []
        for other in self.companions:
            status = other.poll()
            lines = "\n  ".join(other.output().splitlines()[-20:])
            parts.append(f"\n--- {other.name}: {'running' if status is None else f'exited ({status})'}\n  {lines}")
        return "".join(parts)

    def output(self):
        self._collect_available()
        return "\n".join(self.lines[-200:])

    def stop(self, grace=5):
        """SIGTERM to the process group it leads (a launcher's children too), then SIGKILL after `grace` s."""
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, signal.SIGTERM)
                self.popen.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.popen.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.popen.wait(timeout=grace)
            except ProcessLookupError:
                pass
        else:
            # The leader is gone; a child it started (RootCanal's binary under its Python launcher) may not be.
            try:
                os.killpg(self.popen.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if self.popen.stdin:
            try:
                self.popen.stdin.close()
            except OSError:
                pass
        self.reader.join(timeout=grace)
        if not self.reader.is_alive():
            self.popen.stdout.close()


def start(test, name, argv, stdin=False, env=None):
    """Starts a process whose stop is registered as a cleanup of `test`."""
    process = Process(name, argv, stdin=stdin, env=env)
    test.addCleanup(process.stop)
    return process


def run(name, argv, timeout, env=None):
    """Runs a command to completion within `timeout` seconds; returns CompletedProcess (text)."""
    if VERBOSE:
        print(f"[run {name}] {' '.join(argv)}", file=sys.stderr)
    try:
        result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                env=dict(os.environ, **(env or {})))
    except subprocess.TimeoutExpired as error:
        raise PeerError(f"{name} did not finish within {timeout} s:\nstdout: {error.stdout}\nstderr: {error.stderr}")
    if VERBOSE:
        print(f"[{name} exit {result.returncode}]\n{result.stdout}{result.stderr}", file=sys.stderr)
    return result


# --- links -------------------------------------------------------------------------------------------------

class BumbleLink:
    """Bumble's `controllers` app: two virtual controllers on one in-process link, each an H4 TCP server."""

    def __init__(self, test):
        self.port_a, self.port_b = free_port(), free_port()
        self.process = start(test, "bumble-controllers", [
            PYTHON, "-m", "bumble.apps.controllers",
            f"tcp-server:127.0.0.1:{self.port_a}", f"tcp-server:127.0.0.1:{self.port_b}"])
        # A probe connection is harmless: the transport keeps its controller across clients.
        wait_for_port(self.port_a, 20, self.process)
        wait_for_port(self.port_b, 20, self.process)

    # BLEHost.docc/Peers.md: Bumble's controller answers LE Set Data Length (0x2022), which it lists as supported but
    # does not implement, with Command Complete, status 0x01 and no Connection_Handle (4 parameter bytes
    # instead of 6); tshark flags it malformed.
    peer_deviations = ("bthci_evt.code == 0x0e && bthci_evt.opcode == 0x2022 && bthci_evt.param_length == 4"
                       " && bthci_evt.status != 0")

    def ours(self):
        return f"tcp-client:127.0.0.1:{self.port_a}"

    def bumble(self):
        return f"tcp-client:127.0.0.1:{self.port_b}"


class RootCanalLink:
    """RootCanal 1.10.0: every TCP connection to its HCI port is a new controller on one shared link.

    It has no "any free port" option: the four ports it listens on (test, HCI, link, BLE link) are picked
    free just before it starts. It listens on all interfaces; we only connect through 127.0.0.1.
    """

    def __init__(self, test):
        self.test_port, self.hci_port, self.link_port, self.ble_link_port = (free_port() for _ in range(4))
        self.process = start(test, "rootcanal", [
            PYTHON, "-m", "rootcanal", f"-test_port={self.test_port}", f"-hci_port={self.hci_port}",
            f"-link_port={self.link_port}", f"-link_ble_port={self.ble_link_port}"])
        # Readiness from its log rather than a probe: a probe on the HCI port would create a controller.
        self.process.expect_regex(rf"Listening on: {self.hci_port}\b", 20, "HCI port listening")
        self.process.expect_regex(r"initialize: Finished", 20, "initialisation")

    peer_deviations = None

    def ours(self):
        return f"tcp-client:127.0.0.1:{self.hci_port}"

    def bumble(self):
        return f"tcp-client:127.0.0.1:{self.hci_port}"


# --- captures ----------------------------------------------------------------------------------------------

def tshark(*args, timeout=60):
    result = run("tshark", ["tshark", *args], timeout)
    if result.returncode != 0:
        raise PeerError(f"tshark {' '.join(args)} failed ({result.returncode}): {result.stderr}")
    return result.stdout


def check_capture(test, path, require_att=True, peer_deviations=None):
    """The btsnoop file exists, tshark finds no malformed packet and no error-level expert info, and (if
    asked) it holds ATT exchanges. Returns the number of ATT packets.

    `peer_deviations`: a tshark filter for packets *received from the peer's controller* that are known to be
    malformed as the peer sends them (written down in BLEHost.docc/Peers.md); those are the peer's bytes, recorded
    faithfully, and are not held against our recording. Anything we sent must always be well-formed."""
    test.assertTrue(os.path.exists(path) and os.path.getsize(path) > 16, f"no btsnoop capture at {path}")
    bad = "_ws.malformed || _ws.expert.severity == error"
    if peer_deviations:
        bad = f"({bad}) && !(frame.p2p_dir == 1 && ({peer_deviations}))"
    malformed = tshark("-r", path, "-Y", bad).strip()
    test.assertEqual(malformed, "", f"tshark reports malformed or erroneous packets in {path}:\n{malformed}")
    att = [line for line in tshark("-r", path, "-Y", "btatt").splitlines() if line.strip()]
    if require_att:
        test.assertGreater(len(att), 0, f"no ATT packets in {path}")
    return len(att)


def have_tshark():
    return shutil.which("tshark") is not None
