"""How long two brokers of one group both believe they are MASTER after an election whose old master
is still alive (issue 22): the old master holds on until the leader's 1008 reaches it or its next
1004 poll (every 5 s with Java's timings) tells it.

Run: .venv/bin/python bench/bench_two_masters.py [--groups G] [--elections E] [--spacing-s S]
Starts 3 `rmqc serve` nodes on loopback and an in-process fleet (rmqc.brokersim) of G groups x 3
brokers with Java's default timings, waits until every group has one master and a full SyncStateSet,
then, every S seconds, picks the next idle converged group and designates one of its live in-sync
SLAVEs master with a 1002 (designateElect, as `rmqc admin elect-master`). One watcher task reads the
roles of the brokers concerned every ~1 ms (the fleet's own TwoMasters sees only its 200 ms
replication ticks) and reports per election:
  (a) from sending the 1002 until the new master believes MASTER;
  (b) from then until the old master no longer believes MASTER: the two-master belief (0 when the
      old master stepped down first);
and whether the old master learned it from a 1008 (its count of 1008s read rose) or from its poll.
The second pass drops every 1008 that reaches the old master until it has stepped down (a lost
notification; the frame is read and ignored in this process, nothing outside bench/ changes), which
shows the bound the 1004 poll gives. Elections overlap only across groups, never within one.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench._rmqc import RmqcCluster
from bench._stats import fmt, percentile, summarise_ms
from rmqc.brokersim import BrokerFleet, Role, SimBroker, convergence_problems
from rmqc.client import ClientError, ControllerClient
from rmqc.remoting import RemotingCommand, ResponseCode

WATCH_S = 0.001  # how often the watcher reads the brokers' roles
CONVERGE_BOUND_S = 90.0  # the fleet's start-up (and its settling between the passes)
# One election gives up after this: three 1004 poll periods of Java's timings, so a missed 1008
# alone never times out an election, only a broker that neither reads 1008 nor polls.
ELECTION_BOUND_S = 15.0
PICK_BOUND_S = 30.0  # waiting for some group to be idle and converged before the next election
RPC_TIMEOUT_MS = 5000


@dataclass
class Election:
    name: str
    old: SimBroker
    new: SimBroker
    old_epoch: int
    old_notifications: int  # 1008s the old master had read before the 1002
    new_notifications: int
    sent: float  # time.perf_counter() just before the 1002 went out
    answered: float | None = None
    new_master_at: float | None = None
    old_down_at: float | None = None
    old_learned_by: str = ""
    new_learned_by: str = ""
    refused: str = ""

    @property
    def done(self) -> bool:
        return bool(self.refused) or (self.new_master_at is not None and self.old_down_at is not None)


def learned_by(broker: SimBroker, notifications_before: int) -> str:
    """A role change with a 1008 read since the 1002 came from it (within one watcher tick both a
    1008 and a poll answer may have landed; the 1008 is then credited)."""
    return "1008" if broker.notifications > notifications_before else "1004 poll"


def observe(election: Election, now: float) -> None:
    if (election.new_master_at is None and election.new.role is Role.MASTER
            and election.new.master_epoch > election.old_epoch):
        election.new_master_at = now
        election.new_learned_by = learned_by(election.new, election.new_notifications)
    if election.old_down_at is None and election.old.role is not Role.MASTER:
        election.old_down_at = now
        election.old_learned_by = learned_by(election.old, election.old_notifications)


async def watch(pending: list[Election], finished: list[Election], on_old_down: Callable[[Election], None]) -> None:
    """Every WATCH_S: stamp what each pending election's brokers now believe; done ones move on."""
    while True:
        now = time.perf_counter()
        for election in list(pending):
            had_old_down = election.old_down_at is not None
            observe(election, now)
            if election.old_down_at is not None and not had_old_down:
                on_old_down(election)
            if election.done:
                pending.remove(election)
                finished.append(election)
            elif now - election.sent > ELECTION_BOUND_S:
                raise TimeoutError(f"{election.name}: not settled {ELECTION_BOUND_S} s after the 1002 "
                                   f"(new master at {election.new_master_at}, old down at {election.old_down_at}; "
                                   f"old {election.old.belief()}, new {election.new.belief()})")
        await trio.sleep(WATCH_S)


