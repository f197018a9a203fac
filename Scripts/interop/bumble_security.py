"""One long-lived Bumble device for many pairing rows: reconfigured between connections through stdin.

Usage:
  bumble_security.py peripheral TRANSPORT NAME ADDRESS
  bumble_security.py central TRANSPORT ADDRESS

Every line on stdout is a JSON object with an "event". Both roles print {"event": "ready", "address"} once powered
on. Commands on stdin, one per line:

  config JSON     (peripheral) the pairing settings for the next connections; answered by {"event": "configured"}
                  once it advertises (with no link up), or by {"event": "error"} if it cannot
  pair JSON       (central) settings as for config plus "service" (the UUID to find the peripheral by) and
                  "characteristic" (a value to read after pairing): scan, connect, pair, read, disconnect; ends
                  with {"event": "done"}
  passkey NNNNNN  the digits a user types when a passkey is asked for ("passkey-asked")
  quit

Settings (all optional): "io" (none, display, display-yes-no, keyboard, keyboard-display; default none), "sc" (true),
"mitm" (false), "bonding" (true), "initiator_keys" and "responder_keys" (the key distribution this side offers or
asks for, as a list of "enc", "id"; default both), "accept" (true: a pairing request is accepted), "compare"
(true: the answer to a numeric comparison), "show" (the passkey to display, instead of a random one), "type" (the
passkey to type at once, instead of waiting for a "passkey" command), "security_request" (peripheral: send a
Security Request as soon as a central connects), "timeout" (central: seconds to wait for the pairing, 20),
"passkey_wait" (seconds to wait for a "passkey" command, 15).

Per connection: "connected", "security-request" (central: one arrived, with its auth_req), "pairing-start",
"passkey" (shown), "passkey-asked", "compare" (the digits and the answer given), then either "paired" or
"pairing-failed", both with "method" (Just Works, Passkey Entry, Numeric Comparison) when the pairing got that
far. "paired" has "sc", "authenticated" (from the key: Bumble's connection says authenticated after any pairing),
"bonding" (both sides asked for it), "distribution" (the negotiated initiator and responder keys), "irk" and
"identity" (the peer's identity, if it sent one), "ltk". Then "encrypted", "read" (hex, or error code) and
"disconnected".
"""
import asyncio
import json
import sys

from bumble import smp
from bumble.core import AdvertisingData, UUID
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, CharacteristicValue, Service
from bumble.hci import Address
from bumble.keys import MemoryKeyStore
from bumble.pairing import PairingConfig, PairingDelegate

from bumble.transport import open_transport

# The service, its encrypted value, the value's octets, IO capability names, JSON events and finding a peripheral
# by service are bumble_pairing.py's.
from bumble_pairing import IO, VALUE, emit, find
from bumble_pairing import SECURE_SERVICE as SERVICE
from bumble_pairing import SECURE_VALUE as ENCRYPTED

AUTHENTICATED = "5EC1F002-0B5E-4C3A-9D2E-7A1B2C3D4E5F"   # readable on an authenticated link
AFTER_PAIRING = "5EC1F003-0B5E-4C3A-9D2E-7A1B2C3D4E5F"   # open, answered once the link's security settled (10 s)

KEYS = {"enc": PairingDelegate.KeyDistribution.DISTRIBUTE_ENCRYPTION_KEY,
        "id": PairingDelegate.KeyDistribution.DISTRIBUTE_IDENTITY_KEY}
METHODS = {smp.PairingMethod.JUST_WORKS: "Just Works", smp.PairingMethod.PASSKEY: "Passkey Entry",
           smp.PairingMethod.NUMERIC_COMPARISON: "Numeric Comparison", smp.PairingMethod.OOB: "OOB"}


def key_flags(names):
    flags = PairingDelegate.KeyDistribution(0)
    for name in names:
        flags |= KEYS[name]
    return flags


def key_names(flags):
    return [name for name, flag in KEYS.items() if int(flags) & int(flag)]


