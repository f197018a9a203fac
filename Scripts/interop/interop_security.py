"""Pairing without bonding, queued writes, and a table of pairings, against Bumble 0.0.236.

The classes here are mixins: test_interop.py makes them test cases, one per link, so that `python -m unittest
test_interop` (Scripts/interop/run.sh) runs them. The name does not start with "test", so that
`unittest discover` does not run them twice.

One Bumble process (bumble_security.py) serves every row of a test, reconfigured through its standard input before
each connection; our side is one `ble` process per row (it starts in a few milliseconds), each with a store of its
own, so that no row meets a bond another row left.
"""
import json
import os
import re
import shutil
import tempfile
import time

import peers
from peers import BLE, HERE, PYTHON

COMMAND = 60   # one `ble` command, start to exit
STARTUP = 20   # a peer becoming ready
EVENTS = 20    # Bumble reporting what a connection did

PERIPHERAL_NAME = "BSec"               # bumble_security.py's peripheral
PERIPHERAL_ADDRESS = "F0:F1:F2:F3:F4:F5"
CENTRAL_ADDRESS = "F1:F2:F3:F4:F5:F6"
SECURE_SERVICE = "5EC1F000-0B5E-4C3A-9D2E-7A1B2C3D4E5F"
ENCRYPTED_VALUE = "5EC1F001-0B5E-4C3A-9D2E-7A1B2C3D4E5F"   # Bumble's: readable on an encrypted link
AFTER_PAIRING = "5EC1F003-0B5E-4C3A-9D2E-7A1B2C3D4E5F"     # Bumble's: open, answered once security settled
LOCK_SERVICE = "5EC10001-2B7D-4E8A-9C3F-6A1B2C3D4E5F"      # ble serve secure-lock
LOCK_STATE = "5EC10002-2B7D-4E8A-9C3F-6A1B2C3D4E5F"        # its state, readable only encrypted

# SMP Pairing Failed reasons (Core Vol 3, Part H, 3.5.5, Table 3.7).
PASSKEY_ENTRY_FAILED = 0x01
AUTHENTICATION_REQUIREMENTS = 0x03
CONFIRM_VALUE_FAILED = 0x04
PAIRING_NOT_SUPPORTED = 0x05
NUMERIC_COMPARISON_FAILED = 0x0C

JW, PE, NC = "Just Works", "Passkey Entry", "Numeric Comparison"
IO = ("none", "display", "display-yes-no", "keyboard", "keyboard-display")


def hex_lines(stdout):
    return [m.group(1).lower() for m in re.finditer(r"^\s*([0-9a-fA-F]+)(?:  .*)?$", stdout, re.M)]


# --- the spec's table ---------------------------------------------------------------------------------------

def method_from_io(initiator, responder, sc):
    """Core Vol 3, Part H, 2.3.5.1, Table 2.8 (IO capabilities to key generation method), for a pairing where
    MITM protection was asked by at least one side (without it, Just Works: Tables 2.6 and 2.7). Returns
    (method, who displays the passkey: "initiator", "responder" or None when both type it)."""
    if "none" in (initiator, responder):
        return JW, None
    displays_only = {"display", "display-yes-no"}
    if initiator in displays_only and responder in displays_only:
        if sc and initiator == responder == "display-yes-no":
            return NC, None
        return JW, None
    if initiator == responder == "keyboard":
        return PE, None          # both type the same passkey
    if sc and {initiator, responder} in ({"display-yes-no", "keyboard-display"}, {"keyboard-display"}):
        return NC, None
    # Passkey Entry: a side that can only type types; otherwise (keyboard-display against keyboard-display, or
    # against display-yes-no in legacy) the initiator displays and the responder types.
    if initiator == "keyboard" or (responder in displays_only and initiator == "keyboard-display"):
        return PE, "responder"
    return PE, "initiator"


class Side:
    """One side's settings for a row: our `ble` options or Bumble's configuration."""

    def __init__(self, io="none", mitm=False, sc=True, bond=True, send=None, ask=None, sc_only=False):
        self.io, self.mitm, self.sc, self.bond, self.sc_only = io, mitm, sc, bond, sc_only
        # Key distribution, None for the default. Ours: --send-keys and --ask-keys. Bumble's: its initiator key
        # distribution field (the keys the initiator sends) and its responder one (the keys the responder sends),
        # whichever role it has ("enc,id" as ours are written).
        self.send, self.ask = send, ask


