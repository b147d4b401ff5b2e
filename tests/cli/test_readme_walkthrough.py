"""The README's "Operating rmqc" session, run as written: its commands are read from README.md, so
the README cannot drift from what rmqc does. Shortened for CI: 8 broker groups instead of 200
(broker-0007 is the group the session follows), free ports instead of 9876-9878, and the
simulator's --fast timings with JSON lines to read its answers. The history of the session is
then exported as the "History analysis" section does (its `rmqc analyze` runs in tests/pipeline).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_sim_process import SIM_CONVERGE_S, SimProcess, _unwrap, converged_summary

from rmqc.cli.dev import end_with_parent, rmqc_argv
from rmqc.launcher import consecutive_free_ports

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
README_PORTS = (9876, 9877, 9878)
CI_GROUPS = "8"
START_S = 60.0


@dataclass
class Step:
    line: str  # the command as the README writes it
    terminal: int  # "in a second terminal" opens terminal 2: a shell with its own environment
    expected: list[str]  # the "#    ..." lines under it: what the README says it prints


def walkthrough() -> list[Step]:
    """The commands of the README's "Operating rmqc" block, each with the output lines it shows."""
    block = README.read_text().split("## Operating rmqc", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    steps: list[Step] = []
    terminal, after_command = 1, False
    for raw in block.splitlines():
        line = raw.strip()
        if re.match(r"# \d+\. in a \w+ terminal", line):
            terminal += 1
        if line.startswith("#    ") and after_command:  # output lines follow their command
            steps[-1].expected.append(line[1:].strip())
            continue
        after_command = bool(line) and not line.startswith("#")
        if after_command:
            steps.append(Step(line.split("  #")[0].strip(), terminal, []))
    return steps


class Session:
    """Runs README steps in a working directory, with the README's ports mapped to free ones."""

    def __init__(self, workdir: Path, base_port: int) -> None:
        self.workdir = workdir
        self.ports = {str(p): str(base_port + i) for i, p in enumerate(README_PORTS)}
        self.terminals: dict[int, dict[str, str]] = {}
        self.cluster: subprocess.Popen[str] | None = None
        self.cluster_out = (workdir / "dev-cluster.out").open("w")
        self.sim: SimProcess | None = None

    def argv(self, line: str) -> list[str]:
        for readme_port, port in self.ports.items():
            line = line.replace(readme_port, port)
        words = shlex.split(line)
        assert words[0] == ".venv/bin/rmqc", line
        return [*rmqc_argv(), *words[1:]]

    def env(self, step: Step) -> dict[str, str]:
        """The environment of the step's terminal: a fresh shell's (no RMQC_CONTROLLERS) until it exports."""
        if step.terminal not in self.terminals:
            self.terminals[step.terminal] = {k: v for k, v in os.environ.items() if k != "RMQC_CONTROLLERS"}
        return self.terminals[step.terminal]

    def export(self, step: Step) -> None:
        name, _, value = step.line.removeprefix("export ").partition("=")
        for readme_port, port in self.ports.items():
            value = value.replace(readme_port, port)
        self.env(step)[name] = value.strip('"')

    def run(self, step: Step, *extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*self.argv(step.line), *extra], cwd=self.workdir, env=self.env(step),
                              capture_output=True, text=True, timeout=120)

    def start_cluster(self, step: Step) -> None:
        """Start `rmqc dev cluster` and wait, as its user does, for the line it prints once every node
        listens. The next step must not start earlier: the simulator's brokers take ports the kernel
        hands out, and one of them could be a port a node has not bound yet (that node would then
        refuse to start, and the cluster exit 1)."""
        self.cluster = subprocess.Popen(self.argv(step.line), cwd=self.workdir, env=self.env(step), text=True,
                                        stdout=self.cluster_out, stderr=subprocess.STDOUT,
                                        preexec_fn=end_with_parent)
        deadline = time.monotonic() + START_S
        while "controllers: " not in self.cluster_output():
            assert self.cluster.poll() is None, f"dev cluster exited {self.cluster.poll()}: {self.cluster_output()}"
            assert time.monotonic() < deadline, f"no controllers line within {START_S} s: {self.cluster_output()}"
            time.sleep(0.1)

    def cluster_output(self) -> str:
        return (self.workdir / "dev-cluster.out").read_text()

    def start_sim(self, step: Step) -> None:
        words = shlex.split(step.line)
        options = dict(zip(words[3::2], words[4::2], strict=True))  # rmqc sim brokers --opt value ...
        assert options["--replicas"] == "3", step.line
        self.sim = SimProcess(self.env(step)["RMQC_CONTROLLERS"], self.workdir / options["--state-dir"],
                              "--groups", CI_GROUPS, "--replicas", options["--replicas"])

    def stop(self) -> None:
        sim, cluster, self.sim, self.cluster = self.sim, self.cluster, None, None
        try:
            if sim is not None:
                assert sim.quit() == 0
            if cluster is not None:
                cluster.send_signal(signal.SIGINT)  # the README's Ctrl-C
                assert cluster.wait(timeout=60) == 0, self.cluster_output()
        finally:  # closed even when a check fails, so no warning about it lands in a later test
            self.cluster_out.close()


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Session]:
    running = Session(tmp_path, consecutive_free_ports(len(README_PORTS)))
    try:
        yield running
    finally:
        running.stop()