class User(PairingDelegate):
    """What the person at this device does, as the row's settings say."""

    def __init__(self, settings, passkeys):
        super().__init__(
            io_capability=IO[settings.get("io", "none")],
            local_initiator_key_distribution=key_flags(settings.get("initiator_keys", ["enc", "id"])),
            local_responder_key_distribution=key_flags(settings.get("responder_keys", ["enc", "id"])))
        self.settings = settings
        self.passkeys = passkeys

    async def accept(self):
        return self.settings.get("accept", True)

    async def confirm(self, auto=False):
        return True

    async def compare_numbers(self, number, digits):
        answer = self.settings.get("compare", True)
        emit("compare", value=f"{number:0{digits}d}", answer=answer)
        return answer

    async def get_number(self):
        emit("passkey-asked")
        if "type" in self.settings:
            return int(self.settings["type"])
        return await asyncio.wait_for(self.passkeys.get(), self.settings.get("passkey_wait", 15))

    async def generate_passkey(self):
        if "show" in self.settings:
            return int(self.settings["show"])
        return await super().generate_passkey()

    async def display_number(self, number, digits):
        emit("passkey", value=f"{number:0{digits}d}")


class Security:
    """The settings of the current row, and the reports of each connection's pairing."""

    def __init__(self, device):
        self.device = device
        self.settings = {}
        self.passkeys = asyncio.Queue()
        device.keystore = MemoryKeyStore()
        device.pairing_config_factory = lambda connection: PairingConfig(
            sc=self.settings.get("sc", True), mitm=self.settings.get("mitm", False),
            bonding=self.settings.get("bonding", True), delegate=User(self.settings, self.passkeys))

    def configure(self, settings):
        self.settings = settings
        while not self.passkeys.empty():  # a passkey meant for an earlier row is not this row's
            self.passkeys.get_nowait()

    def watch(self, connection):
        """Reports this connection's pairing; returns a future set when the pairing ends (either way)."""
        ended = asyncio.get_running_loop().create_future()
        session = {}

        def method():
            current = session.get("session") or self.device.smp_manager.sessions.get(connection.handle)
            return METHODS.get(current.pairing_method) if current else None

        def on_start():
            session["session"] = self.device.smp_manager.sessions.get(connection.handle)
            emit("pairing-start")

        def on_pairing(keys):
            current = session.get("session") or self.device.smp_manager.sessions.get(connection.handle)
            ltk = keys.ltk or keys.ltk_central or keys.ltk_peripheral
            emit("paired", method=method(), sc=bool(connection.sc),
                 authenticated=bool(ltk.authenticated) if ltk else None,
                 bonding=bool(current.bonding) if current else None,
                 distribution={"initiator": key_names(current.initiator_key_distribution),
                               "responder": key_names(current.responder_key_distribution)} if current else None,
                 ltk=ltk.value.hex() if ltk and ltk.value else None,
                 irk=keys.irk.value.hex() if keys.irk else None,
                 identity=str(connection.peer_address) if keys.irk else None)
            if not ended.done():
                ended.set_result(True)

        def on_failure(reason):
            emit("pairing-failed", reason=int(reason), method=method())
            if not ended.done():
                ended.set_result(False)

        connection.on("pairing_start", on_start)
        connection.on("pairing", on_pairing)
        connection.on("pairing_failure", on_failure)
        connection.on("security_request", lambda auth_req: emit("security-request", auth_req=int(auth_req)))
        def on_encryption(*args):
            emit("encrypted", encrypted=bool(connection.encryption))
            # Encrypted with a key both already held, no pairing: that is the end of it too.
            if "session" not in session and not ended.done():
                ended.set_result(None)

        connection.on("connection_encryption_change", on_encryption)
        connection.on("disconnection", lambda reason: ended.done() or ended.set_result(None))
        return ended


