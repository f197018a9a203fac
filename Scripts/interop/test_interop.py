"""Interop tests: our stack against stacks nobody here wrote (Bumble 0.0.236, RootCanal 1.10.0).

Run with the project's virtual environment: .venv/bin/python -m unittest discover -s Scripts/interop -v
(Scripts/interop/run.sh sets it up and builds `ble` first). INTEROP_VERBOSE=1 echoes every peer's output.

Each test starts its own peers on free loopback ports and stops them in its cleanups, pass or fail; every wait
is bounded. Our side records a btsnoop capture, which tshark must read without malformed packets and which
must contain the ATT exchanges.
"""
import datetime
import json
import os
import re
import shutil
import signal
import tempfile
import time
import unittest

import peers
from peers import BLE, HERE, PYTHON, PeerError

import bumble_peripheral as db

PERIPHERAL_NAME = "BumbleInterop"
PERIPHERAL_ADDRESS = "F0:F1:F2:F3:F4:F5"
# Bounds, in seconds.
COMMAND = 60        # one `ble` command from start to exit (it scans, connects, works, disconnects)
STARTUP = 20        # a peer becoming ready


def hexes(stdout):
    """The hex values a `ble read` / `ble subscribe` printed: a read's line is the hex, then what it means after two
    spaces when the tool knows; a subscribe line starts with the time and 'notify' or 'indicate'."""
    values = []
    for line in stdout.splitlines():
        match = re.fullmatch(r"\s*(?:\S+ (?:notify|indicate) )?([0-9a-fA-F]+)(?:  .*)?\s*", line)
        if match:
            values.append(match.group(1).lower())
    return values


def upper(uuid):
    return uuid.upper()


class Workspace:
    """Where a test's captures go: .build/interop-captures/<test id>/ (git-ignored), emptied when the test
    starts and left in place afterwards, so that a failure's captures can be read with tshark or Wireshark."""

    def __init__(self, test):
        self.dir = os.path.join(peers.ROOT, ".build", "interop-captures", test.id().replace("test_interop.", ""))
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)

    def capture(self, name):
        return os.path.join(self.dir, name + ".btsnoop")


