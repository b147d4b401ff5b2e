"""The one launcher of child processes, above all `rmqc serve` nodes. The cluster tests
(`rmqc.testing.cluster`), `rmqc dev cluster` (`rmqc.cli.dev`) and the benchmark suite (`bench/`)
all start, signal and stop their processes here.

A child is started in its own session (a terminal's Ctrl-C reaches only whoever started it) with
SIGTERM as its parent-death signal (a killed test or CLI leaves no node behind). Its stdout and
stderr are appended to files: a restarted node keeps its earlier output, and only what the current
run wrote counts when waiting for a line. Every child is remembered by PID until reaped and is only
ever signalled by that PID (a PID cannot be reused before we reap it). Every wait is bounded.

Waits come in two colours with one check each: `..._blocking` for plain code (the CLI, sync tests)
and `async` for Trio code. Spawn from the thread that will outlive the child: Linux delivers the
parent-death signal when the spawning *thread* ends, so never spawn from a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGTERM
from typing import Any, BinaryIO, TypeVar

import trio

from rmqc.client import ClientError, ControllerClient
from rmqc.errors import RmqcError

__all__ = [
    "RMQC", "START_TIMEOUT_S", "STOP_GRACE_S", "NodeStartFailed", "Process", "ProcessFailed", "ServeCluster",
    "ServeNode", "cpu_s", "end_with_parent", "free_ports", "join_peers", "poll", "poll_blocking", "rmqc_argv",
    "rss_mb", "serve_argv", "serve_nodes", "serving_pattern", "stop_all", "stop_processes",
]

T = TypeVar("T")

# The `rmqc` console script of this very installation.
RMQC = str(Path(sys.executable).parent / "rmqc")
START_TIMEOUT_S = 60.0  # a node imports trio, LMDB and the controller: seconds on a loaded 2-core machine
STOP_GRACE_S = 10.0  # SIGTERM/SIGINT -> exit; a node gives in-flight answers 0.5 s, more when loaded
POLL_S = 0.01  # a child's output is a file: nothing to wait on but looking again shortly
LEADER_POLL_S = 0.05  # asking every node costs a round of requests: 20 rounds a second at most
TAIL_LINES = 8  # of a child's log in an error message: enough for the traceback's last frames
PR_SET_PDEATHSIG = 1  # prctl option (linux/prctl.h)
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class ProcessFailed(RmqcError):
    """A child process exited, or did not do what it should have within its bound."""


class NodeStartFailed(ProcessFailed):
    """An `rmqc serve` node exited or did not print its "serving on" line within the bound, or the
    nodes did not agree on a leader within the bound."""


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST_PICKED_PORT = 10_000
# Its own generator: a test that seeds the `random` module must not make two processes pick alike.
_PORT_PICKS = random.SystemRandom()
# The last ports free_ports handed out, never handed out again while remembered: a port picked is
# free until its server binds it, so a second call before that (a test picking its nodes' ports,
# then their metrics ports) could otherwise pick it again, and the node started second finds it
# taken. Far more than any test starts at once; the oldest are forgotten first.
REMEMBERED_PICKS = 4096
_handed_out: dict[int, None] = {}  # insertion-ordered: the oldest first


def free_ports(count: int, host: str = "127.0.0.1") -> list[int]:
    """`count` distinct ports free a moment ago and not handed out by a recent call, below the
    kernel's ephemeral range: the kernel gives ports of that range to every bind to port 0 and
    every outgoing connection, so a port picked there could be taken, before its server binds it,
    by a client of the same test (a simulated broker's listener, a connection). Below it only an
    explicit bind takes a port."""
    low = _ephemeral_low()
    if low - LOWEST_PICKED_PORT < 10 * count:  # no room below (an unusual range): the kernel's picks
        return _kernel_ports(count, host)
    picked: list[int] = []
    for port in _PORT_PICKS.sample(range(LOWEST_PICKED_PORT, low), min(low - LOWEST_PICKED_PORT, 50 * count)):
        if port not in _handed_out and _bindable(host, port):
            picked.append(port)
            if len(picked) == count:
                _remember(picked)
                return picked
    raise ProcessFailed(f"no {count} free ports on {host} between {LOWEST_PICKED_PORT} and {low}")


def _remember(ports: list[int]) -> None:
    for port in ports:
        _handed_out[port] = None
    while len(_handed_out) > REMEMBERED_PICKS:
        del _handed_out[next(iter(_handed_out))]


def _ephemeral_low() -> int:
    try:
        return int(EPHEMERAL_RANGE_FILE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return LOWEST_PICKED_PORT  # not Linux: no room below, so the kernel picks


def _kernel_ports(count: int, host: str) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind((host, 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def consecutive_free_ports(count: int, host: str = "127.0.0.1") -> int:
    """A base port with `count` free ports from it (`--base-port` and `--metrics-base-port` take
    consecutive ones); raises ProcessFailed when 50 tries found none."""
    low = _ephemeral_low()
    for _ in range(50):
        (base,) = free_ports(1, host)
        limit = low if base < low else 65536  # all of them below the ephemeral range, as free_ports'
        rest = range(base + 1, base + count)
        if base + count <= limit and all(port not in _handed_out and _bindable(host, port) for port in rest):
            _remember(list(rest))
            return base
    raise ProcessFailed(f"no {count} consecutive free ports on {host}")


def _bindable(host: str, port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def end_with_parent() -> None:
    """In the child before exec (Linux): SIGTERM when the thread that started it ends, so a killed
    test, benchmark or `rmqc dev cluster` never leaves children behind (they are in their own
    session, out of reach of the terminal's signals)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass  # not Linux: stop_processes() still ends them on every normal exit


def rmqc_argv() -> list[str]:
    """How to run the `rmqc` command of this very installation as a child process (works even
    where the console script is not installed)."""
    return [sys.executable, "-c", "import sys; from rmqc.cli.main import app; sys.argv[0] = 'rmqc'; app()"]


def poll_blocking(check: Callable[[], T | None], timeout_s: float, on_timeout: Callable[[], Exception],
                  interval_s: float = POLL_S) -> T:
    """`check()` again every `interval_s` until it returns something other than None; raises
    `on_timeout()` after `timeout_s`. `check` may raise to end the wait early."""
    deadline = time.monotonic() + timeout_s
    while (result := check()) is None:
        if time.monotonic() >= deadline:
            raise on_timeout()
        time.sleep(interval_s)
    return result


async def poll(check: Callable[[], T | None], timeout_s: float, on_timeout: Callable[[], Exception],
               interval_s: float = POLL_S) -> T:
    """poll_blocking for Trio code: sleeps without blocking the other tasks."""
    deadline = trio.current_time() + timeout_s
    while (result := check()) is None:
        if trio.current_time() >= deadline:
            raise on_timeout()
        await trio.sleep(interval_s)
    return result


# Every process started and not yet reaped, by PID: stop_all() ends them, and only them.
_started: dict[int, Process] = {}


class Process:
    """One child: stdout (and stderr, unless `err_path`) appended to `log_path`."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, *, err_path: Path | None = None,
                 env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.err_path = err_path
        with contextlib.ExitStack() as files:
            out = files.enter_context(_append(log_path))
            err = files.enter_context(_append(err_path)) if err_path is not None else None
            self._out_offset = out.tell()
            self._err_offset = err.tell() if err is not None else self._out_offset
            self.popen = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=err if err is not None else subprocess.STDOUT,
                                          env={**os.environ, **(env or {})}, cwd=cwd,
                                          start_new_session=True, preexec_fn=end_with_parent)
        self.pid = self.popen.pid
        self.started_at = time.perf_counter()
        _started[self.pid] = self

    @property
    def returncode(self) -> int | None:
        """None while running; negative for the signal that ended it."""
        code = self.popen.poll()
        if code is not None:
            _started.pop(self.pid, None)  # reaped: its PID may now be reused, never signal it again
        return code

    @property
    def alive(self) -> bool:
        return self.returncode is None

    def output_text(self) -> str:
        """What this run wrote to stdout."""
        return _read_from(self.log_path, self._out_offset)

    def log_text(self) -> str:
        """What this run wrote to stderr (the same as output_text without `err_path`)."""
        return _read_from(self.err_path or self.log_path, self._err_offset)

    def tail(self, lines: int = TAIL_LINES, separator: str = " | ") -> str:
        return separator.join(self.log_text().splitlines()[-lines:])

    def output_match(self, pattern: str | re.Pattern[str]) -> re.Match[str] | None:
        """The first match in this run's stdout, None if not there yet; ProcessFailed if the process
        has exited without printing it."""
        exited = not self.alive  # before reading: output written just before exiting still counts
        match = re.search(pattern, self.output_text())
        if match is None and exited:
            raise ProcessFailed(f"{self.name} exited with {self.popen.returncode}: {self.tail()}")
        return match

    def wait_for_output_blocking(self, pattern: str, timeout_s: float) -> re.Match[str]:
        """Wait (bounded) until this run's stdout matches; ProcessFailed if the process dies first."""
        return poll_blocking(lambda: self.output_match(pattern), timeout_s, lambda: self._silent(pattern, timeout_s))

    async def wait_for_output(self, pattern: str, timeout_s: float) -> re.Match[str]:
        return await poll(lambda: self.output_match(pattern), timeout_s, lambda: self._silent(pattern, timeout_s))

    def _silent(self, pattern: str, timeout_s: float) -> ProcessFailed:
        return ProcessFailed(f"{self.name}: no {pattern!r} within {timeout_s:g} s: {self.tail()}")

    def signal(self, signum: int) -> None:
        """Send `signum` by PID, if the process still runs."""
        if self.alive:
            with contextlib.suppress(ProcessLookupError):  # reaped meanwhile by a stop in another thread
                os.kill(self.pid, signum)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def wait_exit_blocking(self, timeout_s: float = STOP_GRACE_S) -> int:
        """The exit code once it has exited (reaped); ProcessFailed if still running after `timeout_s`."""
        return poll_blocking(lambda: self.returncode, timeout_s, lambda: self._running_after(timeout_s))

    async def wait_exit(self, timeout_s: float = STOP_GRACE_S) -> int:
        return await poll(lambda: self.returncode, timeout_s, lambda: self._running_after(timeout_s))

    def _running_after(self, timeout_s: float) -> ProcessFailed:
        return ProcessFailed(f"{self.name} (pid {self.pid}) still running after {timeout_s:g} s")

    def kill(self) -> int:
        """SIGKILL (a crash), then reap it."""
        self.signal(signal.SIGKILL)
        return self.wait_exit_blocking()

    def stop(self, signum: int = SIGTERM, grace_s: float = STOP_GRACE_S, resume: bool = True) -> int:
        """See stop_processes."""
        (code,) = stop_processes([self], signum, grace_s, resume)
        return code

    def rss_mb(self) -> float | None:
        return rss_mb(self.pid)

    def cpu_s(self) -> float | None:
        return cpu_s(self.pid)


def rss_mb(pid: int) -> float | None:
    """The resident memory of process `pid` (None once it is gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def cpu_s(pid: int) -> float | None:
    """User + system CPU seconds process `pid` used so far (None once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS


def _append(path: Path) -> BinaryIO:
    path.parent.mkdir(parents=True, exist_ok=True)
    return open(path, "ab")  # closed by the caller's ExitStack once the child has it


def _read_from(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode(errors="replace")
    except OSError:
        return ""


def stop_processes(processes: Iterable[Process], signum: int = SIGTERM, grace_s: float = STOP_GRACE_S,
                   resume: bool = True) -> list[int]:
    """`signum` to every running process (then SIGCONT if `resume`, so a SIGSTOPped one can act on
    it), one shared wait of up to `grace_s`, SIGKILL for the rest; their exit codes in order.
    Without `resume` a stopped process cannot act on `signum` and ends by SIGKILL."""
    processes = list(processes)
    for process in processes:
        process.signal(signum)
        if resume:
            process.resume()
    deadline = time.monotonic() + grace_s
    codes = []
    for process in processes:
        try:
            codes.append(process.wait_exit_blocking(max(0.0, deadline - time.monotonic())))
        except ProcessFailed:
            codes.append(process.kill())
    return codes


def stop_all() -> None:
    """Stop every process started here and not yet reaped (the end of a run, whatever happened)."""
    stop_processes(list(_started.values()))


def join_peers(addresses: Iterable[tuple[str, str]]) -> str:
    """`--peers` of `rmqc serve` from (node id, host:port) pairs: "n0-h:p;n1-h:p"."""
    return ";".join(f"{node_id}-{address}" for node_id, address in addresses)


def serve_argv(node_id: str, peers: str, data_dir: Path, settings: Iterable[str] = (),
               metrics_port: int | None = None, program: Sequence[str] | None = None, *,
               listen: str | None = None, join: str | None = None, repair: bool = False) -> list[str]:
    """`rmqc serve` for one node; `settings` are OPTION=VALUE for --set, `program` what runs rmqc.
    Without `peers`, `listen` says where the node is (a joining node, `join` naming any member, or
    a member restarted on its data directory)."""
    argv = [*(program or rmqc_argv()), "serve", "--id", node_id]
    argv += ["--peers", peers] if peers else []
    argv += ["--listen", listen] if listen else []
    argv += ["--join", join] if join else []
    argv += ["--data-dir", str(data_dir)]
    argv += ["--repair"] if repair else []
    if metrics_port is not None:
        argv += ["--metrics-port", str(metrics_port)]
    for setting in settings:
        argv += ["--set", setting]
    return argv


def serving_pattern(node_id: str, address: str) -> str:
    """The line `rmqc serve` prints on stdout once it listens (rmqc.node._run)."""
    return re.escape(f"rmqc {node_id} serving on {address}")


@dataclass(eq=False)
class ServeNode:
    """One `rmqc serve` node: stderr appended to `log_path`, stdout to the same name with `.out`.
    `program` runs rmqc (default: this installation's; another tree's for a before/after);
    `command` may be replaced to start the node some other way (it must still print the line).
    `peers` empty: the node is started with `--listen address` (and `--join join` when given): a
    node added to a running group, then restarted on its data directory without either."""

    node_id: str
    address: str
    peers: str
    data_dir: Path
    log_path: Path
    settings: Sequence[str] = ()
    metrics_port: int | None = None
    process: Process | None = None
    env: dict[str, str] = field(default_factory=dict)  # added to the node's environment
    program: Sequence[str] | None = None
    join: str = ""  # any member's host:port: start with --join (an empty node asks to be added)
    repair: bool = False  # start with --repair (a damaged data directory rejoins its cluster)

    @property
    def out_path(self) -> Path:
        return self.log_path.with_suffix(".out")

    @property
    def err_path(self) -> Path:
        return self.log_path

    def command(self) -> list[str]:
        return serve_argv(self.node_id, self.peers, self.data_dir, self.settings, self.metrics_port, self.program,
                          listen=None if self.peers else self.address, join=self.join or None,
                          repair=self.repair)

    def spawn(self) -> Process:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.process = Process(self.node_id, self.command(), self.out_path, err_path=self.log_path, env=self.env)
        return self.process

    def serving(self) -> bool | None:
        """True once this run printed its "serving on" line, None before; NodeStartFailed if the
        process exited first."""
        assert self.process is not None, f"{self.node_id} was never started"
        try:
            return True if self.process.output_match(serving_pattern(self.node_id, self.address)) else None
        except ProcessFailed as error:
            raise NodeStartFailed(str(error)) from None

    def wait_serving_blocking(self, timeout_s: float = START_TIMEOUT_S) -> None:
        poll_blocking(self.serving, timeout_s, lambda: self._not_serving(timeout_s))

    async def wait_serving(self, timeout_s: float = START_TIMEOUT_S) -> None:
        await poll(self.serving, timeout_s, lambda: self._not_serving(timeout_s))

    def _not_serving(self, timeout_s: float) -> NodeStartFailed:
        return NodeStartFailed(f"{self.node_id} did not print 'serving on' within {timeout_s:g} s: "
                               f"{self.log_tail(TAIL_LINES, ' | ')}")

    def start_blocking(self, timeout_s: float = START_TIMEOUT_S) -> None:
        self.spawn()
        self.wait_serving_blocking(timeout_s)

    async def start(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Start (again, on the same data directory) and wait until it listens."""
        self.spawn()
        await self.wait_serving(timeout_s)

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive

    def kill(self, signum: int = signal.SIGKILL) -> None:
        """Send `signum` by PID, like kill(1); wait_exit reaps it."""
        if self.process is not None:
            self.process.signal(signum)

    async def wait_exit(self, timeout_s: float = STOP_GRACE_S) -> int:
        assert self.process is not None, f"{self.node_id} was never started"
        return await self.process.wait_exit(timeout_s)

    def log_tail(self, lines: int = 30, separator: str = "\n") -> str:
        """The end of this run's stderr (of the last run, once it has exited)."""
        return self.process.tail(lines, separator) if self.process is not None else ""

    def describe(self) -> dict[str, Any]:
        process = self.process
        return {"node_id": self.node_id, "address": self.address, "data_dir": str(self.data_dir),
                "pid": process.pid if process else None,
                "returncode": process.returncode if process else "not started"}


def serve_nodes(root: Path, ports: Sequence[int], host: str = "127.0.0.1", settings: Sequence[str] = (),
                metrics_base_port: int | None = None, program: Sequence[str] | None = None) -> list[ServeNode]:
    """Nodes n0, n1, ... of one cluster: data in root/nI, stderr in root/nI.log, stdout in root/nI.out;
    node I exports metrics on metrics_base_port + I; `program` runs rmqc (see ServeNode)."""
    peers = join_peers((f"n{i}", f"{host}:{port}") for i, port in enumerate(ports))
    return [ServeNode(f"n{i}", f"{host}:{port}", peers, root / f"n{i}", root / f"n{i}.log", tuple(settings),
                      None if metrics_base_port is None else metrics_base_port + i, program=program)
            for i, port in enumerate(ports)]


class ServeCluster:
    """`rmqc serve` nodes started, watched and stopped together."""

    def __init__(self, nodes: list[ServeNode]) -> None:
        self.nodes = nodes

    @property
    def peers(self) -> str:
        return join_peers((node.node_id, node.address) for node in self.nodes)

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in self.nodes]

    @property
    def controllers(self) -> str:
        """The addresses as `rmqc -c` and brokers' controllerAddr take them."""
        return ";".join(self.addresses)

    def node(self, id_or_address: str) -> ServeNode:
        return next(node for node in self.nodes if id_or_address in (node.node_id, node.address))

    def start_blocking(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Spawn every node, then wait (bounded) until each listens. If one fails, the others are
        stopped too: a cluster that did not start leaves no process behind."""
        with self._stopped_unless_started():
            for node in self.nodes:
                node.spawn()
            for node in self.nodes:
                node.wait_serving_blocking(timeout_s)

    async def start_async(self, timeout_s: float = START_TIMEOUT_S) -> None:
        with self._stopped_unless_started():
            for node in self.nodes:
                node.spawn()
            for node in self.nodes:
                await node.wait_serving(timeout_s)

    @contextlib.contextmanager
    def _stopped_unless_started(self) -> Iterator[None]:
        try:
            yield
        except BaseException:
            self.stop_blocking()  # blocking even in Trio: a cancelled task could not await it
            raise

    def stop_blocking(self, signum: int = SIGTERM, grace_s: float = STOP_GRACE_S,
                      resume: bool = True) -> dict[str, int | None]:
        """stop_processes for every node; each node's exit code (None if never started)."""
        started = [node for node in self.nodes if node.process is not None]
        codes = stop_processes([node.process for node in started if node.process is not None], signum, grace_s, resume)
        by_node = dict(zip((node.node_id for node in started), codes, strict=True))
        return {node.node_id: by_node.get(node.node_id) for node in self.nodes}

    async def stop_async(self, signum: int = SIGTERM, grace_s: float = STOP_GRACE_S,
                         resume: bool = True) -> dict[str, int | None]:
        """stop_blocking in a worker thread (it only signals and reaps; it spawns nothing)."""
        return await trio.to_thread.run_sync(self.stop_blocking, signum, grace_s, resume)

    async def leader(self, client: ControllerClient, among: list[ServeNode] | None = None) -> str | None:
        """The leader's address if every running node asked (or every one of `among`) names the
        same one in its 1005 answer and that one says isLeader."""
        seen = set()
        for node in among or [node for node in self.nodes if node.running]:
            try:
                seen.add((await client.get_metadata(address=node.address)).ext("controllerLeaderAddress"))
            except ClientError:
                return None
        if len(seen) != 1 or None in seen:
            return None
        (leader,) = seen
        try:
            answer = await client.get_metadata(address=leader)
        except ClientError:
            return None
        return str(leader) if answer.ext("isLeader") == "true" else None

    async def wait_leader(self, client: ControllerClient | None = None, timeout_s: float = 15.0,
                          among: list[ServeNode] | None = None) -> str:
        """The agreed leader's address (see leader), waiting up to `timeout_s`; NodeStartFailed
        after that. Without `client`, one of our own for the wait."""
        if client is None:
            async with ControllerClient(self.addresses, timeout_ms=2000, max_retries=0) as own:
                return await self.wait_leader(own, timeout_s, among)
        no_leader = NodeStartFailed(f"no leader every node agrees on within {timeout_s:g} s")
        with trio.move_on_after(timeout_s):
            while (leader := await self.leader(client, among)) is None:
                await trio.sleep(LEADER_POLL_S)
            return leader
        raise no_leader

    def logs(self) -> str:
        return "\n".join(f"--- {node.node_id} ---\n{node.log_tail()}" for node in self.nodes)
