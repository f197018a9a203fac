"""A Bumble peripheral with a GATT database of the interop tests' own.

Usage: bumble_peripheral.py TRANSPORT NAME ADDRESS

It powers on, advertises NAME (connectable, restarting after each disconnection) and reports what happens
as JSON lines on stdout: {"event": "ready"}, "connected", "disconnected" (with the reason), "mtu", "write"
(characteristic, length, hex), "write-without-response" (running count and byte total), "subscription",
"notified", "indicated" / "confirmed" (an indication's confirmation arrived), "indicate-failed".
Commands on stdin, one per line: "disconnect" (drop every connection), "quit".

While a client is subscribed to the notify characteristic it is notified every 50 ms; while it is subscribed
to the indicate characteristic, an indication is sent as soon as the previous one is confirmed.
"""
import asyncio
import json
import sys

from bumble.core import AdvertisingData, UUID
from bumble.device import Device
from bumble.gatt import Characteristic, CharacteristicValue, Descriptor, Service
from bumble.hci import Address
from bumble.transport import open_transport

BASE = "7A1E{:04X}-4D6B-4B70-9E8A-5C0F1D2E3B4C"
SERVICE = BASE.format(0xF000)
LONG_READ = BASE.format(0xF001)        # read, 512 bytes
WRITABLE = BASE.format(0xF002)         # read | write, records what it got
WRITE_NO_RESPONSE = BASE.format(0xF003)  # write without response, counts
NOTIFY = BASE.format(0xF004)
INDICATE = BASE.format(0xF005)
DESCRIBED = BASE.format(0xF006)        # read, with several descriptors
CUSTOM_DESCRIPTOR = BASE.format(0xF0D1)
INCLUDED_PRIMARY = 0x180F              # Battery, primary, included by SERVICE
INCLUDED_SECONDARY = 0x1811            # Alert Notification, secondary, included by SERVICE
SECOND_SERVICE = BASE.format(0xF200)   # another primary service

LONG_VALUE = bytes((i * 7 + 3) & 0xFF for i in range(512))


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