class OurCentralAgainstBumblePeripheral:
    """Our `ble` commands as the central; a Bumble `Device` with the database of bumble_peripheral.py."""

    def make_link(self):
        raise NotImplementedError

    def ble(self, *args, capture=None, timeout=COMMAND):
        argv = [BLE, *args, "--transport", self.link.ours()]
        if capture:
            argv += ["--btsnoop", capture]
        return peers.run("ble " + args[0], argv, timeout)

    def ok(self, result, what):
        self.assertEqual(result.returncode, 0, f"{what} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
        return result.stdout

    def setUp(self):
        self.work = Workspace(self)
        self.link = self.make_link()
        self.peripheral = peers.start(self, "bumble-peripheral", [
            PYTHON, os.path.join(HERE, "bumble_peripheral.py"), self.link.bumble(), PERIPHERAL_NAME,
            PERIPHERAL_ADDRESS], stdin=True)
        self.ready = self.peripheral.expect_event("ready", STARTUP)

    def test_central_flow(self):
        p = self.peripheral

        # Scan: the Bumble peripheral is seen, connectable, by name. Asked again, within 30 s, until it is: a clean-
        # clone run found nothing in one 4 s scan (its output empty) while five runs after it found it at once.
        capture = self.work.capture("scan")
        deadline = time.monotonic() + 30
        while True:
            out = self.ok(self.ble("scan", "--timeout", "4", "--json", capture=capture), "ble scan")
            seen = [json.loads(line) for line in out.splitlines() if line.strip().startswith("{")]
            mine = [d for d in seen if d.get("name") == PERIPHERAL_NAME]
            if mine or time.monotonic() > deadline:
                break
        self.assertTrue(mine, f"ble scan did not find {PERIPHERAL_NAME} within 30 s: {out}")
        self.assertTrue(mine[0]["connectable"], mine[0])
        self.assertEqual(mine[0]["address"].upper(), self.ready["address"].split("/")[0].upper(), mine[0])
        peers.check_capture(self, capture, require_att=False, peer_deviations=self.link.peer_deviations)

        # Explore: MTU 517, every service (GAP and GATT included), included services, descriptors and values.
        capture = self.work.capture("explore")
        tree = json.loads(self.ok(self.ble("explore", PERIPHERAL_NAME, "--json", capture=capture), "ble explore"))
        self.assertEqual(tree["mtu"], 517, "ATT_MTU after the exchange")
        services = {upper(s["uuid"]): s for s in tree["services"]}
        for uuid in ("1800", "1801", upper(db.SERVICE), upper(db.SECOND_SERVICE), "180F"):
            self.assertIn(uuid, services, f"service {uuid} not discovered: {sorted(services)}")
        main = services[upper(db.SERVICE)]
        self.assertEqual(sorted(upper(u) for u in main["includedServices"]), ["180F", "1811"],
                         "included services (a primary and a secondary one)")
        chars = {upper(c["uuid"]): c for c in main["characteristics"]}
        expected_properties = {
            db.LONG_READ: {"read"}, db.WRITABLE: {"read", "write"}, db.WRITE_NO_RESPONSE: {"writeWithoutResponse"},
            db.NOTIFY: {"notify"}, db.INDICATE: {"indicate"}, db.DESCRIBED: {"read"},
        }
        for uuid, properties in expected_properties.items():
            self.assertIn(upper(uuid), chars, f"characteristic {uuid} not discovered")
            self.assertEqual(set(chars[upper(uuid)]["properties"]), properties, uuid)
        self.assertEqual(chars[upper(db.LONG_READ)]["value"].lower(), db.LONG_VALUE.hex(), "512-byte value read by explore")
        described = {upper(d["uuid"]): d for d in chars[upper(db.DESCRIBED)]["descriptors"]}
        self.assertEqual(set(described), {"2901", "2904", upper(db.CUSTOM_DESCRIPTOR)}, "descriptors")
        self.assertEqual(described["2901"]["value"].lower(), b"described".hex())
        self.assertEqual(described["2904"]["value"].lower(), "0eff2f27010000")
        self.assertEqual(described[upper(db.CUSTOM_DESCRIPTOR)]["value"].lower(), "deadbeef")
        for uuid in (db.NOTIFY, db.INDICATE):
            cccd = [d for d in chars[upper(uuid)]["descriptors"] if upper(d["uuid"]) == "2902"]
            self.assertEqual(len(cccd), 1, f"CCCD of {uuid}")
        battery = {upper(c["uuid"]): c for c in services["180F"]["characteristics"]}
        self.assertEqual(battery["2A19"]["value"].lower(), "4d")
        p.expect_event("mtu", 20, mtu=517)
        p.expect_event("disconnected", 20)
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)

        # A 512-byte read, intact.
        capture = self.work.capture("read")
        out = self.ok(self.ble("read", PERIPHERAL_NAME, db.LONG_READ, capture=capture), "ble read")
        self.assertEqual(hexes(out), [db.LONG_VALUE.hex()], "512-byte read")
        p.expect_event("disconnected", 20)
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)

        # A 500-byte write with response: the peripheral got exactly those bytes.
        value = bytes((i * 13 + 5) & 0xFF for i in range(500))
        capture = self.work.capture("write")
        self.ok(self.ble("write", PERIPHERAL_NAME, db.WRITABLE, value.hex(), capture=capture), "ble write")
        write = p.expect_event("write", 20)
        self.assertEqual((write["length"], write["hex"]), (500, value.hex()), "what the Bumble peripheral received")
        p.expect_event("disconnected", 20)
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)

        # A burst of writes without response in one command: every one arrives, bytes counted.
        burst = [bytes([n & 0xFF]) * (20 + n % 200) for n in range(50)]
        capture = self.work.capture("write-without-response")
        self.ok(self.ble("write", PERIPHERAL_NAME, db.WRITE_NO_RESPONSE, *[c.hex() for c in burst], "--without-response",
                         capture=capture), "ble write --without-response (burst)")
        p.expect_event("disconnected", 20)
        counts = p.events("write-without-response")
        self.assertEqual((counts[-1]["count"], counts[-1]["bytes"]) if counts else (0, 0),
                         (len(burst), sum(len(c) for c in burst)), "writes without response the peripheral received")
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)

        # Notifications: N values printed, in the order sent; our disconnection reaches the peripheral as
        # Remote User Terminated Connection (0x13).
        capture = self.work.capture("notify")
        out = self.ok(self.ble("subscribe", PERIPHERAL_NAME, db.NOTIFY, "--count", "5", capture=capture), "ble subscribe (notify)")
        values = hexes(out)
        self.assertEqual(len(values), 5, out)
        sequence = [int.from_bytes(bytes.fromhex(v)[:4], "little") for v in values]
        self.assertEqual(sequence, sorted(sequence), "notifications out of order")
        self.assertTrue(all(bytes.fromhex(v)[4:] == b"interop" for v in values), values)
        p.expect_event("subscription", 20, characteristic=db.NOTIFY, notify=True)
        gone = p.expect_event("disconnected", 20)
        self.assertEqual(gone["reason"], 0x13, "reason the peripheral saw for our disconnection")
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)

        # Indications: every value we printed was confirmed to the peripheral.
        capture = self.work.capture("indicate")
        out = self.ok(self.ble("subscribe", PERIPHERAL_NAME, db.INDICATE, "--count", "3", capture=capture), "ble subscribe (indicate)")
        values = hexes(out)
        self.assertEqual(len(values), 3, out)
        p.expect_event("disconnected", 20)
        confirmed = {e["hex"] for e in p.events("confirmed")}
        for v in values:
            self.assertIn(v, confirmed, f"indication {v} printed by ble but not confirmed to the peripheral; "
                                        f"peripheral saw: {p.output()}")
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)

        # Disconnection by the peripheral while we are subscribed: our command ends with an error.
        capture = self.work.capture("peer-disconnect")
        argv = [BLE, "subscribe", PERIPHERAL_NAME, db.NOTIFY, "--count", "100000", "--transport", self.link.ours(),
                "--btsnoop", capture]
        subscriber = peers.start(self, "ble subscribe (peer disconnects)", argv)
        subscriber.expect_regex(r"^\S+Z notify [0-9a-f]+(  .*)?$", COMMAND, "a first notification")
        p.send("disconnect")
        p.expect_event("disconnect-sent", 20)
        status = subscriber.wait(20)
        # 8: "the link dropped" (ble --help, exit statuses).
        self.assertEqual(status, 8, f"ble subscribe must fail when the peer disconnects:\n{subscriber.output()}")
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)


