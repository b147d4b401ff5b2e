"""The 1008 notifier behind a backlog of dead brokers: how long until every live broker has its 1008.

Usage: python bench/bench_notifier.py [--live N] [--refusing R] [--hanging H] [--runs K]
                                      [--notifier-file PATH]
Each run submits one 1008 (masterEpoch = run number) to R addresses that refuse connections
(127.3.x.y:9, nothing listens) and H addresses whose connects hang (a listener that never accepts,
its backlog full), then to N live listeners, as after a mass election the next failover's 1008s
queue behind those of brokers that are gone. It prints the time from the first submit until every
live listener has read its 1008. The live listeners run in a child process (the brokers' side costs
the notifier's process nothing); run 1 connects to them, later runs reuse the cached connections.

--notifier-file loads `Notifier` from another file, e.g. the notifier before a change:
    git show <commit>:src/rmqc/node/_notifier.py > /tmp/old_notifier.py
    python bench/bench_notifier.py --notifier-file /tmp/old_notifier.py
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from typing import Any

import trio

from rmqc.node._notifier import Notifier
from rmqc.remoting import FrameDecoder, make_request

DONE_BOUND_S = 120.0  # one run gives up after this (the old notifier needs ~3 s per 4 hanging brokers)
RECEIVE_BYTES = 65536


def notification(epoch: int) -> Any:
    return make_request(1008, 0, {"masterEpoch": epoch, "masterBrokerId": 1, "masterAddress": "127.0.0.1:1"},
                        b'{"syncStateSet":[1]}', oneway=True)


# ---- the child: N listening brokers -----------------------------------------------------------------


async def serve_live(count: int) -> None:
    """Print the ports on one line, then `done EPOCH WALL_TIME` once every listener read that epoch."""
    listeners = [(await trio.open_tcp_listeners(0, host="127.0.0.1"))[0] for _ in range(count)]
    seen = [0] * count
    reached: dict[int, int] = {}

    def on_epoch(index: int, epoch: int) -> None:
        if epoch <= seen[index]:
            return
        seen[index] = epoch
        reached[epoch] = reached.get(epoch, 0) + 1
        if reached[epoch] == count:
            print(f"done {epoch} {time.time():.6f}", flush=True)

    async def read(index: int, stream: trio.SocketStream) -> None:
        decoder = FrameDecoder()
        async with stream:
            while data := await stream.receive_some(RECEIVE_BYTES):
                for command in decoder.feed(data):
                    on_epoch(index, int(command.ext("masterEpoch") or 0))  # every 1008 carries one

    async with trio.open_nursery() as nursery:
        for index, listener in enumerate(listeners):
            nursery.start_soon(trio.serve_listeners, lambda stream, i=index: read(i, stream), [listener])
        print(" ".join(str(listener.socket.getsockname()[1]) for listener in listeners), flush=True)
        await trio.to_thread.run_sync(sys.stdin.read)  # until the parent closes our stdin
        nursery.cancel_scope.cancel()


# ---- the parent: the notifier -------------------------------------------------------------------------


class Lines:
    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream, self._buffer = stream, b""

    async def next(self) -> str:
        while b"\n" not in self._buffer:
            data = await self._stream.receive_some(RECEIVE_BYTES)
            if not data:
                raise EOFError("the listener process ended")
            self._buffer += data
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line.decode()


async def hanging_addresses(count: int) -> tuple[list[str], list[Any]]:
    """Listeners with backlog 0 and one unaccepted connection: the kernel drops further SYNs."""
    addresses, keep = [], []
    for _ in range(count):
        listener = trio.socket.socket()
        await listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        keep += [listener, await trio.open_tcp_stream("127.0.0.1", port)]
        addresses.append(f"127.0.0.1:{port}")
    return addresses, keep


async def all_sent(notifier: Any, count: int, sent_at: list[float]) -> None:
    """Note the wall time at which the notifier has counted `count` sends (refused ones fail, never send)."""
    while notifier.sent < count:
        await trio.sleep(0.001)
    sent_at.append(time.time())


def load_notifier(path: str | None) -> type:
    if path is None:
        return Notifier
    spec = importlib.util.spec_from_file_location("notifier_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Notifier


async def bench(args: argparse.Namespace) -> None:
    child = await trio.lowlevel.open_process(
        [sys.executable, __file__, "--serve", str(args.live)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdin is not None
    lines = Lines(child.stdout)
    live = [f"127.0.0.1:{port}" for port in (await lines.next()).split()]
    refusing = [f"127.3.{i // 250}.{i % 250 + 1}:9" for i in range(args.refusing)]
    hanging, keep = await hanging_addresses(args.hanging)
    notifier = load_notifier(args.notifier_file)()
    print(f"{args.live:,} live listeners behind {args.refusing:,} refusing and {args.hanging:,} hanging "
          f"addresses ({args.notifier_file or 'rmqc.node._notifier'})")
    async with trio.open_nursery() as nursery:
        await nursery.start(notifier.run)
        for run in range(1, args.runs + 1):
            started, started_cpu, done = time.time(), time.process_time(), None
            for address in refusing + hanging + live:
                notifier.submit(address, notification(run))
            sent_at: list[float] = []
            with trio.move_on_after(DONE_BOUND_S):
                async with trio.open_nursery() as watch:
                    watch.start_soon(all_sent, notifier, run * args.live, sent_at)
                    done = await lines.next()
            if done is None:
                print(f"run {run}: not every live broker had its 1008 after {DONE_BOUND_S} s (sent "
                      f"{notifier.sent:,}, failed {notifier.failed:,})")
                break
            _, epoch, at = done.split()
            assert int(epoch) == run, done
            print(f"run {run}: every live broker had its 1008 after {(float(at) - started) * 1000:,.1f} ms "
                  f"(all sent after {(sent_at[0] - started) * 1000:,.1f} ms; notifier process CPU meanwhile "
                  f"{(time.process_time() - started_cpu) * 1000:,.0f} ms)")
        attempts = args.runs * (args.live + args.refusing + args.hanging)
        with trio.move_on_after(DONE_BOUND_S):
            while notifier.sent + notifier.failed < attempts:  # the hanging ones give up last
                await trio.sleep(0.01)
        print(f"after {time.time() - started:,.1f} s: sent {notifier.sent:,}, failed {notifier.failed:,} "
              f"of {attempts:,} notifications")
        nursery.cancel_scope.cancel()
    await child.stdin.aclose()
    await child.wait()
    for resource in keep:
        if isinstance(resource, trio.SocketStream):
            await resource.aclose()
        else:
            resource.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", type=int, default=2000)
    parser.add_argument("--refusing", type=int, default=1000)
    parser.add_argument("--hanging", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--notifier-file", default=None)
    parser.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)  # the child's role
    args = parser.parse_args()
    if args.serve is not None:
        trio.run(serve_live, args.serve)
    else:
        trio.run(bench, args)


if __name__ == "__main__":
    main()
