"""One registration-generator process: `python -m bench._regworker PLAN_JSON`.

It plays brokers `first_broker` .. `first_broker + brokers - 1` of a fleet re-registering (103)
every `period_s`, as a RocketMQ broker does with every NameServer address it is given: each
broker's 103 frame (its topic table as the body, some KB) is encoded once, then sent on schedule
to every address over one connection per address, broker b at go + b/fleet * period + k * period.
Answers are counted (not awaited per request), so a slow server shows as answers missing at the
end and the sender's lag shows as sends later than due. The harness starts the workers, waits for
`ready`, sends SIGUSR1 (bench._loadworker's handshake) and reads the JSON written to `result_path`.
"""

from __future__ import annotations

import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import orjson
import trio

from rmqc.remoting import FrameDecoder, ResponseCode, encode, make_request

from ._load import RECEIVE_BYTES, split_address
from ._loadworker import wait_for_go
from ._namesrv_fleet import ROCKETMQ_5_5_0, registration

# After the last send, answers still in flight get this long to arrive before the worker reports.
DRAIN_S = 10.0


@dataclass(frozen=True)
class Plan:
    addresses: list[str]
    fleet: int  # brokers in the whole fleet (all workers): spreads the send times over the period
    first_broker: int
    brokers: int
    topics: int
    period_s: float
    duration_s: float  # from the go signal; sends due later are not made
    result_path: str

    def to_json(self) -> str:
        return orjson.dumps(asdict(self)).decode()

    @classmethod
    def from_json(cls, text: str) -> Plan:
        return cls(**orjson.loads(text))


@dataclass
class Tally:
    sent: int = 0  # frames written (one per broker per address per round)
    answered: int = 0
    # why answers were refusals, by code and remark (a plain dict: dataclasses.asdict would turn a
    # Counter's items into counted tuples)
    refused: dict[str, int] = field(default_factory=dict)
    # refusals by the round (period) they came in: the first registers the fleet, the later ones
    # only repeat it
    refused_by_round: dict[str, int] = field(default_factory=dict)
    max_lag_s: float = 0.0  # the latest a send left after its due time
    elapsed_s: float = 0.0


def frames(plan: Plan) -> list[tuple[float, bytes]]:
    """(offset into the period, encoded 103) of each broker of the plan, by offset."""
    out = []
    for broker in range(plan.first_broker, plan.first_broker + plan.brokers):
        ext, body = registration(broker, plan.topics)
        frame = encode(make_request(103, broker + 1, ext, body, version=ROCKETMQ_5_5_0))
        out.append((broker / plan.fleet * plan.period_s, frame))
    return out


async def count_answers(stream: trio.SocketStream, tally: Tally, go: float, period_s: float) -> None:
    decoder = FrameDecoder()
    while data := await stream.receive_some(RECEIVE_BYTES):
        for answer in decoder.feed(data):
            tally.answered += 1
            if answer.code != ResponseCode.SUCCESS:
                why = f"{answer.code} {(answer.remark or '')[:60]}"
                tally.refused[why] = tally.refused.get(why, 0) + 1
                round_ = str(int((trio.current_time() - go) // period_s))
                tally.refused_by_round[round_] = tally.refused_by_round.get(round_, 0) + 1


async def send_on_schedule(plan: Plan, schedule: list[tuple[float, bytes]], streams: list[trio.SocketStream],
                           tally: Tally, go: float) -> None:
    """Every frame due by now in one write per connection, then sleep until the next is due."""
    rounds = int(plan.duration_s // plan.period_s) + 1
    due = [(go + k * plan.period_s + offset, frame) for k in range(rounds) for offset, frame in schedule]
    due = [(at, frame) for at, frame in due if at < go + plan.duration_s]
    position = 0
    while position < len(due):
        await trio.sleep_until(due[position][0])
        now = trio.current_time()
        batch = []
        while position < len(due) and due[position][0] <= now:
            tally.max_lag_s = max(tally.max_lag_s, now - due[position][0])
            batch.append(due[position][1])
            position += 1
        payload = b"".join(batch)
        for stream in streams:
            await stream.send_all(payload)
        tally.sent += len(batch) * len(streams)


async def run(plan: Plan) -> Tally:
    tally = Tally()
    schedule = frames(plan)
    streams = [await trio.open_tcp_stream(*split_address(address)) for address in plan.addresses]
    wait_for_go()
    started, go = time.perf_counter(), trio.current_time()
    async with trio.open_nursery() as nursery:
        for stream in streams:
            nursery.start_soon(count_answers, stream, tally, go, plan.period_s)
        await send_on_schedule(plan, schedule, streams, tally, go)
        with trio.move_on_after(DRAIN_S):
            while tally.answered < tally.sent:
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    tally.elapsed_s = time.perf_counter() - started
    for stream in streams:
        await stream.aclose()
    return tally


def write_tally(path: Path, tally: Tally) -> None:
    path.write_bytes(orjson.dumps(asdict(tally)))


def main(argv: list[str]) -> int:
    plan = Plan.from_json(argv[0])
    write_tally(Path(plan.result_path), trio.run(run, plan))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