class BumbleCentralAgainstOurPeripheral:
    """A Bumble central probing `ble serve heart-rate`."""

    def make_link(self):
        raise NotImplementedError

    def setUp(self):
        self.work = Workspace(self)
        self.link = self.make_link()

    def test_peripheral_flow(self):
        capture = self.work.capture("serve")
        server = peers.start(self, "ble serve", [
            BLE, "serve", "heart-rate", "--transport", self.link.ours(), "--btsnoop", capture])
        plan = {
            # Bumble's virtual controller never sends scan responses: find it by its advertised service.
            "target": {"service": "180D"},
            "ops": [
                {"op": "discover"},
                {"op": "read", "uuid": "2A00"},
                {"op": "read", "uuid": "2A38"},
                {"op": "write", "uuid": "2A39", "hex": "01", "response": True},
                {"op": "write", "uuid": "2A38", "hex": "02", "response": True},
                {"op": "subscribe", "uuid": "2A37", "count": 3, "timeout": 5},
                {"op": "unsubscribe", "uuid": "2A37"},
                {"op": "disconnect"},
            ],
        }
        central = peers.start(self, "bumble-central", [
            PYTHON, os.path.join(HERE, "bumble_central.py"), self.link.bumble(), json.dumps(plan)])
        status = central.wait(120)
        self.assertEqual(status, 0, f"the Bumble central failed:\n{central.output()}\n--- ble serve:\n{server.output()}")

        self.assertEqual(central.events("mtu")[0]["mtu"], 517)
        services = {s["uuid"]: s for s in central.events("services")[0]["services"]}
        for uuid in ("1800", "1801", "180D"):
            self.assertIn(uuid, services, f"service {uuid} missing from our database: {sorted(services)}")
        heart = {c["uuid"]: c for c in services["180D"]["characteristics"]}
        self.assertEqual(heart["2A37"]["properties"] & 0x10, 0x10, "Heart Rate Measurement notifies")
        self.assertIn("2902", [d["uuid"] for d in heart["2A37"]["descriptors"]], "its CCCD")
        self.assertEqual(heart["2A38"]["properties"] & 0x0A, 0x02, "Body Sensor Location: read, no write")
        self.assertEqual(heart["2A39"]["properties"] & 0x08, 0x08, "Heart Rate Control Point: write")
        gap = {c["uuid"] for c in services["1800"]["characteristics"]}
        self.assertTrue({"2A00", "2A01"} <= gap, f"GAP characteristics: {gap}")

        reads = {e["uuid"]: e for e in central.events("read")}
        self.assertIn("hex", reads["2A00"], reads["2A00"])
        self.assertTrue(bytes.fromhex(reads["2A00"]["hex"]), "device name is empty")
        self.assertEqual(len(bytes.fromhex(reads["2A38"].get("hex", ""))), 1, reads["2A38"])

        writes = central.events("write")
        self.assertEqual(writes[0], {"event": "write", "uuid": "2A39", "ok": True}, "control point reset")
        self.assertEqual(writes[1].get("error"), 0x03,
                         f"a write to the read-only Body Sensor Location must fail with Write Not Permitted: {writes[1]}")

        values = [bytes.fromhex(e["hex"]) for e in central.events("value")]
        self.assertEqual(len(values), 3, central.output())
        for value in values:
            flags = value[0]
            bpm = int.from_bytes(value[1:3], "little") if flags & 0x01 else value[1]
            self.assertTrue(30 <= bpm <= 220, f"implausible heart rate {bpm} in {value.hex()}")
        server.stop()
        peers.check_capture(self, capture, peer_deviations=self.link.peer_deviations)


class BumbleLink:
    def make_link(self):
        return peers.BumbleLink(self)


class RootCanalLink:
    def make_link(self):
        return peers.RootCanalLink(self)


class OurCentralBumblePeripheralOverBumbleLink(BumbleLink, OurCentralAgainstBumblePeripheral, unittest.TestCase):
    pass


class OurCentralBumblePeripheralOverRootCanal(RootCanalLink, OurCentralAgainstBumblePeripheral, unittest.TestCase):
    pass


class BumbleCentralOurPeripheralOverBumbleLink(BumbleLink, BumbleCentralAgainstOurPeripheral, unittest.TestCase):
    pass


