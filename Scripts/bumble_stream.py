#!/usr/bin/env python3
"""Bumble's whole stack streaming notifications between two devices in one process, for `ble bench host`.

Two Bumble controllers on one LocalLink (no air time: the link passes packets as fast as Python runs), each under
a Bumble host and device. The peripheral serves one notifying characteristic; the central connects, exchanges
ATT_MTU 247, asks for 251-octet LL payloads, subscribes, and counts what arrives. The peripheral keeps sending
244-octet values (ATT_MTU - 3), the same notifications `ble bench host` streams. The figure is payload bytes per
wall-clock second over the window, after a warm-up.

Run with the project's venv: .venv/bin/python Scripts/bumble_stream.py [--seconds 5] [--runs 1] [--json]
"""
import argparse
import asyncio
import json
import logging
import math
import time

from bumble.controller import Controller
from bumble.core import UUID
from bumble.device import Device, Peer
from bumble.gatt import Characteristic, Service
from bumble.hci import Address
from bumble.link import LocalLink

SERVICE = UUID("B3C40001-5E1D-4F7A-9A0B-2C3D4E5F6071")
STREAM = UUID("B3C40002-5E1D-4F7A-9A0B-2C3D4E5F6071")
VALUE_LENGTH = 244
DEPTH = 8


async def measure(seconds: float, warmup: float) -> dict:
    link = LocalLink()
    central_controller = Controller("central", link=link, public_address="F0:F0:F0:F0:F0:F0")
    sensor_controller = Controller("sensor", link=link, public_address="F1:F1:F1:F1:F1:F1")
    central = Device.with_hci("central", Address("F0:F0:F0:F0:F0:F0"), central_controller, central_controller)
    sensor = Device.with_hci("sensor", Address("F1:F1:F1:F1:F1:F1"), sensor_controller, sensor_controller)
    stream = Characteristic(STREAM, Characteristic.Properties.NOTIFY, Characteristic.Permissions.READABLE, b"")
    sensor.add_service(Service(SERVICE, [stream]))
    await central.power_on()
    await sensor.power_on()
    await sensor.start_advertising(auto_restart=False)

    connection = await central.connect(Address("F1:F1:F1:F1:F1:F1"))
    peer = Peer(connection)
    await peer.request_mtu(247)
    # Bumble's controller has no LE Set Data Length (0.0.236) and its LocalLink carries whole ACL packets of its
    # buffer length with no air time, so there is no LL payload to set here.
    await peer.discover_services([SERVICE])
    service = peer.get_services_by_uuid(SERVICE)[0]
    await service.discover_characteristics([STREAM])
    remote = service.get_characteristics_by_uuid(STREAM)[0]

    counts = {"open": False, "bytes": 0, "values": 0}

    def received(value: bytes) -> None:
        if counts["open"]:
            counts["bytes"] += len(value)
            counts["values"] += 1

    await remote.subscribe(received)
    sensor_connection = next(iter(sensor.connections.values()))
    value = bytes([0xA5]) * VALUE_LENGTH
    running = True

    # Bumble's notify only queues the ACL packets, so the sender keeps at most `DEPTH` of its own in flight (as
    # our stack's notification queue does) and otherwise yields to the event loop that moves them.
    queue = sensor.host.connections[sensor_connection.handle].acl_packet_queue

    async def pump() -> None:
        while running:
            if queue.pending >= DEPTH:
                await asyncio.sleep(0)
                continue
            await sensor.notify_subscriber(sensor_connection, stream, value)

    task = asyncio.create_task(pump())
    await asyncio.sleep(warmup)
    counts["open"] = True
    start = time.perf_counter()
    await asyncio.sleep(seconds)
    counts["open"] = False
    wall = time.perf_counter() - start
    running = False
    await task
    await connection.disconnect()
    return {"wallSeconds": wall, "values": counts["values"], "payloadBytes": counts["bytes"],
            "bytesPerWallSecond": round(counts["bytes"] / wall)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="wall-clock seconds measured per run")
    parser.add_argument("--warmup", type=float, default=1.0, help="wall-clock seconds before each window")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="one JSON object per run, then the median")
    args = parser.parse_args()
    for name, value, low in (("--seconds", args.seconds, 0.1), ("--warmup", args.warmup, 0.0)):
        if not math.isfinite(value) or value < low or value > 3600:
            parser.error(f"{name} must be a number from {low} to 3600, not {value}")
    if not 1 <= args.runs <= 100:
        parser.error(f"--runs must be from 1 to 100, not {args.runs}")
    logging.basicConfig(level=logging.WARNING)
    rates = []
    for run in range(1, args.runs + 1):
        result = asyncio.run(measure(args.seconds, args.warmup))
        rates.append(result["bytesPerWallSecond"])
        if args.json:
            print(json.dumps({"run": run, **result}), flush=True)
        else:
            print(f"run {run}: {result['values']} values, {result['payloadBytes']} bytes in "
                  f"{result['wallSeconds']:.3f} s: {result['bytesPerWallSecond'] / 1e3:.1f} kB/s", flush=True)
    median = sorted(rates)[len(rates) // 2]
    if args.json:
        print(json.dumps({"median": True, "bytesPerWallSecond": median}))
    else:
        print(f"median: {median / 1e3:.1f} kB/s of payload per wall-clock second")


if __name__ == "__main__":
    main()