def wait_until_cluster_answers(session: Session, step: Step) -> subprocess.CompletedProcess[str]:
    """`rmqc status` once every node of the cluster answers and all name one leader (bounded)."""
    deadline = time.monotonic() + START_S
    while True:
        done = session.run(step, "--json")
        views = json.loads(done.stdout or "[]")
        leaders = {view.get("status", {}).get("leader") for view in views}
        if done.returncode == 0 and len(views) == len(README_PORTS) and len(leaders) == 1 and None not in leaders:
            return session.run(step)
        assert time.monotonic() < deadline, done.stdout + done.stderr
        time.sleep(0.2)


def epochs_of(text: str) -> dict[str, str]:
    """`broker-0007: master 1 ...  masterEpoch 1  syncStateSetEpoch 2  in sync 3` -> their values."""
    return dict(re.findall(r"\b(master|masterEpoch|syncStateSetEpoch|in sync) (\d+)", text))


def test_the_readme_walkthrough_runs_as_written(session: Session) -> None:
    steps = walkthrough()
    assert [s.line.split()[:3] for s in steps if s.line.startswith(".venv")][:2] == [
        [".venv/bin/rmqc", "dev", "cluster"], [".venv/bin/rmqc", "sim", "brokers"]]
    sync_state_sets, routes = [], []
    for step in steps:
        words = step.line.split()
        if step.line.startswith("export "):
            session.export(step)
        elif words[1:3] == ["dev", "cluster"]:
            session.start_cluster(step)
        elif words[1:3] == ["sim", "brokers"]:
            session.start_sim(step)
            assert session.sim is not None
            session.sim.wait_for(lambda line: converged_summary(line, 3 * int(CI_GROUPS)), SIM_CONVERGE_S,
                                 "every group converged")
        elif words[1] == "status":
            done = wait_until_cluster_answers(session, step)
            assert done.returncode == 0 and "leader" in done.stdout, done.stderr
        elif words[1:3] == ["admin", "sync-state-set"]:
            sync_state_sets.append(sync_state_set(session, step))
        elif words[1:4] == ["admin", "topic", "describe"]:
            routes.append(route_names_the_controllers_master(session, step))
        elif words[0] == "kill-master":
            assert session.sim is not None
            killed = _unwrap(session.sim.ask(step.line, "brokerId"))
            assert killed["ok"] and killed["command"] == "kill-master" and killed["brokerId"] == 1
        elif words[1] == "events":
            failover_explained(session, step)
        elif words[0] == "beliefs":
            assert session.sim is not None
            live = new_master_named_by_the_live(session.sim, words[1])
            assert len(live) == 2 and {b["masterEpoch"] for b in live} == {2}
        else:
            raise AssertionError(f"a README step this test does not know: {step.line!r}")
    assert len(sync_state_sets) == 2
    assert len(routes) == 2 and routes[0] != routes[1], routes  # the route followed the failover
    assert "controllers: 127.0.0.1:" in session.cluster_output()
    session.stop()
    export_the_history(session)


