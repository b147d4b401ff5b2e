"""An asyncio application using the rmqc controller client through trio-asyncio.

    .venv/bin/python scripts/asyncio_controller_example.py --controllers "127.0.0.1:9878" --broker-name demo

It does what a broker does when it first starts (spec 7.2) with plain asyncio code: asks for the
leader (1005) and a broker id (1012) at once with asyncio.gather, applies the id (1013), registers
(1003), heartbeats (904) and asks to be elected (1002); then reads the group back (1006). It prints
one JSON object. `run_asyncio` starts the asyncio program on trio-asyncio's loop; the calls are the
Trio client's, awaited from asyncio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import Any

from rmqc.client.asyncio_client import AsyncioControllerClient, run_asyncio
from rmqc.remoting import loads_fastjson

CLUSTER = "DefaultCluster"
EXAMPLE_BROKER_ADDRESS = "127.0.0.1:30911"  # where a real broker would listen; nothing listens here


async def register_and_elect(controllers: list[str], broker_name: str) -> dict[str, Any]:
    asyncio.get_running_loop()  # this is asyncio code
    async with AsyncioControllerClient(controllers) as client:
        metadata, next_id_answer = await asyncio.gather(
            client.get_metadata(), client.get_next_broker_id(CLUSTER, broker_name))
        broker_id = int(next_id_answer.ext("nextBrokerId"))
        check_code = f"{EXAMPLE_BROKER_ADDRESS};{time.time_ns() // 1_000_000}"
        applied = await client.apply_broker_id(CLUSTER, broker_name, broker_id, check_code)
        registered = await client.register_broker(CLUSTER, broker_name, broker_id, EXAMPLE_BROKER_ADDRESS)
        await client.heartbeat(CLUSTER, broker_name, broker_id, EXAMPLE_BROKER_ADDRESS, oneway=False)
        elected = await client.elect_master(CLUSTER, broker_name, broker_id)
        sync_state = await client.get_sync_state_data([broker_name])
    return {
        "leader": metadata.ext("controllerLeaderAddress"),
        "brokerId": broker_id,
        "applyCode": applied.code,
        "registerCode": registered.code,
        "electCode": elected.code,
        "masterBrokerId": elected.ext("masterBrokerId"),
        "masterEpoch": elected.ext("masterEpoch"),
        "syncStateData": loads_fastjson(sync_state.body) if sync_state.body else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--controllers", default="127.0.0.1:9878", help='"host:port;host:port"')
    parser.add_argument("--broker-name", default="asyncio-demo")
    args = parser.parse_args(argv)
    controllers = [a for a in args.controllers.split(";") if a]
    print(json.dumps(run_asyncio(register_and_elect, controllers, args.broker_name), sort_keys=True))


if __name__ == "__main__":
    main()