@contextmanager
def notifications_dropped(broker: SimBroker) -> Iterator[list[float]]:
    """While open, every 1008 the broker reads is ignored (a lost notification). The broker's
    reader calls `self.on_notification`, so an instance attribute shadows the method."""
    dropped: list[float] = []

    def drop(command: RemotingCommand) -> None:
        dropped.append(time.perf_counter())

    vars(broker)["on_notification"] = drop
    try:
        yield dropped
    finally:
        del vars(broker)["on_notification"]


def candidate(fleet: BrokerFleet, name: str) -> tuple[SimBroker, SimBroker] | None:
    """(old master, a live SLAVE in its SyncStateSet) of a converged group with a full set; None otherwise."""
    if convergence_problems(fleet.beliefs([name]), full_sync_state_sets=True):
        return None
    master_id = fleet.master_of(name)
    if master_id is None:
        return None
    old = fleet.broker(name, master_id)
    slaves = [b for b in fleet.group(name)
              if b.serving and b.role is Role.SLAVE and b.broker_id in old.sync_state_set]
    return (old, slaves[0]) if slaves else None


async def pick(fleet: BrokerFleet, busy: set[str], turn: Iterator[str]) -> tuple[str, SimBroker, SimBroker]:
    """The next group in round-robin order that no election holds and that has converged."""
    with trio.fail_after(PICK_BOUND_S):
        while True:
            for _ in fleet.group_names:
                name = next(turn)
                if name not in busy and (chosen := candidate(fleet, name)) is not None:
                    return name, *chosen
            await trio.sleep(0.01)


def cycle(names: list[str]) -> Iterator[str]:
    while True:
        yield from names


async def elect(client: ControllerClient, fleet: BrokerFleet, election: Election) -> None:
    assert election.new.broker_id is not None
    try:
        answer = await client.elect_master(fleet.cluster, election.name, election.new.broker_id, designate=True)
    except ClientError as error:
        election.refused = f"1002: {error}"
        return
    election.answered = time.perf_counter()
    if answer.code != ResponseCode.SUCCESS:
        election.refused = f"1002 answered {answer.code}: {answer.remark}"


async def run_pass(client: ControllerClient, fleet: BrokerFleet, args: argparse.Namespace,
                   drop_old_notifications: bool) -> tuple[list[Election], int]:
    """`args.elections` elections, one started every `args.spacing_s`; (finished elections, 1008s dropped)."""
    pending: list[Election] = []
    finished: list[Election] = []
    drops: dict[str, tuple[ExitStack, list[float]]] = {}  # group -> its old master's dropping
    dropped_total = [0]

    def on_old_down(election: Election) -> None:
        if election.name in drops:
            stack, dropped = drops.pop(election.name)
            stack.close()
            dropped_total[0] += len(dropped)

    turn = cycle(fleet.group_names)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, pending, finished, on_old_down)
        for _ in range(args.elections):
            busy = {e.name for e in pending}
            name, old, new = await pick(fleet, busy, turn)
            if drop_old_notifications:
                stack = ExitStack()
                drops[name] = (stack, stack.enter_context(notifications_dropped(old)))
            election = Election(name, old, new, old.master_epoch, old.notifications, new.notifications,
                                time.perf_counter())
            pending.append(election)
            nursery.start_soon(elect, client, fleet, election)
            await trio.sleep(args.spacing_s)
        with trio.fail_after(ELECTION_BOUND_S + 5):
            while pending:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    for name in list(drops):  # refused elections: their old master never stepped down
        drops.pop(name)[0].close()
    return finished, dropped_total[0]


