"""`rmqc sim brokers`: simulated RocketMQ brokers against running controllers (rmqc.brokersim).

    rmqc sim brokers --groups 200 --replicas 3 --controllers "a;b;c" [--processes 2]

Prints a summary every `--report-every` seconds, with how late the simulator ran against its own
schedule since the last one (and a loud NOT VALID on stderr past 25 % of the heartbeat timeout:
failovers then may be its doing). Commands typed on stdin steer the fleet, one per
line, each answered with one JSON line (`help` lists them): `kill-master broker-0003`, `hang NAME ID`,
`beliefs broker-0003`, `summary`, `quit`. With `--processes P` the groups are split over P child
processes (about 1,500 brokers each on a 2-core machine); commands naming a group go to the process
that holds it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from rmqc.cli._credentials import (
    ACCESS_KEY_ENV,
    SECRET_KEY_ENV,
    AccessKeyOption,
    SecretKeyOption,
    TlsCaOption,
    TlsCertOption,
    TlsKeyOption,
    TlsOption,
    credentials_of,
    tls_env,
    tls_of,
)
from rmqc.cli._render import ExitCode, fail

__all__ = ["sim_app", "split_groups"]

sim_app = typer.Typer(help="Simulated brokers for trying and load-testing rmqc.", no_args_is_help=True)

MAX_PROCESSES = 64  # children of one run; each needs a core's share and ~20k descriptors at most
QUIT = "quit"


def split_groups(groups: int, processes: int, first_group: int = 0) -> list[tuple[int, int]]:
    """(first group, count) for each process, as even as possible, none empty."""
    processes = max(1, min(processes, groups))
    base, extra = divmod(groups, processes)
    slices, start = [], first_group
    for index in range(processes):
        count = base + (1 if index < extra else 0)
        slices.append((start, count))
        start += count
    return slices


@sim_app.command("brokers")
def brokers_command(
    groups: Annotated[int, typer.Option("--groups", "-g", help="broker groups (broker-0000, broker-0001, ...)")] = 10,
    replicas: Annotated[int, typer.Option("--replicas", "-r", help="brokers per group")] = 3,
    controllers: Annotated[str, typer.Option("--controllers", "-a", envvar="RMQC_CONTROLLERS",
                                             help='"host:port;host:port"')] = "127.0.0.1:9878",
    processes: Annotated[int, typer.Option("--processes", "-p", help=(
        "child processes sharing the groups. One process carries about 1,500 brokers (500 groups x 3) "
        "on a 2-core machine (measured: 900 brokers at 1 heartbeat/s to 3 controllers use ~32 % of a core); "
        "beyond that it falls behind its schedule and its summaries say so"))] = 1,
    first_group: Annotated[int, typer.Option("--first-group", help="index of the first group")] = 0,
    state_dir: Annotated[Path, typer.Option("--state-dir",
                                            help="identity files, one dir per broker")] = Path("rmqc-sim"),
    cluster: Annotated[str, typer.Option("--cluster", help="broker cluster name")] = "DefaultCluster",
    topics_per_broker: Annotated[int, typer.Option("--topics-per-broker", help=(
        "topics each group registers with the rmqc nodes as its NameServer (103): "
        "broker-0000-topic-0, broker-0000-topic-1, ..."))] = 4,
    fast: Annotated[bool, typer.Option("--fast", help="short timings (poll 0.5 s, heartbeat timeout 3 s)")] = False,
    duration_s: Annotated[float | None, typer.Option("--duration", help="stop after this many seconds")] = None,
    report_every_s: Annotated[float, typer.Option("--report-every", help="seconds between summaries")] = 5.0,
    beliefs_out: Annotated[Path | None, typer.Option("--beliefs-out", help="write every belief here at exit")] = None,
    seed: Annotated[int | None, typer.Option("--seed", help="seed of the simulator's randomness")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="summaries as JSON lines")] = False,
    access_key: AccessKeyOption = None,
    secret_key: SecretKeyOption = None,
    tls: TlsOption = False,
    tls_ca: TlsCaOption = None,
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    quit_at_eof: Annotated[bool, typer.Option("--quit-at-eof", hidden=True,
                                              help="end when stdin ends (a child of --processes)")] = False,
) -> None:
    """Run simulated brokers (spec section 7 lifecycle) until Ctrl-C, `quit` or --duration.

    Commands typed on stdin, one per line, each answered with one JSON line: kill NAME ID,
    kill-master NAME, hang NAME ID (heartbeats stop, connections stay open), hang-master NAME,
    resume NAME ID, restart NAME ID (reuses its identity files), lag NAME ID (falls behind and
    leaves the SyncStateSet), catch-up NAME ID, beliefs [NAME ...], summary, help, quit.
    """
    from rmqc.cli.admin import parse_controllers

    addresses = parse_controllers(controllers)
    credentials = credentials_of(access_key, secret_key)
    ssl_context = tls_of(tls, tls_ca, tls_cert, tls_key)
    if groups < 1 or replicas < 1 or not 1 <= processes <= MAX_PROCESSES:
        fail(ExitCode.USAGE, f"need groups >= 1, replicas >= 1 and 1 <= processes <= {MAX_PROCESSES}")
    options = dict(groups=groups, replicas=replicas, state_dir=state_dir, cluster=cluster, fast=fast,
                   topics_per_broker=topics_per_broker,
                   duration_s=duration_s, report_every_s=report_every_s, seed=seed, as_json=as_json,
                   beliefs_out=beliefs_out, first_group=first_group, credentials=credentials,
                   ssl_context=ssl_context, tls_env=tls_env(tls, tls_ca, tls_cert, tls_key), quit_at_eof=quit_at_eof)
    import trio

    try:
        if processes == 1:
            trio.run(_run_fleet, addresses, options)
        else:
            trio.run(_run_children, controllers, processes, options)
    except KeyboardInterrupt:
        pass
    except Exception as error:  # FleetTooLarge and friends become a clear usage error
        from rmqc.errors import RmqcError

        if isinstance(error, RmqcError):
            fail(ExitCode.USAGE, str(error))
        raise


async def _run_fleet(addresses: list[str], options: dict[str, Any]) -> None:
    import trio

    from rmqc.brokersim import BrokerFleet, SimTiming, run_control_line

    timing = SimTiming.fast() if options["fast"] else SimTiming()
    async with BrokerFleet(addresses, groups=options["groups"], replicas=options["replicas"],
                           state_dir=options["state_dir"], cluster=options["cluster"],
                           first_group=options["first_group"], timing=timing, seed=options["seed"],
                           credentials=options["credentials"], ssl_context=options["ssl_context"],
                           topics_per_broker=options["topics_per_broker"]) as fleet:
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_report_loop, fleet, options)
                nursery.start_soon(_control_loop, _canceller(nursery.cancel_scope),
                                   lambda line: run_control_line(fleet, line), options["quit_at_eof"])
                with trio.move_on_after(options["duration_s"] if options["duration_s"] is not None else float("inf")):
                    await trio.sleep_forever()
                nursery.cancel_scope.cancel()
        finally:
            _report(fleet.summary(), options["as_json"], final=True)
            if options["beliefs_out"] is not None:
                import orjson

                beliefs = orjson.dumps([b.to_json() for b in fleet.beliefs()])
                await trio.Path(options["beliefs_out"]).write_bytes(beliefs)


async def _report_loop(fleet: Any, options: dict[str, Any]) -> None:
    import trio

    while True:
        await trio.sleep(options["report_every_s"])
        _report(fleet.summary(), options["as_json"])


def _report(summary: dict[str, Any], as_json: bool, final: bool = False) -> None:
    if not summary["lateness"]["valid"]:
        _warn_invalid(summary["lateness"])
    if as_json:
        _print_json({"summary": summary, "final": final})
        return
    from rmqc.cli._render import console

    late = summary["lateness"]
    window = late["window"]
    console().print(
        f"{'final: ' if final else ''}{summary['brokers']} brokers in {summary['groups']} groups: "
        f"{summary['running']} running, {summary['starting']} starting, {summary['hung']} hung, "
        f"{summary['killed']} killed; {summary['masters']} masters; "
        f"{summary['notConverged']} groups not converged {summary['problems'][:2] or ''}; "
        f"late by at most {window['heartbeat']['maxMs']:.0f} ms (heartbeats), {window['probe']['maxMs']:.0f} ms "
        f"(scheduler) since the last summary, {late['worstMs']:.0f} ms in the run, "
        f"{late['invalidWindows']} invalid summaries", markup=False, highlight=False,
        soft_wrap=True)  # one line, however long: scripts read it line by line


def _warn_invalid(lateness: dict[str, Any]) -> None:
    """On stderr for every invalid window (JSON or not), so no one reads its figures unwarned."""
    from rmqc.cli._render import error_console

    error_console().print(f"[bold red]SIMULATOR RESULTS NOT VALID since the last summary:[/] "
                          f"{lateness['invalidBecause']}; it fell behind its own schedule, so failovers then "
                          "may be its doing, not the "
                          "controllers' (use more --processes or a less loaded machine)")


def _print_json(document: Any) -> None:
    import orjson

    sys.stdout.write(orjson.dumps(document).decode() + "\n")
    sys.stdout.flush()


def _canceller(cancel_scope: Any) -> Any:
    async def stop() -> None:
        cancel_scope.cancel()

    return stop


async def _control_loop(stop: Any, execute: Any, quit_at_eof: bool = False) -> None:
    """Read command lines from stdin (in a thread: stdin may be a terminal); `quit` calls `stop()`,
    and so does EOF with `quit_at_eof`."""
    import trio

    while True:
        line = await trio.to_thread.run_sync(sys.stdin.readline, abandon_on_cancel=True)
        if not line:
            if quit_at_eof:
                await stop()
            return  # EOF: keep running until --duration or Ctrl-C
        if line.split()[:1] == [QUIT]:
            await stop()
            return
        _print_json(await execute(line))


def _child_env(options: dict[str, Any]) -> dict[str, str]:
    """The children sign with our account and use our TLS choice; both travel in their environment,
    not their argv (which every user of the machine can read)."""
    import os

    env = {**os.environ, **options["tls_env"]}
    credentials = options["credentials"]
    if credentials is not None:
        env[ACCESS_KEY_ENV], env[SECRET_KEY_ENV] = credentials.access_key, credentials.secret_key
    return env


async def _run_children(controllers: str, processes: int, options: dict[str, Any]) -> None:
    """One `rmqc sim brokers` child per slice of groups; their lines are relayed, commands routed."""
    import trio

    from rmqc.cli.dev import rmqc_argv

    slices = split_groups(options["groups"], processes, options["first_group"])
    children: list[Any] = []
    async with trio.open_nursery() as nursery:
        for index, (first, count) in enumerate(slices):
            argv = [*rmqc_argv(), "sim", "brokers", "--groups", str(count), "--first-group", str(first),
                    "--replicas", str(options["replicas"]), "--controllers", controllers, "--json",
                    "--state-dir", str(options["state_dir"]), "--cluster", options["cluster"],
                    "--report-every", str(options["report_every_s"]), "--quit-at-eof",
                    "--topics-per-broker", str(options["topics_per_broker"])]
            if options["fast"]:
                argv.append("--fast")
            if options["seed"] is not None:
                argv += ["--seed", str(options["seed"] + index)]
            if options["duration_s"] is not None:
                argv += ["--duration", str(options["duration_s"])]
            if options["beliefs_out"] is not None:
                argv += ["--beliefs-out", f"{options['beliefs_out']}.{index}"]
            # A child ends when its stdin (this process's pipe) closes, i.e. when this process ends.
            # Not PR_SET_PDEATHSIG (end_with_parent): it fires when the *thread* that started the
            # child ends, and open_process starts it in a worker thread that exits when idle, which
            # killed every child ~10 s after start whenever this process's own stdin was at EOF.
            child = await trio.lowlevel.open_process(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                                     env=_child_env(options))
            children.append(child)
            nursery.start_soon(_relay, index, child)

        async def route(line: str) -> dict[str, Any]:
            targets = _targets(line, slices)
            for index in targets:
                await children[index].stdin.send_all(line.rstrip("\n").encode() + b"\n")
            return {"ok": True, "routedTo": targets}

        async def stop_children() -> None:
            for index in range(len(children)):
                await route(f"{QUIT} broker-{slices[index][0]:04d}")

        nursery.start_soon(_control_loop, stop_children, route, options["quit_at_eof"])
        try:
            for child in children:
                await child.wait()
        finally:
            for child in children:
                if child.returncode is None:
                    child.terminate()
        nursery.cancel_scope.cancel()


def _targets(line: str, slices: list[tuple[int, int]]) -> list[int]:
    """The children holding the groups a command names (all of them when it names none)."""
    names = [word for word in line.split()[1:] if word.startswith("broker-") and word[7:].isdigit()]
    if not names:
        return list(range(len(slices)))
    wanted = {int(name[7:]) for name in names}
    return [i for i, (first, count) in enumerate(slices) if any(first <= g < first + count for g in wanted)]


async def _relay(index: int, child: Any) -> None:
    buffer = b""
    while chunk := await child.stdout.receive_some(65536):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            sys.stdout.write(f'{{"process":{index},"line":{line.decode(errors="replace")}}}\n'
                             if line.startswith(b"{") else line.decode(errors="replace") + "\n")
        sys.stdout.flush()