class Row:
    """A pairing to try. `role`: "central" (`ble pair` initiates against Bumble's peripheral), "peripheral"
    (Bumble's central initiates against `ble serve secure-lock`), "security-request" (Bumble's peripheral sends a
    Security Request to `ble read`). `user`: what the users do ("yes"; "no": ours refuses the comparison;
    "bumble-no": Bumble's refuses it; "wrong": the passkey typed is not the one shown; "bumble-refuses": Bumble
    does not accept the pairing request; "no-passkey": ours is asked for a passkey it was not given).

    Unless `fails` says which side sends Pairing Failed with which reason, the expected outcome follows from the
    spec: the method (Table 2.8, Just Works when neither side asks MITM), authenticated unless Just Works, Secure
    Connections when both support it, bonded when both ask for bonding."""

    def __init__(self, role, ours, bumble, user="yes", fails=None, why=""):
        self.role, self.ours, self.bumble, self.user, self.fails, self.why = role, ours, bumble, user, fails, why
        initiator, responder = (bumble, ours) if role == "peripheral" else (ours, bumble)
        self.sc = ours.sc and bumble.sc
        if ours.mitm or bumble.mitm:
            self.method, self.displays = method_from_io(initiator.io, responder.io, self.sc)
        else:
            self.method, self.displays = JW, None
        self.authenticated = self.method != JW
        self.bonded = ours.bond and bumble.bond
        if self.fails is None and ours.mitm and self.method == JW:
            # `--mitm` requires the protection: when the capabilities give Just Works, our side ends the pairing
            # with Authentication Requirements (2.3.5.1: the key would not have the security properties required).
            self.fails = ("ours", AUTHENTICATION_REQUIREMENTS)
        # Who shows the passkey, who types it (our side or Bumble's).
        ours_is_initiator = role != "peripheral"
        if self.method == PE and self.displays is not None:
            ours_displays = (self.displays == "initiator") == ours_is_initiator
            self.shower, self.typist = ("ours", "bumble") if ours_displays else ("bumble", "ours")
        elif self.method == PE:
            self.shower, self.typist = None, "both"
        else:
            self.shower = self.typist = None

    def describe(self):
        o, b = self.ours, self.bumble
        ours = f"ours {o.io}{' mitm' if o.mitm else ''}{'' if o.sc else ' legacy'}{' sc-only' if o.sc_only else ''}" \
               f"{'' if o.bond else ' no-bond'}{f' send={o.send}' if o.send else ''}{f' ask={o.ask}' if o.ask else ''}"
        bumble = f"bumble {b.io}{' mitm' if b.mitm else ''}{'' if b.sc else ' legacy'}{'' if b.bond else ' no-bond'}" \
                 f"{f' init={b.send}' if b.send else ''}{f' resp={b.ask}' if b.ask else ''}"
        expected = (f"fails {self.fails[1]:#04x} from {self.fails[0]}" if self.fails else
                    f"{self.method}, {'SC' if self.sc else 'legacy'}, "
                    f"{'authenticated' if self.authenticated else 'unauthenticated'}, bonded {self.bonded}")
        return f"[{self.role}] {ours} / {bumble} / user {self.user} -> {expected}"


PASSKEY = 314159     # what Bumble shows, when it shows one
WRONG = PASSKEY ^ 1  # its lowest bit differs: the first round of SC Passkey Entry already fails


def matrix():
    """The rows. Every IO capability pair in two directions: our central under SC with Bumble asking MITM (its
    Just Works cells complete, unauthenticated), our peripheral under legacy with both asking MITM (its Just Works
    cells fail: ours requires it); the Numeric Comparison cells the other way round; then MITM, bonding, keys,
    refusals and wrong passkeys."""
    rows = []
    for a in IO:
        for b in IO:
            rows.append(Row("central", Side(a), Side(b, mitm=True)))
            rows.append(Row("peripheral", Side(a, mitm=True, sc=False), Side(b, mitm=True, sc=False)))
    for a, b in (("display-yes-no", "display-yes-no"), ("display-yes-no", "keyboard-display"),
                 ("keyboard-display", "display-yes-no"), ("keyboard-display", "keyboard-display"),
                 ("keyboard", "keyboard"), ("display", "keyboard")):
        rows.append(Row("central", Side(a, mitm=True, sc=False), Side(b, mitm=True, sc=False)))
        rows.append(Row("peripheral", Side(a, mitm=True), Side(b, mitm=True)))
    kd, kb = "keyboard-display", "keyboard"
    rows += [
        # MITM asked by nobody: Just Works whatever the capabilities; by one side only: the table applies.
        Row("central", Side(kd), Side(kd)),
        Row("peripheral", Side(kd, sc=False), Side(kd, sc=False)),
        Row("central", Side(kb, mitm=True), Side("display")),
        Row("central", Side(kb), Side("display", mitm=True)),
        Row("peripheral", Side("display", mitm=True), Side(kb)),
        Row("peripheral", Side("display"), Side(kb, mitm=True, sc=False)),
        # Our side requires MITM and the capabilities allow only Just Works: ours refuses (Authentication
        # Requirements, 2.3.5.1). Bumble's mitm only asks for it: Bumble goes on unauthenticated (rows above).
        Row("central", Side("none", mitm=True), Side(kd), fails=("ours", AUTHENTICATION_REQUIREMENTS)),
        Row("central", Side(kd, mitm=True), Side("none"), fails=("ours", AUTHENTICATION_REQUIREMENTS)),
        Row("peripheral", Side(kd, mitm=True), Side("none", mitm=True), fails=("ours", AUTHENTICATION_REQUIREMENTS)),
        # Secure Connections Only against a legacy-only peer (2.3.5.1; Vol 3, Part C, 10.2.4).
        Row("central", Side(sc_only=True), Side(sc=False), fails=("ours", AUTHENTICATION_REQUIREMENTS)),
        Row("peripheral", Side(sc_only=True), Side(sc=False), fails=("ours", AUTHENTICATION_REQUIREMENTS)),
        # Our side legacy against Bumble's SC: legacy.
        Row("central", Side(kd, mitm=True, sc=False), Side("display", mitm=True)),
        Row("peripheral", Side("display", sc=False), Side(kb, mitm=True)),
        # Bonding: bonded only when both ask (3.5.1, Bonding_Flags).
        Row("central", Side(), Side(bond=False)),
        Row("central", Side(bond=False), Side()),
        Row("central", Side(bond=False, sc=False), Side(bond=False, sc=False)),
        Row("peripheral", Side(), Side(bond=False)),
        Row("peripheral", Side(bond=False, sc=False), Side(sc=False)),
        # Key distribution: what is distributed is what the initiator asked and the responder agreed to.
        Row("central", Side(send="id", ask="none"), Side()),
        Row("central", Side(send="none", ask="id"), Side()),
        Row("central", Side(send="enc,id", ask="enc", sc=False), Side(sc=False)),
        Row("central", Side(bond=False, send="id", ask="id", sc=False), Side(bond=False, sc=False)),
        Row("peripheral", Side(send="none", ask="none"), Side()),
        Row("peripheral", Side(send="id", ask="enc", sc=False), Side(sc=False)),
        # Users: a comparison refused on either side, a wrong passkey either way, a passkey never given.
        Row("central", Side("display-yes-no", mitm=True), Side("display-yes-no"), user="no",
            fails=("ours", NUMERIC_COMPARISON_FAILED)),
        Row("central", Side("display-yes-no", mitm=True), Side(kd), user="bumble-no",
            fails=("bumble", CONFIRM_VALUE_FAILED),
            why="Bumble refuses a comparison with Confirm Value Failed, not Numeric Comparison Failed (0x0C)"),
        Row("peripheral", Side(kd, mitm=True), Side("display-yes-no", mitm=True), user="no",
            fails=("ours", NUMERIC_COMPARISON_FAILED)),
        Row("peripheral", Side("display-yes-no"), Side(kd, mitm=True), user="bumble-no",
            fails=("bumble", CONFIRM_VALUE_FAILED), why="as above"),
        # A wrong passkey: the responder checks the initiator's confirm value first (2.3.5.5, 2.3.5.6.3).
        Row("central", Side(kb, mitm=True), Side("display"), user="wrong", fails=("bumble", CONFIRM_VALUE_FAILED)),
        Row("central", Side(kb, mitm=True, sc=False), Side(kd), user="wrong",
            fails=("bumble", CONFIRM_VALUE_FAILED)),
        Row("central", Side("display", mitm=True), Side(kb), user="wrong", fails=("bumble", CONFIRM_VALUE_FAILED)),
        Row("peripheral", Side("display", mitm=True), Side(kb), user="wrong", fails=("ours", CONFIRM_VALUE_FAILED)),
        Row("peripheral", Side(kb, sc=False), Side(kd, mitm=True, sc=False), user="wrong",
            fails=("ours", CONFIRM_VALUE_FAILED)),
        Row("central", Side(kb, mitm=True), Side("display"), user="no-passkey", fails=("ours", PASSKEY_ENTRY_FAILED)),
        Row("peripheral", Side(kb, mitm=True), Side("display"), user="no-passkey",
            fails=("ours", PASSKEY_ENTRY_FAILED)),
        # A peripheral that does not pair (Bumble's user refuses the request): Pairing Not Supported.
        Row("central", Side(), Side(), user="bumble-refuses", fails=("bumble", PAIRING_NOT_SUPPORTED)),
        # The peripheral asks for security (Security Request, 2.4.6); `ble read` has no pairing options: Just Works.
        Row("security-request", Side(), Side()),
        Row("security-request", Side(), Side(sc=False, bond=False)),
        Row("security-request", Side(), Side(kd, mitm=True)),
    ]
    return rows