async def commands(security, handle):
    """Reads stdin; "passkey" lines feed the delegate at once, others go to `handle`, one after the other (a
    worker runs them, so that a passkey can arrive while a pairing runs)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    work = asyncio.Queue()

    async def worker():
        while True:
            word, settings = await work.get()
            await handle(word, settings)

    running = asyncio.ensure_future(worker())
    try:
        while True:
            line = (await reader.readline()).decode().strip()
            if line in ("quit", ""):
                return
            word, _, rest = line.partition(" ")
            if word == "passkey":
                security.passkeys.put_nowait(int(rest))
            else:
                work.put_nowait((word, json.loads(rest) if rest else {}))
    finally:
        running.cancel()


async def peripheral(transport, name, address):
    async with await open_transport(transport) as (source, sink):
        device = Device.with_hci(name, Address(address), source, sink)
        security = Security(device)
        pairings = {}

        def read(connection):
            emit("read", hex=VALUE.hex(), encrypted=bool(connection.encryption))
            return VALUE

        async def read_after_pairing(connection):
            ended = pairings.get(connection.handle)
            if ended is not None:
                try:
                    await asyncio.wait_for(asyncio.shield(ended), 10)
                except asyncio.TimeoutError:
                    pass
            emit("read", hex=VALUE.hex(), encrypted=bool(connection.encryption))
            return VALUE

        readable = Characteristic.READABLE
        device.add_service(Service(SERVICE, [
            Characteristic(ENCRYPTED, Characteristic.Properties.READ,
                           readable | Characteristic.READ_REQUIRES_ENCRYPTION, CharacteristicValue(read=read)),
            Characteristic(AUTHENTICATED, Characteristic.Properties.READ,
                           readable | Characteristic.READ_REQUIRES_ENCRYPTION
                           | Characteristic.READ_REQUIRES_AUTHENTICATION, CharacteristicValue(read=read)),
            Characteristic(AFTER_PAIRING, Characteristic.Properties.READ, readable,
                           CharacteristicValue(read=read_after_pairing)),
        ]))

        def on_connection(connection):
            emit("connected", peer=str(connection.peer_address), handle=connection.handle)
            pairings[connection.handle] = security.watch(connection)

            on_air.clear()

            def gone(reason):
                pairings.pop(connection.handle, None)
                emit("disconnected", reason=reason)
                asyncio.get_running_loop().create_task(advertise())

            connection.on("disconnection", gone)
            if security.settings.get("security_request"):
                connection.request_pairing()
                emit("security-request-sent")

        device.on("connection", on_connection)
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
            (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, bytes(UUID(SERVICE))),
        ]))
        # Advertising is put back on the air here after each link rather than by Bumble's auto_restart, whose
        # failure would go unseen: "config" answers only once the device advertises again, or says why not.
        on_air = asyncio.Event()
        restart_error = None

        async def advertise():
            nonlocal restart_error
            try:
                await device.start_advertising(advertising_interval_min=20, advertising_interval_max=20)
            except Exception as error:  # noqa: BLE001 (reported, and the next "config" fails with it)
                restart_error = f"advertising did not restart: {error!r}"
                emit("error", message=restart_error)
                return
            restart_error = None
            if not device.connections:
                on_air.set()

        await device.power_on()
        await advertise()
        emit("ready", address=str(device.random_address), name=name)

        async def handle(word, settings):
            if word == "config":
                security.configure(settings)
                if not device.connections:
                    try:
                        await asyncio.wait_for(on_air.wait(), 10)
                    except asyncio.TimeoutError:
                        emit("error", message=restart_error or "not advertising again within 10 s of the last link")
                        return
                emit("configured", advertising=on_air.is_set())
            else:
                emit("error", message=f"unknown command {word}")

        await commands(security, handle)


async def central(transport, address):
    async with await open_transport(transport) as (source, sink):
        device = Device.with_hci("BumbleSecurity", Address(address), source, sink)
        security = Security(device)
        await device.power_on()
        emit("ready", address=str(device.random_address))

        async def pair_once(settings):
            security.configure(settings)
            target = await find(device, settings["service"], 20)
            connection = await device.connect(target, timeout=20)
            disconnected = asyncio.get_running_loop().create_future()
            connection.on("disconnection", lambda reason: disconnected.done() or disconnected.set_result(reason))
            security.watch(connection)
            emit("connected", peer=str(connection.peer_address), handle=connection.handle)
            try:
                await asyncio.wait_for(connection.pair(), settings.get("timeout", 20))
            except asyncio.TimeoutError:
                emit("pairing-timeout", seconds=settings.get("timeout", 20))
            except Exception as error:
                emit("pair-raised", error=str(error))
            if connection.is_encrypted or settings.get("read_anyway"):
                try:
                    peer = Peer(connection)
                    await peer.discover_all()
                    value = await peer.read_value(peer.get_characteristics_by_uuid(UUID(settings["characteristic"]))[0])
                    emit("read", hex=bytes(value).hex())
                except Exception as error:
                    emit("read", error=getattr(error, "error_code", None), message=str(error))
            if disconnected.done():
                emit("disconnected", reason=disconnected.result(), by="peer")
            else:
                await connection.disconnect()
                emit("disconnected", reason=await asyncio.wait_for(disconnected, 10))

        async def handle(word, settings):
            if word == "pair":
                try:
                    await pair_once(settings)
                except Exception as error:
                    emit("error", message=f"{type(error).__name__}: {error}")
                emit("done")
            else:
                emit("error", message=f"unknown command {word}")

        await commands(security, handle)


if __name__ == "__main__":
    if sys.argv[1] == "peripheral":
        asyncio.run(peripheral(sys.argv[2], sys.argv[3], sys.argv[4]))
    else:
        asyncio.run(central(sys.argv[2], sys.argv[3]))
