"""A Bumble central running a plan of GATT operations against one peripheral, reporting JSON lines.

Usage: bumble_central.py TRANSPORT PLAN_JSON

PLAN_JSON: {"target": {"name": N} or {"service": UUID} or {"address": A}, "mtu": 517, "ops": [...]}
Operations, each reported by one or more JSON lines on stdout:
  {"op": "discover"}                         -> {"event": "services", "services": [...]} (every service with its
                                                included services, characteristics and descriptors)
  {"op": "read", "uuid": U}                  -> {"event": "read", "uuid", "hex"} or {"event": "read", "uuid", "error"}
  {"op": "read-descriptors", "uuid": U}      -> one {"event": "descriptor", "uuid", "characteristic", "hex"} each
  {"op": "write", "uuid": U, "hex": H, "response": bool}
                                             -> {"event": "write", "uuid", "ok": true} or {..., "error": code}
  {"op": "subscribe", "uuid": U, "count": N, "timeout": T}
                                             -> {"event": "value", "uuid", "hex"} per value received, then
                                                {"event": "subscribed-done", "uuid", "received": n}
  {"op": "unsubscribe", "uuid": U}           -> {"event": "unsubscribed", "uuid"}
  {"op": "prepare", "uuid": U, "offset": N, "hex": H}
                                             -> a raw ATT Prepare Write Request to U's value handle:
                                                {"event": "prepare", "uuid", "ok": true, "handle", "offset", "hex"}
                                                (what the server echoed) or {..., "error": code, "handle"}
  {"op": "execute", "flags": F}              -> a raw ATT Execute Write Request (1: write the queue, 0: cancel):
                                                {"event": "execute", "flags", "ok": true} or {..., "error", "handle"}
  {"op": "disconnect"}                       -> {"event": "disconnected", "reason"}
Before the plan: {"event": "found", "address", "name"}, {"event": "connected"}, {"event": "mtu", "mtu"}.
Errors end the run with {"event": "failed", "error"} and exit status 1.
"""
import asyncio
import json
import sys

from bumble import att
from bumble.core import AdvertisingData, UUID
from bumble.device import Device, Peer
from bumble.hci import Address
from bumble.transport import open_transport