def route_names_the_controllers_master(session: Session, step: Step) -> str:
    """The topic's route (105, any node) names as master the group's master that `admin
    sync-state-set` shows, with the queues and perm the README shows; that master's address."""
    topic = step.line.split()[-1]
    group = topic.rsplit("-topic-", 1)[0]
    read, write, perm = next(line for line in step.expected if "DefaultCluster" in line).split()[-3:]
    ask_controller = Step(f".venv/bin/rmqc admin sync-state-set {group}", step.terminal, [])
    deadline = time.monotonic() + SIM_CONVERGE_S
    while True:  # a new master registers (103) within a moment of its election
        done, controller = session.run(step, "--json"), session.run(ask_controller)
        route = json.loads(done.stdout)["route"] if done.returncode == 0 else None
        master = re.search(r"\bmaster \d+ (\S+)", controller.stdout)
        queues = {q["brokerName"]: q for q in route["queueDatas"]} if route else {}
        addrs = {b["brokerName"]: b["brokerAddrs"] for b in route["brokerDatas"]} if route else {}
        if master and group in queues and addrs.get(group, {}).get("0") == master[1]:
            break
        assert time.monotonic() < deadline, (done.stdout + done.stderr, controller.stdout)
        time.sleep(0.2)
    q = queues[group]
    assert (str(q["readQueueNums"]), str(q["writeQueueNums"]), str(q["perm"])) == (read, write, perm), route
    return master[1]


def sync_state_set(session: Session, step: Step) -> dict[str, str]:
    """The group's master and epochs, which must be those the README shows under the command; where
    the README notes that a value depends on timing ("(syncStateSetEpoch 2 when ..., 3 when ...)"),
    any value it names."""
    want = epochs_of(step.expected[0])
    allowed = {name: {want.pop(name)} | set(re.findall(r"\b(\d+) when", note))
               for note in step.expected[1:] if note.startswith("(")
               for name in re.findall(r"^\((\w+)", note)}
    deadline = time.monotonic() + SIM_CONVERGE_S
    while True:  # after a failover the controller learns of the new master within a moment
        done = session.run(step)
        assert done.returncode == 0, done.stderr
        got = epochs_of(done.stdout)
        if {k: got.get(k) for k in want} == want or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert {k: got.get(k) for k in want} == want, (step.expected[0], done.stdout)
    assert all(got.get(name) in values for name, values in allowed.items()), (step.expected, done.stdout)
    return got


def failover_explained(session: Session, step: Step) -> None:
    """`rmqc events` shows the failover the README's kill caused: the group, the old master, the
    reason (its connections closed) and the timeline, as the line under the command does."""
    want = re.search(r"failover (\S+): master 1 -> \d at masterEpoch 2; reason (\w+);", step.expected[0])
    assert want is not None, step.expected
    deadline = time.monotonic() + SIM_CONVERGE_S
    while True:  # the node asked applies the election within a moment of the leader
        done = session.run(step)
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stdout.splitlines() if f"failover {want[1]}: master 1 -> " in line]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(lines) == 1 and f"reason {want[2]};" in lines[0] and "committed +" in lines[0], done.stdout


def new_master_named_by_the_live(sim: SimProcess, group: str) -> list[dict]:
    deadline = time.monotonic() + SIM_CONVERGE_S
    while True:
        live = [b for b in sim.beliefs(group) if b["status"] == "running"]
        if len({b["masterBrokerId"] for b in live}) == 1 and {b["masterEpoch"] for b in live} == {2}:
            return live
        assert time.monotonic() < deadline, live
        time.sleep(0.2)


def export_the_history(session: Session) -> None:
    """The README's export line, pointed at the session's node n0 (rmqc-dev/n0 rather than the
    rmqc-data of `make serve`)."""
    (line,) = [text for text in README.read_text().splitlines() if ".venv/bin/rmqc log export" in text]
    step = Step(line.split("  #")[0].strip().replace("rmqc-data", "rmqc-dev/n0"), 1, [])
    done = session.run(step)
    assert done.returncode == 0, done.stderr
    table = pq.read_table(session.workdir / "n0.parquet").to_pylist()
    assert {(r["controller_cluster"], r["node_id"]) for r in table} == {("rmqc", "n0")}
    failover = [r for r in table if r["trigger"] == "controller" and r["broker_name"] == "broker-0007"]
    assert failover and failover[0]["master_last_alive_ms"] is not None


WALKTHROUGH_OUTPUTS = ("rmqc-dev/", "rmqc-sim/", "analysis/", "n0.parquet")


def test_walkthrough_outputs_are_ignored_by_git_and_removed_by_make_clean() -> None:
    root = README.parent
    ignored = subprocess.run(["git", "check-ignore", *WALKTHROUGH_OUTPUTS], cwd=root, capture_output=True,
                             text=True, timeout=30)
    assert ignored.stdout.split() == list(WALKTHROUGH_OUTPUTS), ignored.stderr
    dry_run = subprocess.run(["make", "-n", "clean"], cwd=root, capture_output=True, text=True, timeout=30)
    removed = dry_run.stdout.split()
    assert all(name in removed for name in ("rmqc-dev", "rmqc-sim", "analysis", "*.parquet")), dry_run.stdout
