"""`rmqc serve` with the logic's CPU counted apart from the shell's (bench/bench_serve_logic.py).

Run as the node program (`python -m bench._timed_serve serve ...`): before the CLI starts, the
entry points of the logic (the replica's inputs and passes, the peer codec, the answers' encode)
and the shell's work nested inside them (the saver's hand-off, the outbox drain that performs the
replica's actions) are wrapped to add their event-loop thread's CPU (time.thread_time, user +
system) to a label, each region's time exclusive of the regions nested in it. A Trio instrument
counts the loop's task steps (by task) and its waits for I/O: how often the node resumes. SIGUSR1
starts a window; SIGUSR2 writes the window's figures as JSON to $RMQC_TIMED_SERVE_OUT.<pid>.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import trio

import rmqc.node._node as node_module
import rmqc.node._saver as saver_module
import rmqc.node._server as server_module
import rmqc.peerwire._dispatch as dispatch_module
import rmqc.peerwire._outbox as outbox_module
import rmqc.remoting._frames as frames_module
import rmqc.replica._replica as replica_module
import rmqc.replica._runner as runner_module

OUT_ENV = "RMQC_TIMED_SERVE_OUT"
LOGIC = "logic"
SHELL_IN_LOGIC = "shell inside a pass"

# (owner, attribute, kind): the logic's entry points, then the shell's work nested in them
REGIONS: list[tuple[Any, str, str]] = [
    *((replica_module.Replica, name, LOGIC) for name in (
        "client_request", "forwarded_request", "forwarded_response", "raft_messages", "heartbeat", "drive",
        "advance_time", "save_finished", "peer_unreachable", "digest", "notification_sent", "connection_closed")),
    (dispatch_module, "decode_messages", LOGIC),
    (outbox_module, "encode_messages", LOGIC),
    (frames_module, "decode_json_header", LOGIC),  # a request's header (its body is a slice)
    (server_module, "encode", LOGIC),  # the answers, encoded for their socket
    (node_module, "encode", LOGIC),  # forwarded requests and their answers
    (saver_module.BackgroundSaver, "save", SHELL_IN_LOGIC),  # the hand-off and the wait's system calls
    (runner_module.Runner, "flush", SHELL_IN_LOGIC),  # a pass's actions performed: the sends to peers
]


class Regions(trio.abc.Instrument):
    """Exclusive thread CPU per kind of region, in the thread that runs them (the event loop), and
    the loop's task steps and I/O waits."""

    def __init__(self) -> None:
        self.task_steps: Counter[str] = Counter()
        self.io_waits = 0
        self.cpu_s: defaultdict[str, float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.window_started_s = time.thread_time()
        self._stack: list[list[float]] = []  # per open region: [started, time of the regions nested in it]

    def wrap(self, function: Callable[..., Any], kind: str, label: str) -> Callable[..., Any]:
        stack, main = self._stack, threading.main_thread().ident

        def timed(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() != main:  # only the event loop's thread is counted
                return function(*args, **kwargs)
            frame = [time.thread_time(), 0.0]
            stack.append(frame)
            try:
                return function(*args, **kwargs)
            finally:
                stack.pop()
                spent = time.thread_time() - frame[0]
                self.cpu_s[kind] += spent - frame[1]
                self.calls[label] += 1
                if stack:
                    stack[-1][1] += spent
        return timed

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        self.task_steps[task.name.rpartition(".")[2]] += 1

    def before_io_wait(self, timeout: float) -> None:
        self.io_waits += 1

    def reset(self) -> None:
        self.cpu_s.clear()
        self.calls.clear()
        self.task_steps.clear()
        self.io_waits = 0
        self.window_started_s = time.thread_time()

    def dump(self, path: str) -> None:
        figures = {"event_loop_cpu_s": time.thread_time() - self.window_started_s, "cpu_s": dict(self.cpu_s),
                   "calls": dict(self.calls), "task_steps": dict(self.task_steps), "io_waits": self.io_waits}
        with open(path, "w") as out:
            json.dump(figures, out)


def install() -> Regions:
    regions = Regions()
    for owner, name, kind in REGIONS:
        label = f"{getattr(owner, '__name__', '')}.{name}"
        setattr(owner, name, regions.wrap(getattr(owner, name), kind, label))
    serve = node_module.ControllerNode.run

    async def run_instrumented(node: node_module.ControllerNode, **kwargs: Any) -> None:
        trio.lowlevel.add_instrument(regions)
        await serve(node, **kwargs)

    node_module.ControllerNode.run = run_instrumented  # type: ignore[method-assign,assignment]
    out = os.environ[OUT_ENV]
    signal.signal(signal.SIGUSR1, lambda *_: regions.reset())
    signal.signal(signal.SIGUSR2, lambda *_: regions.dump(f"{out}.{os.getpid()}"))
    return regions


def main() -> None:
    install()
    from rmqc.cli.main import app
    sys.argv[0] = "rmqc"
    app()


if __name__ == "__main__":
    main()