class BumbleCentralOurPeripheralOverRootCanal(RootCanalLink, BumbleCentralAgainstOurPeripheral, unittest.TestCase):
    pass


class TwoOfOursThroughRootCanal(unittest.TestCase):
    """Two `ble` processes on one RootCanal: `ble serve heart-rate` and our central, each on its own controller."""

    def test_serve_and_explore_read_subscribe(self):
        work = Workspace(self)
        link = peers.RootCanalLink(self)
        server_capture, central_capture = work.capture("serve"), work.capture("central")
        server = peers.start(self, "ble serve", [
            BLE, "serve", "heart-rate", "--name", "RC-HRM", "--transport", link.ours(), "--btsnoop", server_capture])
        server.expect_regex(r'advertising "RC-HRM"', STARTUP, "ble serve advertising")

        def ble(*args, capture=None):
            argv = [BLE, *args, "--transport", link.ours()] + (["--btsnoop", capture] if capture else [])
            result = peers.run("ble " + args[0], argv, COMMAND)
            self.assertEqual(result.returncode, 0, f"ble {args[0]} failed ({result.returncode}):\n{result.stdout}\n"
                             f"{result.stderr}\n--- ble serve:\n{server.output()}")
            return result.stdout

        found = [json.loads(line) for line in ble("scan", "--timeout", "3", "--json").splitlines() if line.strip()]
        mine = [d for d in found if d["name"] == "RC-HRM"]
        self.assertTrue(mine, f"ble scan did not find the other ble process: {found}")
        self.assertEqual(mine[0]["serviceUUIDs"][:1], ["180D"])
        self.assertTrue(mine[0]["connectable"])

        tree = json.loads(ble("explore", "RC-HRM", "--json", capture=central_capture))
        self.assertEqual(tree["mtu"], 517)
        services = {s["uuid"]: s for s in tree["services"]}
        self.assertTrue({"1800", "1801", "180D", "180F", "180A"} <= set(services), sorted(services))
        names = {c["uuid"]: c for c in services["1800"]["characteristics"]}
        self.assertEqual(bytes.fromhex(names["2A00"]["value"]).decode(), "RC-HRM")

        self.assertEqual(hexes(ble("read", "RC-HRM", "2A38")), ["01"])
        values = hexes(ble("subscribe", "RC-HRM", "2A37", "--count", "2"))
        self.assertEqual(len(values), 2, values)
        refused = peers.run("ble write", [BLE, "write", "RC-HRM", "2A38", "02", "--transport", link.ours()], COMMAND)
        self.assertEqual(refused.returncode, 5, f"a write to a read-only value: {refused.stdout}{refused.stderr}")
        self.assertIn("Write Not Permitted", refused.stderr)

        server.stop()
        peers.check_capture(self, central_capture)
        peers.check_capture(self, server_capture)


class ManyDevicesThroughRootCanal(unittest.TestCase):
    """One central of ours keeping eight of our peripherals connected and streaming at once, and a chunked
    transfer to the camera, over RootCanal (Bumble's linked controllers link only two devices)."""

    DEVICES = 8

    def serve(self, link, profile, name):
        server = peers.start(self, f"ble serve {name}", [
            BLE, "serve", profile, "--name", name, "--transport", link.ours()])
        server.expect_regex(rf'advertising "{re.escape(name)}"', STARTUP, f"{name} advertising")
        return server

    def test_one_central_keeps_eight_devices_streaming(self):
        work = Workspace(self)
        link = peers.RootCanalLink(self)
        names = [f"RC-HRM-{n}" for n in range(1, self.DEVICES + 1)]
        servers = [self.serve(link, "heart-rate", name) for name in names]
        capture = work.capture("central")
        result = peers.run("ble connect", [
            BLE, "connect", *names, "--subscribe", "2A37", "--duration", "6", "--timeout", "10",
            "--transport", link.ours(), "--btsnoop", capture], COMMAND + 30)
        self.assertEqual(result.returncode, 0, f"ble connect failed ({result.returncode}):\n{result.stdout}\n"
                         f"{result.stderr}")
        connected, values = {}, {name: [] for name in names}
        for line in result.stdout.splitlines():
            # Each line starts with its time, UTC in ISO 8601 with milliseconds.
            stamp = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z (.*)$", line)
            self.assertIsNotNone(stamp, line)
            at = datetime.datetime.fromisoformat(stamp.group(1)).timestamp()
            text = stamp.group(2)
            if text.startswith("connected to "):
                connected[text.split()[2]] = at
            elif (value := re.match(r"(RC-HRM-\d+): 2A37 ([0-9a-f]+)(  .*)?$", text)):
                values[value.group(1)].append(at)
        self.assertEqual(sorted(connected), sorted(names), result.stdout)
        # Every device streams while all eight are connected: values from each after the last connection.
        all_up = max(connected.values())
        for name in names:
            self.assertGreaterEqual(len([at for at in values[name] if at > all_up]), 2,
                                    f"{name} did not stream with the others:\n{result.stdout}")
        for server in servers:
            server.stop()
        peers.check_capture(self, capture)

    def test_chunked_transfer_to_the_camera(self):
        work = Workspace(self)
        link = peers.RootCanalLink(self)
        camera = self.serve(link, "camera", "RC-Camera")
        payload = os.urandom(1024)
        path = os.path.join(work.dir, "commands.bin")
        with open(path, "wb") as f:
            f.write(payload)
        command = "CA3E0002-0000-1000-8000-00805F9B34FB"
        received = bytearray()

        def collect(total):
            """The command bytes the camera logged, until `total` have arrived (bounded)."""
            while len(received) < total:
                write = camera.expect_regex(r" write CA3E0002 ([0-9a-f]+)$", COMMAND, "the camera's writes")
                received.extend(bytes.fromhex(write.group(1)))

        for extra in (["--chunk", "18"], ["--without-response", "--chunk", "18", "--interval", "40"]):
            capture = work.capture("send" + ("-wwr" if "--without-response" in extra else ""))
            result = peers.run("ble send", [
                BLE, "send", "RC-Camera", command, path, *extra, "--transport", link.ours(), "--btsnoop", capture],
                COMMAND)
            self.assertEqual(result.returncode, 0, f"ble send {extra} failed ({result.returncode}):\n"
                             f"{result.stdout}\n{result.stderr}\n--- camera:\n{camera.output()}")
            self.assertRegex(result.stdout,
                             r"^sent 1024 bytes to Camera Command \(CA3E0002\) in \d+\.\d{3} s \(\d+ B/s\)\n$")
            before = len(received)
            collect(before + len(payload))
            self.assertEqual(bytes(received[before:]), payload, f"{extra}: the camera took other bytes")
            peers.check_capture(self, capture)
        # The camera's own count: everything taken, nothing dropped.
        status = hexes(peers.run("ble read", [
            BLE, "read", "RC-Camera", "CA3E0003-0000-1000-8000-00805F9B34FB", "--transport", link.ours()],
            COMMAND).stdout)
        self.assertEqual(status, [(2048).to_bytes(4, "little").hex() + (0).to_bytes(4, "little").hex()])
        camera.stop()


