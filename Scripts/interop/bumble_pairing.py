"""A Bumble device that pairs, bonds and reads or serves an encrypted value, for the security interop tests.

Usage:
  bumble_pairing.py peripheral TRANSPORT NAME ADDRESS OPTIONS_JSON
  bumble_pairing.py central TRANSPORT ADDRESS OPTIONS_JSON

OPTIONS_JSON: {"io": "none|display|display-yes-no|keyboard|keyboard-display", "sc": bool, "mitm": bool,
               "keystore": PATH, and for the central: "service": UUID (to find the peripheral by),
               "characteristic": UUID (the encrypted value to read), "rounds": N (connections, each paired or
               encrypted with the kept key, then read, then disconnected)}

The peripheral serves one service, SECURE_SERVICE, with SECURE_VALUE readable only on an encrypted link (and only
on an authenticated one when "mitm" is set), and advertises NAME and the service, restarting after each
disconnection.

Both report JSON lines on stdout: "ready" (with the address), "connected" (peer), "passkey" (a passkey to show:
the other side's user types it), "passkey-asked" (type one: answer on stdin with "passkey NNNNNN"), "compare"
(numeric comparison: answered yes), "paired" (with "sc", "authenticated", "ltk" and whether the peer gave an
identity address, "identity"), "pairing-failed" (reason), "encrypted" (whether the link is), "read" (hex or
error), "disconnected" (reason). Commands on stdin: "passkey NNNNNN", "quit".
"""
import asyncio
import json
import sys

from bumble.core import AdvertisingData, UUID
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, Service
from bumble.hci import Address
from bumble.keys import JsonKeyStore
from bumble.pairing import PairingConfig, PairingDelegate
from bumble.transport import open_transport

SECURE_SERVICE = "5EC1F000-0B5E-4C3A-9D2E-7A1B2C3D4E5F"
SECURE_VALUE = "5EC1F001-0B5E-4C3A-9D2E-7A1B2C3D4E5F"
VALUE = bytes.fromhex("5ec0de")

IO = {
    "none": PairingDelegate.IoCapability.NO_OUTPUT_NO_INPUT,
    "display": PairingDelegate.IoCapability.DISPLAY_OUTPUT_ONLY,
    "display-yes-no": PairingDelegate.IoCapability.DISPLAY_OUTPUT_AND_YES_NO_INPUT,
    "keyboard": PairingDelegate.IoCapability.KEYBOARD_INPUT_ONLY,
    "keyboard-display": PairingDelegate.IoCapability.DISPLAY_OUTPUT_AND_KEYBOARD_INPUT,
}


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


class Delegate(PairingDelegate):
    """The user: shows passkeys, types the ones the test sends on stdin, accepts Just Works and comparisons."""

    def __init__(self, io, passkeys):
        super().__init__(io_capability=IO[io])
        self.passkeys = passkeys

    async def accept(self):
        return True

    async def confirm(self, auto=False):
        return True

    async def compare_numbers(self, number, digits):
        emit("compare", value=f"{number:0{digits}d}")
        return True

    async def get_number(self):
        emit("passkey-asked")
        return await asyncio.wait_for(self.passkeys.get(), 60)

    async def display_number(self, number, digits):
        emit("passkey", value=f"{number:0{digits}d}")


def configure(device, options, passkeys):
    device.keystore = JsonKeyStore("interop", options["keystore"])
    device.pairing_config_factory = lambda connection: PairingConfig(
        sc=options.get("sc", True), mitm=options.get("mitm", False), bonding=True,
        delegate=Delegate(options.get("io", "none"), passkeys))


def watch(connection):
    def on_pairing(keys):
        emit("paired", sc=bool(connection.sc), authenticated=bool(connection.authenticated),
             ltk=(keys.ltk or keys.ltk_central or keys.ltk_peripheral).value.hex()
             if (keys.ltk or keys.ltk_central or keys.ltk_peripheral) else None,
             identity=str(keys.address) if getattr(keys, "address", None) else None,
             irk=keys.irk.value.hex() if keys.irk else None, peer=str(connection.peer_address))

    connection.on("pairing", on_pairing)
    connection.on("pairing_failure", lambda reason: emit("pairing-failed", reason=int(reason)))
    connection.on("connection_encryption_change",
                  lambda *args: emit("encrypted", encrypted=bool(connection.encryption)))
    connection.on("connection_encryption_failure",
                  lambda error=None, *args: emit("encryption-failed", error=str(error)))


