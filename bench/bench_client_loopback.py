"""ControllerClient over loopback against an in-process echo controller (our codec on Trio).

Usage: python bench/bench_client_loopback.py [--requests N] [--concurrency C]
Prints the latency of one client's sequential 1004 requests (p50/p99) and the throughput of C
concurrent callers sharing one client (one connection). The server answers at once, so the figures
are the client + codec + loopback cost that every rmqc request pays on top of the controller's work.
"""

from __future__ import annotations

import argparse
import functools
import statistics

import trio

from rmqc.client import ControllerClient
from rmqc.remoting import FrameDecoder, RequestCode, ResponseCode, encode, make_response


async def echo_controller(stream: trio.SocketStream) -> None:
    decoder = FrameDecoder()
    address = f"127.0.0.1:{stream.socket.getsockname()[1]}"
    while data := await stream.receive_some(65536):
        replies = []
        for request in decoder.feed(data):
            asks_leader = request.code == RequestCode.CONTROLLER_GET_METADATA_INFO
            ext = {"controllerLeaderAddress": address} if asks_leader else None
            replies.append(encode(make_response(request, ResponseCode.SUCCESS, ext=ext)))
        await stream.send_all(b"".join(replies))


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def sequential(client: ControllerClient, requests: int) -> None:
    samples_ms = []
    for _ in range(requests):
        start = trio.current_time()
        await client.get_replica_info("broker-a")
        samples_ms.append((trio.current_time() - start) * 1000)
    print(
        f"1 caller, {requests} sequential 1004: p50 {statistics.median(samples_ms):.3f} ms  "
        f"p99 {percentile(samples_ms, 0.99):.3f} ms  ({requests / (sum(samples_ms) / 1000):,.0f} req/s)"
    )


async def concurrent(client: ControllerClient, requests: int, concurrency: int) -> None:
    per_caller = requests // concurrency

    async def caller() -> None:
        for _ in range(per_caller):
            await client.get_replica_info("broker-a")

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(caller)
    elapsed_s = trio.current_time() - start
    total = per_caller * concurrency
    print(f"{concurrency} callers, one client, {total} 1004: {total / elapsed_s:,.0f} req/s")


async def main(requests: int, concurrency: int) -> None:
    async with trio.open_nursery() as nursery:
        serve = functools.partial(trio.serve_tcp, echo_controller, 0, host="127.0.0.1")
        [listener] = await nursery.start(serve)
        address = f"127.0.0.1:{listener.socket.getsockname()[1]}"
        async with ControllerClient([address], timeout_ms=10_000, max_in_flight=max(1024, concurrency)) as client:
            await client.get_replica_info("broker-a")  # warm up: discovery and connection
            await sequential(client, requests // 5)
            await concurrent(client, requests, concurrency)
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="client loopback latency and throughput")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=256)
    args = parser.parse_args()
    trio.run(main, args.requests, args.concurrency)