class BumbleHostOnOurController(unittest.TestCase):
    """Bumble's host stack driving one virtual controller of our simulated world through `ble controller`."""

    def test_bumble_host_reads_the_simulated_world(self):
        work = Workspace(self)
        capture = work.capture("controller")
        controller = peers.start(self, "ble controller", [
            BLE, "controller", "tcp-server:127.0.0.1:0", "--btsnoop", capture])
        port = int(controller.expect_regex(r"listening on tcp-server:127\.0\.0\.1:(\d+)", STARTUP).group(1))
        plan = {
            "target": {"service": "180D"},
            "ops": [
                {"op": "discover"},
                {"op": "read", "uuid": "2A38"},
                {"op": "read", "uuid": "2A29"},
                {"op": "subscribe", "uuid": "2A37", "count": 2, "timeout": 5},
                {"op": "disconnect"},
            ],
        }
        central = peers.start(self, "bumble-host", [
            PYTHON, os.path.join(HERE, "bumble_central.py"), f"tcp-client:127.0.0.1:{port}", json.dumps(plan)])
        status = central.wait(90)
        self.assertEqual(status, 0, f"Bumble's host failed on our controller:\n{central.output()}\n"
                                    f"--- ble controller:\n{controller.output()}")
        # Bumble's host warns about events for connection handles it was never told of.
        self.assertNotIn("unknown handle", central.output(),
                         "our controller sent an event for a connection before announcing it (see the capture)")
        controller.expect_regex(r"^host connected from 127\.0\.0\.1:\d+", 10)
        controller.expect_regex(r"^host disconnected", 10)

        self.assertEqual(central.events("mtu")[0]["mtu"], 517)
        services = {s["uuid"]: s for s in central.events("services")[0]["services"]}
        for uuid in ("1800", "1801", "180D"):
            self.assertIn(uuid, services, f"{uuid} not in the simulated device's database: {sorted(services)}")
        reads = {e["uuid"]: e for e in central.events("read")}
        self.assertEqual(len(bytes.fromhex(reads["2A38"].get("hex", ""))), 1, reads["2A38"])
        self.assertTrue(bytes.fromhex(reads["2A29"].get("hex", "")), reads["2A29"])
        self.assertEqual(len(central.events("value")), 2, central.output())
        self.assertEqual(central.events("disconnected")[0]["reason"], 0x16)

        # SIGINT stops it cleanly, with the status an interrupted command has (130).
        controller.popen.send_signal(signal.SIGINT)
        self.assertEqual(controller.wait(10), 130, controller.output())
        peers.check_capture(self, capture)


