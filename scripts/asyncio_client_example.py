"""Ask a controller for its metadata and a broker-set's replica info from an asyncio program.

Usage: python scripts/asyncio_client_example.py [controller-address ...] [--broker-name NAME]
(default 127.0.0.1:9878, the address `rmqc serve` listens on). The program is plain asyncio; it runs
on trio-asyncio's loop, which is what lets it await rmqc's Trio client.
"""

from __future__ import annotations

import argparse
import asyncio

from rmqc.client import ClientError
from rmqc.client.asyncio_client import AsyncioControllerClient, run_asyncio


async def main(addresses: list[str], broker_name: str) -> int:
    async with AsyncioControllerClient(addresses, timeout_ms=3000) as client:
        try:
            metadata, replicas = await asyncio.gather(client.get_metadata(), client.get_replica_info(broker_name))
        except ClientError as exc:
            print(f"controller unreachable: {exc}")
            return 1
    print(f"leader: {metadata.ext('controllerLeaderAddress')}  peers: {metadata.ext('peers')}")
    print(f"{broker_name}: code {replicas.code} {replicas.remark or ''} {replicas.ext_fields or {}}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("addresses", nargs="*", default=["127.0.0.1:9878"])
    parser.add_argument("--broker-name", default="broker-a")
    args = parser.parse_args()
    raise SystemExit(run_asyncio(main, args.addresses, args.broker_name))