# Pairings the table leaves out, and why (nothing here is skipped at run time: these rows are not in it).
NOT_PLAYED = {
    "OOB data (either side)": "`ble` has no option to give or take out-of-band data",
    "Keypress notifications": "Bumble 0.0.236 does not handle SMP_Pairing_Keypress_Notification (commented out in "
                              "smp.py), and `ble` has no option to send them",
    "Signing keys (CSRK)": "`ble --send-keys/--ask-keys` offer enc and id only",
    "Security Request from our peripheral": "`ble serve` has no option to send one",
    "Security Request rows needing a passkey or a comparison": "`ble read` (the central that answers a Security "
                                                               "Request) has no pairing options: Just Works only",
    "Bumble requiring MITM and refusing Just Works": "Bumble's mitm only sets the flag; it never fails a pairing "
                                                     "for want of MITM (decide_pairing_method), so such rows "
                                                     "complete unauthenticated (they are in the table that way)",
    "A legacy bond re-encrypting with Bumble as peripheral": "Bumble answers the LTK request with the wrong key "
                                                             "(BLEHost.docc/Peers.md)",
}


def json_records(process_lines):
    out = []
    for line in process_lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and "event" in record:
            out.append(record)
    return out


def events_until(process, last, timeout, **fields):
    """Every JSON event `process` prints from here on, up to and including the first `last` event (with `fields`)."""
    seen = []

    def take(line):
        try:
            record = json.loads(line)
        except ValueError:
            return None
        if not isinstance(record, dict) or "event" not in record:
            return None
        seen.append(record)
        return record["event"] == last and all(record.get(k) == v for k, v in fields.items())

    process.expect(take, timeout, f"event {last}")
    return seen


def one(events, name):
    found = [e for e in events if e["event"] == name]
    return found[0] if found else None