class BumbleInTheSharedRoom(unittest.TestCase):
    """Bumble's host stack joining the shared room (`ble room --h4 tcp-server:...`) as devices of its own, beside
    `ble` processes attached over the room's Unix socket: each meets the others on our radio."""

    def test_bumble_and_ble_processes_meet_in_the_room(self):
        runtime = tempfile.mkdtemp(prefix="ble-room-", dir="/tmp")
        self.addCleanup(shutil.rmtree, runtime, True)
        env = {"XDG_RUNTIME_DIR": runtime, "BLE_TRANSPORT": "room"}
        room = peers.start(self, "ble room", [
            BLE, "room", "--h4", "tcp-server:127.0.0.1:0", "--idle-timeout", "0"], env=env)
        port = int(room.expect_regex(r"listening on tcp-server:127\.0\.0\.1:(\d+)", STARTUP).group(1))
        room.expect_regex(r"room running", STARTUP)

        # A Bumble peripheral joins over H4, and a `ble` process serves a heart-rate profile over the socket.
        peripheral = peers.start(self, "bumble-peripheral", [
            PYTHON, os.path.join(HERE, "bumble_peripheral.py"), f"tcp-client:127.0.0.1:{port}", PERIPHERAL_NAME,
            PERIPHERAL_ADDRESS], stdin=True)
        peripheral.expect_event("ready", STARTUP)
        room.expect_regex(r"device \d+ attached \(h4 from 127\.0\.0\.1:\d+\)", 10)
        serve = peers.start(self, "ble serve", [BLE, "serve", "heart-rate", "--name", "Room-HRM"], env=env)
        serve.expect_regex(r'^\S+Z advertising "Room-HRM"', STARTUP)

        # Our central (a third device) reads Bumble's peripheral.
        result = peers.run("ble read", [BLE, "read", PERIPHERAL_NAME, db.WRITABLE], COMMAND, env=env)
        self.assertEqual(result.returncode, 0, f"{result.stdout}\n{result.stderr}\n--- room:\n{room.output()}")
        peripheral.expect_event("connected", 10)

        # Bumble's central (a fourth device, over H4) reads our served device, then Bumble's own peripheral.
        for target, reads in (({"name": "Room-HRM"}, ["2A38", "2A19"]), ({"name": PERIPHERAL_NAME}, [db.WRITABLE])):
            plan = {"target": target, "ops": [{"op": "discover"}] + [{"op": "read", "uuid": u} for u in reads]
                    + [{"op": "disconnect"}]}
            central = peers.start(self, "bumble-central", [
                PYTHON, os.path.join(HERE, "bumble_central.py"), f"tcp-client:127.0.0.1:{port}", json.dumps(plan)])
            self.assertEqual(central.wait(90), 0, f"Bumble's central in the room:\n{central.output()}\n"
                                                  f"--- room:\n{room.output()}")
            got = {e["uuid"].upper(): e for e in central.events("read")}
            for uuid in reads:
                self.assertIn(uuid.upper(), got, central.output())
            if target["name"] == "Room-HRM":
                self.assertEqual(got["2A38"]["hex"], "01", "the body sensor location: chest")
                # The battery level is the app's to answer: the serving process prints the request.
                serve.expect_regex(r" read 2A19 [0-9a-f]{2}$", 10)

        # The room says who is in it, and stops when asked; the devices attached hear their controllers go.
        status = peers.run("ble room status", [BLE, "room", "status", "--json"], 20, env=env)
        devices = json.loads(status.stdout)["devices"]
        self.assertEqual(sorted(d["via"].split(" ")[0] for d in devices), ["h4", "unix"], status.stdout)
        stop = peers.run("ble room stop", [BLE, "room", "stop"], 30, env=env)
        self.assertEqual(stop.stdout.strip(), "room stopped", stop.stderr)
        self.assertEqual(room.wait(15), 0, room.output())
        self.assertNotEqual(serve.wait(15), 0, "ble serve ends with an error when its controller goes")


LOCK_STATE = "5EC10002-2B7D-4E8A-9C3F-6A1B2C3D4E5F"   # ble serve secure-lock: readable only encrypted
LOCK_SERVICE = "5EC10001-2B7D-4E8A-9C3F-6A1B2C3D4E5F"
PAIRING_NAME = "BLock"  # short: with the flags and a 128-bit UUID it fits 31 octets


