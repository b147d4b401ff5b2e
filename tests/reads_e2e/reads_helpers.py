"""Shared by the read tests: a broker group whose master address is a register (1003 writes it,
1004 reads it), and the history those ops make for rmqc.linearizability."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from rmqc.client import ClientError, ControllerClient
from rmqc.remoting import RequestCode
from rmqc.replica import COMMIT_TIMEOUT_REMARK
from rmqc.testing import Op

CLUSTER = "C"
MASTER_ID = 1
# Ops recorded in one test; a bound so a runaway loop fails loudly instead of eating memory.
MAX_OPS = 200_000


def now_ns() -> int:
    return time.monotonic_ns()


async def make_group(client: ControllerClient, name: str, address: str) -> None:
    """Register id 1 of `name` and elect it master: from then on 1003 moves the master address."""
    applied = await client.apply_broker_id(CLUSTER, name, MASTER_ID, f"{address};1700000000000")
    assert applied.code == 0, applied.remark
    elected = await client.elect_master(CLUSTER, name, MASTER_ID)
    assert elected.code == 0, elected.remark


@dataclass
class History:
    ops: list[Op] = field(default_factory=list)

    def add(self, op: Op) -> None:
        if len(self.ops) >= MAX_OPS:
            raise AssertionError(f"more than {MAX_OPS} ops recorded")
        self.ops.append(op)

    async def write(self, client: ControllerClient, process: str, name: str, address: str,
                    node: str | None = None) -> bool:
        """1003 with a new address for the master. A failure or timeout may still have taken
        effect (forwarded, committed, answer lost): its outcome is unknown, not 'failed'."""
        return (await self._write(client, process, name, address, node)) == ""

    async def write_until_committed(self, client: ControllerClient, process: str, name: str, address: str,
                                    node: str | None = None, attempts: int = 5) -> None:
        """`write`, sent again while the leader answers that its commit wait ran out. Tests that set
        a short request timeout (so refusals come quickly) see that answer when the disk stalls:
        CI once saw two 1.3 s fsyncs against a 1 s timeout. Any other failure fails the test."""
        for _ in range(attempts):
            failure = await self._write(client, process, name, address, node)
            if failure != COMMIT_TIMEOUT_REMARK:
                assert failure == "", failure
                return
        raise AssertionError(f"{attempts} writes of {address} each ran out of commit wait")

    async def _write(self, client: ControllerClient, process: str, name: str, address: str,
                     node: str | None) -> str:
        """'' when the write committed, else the remark (or the client's error) saying why not."""
        invoke = now_ns()
        ext = {"clusterName": CLUSTER, "brokerName": name, "brokerId": MASTER_ID,
               "brokerAddress": address, "invokeTime": 1}
        try:
            answer = await client.request(RequestCode.CONTROLLER_REGISTER_BROKER, ext, address=node)
        except ClientError as error:
            failure = f"client: {error}"
        else:
            if answer is None:
                failure = "no answer"
            else:
                failure = "" if answer.code == 0 else (answer.remark or f"code {answer.code}")
        self.add(Op(process, name, "write", address, invoke, None if failure else now_ns()))
        return failure

    async def read(self, client: ControllerClient, process: str, name: str, node: str,
                   consistency: str) -> tuple[int, dict[str, str]] | None:
        """1004 at `node` and `consistency`; records the master address it returned."""
        invoke = now_ns()
        ext = {"brokerName": name, "consistency": consistency}
        try:
            answer = await client.request(RequestCode.CONTROLLER_GET_REPLICA_INFO, ext, address=node)
        except ClientError:
            return None
        complete = now_ns()
        if answer is None:
            return None
        if answer.code == 0:
            self.add(Op(f"{process}@{consistency}", name, "read", answer.ext("masterAddress"), invoke, complete))
        return answer.code, dict(answer.ext_fields or {}) | {"remark": answer.remark or ""}

    def of_levels(self, *levels: str) -> list[Op]:
        return [op for op in self.ops if op.kind == "write" or op.process.rsplit("@", 1)[-1] in levels]