class SecurityPeers:
    """What the tests here share: the link (from the concrete class), Bumble's device, and `ble` runs with a store
    of their own."""

    def make_link(self):
        raise NotImplementedError

    def setUp(self):
        self.link = self.make_link()
        self.running = []   # the `ble` processes of the current row
        self.states = tempfile.mkdtemp(prefix="ble-sec-state-")
        self.addCleanup(shutil.rmtree, self.states, True)

    def fresh_env(self):
        state = tempfile.mkdtemp(dir=self.states)
        return {**self.link.env(), "XDG_STATE_HOME": state}

    def bumble_peripheral(self):
        process = peers.start(self, "bumble-security-peripheral", [
            PYTHON, os.path.join(HERE, "bumble_security.py"), "peripheral", self.link.bumble(), PERIPHERAL_NAME,
            PERIPHERAL_ADDRESS], stdin=True)
        process.expect_event("ready", STARTUP)
        return process

    def bumble_central(self):
        process = peers.start(self, "bumble-security-central", [
            PYTHON, os.path.join(HERE, "bumble_security.py"), "central", self.link.bumble(), CENTRAL_ADDRESS],
            stdin=True)
        process.expect_event("ready", STARTUP)
        return process

    def configure(self, peripheral, **settings):
        """Bumble's peripheral takes the row's settings; it answers once it advertises again."""
        peripheral.send("config " + json.dumps(settings))

        def answer(line):
            try:
                record = json.loads(line)
            except ValueError:
                return None
            return record if isinstance(record, dict) and record.get("event") in ("configured", "error") else None
        record = peripheral.expect(answer, EVENTS, "its answer to config")
        if record["event"] == "error":
            raise peers.PeerError(f"{peripheral.name} refused the row's settings: {record.get('message')}")

    def ble(self, env, *args, stdin=False):
        process = peers.start(self, "ble " + args[0], [BLE, *args, *self.link.transport()], stdin=stdin, env=env)
        process.companions.append(self.link.process)
        self.running.append(process)
        return process

    def bonds(self, env):
        result = peers.run("ble bonds", [BLE, "bonds", "--json"], 20, env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


# --- 1. pairing without bonding ------------------------------------------------------------------------------

class PairingWithoutBonding(SecurityPeers):
    """A peer that pairs without bonding yet distributes its identity key, as BTstack's stock examples and Linux
    do. Before the fix our central answered Bumble's Identity Information with Pairing Failed (Unspecified Reason),
    and our peripheral promised IdKey in its Pairing Response and never sent it (the peer timed out after 30 s)."""

    def test_our_central_pairs_with_a_peripheral_that_does_not_bond(self):
        peripheral = self.bumble_peripheral()
        for sc in (True, False):
            with self.subTest(sc=sc):
                self.configure(peripheral, sc=sc, bonding=False)
                # Any read that needs encryption pairs first, then reads (Bumble's sc=False makes it legacy).
                env = self.fresh_env()
                read = self.ble(env, "read", PERIPHERAL_NAME, ENCRYPTED_VALUE)
                status = read.wait(COMMAND)
                events = events_until(peripheral, "disconnected", EVENTS)
                self.assertEqual(status, 0, f"ble read:\n{read.output()}\n--- Bumble:\n{events}")
                self.assertEqual(hex_lines(read.output()), ["5ec0de"], read.output())
                paired = one(events, "paired")
                self.assertIsNotNone(paired, events)
                self.assertEqual((paired["sc"], paired["bonding"]), (sc, False), paired)
                self.assertIn("id", paired["distribution"]["responder"], "Bumble gave its identity key")
                self.assertIsNone(one(events, "pairing-failed"), events)
                self.assertTrue(one(events, "read")["encrypted"], events)
                self.assertEqual(self.bonds(env), [], "no bond kept when the peer does not bond")

                # `ble pair` (bonding asked), then with --no-bond, and --no-bond still asking the identity.
                for extra in ([], ["--no-bond"], ["--no-bond", "--ask-keys", "id", "--send-keys", "id"]):
                    env = self.fresh_env()
                    pair = self.ble(env, "pair", PERIPHERAL_NAME, *([] if sc else ["--legacy"]), *extra)
                    status = pair.wait(COMMAND)
                    events = events_until(peripheral, "disconnected", EVENTS)
                    out = pair.output()
                    self.assertEqual(status, 0, f"ble pair {extra}:\n{out}\n--- Bumble:\n{events}")
                    self.assertIn("method: Just Works", out)
                    self.assertIn(f"security: {'Secure Connections' if sc else 'LE legacy'}, unauthenticated, "
                                  f"key size 16", out)
                    self.assertIn("bonded: no", out)
                    paired = one(events, "paired")
                    self.assertIsNotNone(paired, f"{extra}: {events}")
                    self.assertIsNone(one(events, "pairing-failed"), events)
                    if "--ask-keys" in extra:
                        self.assertEqual(paired["distribution"], {"initiator": ["id"], "responder": ["id"]}, paired)
                        self.assertIsNotNone(paired["irk"], "Bumble received our identity")
                    self.assertEqual(self.bonds(env), [], f"ble pair {extra}: no bond kept")

    def test_bumble_central_without_bonding_pairs_with_our_lock(self):
        central = self.bumble_central()
        for sc, ours in ((True, []), (False, []), (False, ["--legacy"]), (True, ["--no-bond"])):
            with self.subTest(sc=sc, ours=ours):
                serve = self.ble(self.fresh_env(), "serve", "secure-lock", *ours)
                serve.expect_regex(r'^\S+Z advertising "SecureLock"', STARTUP)
                started = time.monotonic()
                # Bumble asks for no bonding and offers and asks IdKey both ways (and EncKey, its default).
                central.send("pair " + json.dumps({"service": LOCK_SERVICE, "characteristic": LOCK_STATE, "sc": sc,
                                                   "bonding": False, "timeout": 10}))
                events = events_until(central, "done", 60)
                took = time.monotonic() - started
                report = f"Bumble:\n{events}\n--- ble serve:\n{serve.output()}"
                self.assertIsNone(one(events, "pairing-timeout"), report)
                self.assertIsNone(one(events, "pairing-failed"), report)
                paired = one(events, "paired")
                self.assertIsNotNone(paired, report)
                self.assertEqual((paired["sc"], paired["bonding"]), (sc and not ours == ["--legacy"], False), paired)
                # Bumble asked for our IdKey: ours gives it unless --no-bond (whose default is to send no keys); what
                # it promised in its Pairing Response, it sent (else Bumble would still be waiting for it).
                promised = paired["distribution"]["responder"]
                self.assertEqual("id" in promised, ours != ["--no-bond"], paired)
                self.assertEqual(paired["irk"] is not None, "id" in promised, f"our identity: {report}")
                self.assertEqual(one(events, "read").get("hex"), "01", report)
                serve.expect_regex(rf" read {LOCK_STATE} 01$", 10, "our lock logging the encrypted read")
                self.assertLess(took, 10, f"pairing and reading took {took:.1f} s (an SMP timeout is 30 s)")
                serve.stop()


# --- 2. queued writes ---------------------------------------------------------------------------------------

QUEUED_SERVICE = "5EC20000-2B7D-4E8A-9C3F-6A1B2C3D4E5F"
FIRST = "5EC20001-2B7D-4E8A-9C3F-6A1B2C3D4E5F"    # dynamic, no initial value: the app answers
SECOND = "5EC20002-2B7D-4E8A-9C3F-6A1B2C3D4E5F"   # dynamic, initial value aabbcc
FIXED = "5EC20003-2B7D-4E8A-9C3F-6A1B2C3D4E5F"    # read only with a value: the GATT server answers
QUEUED_PROFILE = {
    "name": "Queued", "advertise": [QUEUED_SERVICE],
    "services": [{"uuid": QUEUED_SERVICE, "primary": True, "characteristics": [
        {"uuid": FIRST, "properties": ["read", "write"], "value": None},
        {"uuid": SECOND, "properties": ["read", "write"], "value": "aabbcc"},
        {"uuid": FIXED, "properties": ["read"], "value": "f1f2f3"},
    ]}]}
INVALID_OFFSET = 0x07
INVALID_ATTRIBUTE_VALUE_LENGTH = 0x0D
WRITE_NOT_PERMITTED = 0x03


class QueuedWrites(SecurityPeers):
    """Prepare Write and Execute Write Requests (Vol 3, Part F, 3.4.6) from Bumble's central, as raw ATT PDUs,
    against `ble serve FILE.json` (the app answers the writes of a profile's dynamic characteristics) and
    `ble serve heart-rate` (an app that refuses a value with an application error)."""

    def run_plan(self, target, ops):
        plan = {"target": target, "ops": [{"op": "discover"}, *ops, {"op": "disconnect"}]}
        central = peers.start(self, "bumble-central", [
            PYTHON, os.path.join(HERE, "bumble_central.py"), self.link.bumble(), json.dumps(plan)])
        self.assertEqual(central.wait(90), 0, central.output())
        return [e for e in json_records(central.lines) if e["event"] in ("write", "prepare", "execute", "read")]

    def test_prepared_writes_at_offsets(self):
        folder = tempfile.mkdtemp(prefix="queued-")
        self.addCleanup(shutil.rmtree, folder, True)
        profile = os.path.join(folder, "queued.json")
        with open(profile, "w") as f:
            json.dump(QUEUED_PROFILE, f)
        serve = self.ble(self.fresh_env(), "serve", profile)
        serve.expect_regex(r'^\S+Z advertising "Queued"', STARTUP)
        ten = bytes(range(10)).hex()
        steps = [
            # (operation, what Bumble must report: a dict of fields, compared after dropping the others)
            ({"op": "write", "uuid": FIRST, "hex": ten}, {"ok": True}),
            # One part inside the value: the rest of it is kept.
            ({"op": "prepare", "uuid": FIRST, "offset": 5, "hex": "ffff"}, {"ok": True, "offset": 5, "hex": "ffff"}),
            ({"op": "execute", "flags": 1}, {"ok": True}),
            ({"op": "read", "uuid": FIRST}, {"hex": "0001020304ffff070809"}),
            # Past the end (offset 11 of 10 octets): the Prepare is queued, the Execute fails with Invalid Offset
            # (3.4.6.3) and nothing changes.
            ({"op": "prepare", "uuid": FIRST, "offset": 11, "hex": "ee"}, {"ok": True, "offset": 11}),
            ({"op": "execute", "flags": 1}, {"error": INVALID_OFFSET}),
            ({"op": "read", "uuid": FIRST}, {"hex": "0001020304ffff070809"}),
            # At the end exactly: appended.
            ({"op": "prepare", "uuid": FIRST, "offset": 10, "hex": "0a"}, {"ok": True}),
            ({"op": "execute", "flags": 1}, {"ok": True}),
            ({"op": "read", "uuid": FIRST}, {"hex": "0001020304ffff0708090a"}),
            # Parts of two characteristics in one queue, applied in the order queued. SECOND's part starts past 0:
            # the rest of its value is kept. FIRST's parts start at 0: a client writing a long value from offset 0
            # writes the whole value (Vol 3, Part G, 4.9.4), which ends where its farthest part ends.
            ({"op": "prepare", "uuid": FIRST, "offset": 0, "hex": "11"}, {"ok": True}),
            ({"op": "prepare", "uuid": SECOND, "offset": 1, "hex": "22"}, {"ok": True}),
            ({"op": "prepare", "uuid": FIRST, "offset": 1, "hex": "3344"}, {"ok": True}),
            ({"op": "prepare", "uuid": FIRST, "offset": 2, "hex": "55"}, {"ok": True}),
            ({"op": "execute", "flags": 1}, {"ok": True}),
            ({"op": "read", "uuid": FIRST}, {"hex": "113355"}),
            ({"op": "read", "uuid": SECOND}, {"hex": "aa22cc"}),
            # Execute with flags 0 cancels: nothing written.
            ({"op": "prepare", "uuid": FIRST, "offset": 0, "hex": "99"}, {"ok": True}),
            ({"op": "prepare", "uuid": SECOND, "offset": 0, "hex": "99"}, {"ok": True}),
            ({"op": "execute", "flags": 0}, {"ok": True}),
            ({"op": "read", "uuid": FIRST}, {"hex": "113355"}),
            ({"op": "read", "uuid": SECOND}, {"hex": "aa22cc"}),
            # Parts adding up to 513 octets: Invalid Attribute Value Length at Execute, nothing written.
            ({"op": "prepare", "uuid": FIRST, "offset": 0, "hex": "55" * 300}, {"ok": True}),
            ({"op": "prepare", "uuid": FIRST, "offset": 300, "hex": "66" * 213}, {"ok": True}),
            ({"op": "execute", "flags": 1}, {"error": INVALID_ATTRIBUTE_VALUE_LENGTH}),
            ({"op": "read", "uuid": FIRST}, {"hex": "113355"}),
            # 512 octets exactly is allowed.
            ({"op": "prepare", "uuid": SECOND, "offset": 0, "hex": "77" * 300}, {"ok": True}),
            ({"op": "prepare", "uuid": SECOND, "offset": 300, "hex": "88" * 212}, {"ok": True}),
            ({"op": "execute", "flags": 1}, {"ok": True}),
            ({"op": "read", "uuid": SECOND}, {"hex": "77" * 300 + "88" * 212}),
            # A fixed value (the GATT server's): the Prepare itself is refused, Write Not Permitted (3.4.6.1).
            ({"op": "prepare", "uuid": FIXED, "offset": 0, "hex": "00"}, {"error": WRITE_NOT_PERMITTED}),
            ({"op": "execute", "flags": 1}, {"ok": True}),
            ({"op": "read", "uuid": FIXED}, {"hex": "f1f2f3"}),
        ]
        got = self.run_plan({"service": QUEUED_SERVICE}, [op for op, _ in steps])
        self.assertEqual(len(got), len(steps), got)
        for (op, expected), result in zip(steps, got):
            self.assertEqual({k: result.get(k) for k in expected}, expected, f"{op} -> {result}")
        serve.stop()
        # What `ble serve` logged: a 'write UUID HEX' line per characteristic an Execute wrote, with the value it
        # became, in order; a refused Execute as the refusal; a cancelled queue and refused Prepares not at all.
        logged = [m.groups() for m in re.finditer(
            r" write ([0-9A-F-]{36}) ([0-9a-f]*|at offset [0-9,]+ -> .*)$", serve.output(), re.M)]
        self.assertEqual(logged, [
            (FIRST, ten),
            (FIRST, "0001020304ffff070809"),
            (FIRST, "at offset 11 -> Invalid Offset (0x07)"),
            (FIRST, "0001020304ffff0708090a"),
            (FIRST, "113355"),
            (SECOND, "aa22cc"),
            (SECOND, "77" * 300 + "88" * 212),
        ], serve.output())

    def test_an_execute_the_app_refuses_names_the_attribute(self):
        # Vol 3, Part F, 3.4.6.3: when the queued values cannot be written because of an application error, the
        # Error Response's Attribute Handle In Error "shall be set to the attribute handle of the attribute from
        # the prepare queue that caused this application error". heart-rate refuses anything but 01 on its control
        # point (2A39) with 0x80.
        serve = self.ble(self.fresh_env(), "serve", "heart-rate")
        serve.expect_regex(r'^\S+Z advertising "HRM-Demo"', STARTUP)
        got = self.run_plan({"service": "180D"}, [
            {"op": "prepare", "uuid": "2A39", "offset": 0, "hex": "02"},
            {"op": "execute", "flags": 1},
            {"op": "prepare", "uuid": "2A39", "offset": 0, "hex": "01"},
            {"op": "execute", "flags": 1},
        ])
        prepared, refused, _, accepted = got
        self.assertEqual(refused.get("error"), 0x80, got)
        self.assertTrue(accepted.get("ok"), got)
        serve.stop()
        self.assertRegex(serve.output(), r" write 2A39 02 -> Application Error \(0x80\)\n.* write 2A39 01\n")
        self.assertEqual(refused.get("handle"), prepared["handle"],
                         f"Attribute Handle In Error of the refused Execute: {got}")


# --- 3. the pairing matrix ----------------------------------------------------------------------------------

class PairingMatrix(SecurityPeers):
    """Every row of matrix(): both sides must reach the outcome the spec gives. Failures are collected and
    reported together, one line per row (with both sides' output), so that one run shows every row that fails."""

    def ours_args(self, row, ours_is_central):
        o = row.ours
        args = ["--io-capability", o.io]
        if o.mitm:
            args.append("--mitm")
        if not o.sc:
            args.append("--legacy")
        if o.sc_only:
            args.append("--sc-only")
        if not o.bond:
            args.append("--no-bond")
        if o.send:
            args += ["--send-keys", o.send]
        if o.ask:
            args += ["--ask-keys", o.ask]
        if row.typist in ("ours", "both") and row.user != "no-passkey":
            args += ["--passkey", f"{WRONG if row.user == 'wrong' and row.shower == 'bumble' else PASSKEY:06d}"]
        if row.method == NC or row.user == "no":
            args.append("--no" if row.user == "no" else "--yes")
        return args

    def bumble_settings(self, row):
        b = row.bumble
        settings = {"io": b.io, "mitm": b.mitm, "sc": b.sc, "bonding": b.bond, "show": PASSKEY,
                    "accept": row.user != "bumble-refuses", "compare": row.user != "bumble-no"}
        if b.send:
            settings["initiator_keys"] = [k for k in b.send.split(",") if k != "none"]
        if b.ask:
            settings["responder_keys"] = [k for k in b.ask.split(",") if k != "none"]
        if row.typist == "both":
            settings["type"] = PASSKEY
        return settings

    def check_row(self, row, ours_out, status, events, ours_role):
        """Returns a list of what is wrong (empty: the row passed)."""
        problems = []
        paired, failed = one(events, "paired"), one(events, "pairing-failed")
        if row.fails:
            who, reason = row.fails
            if paired:
                problems.append(f"Bumble reports a completed pairing: {paired}")
            if not failed:
                problems.append("Bumble reports no failed pairing")
            elif failed["reason"] != reason:
                problems.append(f"Pairing Failed reason {failed['reason']:#04x}, "
                                f"expected {reason:#04x} (sent by {who})")
            if ours_role == "central":
                if status != 9:
                    problems.append(f"ble pair exit status {status}, expected 9 (pairing failed)")
                if not re.search(r"^ble: .*pair", ours_out, re.M | re.I):
                    problems.append("ble pair printed no error line about the pairing")
            return problems
        if failed or not paired:
            problems.append(f"Bumble: {failed or 'no pairing reported'}")
            return problems
        if paired["method"] != row.method:
            problems.append(f"Bumble's method {paired['method']}, expected {row.method}")
        if paired["sc"] != row.sc:
            problems.append(f"Bumble's SC {paired['sc']}, expected {row.sc}")
        if paired["authenticated"] != row.authenticated:
            problems.append(f"Bumble's key authenticated {paired['authenticated']}, expected {row.authenticated}")
        if paired["bonding"] != row.bonded:
            problems.append(f"Bumble's bonding {paired['bonding']}, expected {row.bonded}")
        distribution = paired["distribution"]
        if row.role != "security-request":
            initiator, responder = (row.ours, row.bumble) if ours_role == "central" else (row.bumble, row.ours)
            problems += self.check_distribution(row, initiator, responder, distribution, ours_role, paired)
        if ours_role == "central":
            if status != 0:
                problems.append(f"ble exit status {status}")
            if row.role == "central":
                level = "authenticated" if row.authenticated else "unauthenticated"
                for line in (f"method: {row.method}",
                             f"security: {'Secure Connections' if row.sc else 'LE legacy'}, {level}, key size 16",
                             f"bonded: {'yes' if row.bonded else 'no'}"):
                    if line not in ours_out:
                        problems.append(f"ble pair did not print {line!r}")
        return problems

    def check_distribution(self, row, initiator, responder, distribution, ours_role, paired):
        """Keys: the initiator offers its own and asks for the responder's; the responder agrees to a subset
        (3.6.1). Our side's defaults: both when bonding, none otherwise; Bumble's: enc and id, whatever it offers
        as responder being the intersection with what was asked."""
        def ours_keys(side, which):
            value = side.send if which == "send" else side.ask
            if value is None:
                return {"enc", "id"} if side.bond else set()
            return set() if value == "none" else set(value.split(","))

        def bumble_keys(side, which):
            value = side.send if which == "send" else side.ask
            return {"enc", "id"} if value is None else set(k for k in value.split(",") if k != "none")

        if ours_role == "central":
            init_offer, init_ask = ours_keys(initiator, "send"), ours_keys(initiator, "ask")
            resp_send, resp_take = bumble_keys(responder, "ask"), bumble_keys(responder, "send")
            expected = {"initiator": init_offer & resp_take, "responder": init_ask & resp_send}
        else:
            init_offer, init_ask = bumble_keys(initiator, "send"), bumble_keys(initiator, "ask")
            resp_send, resp_take = ours_keys(responder, "send"), ours_keys(responder, "ask")
            expected = {"initiator": init_offer & resp_take, "responder": init_ask & resp_send}
        problems = []
        got = {k: set(v) for k, v in distribution.items()}
        if got != expected:
            problems.append(f"key distribution {distribution}, expected "
                            f"{ {k: sorted(v) for k, v in expected.items()} }")
        ours_sent_id = "id" in (got["initiator"] if ours_role == "central" else got["responder"])
        if ours_sent_id and paired["irk"] is None:
            problems.append("our IdKey was agreed but Bumble did not receive our identity")
        return problems

    def run_central_row(self, row, peripheral):
        env = self.fresh_env()
        if row.role == "security-request":
            self.configure(peripheral, **self.bumble_settings(row), security_request=True)
            ours = self.ble(env, "read", PERIPHERAL_NAME, AFTER_PAIRING)
            self.bumble_owes = "disconnected"
        else:
            self.configure(peripheral, **self.bumble_settings(row))
            ours = self.ble(env, "pair", PERIPHERAL_NAME, *self.ours_args(row, True))
            self.bumble_owes = "disconnected"
        if row.shower == "ours":
            shown = int(ours.expect_regex(r"passkey: (\d{6})", EVENTS, "the passkey ble pair shows").group(1))
            peripheral.send(f"passkey {shown ^ 1 if row.user == 'wrong' else shown:06d}")
        status = ours.wait(COMMAND)
        events = events_until(peripheral, "disconnected", EVENTS)
        out = ours.output()
        problems = self.check_row(row, out, status, events, "central")
        if row.role == "security-request" and not problems:
            if one(events, "security-request-sent") is None:
                problems.append("Bumble did not send its Security Request")
            if hex_lines(out) != ["5ec0de"]:
                problems.append("ble read did not print the value")
            if one(events, "read") is None or not one(events, "read")["encrypted"]:
                problems.append("the read was not answered on an encrypted link")
            if bool(self.bonds(env)) != row.bonded:
                problems.append(f"ble bonds lists {self.bonds(env)}, expected a bond: {row.bonded}")
        return problems, out, events

    def run_peripheral_row(self, row, central):
        env = self.fresh_env()
        serve = self.ble(env, "serve", "secure-lock", *self.ours_args(row, False))
        serve.expect_regex(r'^\S+Z advertising "SecureLock"', STARTUP)
        central.send("pair " + json.dumps({"service": LOCK_SERVICE, "characteristic": LOCK_STATE, "timeout": 10,
                                           **self.bumble_settings(row)}))
        self.bumble_owes = "done"
        if row.shower == "ours":
            shown = int(serve.expect_regex(r"\* passkey: (\d{6})", EVENTS, "the passkey ble serve shows").group(1))
            central.send(f"passkey {shown ^ 1 if row.user == 'wrong' else shown:06d}")
        events = events_until(central, "done", COMMAND)
        serve.stop()
        out = serve.output()
        problems = self.check_row(row, out, None, events, "peripheral")
        read = one(events, "read")
        if not row.fails and not problems:
            if read is None or read.get("hex") != "01":
                problems.append(f"Bumble's read of the lock: {read}")
            if not re.search(rf" read {LOCK_STATE} 01$", out, re.M):
                problems.append("ble serve did not log the read")
            if row.method == NC:
                ours_digits = re.search(r"numeric comparison: (\d{6})", out)
                compare = one(events, "compare")
                if not ours_digits or not compare or ours_digits.group(1) != compare["value"]:
                    problems.append(f"the digits compared differ: ours {ours_digits and ours_digits.group(1)}, "
                                    f"Bumble's {compare}")
        if row.fails and row.fails[0] == "ours":
            # Our side says why, in its own words, on its log.
            if row.user == "no" and "numeric comparison refused (--no)" not in out:
                problems.append("ble serve did not log the refused comparison")
            if row.user == "no-passkey" and "pairing: a passkey was asked for and none was given" not in out:
                problems.append("ble serve did not log the missing passkey")
        return problems, out, events

    def test_matrix(self):
        # Bumble's side of the link is one controller: one Bumble host at a time. Its peripheral serves the rows
        # where ours is the central, then its central plays the others.
        rows = sorted(matrix(), key=lambda row: row.role == "peripheral")
        started = time.monotonic()
        failures = []
        peripheral = central = None
        stuck = 0
        for number, row in enumerate(rows):
            if row.role == "peripheral" and central is None:
                peripheral.stop()
                central = self.bumble_central()
            elif row.role != "peripheral" and peripheral is None:
                peripheral = self.bumble_peripheral()
            if stuck >= 3:
                failures.append(f"row {number} {row.describe()}: not run, after three rows in a row that timed out")
                continue
            bumble = central if row.role == "peripheral" else peripheral
            mark = len(bumble.lines)
            self.bumble_owes = None
            row_started = time.monotonic()
            try:
                if row.role == "peripheral":
                    problems, out, events = self.run_peripheral_row(row, central)
                else:
                    problems, out, events = self.run_central_row(row, peripheral)
            except peers.PeerError as error:
                # A step that did not happen (a passkey never shown, an exit that did not come): this row fails
                # with what was seen; our processes are stopped and Bumble's row is let finish before the next.
                problems, events = [f"{error}"], []
                for process in self.running:
                    process.stop()
                # What our side printed up to then (its exit status when it ended by itself) says why.
                out = "\n".join(f"[{process.name}, exit {process.returncode}]\n{process.output()}"
                                for process in self.running)
                # Bumble ends its part of the row (a "done" once asked to pair; a "disconnected" once connected).
                bumble.output()
                said = [e["event"] for e in json_records(bumble.lines[mark:])]
                owes = self.bumble_owes
                if owes == "disconnected" and ("connected" not in said
                                               or "disconnected" in said[said.index("connected"):]):
                    owes = None
                if owes == "done" and "done" in said:
                    owes = None
                if owes:
                    try:
                        events_until(bumble, owes, COMMAND)
                    except peers.PeerError as again:
                        problems.append(f"and Bumble did not finish the row: {again}")
                stuck += 1
            else:
                stuck = 0
            self.running = []
            if problems:
                failures.append(f"row {number} {row.describe()} ({time.monotonic() - row_started:.1f} s): "
                                f"{'; '.join(problems)}\n"
                                f"    ours:\n      " + "\n      ".join(out.splitlines()) +
                                "\n    Bumble:\n      " + "\n      ".join(json.dumps(e) for e in events))
        took = time.monotonic() - started
        print(f"\npairing matrix: {len(rows)} rows, {len(rows) - len(failures)} pass, {len(failures)} fail, "
              f"{took:.1f} s")
        self.assertEqual(failures, [], "\n" + "\n".join(failures))