def emit(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def uuid_text(uuid):
    # 16-bit as 4 hex digits, 128-bit in the usual 8-4-4-4-12 form, upper case (as CoreBluetooth prints them).
    return uuid.to_hex_str("-").upper() if hasattr(uuid, "to_hex_str") else str(uuid).upper()


def advertised_services(data):
    found = []
    for ad_type in (AdvertisingData.COMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS,
                    AdvertisingData.INCOMPLETE_LIST_OF_16_BIT_SERVICE_CLASS_UUIDS,
                    AdvertisingData.COMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS,
                    AdvertisingData.INCOMPLETE_LIST_OF_128_BIT_SERVICE_CLASS_UUIDS):
        for uuids in data.get_all(ad_type) or []:
            found.extend(uuid_text(u) for u in uuids)
    return found


async def find(device, target, timeout):
    found = asyncio.get_running_loop().create_future()

    def on_advertisement(advertisement):
        data = advertisement.data
        name = data.get(AdvertisingData.COMPLETE_LOCAL_NAME) or data.get(AdvertisingData.SHORTENED_LOCAL_NAME)
        name = name.decode() if isinstance(name, bytes) else name
        services = advertised_services(data)
        matches = (("name" in target and name == target["name"])
                   or ("service" in target and target["service"].upper() in services)
                   or ("address" in target and str(advertisement.address).split("/")[0] == target["address"].upper()))
        if matches and not found.done():
            found.set_result((advertisement.address, name, services, advertisement.is_connectable))

    device.on("advertisement", on_advertisement)
    await device.start_scanning(active=True, filter_duplicates=False)
    try:
        return await asyncio.wait_for(found, timeout)
    finally:
        device.remove_listener("advertisement", on_advertisement)
        await device.stop_scanning()


async def describe(peer):
    await peer.discover_services()
    services = []
    for service in peer.services:
        included = await peer.discover_included_services(service)
        await service.discover_characteristics()
        characteristics = []
        for characteristic in service.characteristics:
            descriptors = await characteristic.discover_descriptors()
            characteristics.append({
                "uuid": uuid_text(characteristic.uuid),
                "handle": characteristic.handle,
                "properties": int(characteristic.properties),
                "descriptors": [{"uuid": uuid_text(d.type), "handle": d.handle} for d in descriptors],
            })
        services.append({
            "uuid": uuid_text(service.uuid), "handle": service.handle, "end": service.end_group_handle,
            "included": [uuid_text(s.uuid) for s in included], "characteristics": characteristics,
        })
    return services


def characteristic(peer, uuid):
    matches = peer.get_characteristics_by_uuid(UUID(uuid))
    if not matches:
        raise LookupError(f"no characteristic {uuid} discovered")
    return matches[0]


async def run(transport, plan):
    async with await open_transport(transport) as (source, sink):
        device = Device.with_hci("BumbleCentral", Address("F1:F2:F3:F4:F5:F6"), source, sink)
        await device.power_on()
        address, name, services, connectable = await find(device, plan["target"], plan.get("scan_timeout", 20))
        emit("found", address=str(address), name=name, services=services, connectable=connectable)
        connection = await device.connect(address, timeout=plan.get("connect_timeout", 20))
        disconnected = asyncio.get_running_loop().create_future()
        connection.on("disconnection", lambda reason: disconnected.done() or disconnected.set_result(reason))
        emit("connected", handle=connection.handle)
        peer = Peer(connection)
        emit("mtu", mtu=await peer.request_mtu(plan.get("mtu", 517)))
        discovered = False
        for op in plan["ops"]:
            kind = op["op"]
            if kind == "discover":
                emit("services", services=await describe(peer))
                discovered = True
                continue
            if not discovered:
                await peer.discover_all()
                discovered = True
            if kind == "read":
                try:
                    value = await peer.read_value(characteristic(peer, op["uuid"]))
                    emit("read", uuid=op["uuid"], hex=bytes(value).hex())
                except Exception as error:
                    emit("read", uuid=op["uuid"], error=getattr(error, "error_code", None), message=str(error))
            elif kind == "read-descriptors":
                target = characteristic(peer, op["uuid"])
                for descriptor in target.descriptors:
                    value = await peer.read_value(descriptor)
                    emit("descriptor", characteristic=op["uuid"], uuid=uuid_text(descriptor.type), hex=bytes(value).hex())
            elif kind == "write":
                try:
                    await peer.write_value(characteristic(peer, op["uuid"]), bytes.fromhex(op["hex"]),
                                           with_response=op.get("response", True))
                    emit("write", uuid=op["uuid"], ok=True)
                except Exception as error:
                    emit("write", uuid=op["uuid"], error=getattr(error, "error_code", None), message=str(error))
            elif kind == "prepare":
                # A raw Prepare Write Request: the part is queued by the server, nothing is written yet.
                target = characteristic(peer, op["uuid"])
                part = bytes.fromhex(op["hex"])
                response = await connection.gatt_client.send_request(att.ATT_Prepare_Write_Request(
                    attribute_handle=target.handle, value_offset=op.get("offset", 0), part_attribute_value=part))
                if isinstance(response, att.ATT_Error_Response):
                    emit("prepare", uuid=op["uuid"], error=int(response.error_code),
                         handle=response.attribute_handle_in_error)
                else:
                    emit("prepare", uuid=op["uuid"], ok=True, handle=response.attribute_handle,
                         offset=response.value_offset, hex=bytes(response.part_attribute_value).hex())
            elif kind == "execute":
                # A raw Execute Write Request: flags 1 writes every queued part, 0 cancels them.
                response = await connection.gatt_client.send_request(att.ATT_Execute_Write_Request(flags=op["flags"]))
                if isinstance(response, att.ATT_Error_Response):
                    emit("execute", flags=op["flags"], error=int(response.error_code),
                         handle=response.attribute_handle_in_error)
                else:
                    emit("execute", flags=op["flags"], ok=True)
            elif kind == "subscribe":
                values = asyncio.Queue()
                target = characteristic(peer, op["uuid"])
                await peer.subscribe(target, lambda value: values.put_nowait(bytes(value)),
                                     prefer_notify=op.get("prefer_notify", True))
                emit("subscribed", uuid=op["uuid"])
                received = 0
                try:
                    while received < op.get("count", 1):
                        value = await asyncio.wait_for(values.get(), op.get("timeout", 10))
                        received += 1
                        emit("value", uuid=op["uuid"], hex=value.hex())
                except asyncio.TimeoutError:
                    pass
                emit("subscribed-done", uuid=op["uuid"], received=received)
            elif kind == "unsubscribe":
                await peer.unsubscribe(characteristic(peer, op["uuid"]))
                emit("unsubscribed", uuid=op["uuid"])
            elif kind == "disconnect":
                await connection.disconnect()
                reason = await asyncio.wait_for(disconnected, 10)
                emit("disconnected", reason=reason)
                return
            else:
                raise ValueError(f"unknown op {kind}")


def main():
    transport, plan = sys.argv[1], json.loads(sys.argv[2])
    try:
        asyncio.run(asyncio.wait_for(run(transport, plan), plan.get("deadline", 90)))
    except Exception as error:
        emit("failed", error=f"{type(error).__name__}: {error}")
        sys.exit(1)


if __name__ == "__main__":
    main()