async def read_commands(passkeys, done):
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while True:
        line = (await reader.readline()).decode().strip()
        if line.startswith("passkey "):
            passkeys.put_nowait(int(line.split()[1]))
        elif line in ("quit", ""):
            if not done.done():
                done.set_result(None)
            return


async def peripheral(transport, name, address, options):
    passkeys = asyncio.Queue()
    async with await open_transport(transport) as (source, sink):
        device = Device.with_hci(name, Address(address), source, sink)
        configure(device, options, passkeys)
        permissions = Characteristic.READABLE | Characteristic.READ_REQUIRES_ENCRYPTION
        if options.get("mitm"):
            permissions |= Characteristic.READ_REQUIRES_AUTHENTICATION

        def on_read(connection):
            emit("read", hex=VALUE.hex(), encrypted=bool(connection.encryption))
            return VALUE

        from bumble.gatt import CharacteristicValue
        device.add_service(Service(SECURE_SERVICE, [
            Characteristic(SECURE_VALUE, Characteristic.Properties.READ, permissions, CharacteristicValue(read=on_read)),
        ]))

        def on_connection(connection):
            emit("connected", peer=str(connection.peer_address), handle=connection.handle)
            watch(connection)
            connection.on("disconnection", lambda reason: emit("disconnected", reason=reason))

        device.on("connection", on_connection)
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
            (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS, bytes(UUID(SECURE_SERVICE))),
        ]))
        await device.power_on()
        await device.start_advertising(auto_restart=True, advertising_interval_min=20, advertising_interval_max=20)
        emit("ready", address=str(device.random_address), name=name)
        done = asyncio.get_running_loop().create_future()
        await read_commands(passkeys, done)


async def find(device, service, timeout):
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(advertisement):
        uuids = []
        for ad_type in (AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
                        AdvertisingData.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS):
            for listed in advertisement.data.get_all(ad_type) or []:
                uuids.extend(str(u).upper() for u in listed)
        if service.upper() in uuids and advertisement.is_connectable and not found.done():
            found.set_result(advertisement.address)

    device.on("advertisement", on_advertisement)
    await device.start_scanning(active=False, filter_duplicates=False)
    try:
        return await asyncio.wait_for(found, timeout)
    finally:
        device.remove_listener("advertisement", on_advertisement)
        await device.stop_scanning()


async def central(transport, address, options):
    passkeys = asyncio.Queue()
    async with await open_transport(transport) as (source, sink):
        device = Device.with_hci("BumblePairing", Address(address), source, sink)
        configure(device, options, passkeys)
        await device.power_on()
        emit("ready", address=str(device.random_address))
        commands = asyncio.ensure_future(read_commands(passkeys, asyncio.get_running_loop().create_future()))
        for round in range(options.get("rounds", 1)):
            target = await find(device, options["service"], 20)
            connection = await device.connect(target, timeout=20)
            disconnected = asyncio.get_running_loop().create_future()
            connection.on("disconnection", lambda reason: disconnected.done() or disconnected.set_result(reason))
            watch(connection)
            keys = await device.keystore.get(str(connection.peer_address))
            emit("connected", peer=str(connection.peer_address), round=round, bonded=keys is not None)
            try:
                if keys is not None:
                    await connection.encrypt()
                else:
                    await connection.pair()
            except Exception as error:
                emit("security-failed", error=str(error))
            peer = Peer(connection)
            await peer.discover_all()
            try:
                value = await peer.read_value(peer.get_characteristics_by_uuid(UUID(options["characteristic"]))[0])
                emit("read", hex=bytes(value).hex(), round=round)
            except Exception as error:
                emit("read", error=getattr(error, "error_code", None), message=str(error), round=round)
            await connection.disconnect()
            emit("disconnected", reason=await asyncio.wait_for(disconnected, 10), round=round)
        commands.cancel()


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "peripheral":
        asyncio.run(peripheral(sys.argv[2], sys.argv[3], sys.argv[4], json.loads(sys.argv[5])))
    else:
        asyncio.run(central(sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