class Pairing:
    """Pairing, bonding and encryption against Bumble's host (bumble_pairing.py), in both roles: LE Secure
    Connections and legacy, Just Works and Passkey Entry, then a new process (ours or Bumble's) that re-encrypts
    with the kept key. Subclasses choose the link: Bumble's controllers, or our own room (Bumble's host pairing on
    our controller)."""

    def make_link(self):
        raise NotImplementedError

    def setUp(self):
        self.link = self.make_link()
        self.keystore = os.path.join(tempfile.mkdtemp(prefix="bumble-keys-"), "keys.json")
        self.addCleanup(shutil.rmtree, os.path.dirname(self.keystore), True)
        # Our devices' stores (their bonds and identities) are this test's own: a bond of another test must not
        # meet a Bumble whose keystore is new.
        self.state = tempfile.mkdtemp(prefix="ble-state-")
        self.addCleanup(shutil.rmtree, self.state, True)

    def env(self):
        return {**self.link.env(), "XDG_STATE_HOME": self.state}

    def ble(self, *args, stdin=False):
        process = peers.start(self, "ble " + args[0], [BLE, *args, *self.link.transport()], stdin=stdin, env=self.env())
        process.companions.append(self.link.process)
        return process

    def finish(self, process, what):
        status = process.wait(COMMAND)
        self.assertEqual(status, 0, f"{what} failed ({status}):\n{process.output()}")
        return process.output()

    def bumble_peripheral(self, **options):
        peripheral = peers.start(self, "bumble-pairing-peripheral", [
            PYTHON, os.path.join(HERE, "bumble_pairing.py"), "peripheral", self.link.bumble(), PAIRING_NAME,
            PERIPHERAL_ADDRESS, json.dumps({"keystore": self.keystore, **options})], stdin=True)
        peripheral.expect_event("ready", STARTUP)
        return peripheral

    def bumble_central(self, rounds, **options):
        return peers.start(self, "bumble-pairing-central", [
            PYTHON, os.path.join(HERE, "bumble_pairing.py"), "central", self.link.bumble(), "F1:F2:F3:F4:F5:F6",
            json.dumps({"keystore": self.keystore, "service": LOCK_SERVICE, "characteristic": LOCK_STATE,
                        "rounds": rounds, **options})], stdin=True)

    def our_bonds(self):
        result = peers.run("ble bonds", [BLE, "bonds", "--json"], 20, env=self.env())
        self.assertEqual(result.returncode, 0, result.stderr)
        return [json.loads(line) for line in result.stdout.splitlines()]

    # Our central, Bumble's peripheral.

    def test_our_central_pairs_with_secure_connections_and_a_new_process_re_encrypts(self):
        peripheral = self.bumble_peripheral(sc=True, io="none")
        out = self.finish(self.ble("read", PAIRING_NAME, "5EC1F001-0B5E-4C3A-9D2E-7A1B2C3D4E5F"), "ble read")
        self.assertEqual(hexes(out), ["5ec0de"], out)
        paired = peripheral.expect_event("paired", 20)
        self.assertTrue(paired["sc"], paired)
        self.assertIsNotNone(paired["irk"], "we gave our IRK and identity address")
        self.assertTrue(peripheral.expect_event("read", 20)["encrypted"])
        peripheral.expect_event("disconnected", 20)
        [bond] = self.our_bonds()
        self.assertEqual((bond["secureConnections"], bond["authenticated"]), (True, False), bond)
        # A new `ble` process (another address from the link): Bumble resolves it with our IRK, finds the key, and
        # the link is encrypted with it; nobody pairs again.
        out = self.finish(self.ble("read", PAIRING_NAME, "5EC1F001-0B5E-4C3A-9D2E-7A1B2C3D4E5F"), "second ble read")
        self.assertEqual(hexes(out), ["5ec0de"], out)
        self.assertTrue(peripheral.expect_event("encrypted", 20)["encrypted"])
        self.assertTrue(peripheral.expect_event("read", 20)["encrypted"])
        peripheral.expect_event("disconnected", 20)
        self.assertEqual(len(peripheral.events("paired")), 1, peripheral.output())
        self.assertEqual(self.our_bonds(), [bond], "the same bond")

    def test_our_central_types_the_passkey_bumble_shows(self):
        peripheral = self.bumble_peripheral(sc=True, io="display", mitm=True)
        pair = self.ble("pair", PAIRING_NAME, "--io-capability", "keyboard", "--mitm", "--passkey", "-", stdin=True)
        shown = peripheral.expect_event("passkey", 30)["value"]
        pair.send(shown)
        out = self.finish(pair, "ble pair")
        self.assertIn("method: Passkey Entry", out)
        self.assertIn("security: Secure Connections, authenticated, key size 16", out)
        paired = peripheral.expect_event("paired", 20)
        self.assertTrue(paired["sc"] and paired["authenticated"], paired)
        # The authenticated bond opens the value Bumble keeps for authenticated links, from a new process.
        out = self.finish(self.ble("read", PAIRING_NAME, "5EC1F001-0B5E-4C3A-9D2E-7A1B2C3D4E5F"), "ble read")
        self.assertEqual(hexes(out), ["5ec0de"], out)
        self.assertEqual(len(peripheral.events("paired")), 1, peripheral.output())

    def test_our_central_pairs_with_legacy_passkey_entry(self):
        # Bumble types what we show. Legacy bonds are checked on the first connection only: Bumble's peripheral
        # answers the next LTK request with the wrong key (BLEHost.docc/Peers.md; our own pair re-encrypts, see
        # PairingTests.aLegacyBondReEncryptsTheNextLink).
        peripheral = self.bumble_peripheral(sc=False, io="keyboard", mitm=True)
        pair = self.ble("pair", PAIRING_NAME, "--io-capability", "display", "--mitm")
        shown = pair.expect_regex(r"passkey: (\d{6})", 30).group(1)
        peripheral.expect_event("passkey-asked", 20)
        peripheral.send(f"passkey {shown}")
        out = self.finish(pair, "ble pair")
        self.assertIn("security: LE legacy, authenticated, key size 16", out)
        paired = peripheral.expect_event("paired", 20)
        self.assertEqual((paired["sc"], paired["authenticated"]), (False, True), paired)
        [bond] = self.our_bonds()
        self.assertEqual((bond["secureConnections"], bond["authenticated"]), (False, True), bond)

    # Bumble's central, our peripheral (`ble serve secure-lock`).

    def test_bumble_central_pairs_with_our_lock_and_re_encrypts_next_time(self):
        serve = self.ble("serve", "secure-lock")
        serve.expect_regex(r'^\S+Z advertising "SecureLock"', STARTUP)
        central = self.bumble_central(2, sc=True, io="none")
        self.assertEqual(central.wait(120), 0, f"{central.output()}\n--- ble serve:\n{serve.output()}")
        reads = central.events("read")
        self.assertEqual([r.get("hex") for r in reads], ["01", "01"], central.output())
        connected = central.events("connected")
        self.assertEqual([c["bonded"] for c in connected], [False, True], "paired once, then the kept key")
        self.assertEqual(len(central.events("paired")), 1, central.output())
        self.assertTrue(central.events("paired")[0]["sc"])
        self.assertEqual(len(central.events("security-failed")), 0, central.output())

    def test_bumble_central_pairs_with_legacy_passkey_and_re_encrypts_next_time(self):
        # Our lock shows the passkey; Bumble's central types it. Bumble's fault is in its peripheral, so a legacy
        # bond with Bumble as central re-encrypts.
        serve = self.ble("serve", "secure-lock", "--io-capability", "display", "--mitm")
        serve.expect_regex(r'^\S+Z advertising "SecureLock"', STARTUP)
        central = self.bumble_central(2, sc=False, io="keyboard", mitm=True)
        central.expect_event("passkey-asked", 60)
        shown = serve.expect_regex(r"\* passkey: (\d{6})", 20).group(1)
        central.send(f"passkey {shown}")
        self.assertEqual(central.wait(120), 0, f"{central.output()}\n--- ble serve:\n{serve.output()}")
        self.assertEqual([r.get("hex") for r in central.events("read")], ["01", "01"], central.output())
        paired = central.events("paired")
        self.assertEqual(len(paired), 1, central.output())
        self.assertEqual((paired[0]["sc"], paired[0]["authenticated"]), (False, True), paired)
        self.assertEqual([c["bonded"] for c in central.events("connected")], [False, True])