def report(title: str, elections: list[Election], dropped: int, fleet: BrokerFleet, episodes_before: int) -> None:
    done = [e for e in elections if not e.refused]
    refused = Counter(e.refused[:60] for e in elections if e.refused)
    to_new = [1000 * (e.new_master_at - e.sent) for e in done if e.new_master_at is not None]
    # old master's step-down minus new master's MASTER: negative when the old one stepped down first
    gaps = [1000 * (e.old_down_at - e.new_master_at) for e in done
            if e.old_down_at is not None and e.new_master_at is not None]
    overlap = [max(0.0, gap) for gap in gaps]
    answers = [1000 * (e.answered - e.sent) for e in done if e.answered is not None]
    print(f"{title}: {len(done)} elections" + (f", refused {dict(refused)}" if refused else ""))
    for label, samples in (("1002 sent -> its answer", answers), ("(a) 1002 sent -> new master MASTER", to_new),
                           ("(b) two masters (new MASTER -> old not)", overlap)):
        s = summarise_ms(samples)
        print(f"  {label:42s} n {s['n']:3d}  p50 {fmt(s['p50_ms'])} ms  p99 {fmt(s['p99_ms'])} ms  "
              f"max {fmt(s['max_ms'])} ms")
    print(f"  old master's step-down minus new master's MASTER: min {fmt(min(gaps, default=math.nan))} ms, "
          f"p50 {fmt(percentile(gaps, 0.5))} ms, max {fmt(max(gaps, default=math.nan))} ms (one watcher tick "
          f"~{1000 * WATCH_S:g} ms)")
    print(f"  two-master beliefs > 0 ms: {sum(1 for v in overlap if v > 0)} of {len(overlap)}; "
          f"old master learned by {dict(Counter(e.old_learned_by for e in done))}, "
          f"new master by {dict(Counter(e.new_learned_by for e in done))}"
          + (f"; 1008s dropped at old masters: {dropped}" if dropped else ""))
    longest = max(done, key=lambda e: (e.old_down_at or 0) - (e.new_master_at or 0), default=None)
    if longest is not None and longest.old_down_at is not None and longest.new_master_at is not None:
        print(f"  longest: {longest.name}, old master {longest.old.broker_id} down "
              f"{1000 * (longest.old_down_at - longest.new_master_at):.1f} ms after new master "
              f"{longest.new.broker_id} (by {longest.old_learned_by})")
    print(f"  the fleet's own 200 ms view: {fleet.two_masters.episodes - episodes_before} two-master episodes, "
          f"longest so far {fleet.two_masters.longest_ms} ms; simulator lateness {lateness(fleet)}")


def lateness(fleet: BrokerFleet) -> str:
    window = fleet.lateness.take_window()
    verdict = "valid" if window["valid"] else f"NOT VALID: {window['invalidBecause']}"
    return f"worst {window['windowMaxMs']} ms in this pass ({verdict})"


async def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-two-masters-") as root:
        cluster = RmqcCluster(Path(root), 3)
        try:
            await cluster.start()
            async with BrokerFleet(cluster.addresses, groups=args.groups, replicas=3,
                                   state_dir=Path(root) / "brokers", seed=args.seed) as fleet:
                started = await fleet.wait_converged(CONVERGE_BOUND_S, full_sync_state_sets=True)
                print(f"3 rmqc serve nodes, {args.groups} groups x 3 brokers (Java timings: heartbeat "
                      f"{fleet.timing.heartbeat_interval_ms} ms, 1004 poll {fleet.timing.poll_interval_ms} ms), "
                      f"seed {fleet.seed}: converged {started:.1f} s after the start; "
                      f"simulator lateness {lateness(fleet)}")
                async with ControllerClient(cluster.addresses, timeout_ms=RPC_TIMEOUT_MS) as client:
                    for title, drop in (("1008 delivered", False), ("old master's 1008 dropped", True)):
                        if drop and args.no_drop_pass:
                            continue
                        await fleet.wait_converged(CONVERGE_BOUND_S, full_sync_state_sets=True)
                        episodes = fleet.two_masters.episodes
                        elections, dropped = await run_pass(client, fleet, args, drop)
                        report(title, elections, dropped, fleet, episodes)
        finally:
            cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=40)
    parser.add_argument("--elections", type=int, default=40, help="per pass")
    parser.add_argument("--spacing-s", type=float, default=0.25, help="between the starts of two elections")
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--no-drop-pass", action="store_true", help="skip the pass with 1008s dropped")
    trio.run(bench, parser.parse_args())


if __name__ == "__main__":
    main()
