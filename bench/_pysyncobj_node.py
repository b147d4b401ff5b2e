"""One PySyncObj node for the anchor, run as `python -m bench._pysyncobj_node SELF PARTNERS PORT`.

It holds a replicated dict (pysyncobj.batteries.ReplDict, in-memory journal: PySyncObj does not
fsync) and serves a line protocol on 127.0.0.1:PORT for the suite's load generator:
`PUT key value` -> `OK` once the write is committed and applied here (PySyncObj forwards
non-leader writes to its leader), `GET key` -> `OK value` from local state, `LEADER` -> `OK addr`.
"""

from __future__ import annotations

import asyncio
import sys

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.batteries import ReplDict

# Bytes of one request line; anything longer is a broken client and closes its connection.
MAX_LINE_BYTES = 65536


def _settle(future: asyncio.Future[str], outcome: str) -> None:
    if not future.done():  # a cancelled waiter has gone
        future.set_result(outcome)


class NodeServer:
    def __init__(self, self_address: str, partners: list[str]) -> None:
        self.data = ReplDict()
        self.sync = SyncObj(self_address, partners, consumers=[self.data], conf=SyncObjConf(autoTick=True))
        self.loop = asyncio.get_running_loop()

    def put(self, key: str, value: str) -> asyncio.Future[str]:
        future: asyncio.Future[str] = self.loop.create_future()

        def done(_result: object, error: int) -> None:
            outcome = "OK" if error == FAIL_REASON.SUCCESS else f"ERR {error}"
            self.loop.call_soon_threadsafe(_settle, future, outcome)

        self.data.set(key, value, callback=done)
        return future

    async def answer(self, line: str) -> str:
        verb, _, rest = line.partition(" ")
        if verb == "PUT":
            key, _, value = rest.partition(" ")
            return await self.put(key, value)
        if verb == "GET":
            return f"OK {self.data.get(rest, '')}"
        if verb == "LEADER":
            leader = self.sync._getLeader()
            return f"OK {leader.address if leader is not None else ''}"
        return f"ERR unknown verb {verb!r}"

    async def serve_client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                if len(line) > MAX_LINE_BYTES:
                    break
                writer.write((await self.answer(line.decode().rstrip("\n"))).encode() + b"\n")
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def main(self_address: str, partners: str, port: int) -> None:
    node = NodeServer(self_address, [p for p in partners.split(",") if p])
    server = await asyncio.start_server(node.serve_client, "127.0.0.1", port, limit=MAX_LINE_BYTES)
    print(f"pysyncobj {self_address} serving on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