class PairingOverBumbleLink(Pairing, unittest.TestCase):
    def make_link(self):
        return BumbleTransportLink(self)


class PairingInOurRoom(Pairing, unittest.TestCase):
    """The same, on our controllers: Bumble's host joins the room over H4, so its pairing runs on our virtual
    controller (LE encryption, AES-CCM), as another stack's would on a dongle of ours."""

    def make_link(self):
        return RoomLink(self)


class BumbleTransportLink:
    """Our side on one of Bumble's two linked controllers, Bumble's on the other."""

    def __init__(self, test):
        self.link = peers.BumbleLink(test)
        self.process = self.link.process

    def transport(self):
        return ["--transport", self.link.ours()]

    def env(self):
        return {}

    def bumble(self):
        return self.link.bumble()


class RoomLink:
    """A shared room of this test's own: `ble` processes attach over its socket, Bumble over H4 (a new device
    for each connection)."""

    def __init__(self, test):
        runtime = tempfile.mkdtemp(prefix="ble-room-", dir="/tmp")
        test.addCleanup(shutil.rmtree, runtime, True)
        self.runtime = runtime
        self.room = peers.start(test, "ble room", [
            BLE, "room", "--h4", "tcp-server:127.0.0.1:0", "--idle-timeout", "0"], env=self.env())
        self.process = self.room
        self.port = int(self.room.expect_regex(r"listening on tcp-server:127\.0\.0\.1:(\d+)", STARTUP).group(1))
        self.room.expect_regex(r"room running", STARTUP)

    def transport(self):
        return []

    def env(self):
        return {"XDG_RUNTIME_DIR": self.runtime, "BLE_TRANSPORT": "room"}

    def bumble(self):
        return f"tcp-client:127.0.0.1:{self.port}"


# Pairing without bonding, queued writes and the pairing matrix (interop_security.py), on the links above.
import interop_security  # noqa: E402  (its tests use the links defined above)


class PairingWithoutBondingOverBumbleLink(interop_security.PairingWithoutBonding, unittest.TestCase):
    def make_link(self):
        return BumbleTransportLink(self)


class PairingWithoutBondingInOurRoom(interop_security.PairingWithoutBonding, unittest.TestCase):
    def make_link(self):
        return RoomLink(self)


class QueuedWritesOverBumbleLink(interop_security.QueuedWrites, unittest.TestCase):
    def make_link(self):
        return BumbleTransportLink(self)


class PairingMatrixOverBumbleLink(interop_security.PairingMatrix, unittest.TestCase):
    def make_link(self):
        return BumbleTransportLink(self)


if __name__ == "__main__":
    unittest.main()