class Peripheral:
    def __init__(self, device):
        self.device = device
        self.written = b""
        self.wwr_count = 0
        self.wwr_bytes = 0
        self.notify_tasks = {}
        self.indicate_tasks = {}
        self.sequence = 0

        def on_write(connection, value):
            self.written = bytes(value)
            emit("write", characteristic=WRITABLE, length=len(value), hex=bytes(value).hex())

        def on_write_without_response(connection, value):
            self.wwr_count += 1
            self.wwr_bytes += len(value)
            emit("write-without-response", count=self.wwr_count, bytes=self.wwr_bytes, length=len(value))

        self.long_read = Characteristic(
            LONG_READ, Characteristic.Properties.READ, Characteristic.READABLE, LONG_VALUE,
            descriptors=[Descriptor(UUID.from_16_bits(0x2901), Descriptor.READABLE, b"512 bytes")])
        self.writable = Characteristic(
            WRITABLE, Characteristic.Properties.READ | Characteristic.Properties.WRITE,
            Characteristic.READABLE | Characteristic.WRITEABLE,
            CharacteristicValue(read=lambda connection: self.written, write=on_write))
        self.write_no_response = Characteristic(
            WRITE_NO_RESPONSE, Characteristic.Properties.WRITE_WITHOUT_RESPONSE, Characteristic.WRITEABLE,
            CharacteristicValue(write=on_write_without_response))
        self.notify = Characteristic(NOTIFY, Characteristic.Properties.NOTIFY, Characteristic.READABLE, b"")
        self.indicate = Characteristic(INDICATE, Characteristic.Properties.INDICATE, Characteristic.READABLE, b"")
        self.described = Characteristic(
            DESCRIBED, Characteristic.Properties.READ, Characteristic.READABLE, b"\x2a\x00",
            descriptors=[
                Descriptor(UUID.from_16_bits(0x2901), Descriptor.READABLE, b"described"),
                # Presentation Format: sint16, exponent -1, unit Celsius (0x272F), namespace SIG, no description.
                Descriptor(UUID.from_16_bits(0x2904), Descriptor.READABLE, bytes([0x0E, 0xFF, 0x2F, 0x27, 0x01, 0x00, 0x00])),
                Descriptor(UUID(CUSTOM_DESCRIPTOR), Descriptor.READABLE, b"\xde\xad\xbe\xef"),
            ])

        # Included services must be in the database before the service that includes them (Bumble otherwise
        # registers them inside the including service's handle range).
        battery = Service(UUID.from_16_bits(INCLUDED_PRIMARY), [
            Characteristic(UUID.from_16_bits(0x2A19), Characteristic.Properties.READ, Characteristic.READABLE, bytes([77])),
        ])
        secondary = Service(UUID.from_16_bits(INCLUDED_SECONDARY), [
            Characteristic(UUID.from_16_bits(0x2A47), Characteristic.Properties.READ, Characteristic.READABLE, bytes([0x01, 0x00])),
        ], primary=False)
        device.add_service(battery)
        device.add_service(secondary)
        device.add_service(Service(SERVICE, [
            self.long_read, self.writable, self.write_no_response, self.notify, self.indicate, self.described,
        ], included_services=[battery, secondary]))
        device.add_service(Service(SECOND_SERVICE, [
            Characteristic(BASE.format(0xF201), Characteristic.Properties.READ, Characteristic.READABLE, b"second"),
        ]))

        self.notify.on("subscription", self.on_notify_subscription)
        self.indicate.on("subscription", self.on_indicate_subscription)

    def on_notify_subscription(self, connection, notify_enabled, indicate_enabled):
        emit("subscription", characteristic=NOTIFY, notify=notify_enabled, indicate=indicate_enabled)
        task = self.notify_tasks.pop(connection, None)
        if task:
            task.cancel()
        if notify_enabled:
            self.notify_tasks[connection] = asyncio.get_running_loop().create_task(self.notify_loop(connection))

    def on_indicate_subscription(self, connection, notify_enabled, indicate_enabled):
        emit("subscription", characteristic=INDICATE, notify=notify_enabled, indicate=indicate_enabled)
        task = self.indicate_tasks.pop(connection, None)
        if task:
            task.cancel()
        if indicate_enabled:
            self.indicate_tasks[connection] = asyncio.get_running_loop().create_task(self.indicate_loop(connection))

    def next_value(self):
        self.sequence += 1
        return self.sequence.to_bytes(4, "little") + b"interop"

    def subscribed(self, connection, characteristic, bit):
        cccd = self.device.gatt_server.subscribers.get(connection, {}).get(characteristic.handle)
        return bool(cccd) and cccd[0] & bit != 0

    async def notify_loop(self, connection):
        while self.subscribed(connection, self.notify, 0x01):
            value = self.next_value()
            await self.device.notify_subscriber(connection, self.notify, value)
            emit("notified", hex=value.hex())
            await asyncio.sleep(0.05)

    async def indicate_loop(self, connection):
        # Checked before each one: Bumble returns at once, sending nothing, to a client no longer subscribed.
        while self.subscribed(connection, self.indicate, 0x02):
            value = self.next_value()
            emit("indicated", hex=value.hex())
            try:
                # Returns once the client's Handle Value Confirmation arrived; raises on the ATT timeout.
                await self.device.indicate_subscriber(connection, self.indicate, value)
            except Exception as error:  # the link went down or the confirmation never came
                emit("indicate-failed", error=str(error))
                return
            emit("confirmed", hex=value.hex())

    def stop_tasks(self, connection):
        for tasks in (self.notify_tasks, self.indicate_tasks):
            task = tasks.pop(connection, None)
            if task:
                task.cancel()


async def main(transport_spec, name, address):
    async with await open_transport(transport_spec) as (source, sink):
        device = Device.with_hci(name, Address(address), source, sink)
        peripheral = Peripheral(device)
        connections = set()

        def on_connection(connection):
            connections.add(connection)
            emit("connected", peer=str(connection.peer_address), handle=connection.handle)

            def on_disconnection(reason):
                connections.discard(connection)
                peripheral.stop_tasks(connection)
                emit("disconnected", reason=reason)

            connection.on("disconnection", on_disconnection)
            connection.on("connection_att_mtu_update", lambda: emit("mtu", mtu=connection.att_mtu))

        device.on("connection", on_connection)
        device.advertising_data = bytes(AdvertisingData([
            (AdvertisingData.FLAGS, bytes([0x06])),
            (AdvertisingData.COMPLETE_LOCAL_NAME, name.encode()),
        ]))
        await device.power_on()
        await device.start_advertising(auto_restart=True, advertising_interval_min=20, advertising_interval_max=20)
        emit("ready", address=str(device.random_address), name=name)

        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        while True:
            line = (await reader.readline()).decode().strip()
            if line == "disconnect":
                for connection in list(connections):
                    await connection.disconnect()
                emit("disconnect-sent")
            elif line in ("quit", ""):
                return


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
