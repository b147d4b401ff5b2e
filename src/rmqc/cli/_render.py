"""Rich output of `rmqc admin`, `rmqc status`, `rmqc dev`, `rmqc sim` and `rmqc chaos`: every table, every error
line and the exit codes in one module, so the commands themselves only parse, call and render."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

import orjson
import typer
from rich.console import Console, Group
from rich.table import Table

from rmqc.remoting import RemotingCommand, ResponseCode

from ._exit import ExitCode

__all__ = [
    "ChaosProgress",
    "ExitCode",
    "LiveView",
    "answer_json",
    "console",
    "controller_refused",
    "emit_json",
    "fail",
    "hint_for",
    "render_chaos_summary",
    "render_cluster_processes",
    "render_config",
    "render_elected",
    "render_event",
    "render_metadata",
    "render_rows",
    "render_status",
    "render_sync_state_data",
    "render_topic_route",
    "status_table",
]

WIDE_CONSOLE = 160  # when not on a terminal (pipes, tests): wide enough that addresses never wrap


# What an operator can do about each answer (the spec's remark says what happened, this says what next).
HINTS: dict[int, str] = {
    ResponseCode.SYSTEM_ERROR: "the controller failed internally; see its log, then retry",
    ResponseCode.SYSTEM_BUSY: "the controller is overloaded; retry in a moment",
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
        "this node does not serve that request (a Java controller or an older rmqc?)",
    ResponseCode.NO_PERMISSION: "this account or address may not make that request (docs/security.md)",
    ResponseCode.CONTROLLER_NOT_LEADER:
        "this node is not the leader; pass every controller with --controllers, or wait for an election",
    ResponseCode.CONTROLLER_MASTER_NOT_AVAILABLE:
        "no replica of the group is alive and in sync; start a broker of the group",
    ResponseCode.CONTROLLER_BROKER_NOT_ALIVE:
        "a named broker is not heartbeating; check that it runs and reaches the controllers",
    ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
        "the broker group is unknown; check the name with `rmqc admin sync-state-set --all`",
    ResponseCode.INVALID_PARAMETER:
        "check the key's spelling and the value's type; `rmqc admin config get` lists every key with its value",
    ResponseCode.CONTROLLER_BROKER_NEED_TO_BE_REGISTERED:
        "the group or broker id is not registered; brokers register themselves when they start",
    ResponseCode.CONTROLLER_MASTER_STILL_EXIST: "that broker is already the master; nothing to do",
    ResponseCode.CONTROLLER_ELECT_MASTER_FAILED:
        "the broker must be alive and in the SyncStateSet (or set enableElectUncleanMaster=true)",
    ResponseCode.CONTROLLER_BROKER_ID_INVALID: "that broker id is taken; let the broker ask for one (1012)",
}


def console() -> Console:
    """A console on the current stdout (CliRunner swaps it), wide when stdout is not a terminal."""
    return Console(file=sys.stdout, width=None if sys.stdout.isatty() else WIDE_CONSOLE, highlight=False)


def error_console() -> Console:
    return Console(file=sys.stderr, width=None if sys.stderr.isatty() else WIDE_CONSOLE, highlight=False)


# Answers whose one code covers several causes: the remark (Java's fixed text) says which.
SIGN_WITH = "--access-key and --secret-key (or RMQC_ACCESS_KEY and RMQC_SECRET_KEY)"
REMARK_HINTS: tuple[tuple[int, str, str], ...] = (
    # 1009 of a key in configBlackList (Java's text), and the ACL's refusals (rmqc.acl Refusal)
    (ResponseCode.NO_PERMISSION, "black list",
     "the key is in configBlackList and cannot be changed at run time; edit the config file and restart"),
    (ResponseCode.NO_PERMISSION, "address not allowed",
     f"the nodes require signed requests: sign with {SIGN_WITH}, an account of their plain_acl.yml "
     "(docs/security.md)"),
    (ResponseCode.NO_PERMISSION, "unknown access key",
     f"check the access key given with {SIGN_WITH} against the nodes' plain_acl.yml"),
    (ResponseCode.NO_PERMISSION, "bad signature",
     f"check the secret key given with {SIGN_WITH}: it must be the access key's secret in plain_acl.yml"),
    (ResponseCode.NO_PERMISSION, "not an admin",
     f"sign with an account that has admin: true in the nodes' plain_acl.yml ({SIGN_WITH})"),
    (ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "is not existed",
     "the broker group is unknown; check the name with `rmqc admin sync-state-set --all`"),
    (ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "still alive",
     "stop the broker(s) first, or pass --clean-living to remove them anyway"),
    (ResponseCode.CONTROLLER_INVALID_CLEAN_BROKER_METADATA, "NumberFormatException",
     'give the ids as numbers, like -b "1;2"'),
    # rmqc's own operations (rmqc.replica._operations) refuse with code 1 and say why
    (ResponseCode.SYSTEM_ERROR, "unknown node id", "name one of the voters (`rmqc status` lists them)"),
    (ResponseCode.SYSTEM_ERROR, "is a learner", "only a voter can lead: name a voter"),
    (ResponseCode.SYSTEM_ERROR, "is the only voter", "a group of one node has no one to hand the leadership to"),
    (ResponseCode.SYSTEM_ERROR, "already in progress", "wait for that transfer's answer, then retry"),
    (ResponseCode.SYSTEM_ERROR, "refuses to transfer until", "retry in a moment (docs/operations.md)"),
    (ResponseCode.SYSTEM_ERROR, "was just elected", "retry in a moment"),
    (ResponseCode.SYSTEM_ERROR, "leadership not transferred",
     "look at the target in `rmqc status` (lag, alarms, unreachable) and retry, or name another voter"),
    (ResponseCode.SYSTEM_ERROR, "more than one frame carries", "see the remark; docs/operations.md, Backup"),
    # membership changes (rmqc.replica._membership): nothing changed
    (ResponseCode.SYSTEM_ERROR, "is pending", "one change at a time: wait for the pending one (shown under "
                                              "`rmqc status`), then retry"),
    (ResponseCode.SYSTEM_ERROR, "is not applied yet", "one change at a time: retry in a moment"),
    (ResponseCode.SYSTEM_ERROR, "is the last voter", "add and promote another node first (or replace it)"),
    (ResponseCode.SYSTEM_ERROR, "has not caught up",
     "wait until `rmqc admin members list` shows its lag near 0, then retry (replace waits by itself)"),
    (ResponseCode.SYSTEM_ERROR, "unknown id", "name a member: `rmqc admin members list`"),
    (ResponseCode.SYSTEM_ERROR, "is already a member with address",
     "an id keeps its address: remove it first, or add the node under a new id"),
    (ResponseCode.SYSTEM_ERROR, "is already used by member", "give the new node another host:port"),
    (ResponseCode.SYSTEM_ERROR, "not removed: leadership not transferred",
     "look at the other voters in `rmqc status` (lag, alarms, unreachable) and retry"),
)


def hint_for(code: int, remark: str | None = None) -> str:
    for hinted_code, marker, hint in REMARK_HINTS:
        if code == hinted_code and marker in (remark or ""):
            return hint
    return HINTS.get(code, "see the controller's remark")


def code_name(code: int) -> str:
    try:
        return f"{ResponseCode(code).name} ({code})"
    except ValueError:
        return str(code)


def fail(code: ExitCode, message: str, *, hint: str | None = None) -> NoReturn:
    """Print `message` (and what to do) on stderr and exit with `code`."""
    out = error_console()
    out.print(f"[bold red]error:[/] {message}")
    if hint:
        out.print(f"[yellow]what to do:[/] {hint}")
    raise typer.Exit(int(code))


def controller_refused(answer: RemotingCommand, what: str, *, as_json: bool = False) -> NoReturn:
    """Exit 1 for a non-zero answer: the code, the controller's remark, and what to do."""
    if as_json:
        emit_json(answer_json(answer))  # and the reason on stderr, as without --json
    remark = (answer.remark or "").strip() or "no remark"
    fail(ExitCode.REFUSED, f"{what}: the controller answered {code_name(answer.code)}: {remark}",
         hint=hint_for(answer.code, answer.remark))


def emit_json(document: Any) -> None:
    sys.stdout.write(orjson.dumps(document, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n")
    sys.stdout.flush()


def answer_json(answer: RemotingCommand, body: Any = None) -> dict[str, Any]:
    return {"code": answer.code, "remark": answer.remark, "extFields": answer.ext_fields or {}, "body": body}


class LiveView:
    """A view redrawn in place on a terminal (rich.live); elsewhere (a pipe, a log file) each
    update that differs from the last one printed goes below it, so `--watch | tee file` records
    every change, and an idle `rmqc dev cluster` does not write its table into its log every second."""

    def __init__(self, renderable: Any) -> None:
        from rich.live import Live

        self._console = console()
        self._live = Live(renderable, console=self._console, auto_refresh=False) if self._console.is_terminal else None
        self._printed = ""
        if self._live is None:
            self._print_if_changed(renderable)

    def _print_if_changed(self, renderable: Any) -> None:
        with self._console.capture() as capture:
            self._console.print(renderable)
        text = capture.get()
        if text != self._printed:
            self._printed = text
            self._console.file.write(text)
            self._console.file.flush()

    def __enter__(self) -> LiveView:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc_info)

    def update(self, renderable: Any) -> None:
        if self._live is not None:
            self._live.update(renderable, refresh=True)
        else:
            self._print_if_changed(renderable)


# ---- admin ---------------------------------------------------------------------------------------


def render_metadata(answer: RemotingCommand, node: str) -> None:
    table = Table(title=f"controller metadata (asked {node})", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for label, key in (("group", "group"), ("leader id", "controllerLeaderId"),
                       ("leader address", "controllerLeaderAddress"), ("answering node is leader", "isLeader")):
        table.add_row(label, answer.ext(key) or "null")
    for peer in filter(None, (answer.ext("peers") or "").split(";")):
        table.add_row("peer", peer)
    console().print(table)


def render_sync_state_data(replicas_table: Mapping[str, Any]) -> None:
    out = console()
    if not replicas_table:
        out.print("no broker groups matched")
        return
    for name in sorted(replicas_table):
        info = replicas_table[name]
        in_sync = info.get("inSyncReplicas") or []
        table = Table(title=(f"{name}: master {info.get('masterBrokerId', '-')} {info.get('masterAddress', '')}  "
                             f"masterEpoch {info.get('masterEpoch')}  "
                             f"syncStateSetEpoch {info.get('syncStateSetEpoch')}  in sync {len(in_sync)}"))
        for column in ("brokerId", "address", "in sync", "alive", "role"):
            table.add_column(column)
        replicas = [(r, True) for r in in_sync] + [(r, False) for r in info.get("notInSyncReplicas") or []]
        for replica, synced in sorted(replicas, key=lambda pair: pair[0].get("brokerId", 0)):
            is_master = replica.get("brokerId") == info.get("masterBrokerId")
            table.add_row(str(replica.get("brokerId")), str(replica.get("brokerAddress")), _yes(synced),
                          _yes(bool(replica.get("alive"))), "master" if is_master else "slave")
        out.print(table)


def render_elected(answer: RemotingCommand, cluster: str, broker_name: str, members: Mapping[Any, Any]) -> None:
    table = Table(title=f"new master of {broker_name}", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value")
    for label, value in (("cluster", cluster), ("broker name", broker_name),
                         ("master broker id", answer.ext("masterBrokerId")),
                         ("master address", answer.ext("masterAddress")), ("masterEpoch", answer.ext("masterEpoch")),
                         ("syncStateSetEpoch", answer.ext("syncStateSetEpoch"))):
        table.add_row(label, str(value))
    for broker_id in sorted(members, key=int):
        table.add_row("member", f"{broker_id} {members[broker_id]}")
    console().print(table)


def render_config(per_node: Mapping[str, Mapping[str, str] | str], key: str | None) -> None:
    out = console()
    for node, values in per_node.items():
        if isinstance(values, str):
            out.print(f"[red]{node}: {values}[/]")
            continue
        table = Table(title=f"configuration of {node}")
        table.add_column("key", style="bold")
        table.add_column("value")
        for name in sorted(values):
            if key is None or name == key:
                table.add_row(name, values[name])
        out.print(table)


# ---- the NameServer role (rmqc admin topic / kv) ----------------------------------------------------


def render_rows(title: str, columns: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    console().print(table)


def render_topic_route(topic: str, route: Mapping[str, Any]) -> None:
    """105 as an operator reads it: per broker name its addresses (0 is the master) and queues."""
    queues = {q["brokerName"]: q for q in route["queueDatas"]}
    table = Table(title=f"route of {topic}")
    for column in ("broker name", "cluster", "master", "slaves", "read", "write", "perm"):
        table.add_column(column)
    for broker in route["brokerDatas"]:
        addrs = broker["brokerAddrs"]
        q = queues.get(broker["brokerName"], {})
        table.add_row(broker["brokerName"], broker["cluster"], addrs.get("0", "-"),
                      ", ".join(f"{i}={a}" for i, a in sorted(addrs.items()) if i != "0") or "-",
                      str(q.get("readQueueNums", "-")), str(q.get("writeQueueNums", "-")), str(q.get("perm", "-")))
    console().print(table)


# ---- members ----------------------------------------------------------------------------------------


def render_members(rows: Sequence[Mapping[str, Any]]) -> None:
    """`rmqc admin members list`: one row per member, as the leader knows it."""
    table = Table(title="rmqc members")
    for column in ("id", "address", "role", "leader", "match", "lag"):
        table.add_column(column)
    for row in rows:
        table.add_row(str(row.get("id")), str(row.get("address")), str(row.get("role")),
                      "[bold green]leader[/]" if row.get("isLeader") else "", _num(row.get("match")),
                      _num(row.get("lag")))
    console().print(table)


# ---- status ----------------------------------------------------------------------------------------


def status_table(views: Sequence[Mapping[str, Any]]) -> Table:
    leader = _leader_status(views)
    caption = "; ".join(part for part in (_membership_caption(leader), _namesrv_caption(leader)) if part)
    table = Table(title="rmqc controllers", caption=caption or None)
    for column in ("node", "address", "role", "term", "commit", "applied", "leader", "lag", "groups", "live brokers",
                   "alarms", "ready"):
        table.add_column(column)
    for view in views:
        status = view.get("status")
        if status is None:
            table.add_row("?", view["address"], f"[red]{view.get('error')}[/]", *["-"] * 8, "[red]no[/]")
            continue
        role = status.get("role", "?")
        if status.get("nodeId") in ((leader or {}).get("learners") or ()):
            role = "learner"  # Raft calls it a follower; it has no vote
        role_text = f"[bold green]{role}[/]" if status.get("servingAsLeader") else role
        table.add_row(str(status.get("nodeId")), view["address"], role_text, _num(status.get("term")),
                      _num(status.get("commit")), _num(status.get("applied")), str(status.get("leader") or "-"),
                      _lag_text(status, leader), _num(status.get("brokerGroups")), _num(status.get("liveBrokers")),
                      _alarms_text(status), _ready_text(status))
    return table


def render_status(views: Sequence[Mapping[str, Any]]) -> None:
    console().print(status_table(views))


def render_cluster_processes(processes: Iterable[Mapping[str, Any]], views: Sequence[Mapping[str, Any]]) -> Group:
    table = Table(title="local rmqc cluster (Ctrl-C stops every node)")
    for column in ("node", "pid", "address", "process", "data dir"):
        table.add_column(column)
    exited = False
    for process in processes:
        state = "running" if process["returncode"] is None else f"exited {process['returncode']}"
        exited |= process["returncode"] is not None
        table.add_row(process["node_id"], str(process["pid"]), process["address"], state, process["data_dir"])
    if exited:  # restarted by this command, so that Ctrl-C stops them too (not by hand)
        table.caption = f"restart the exited nodes: kill -HUP {os.getpid()}"
    return Group(table, status_table(views))


def _leader_status(views: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((view["status"] for view in views
                 if view.get("status") and view["status"].get("servingAsLeader")), None)


def _lag_text(status: Mapping[str, Any], leader: Mapping[str, Any] | None) -> str:
    """Entries this node lacks, as the leader measures it (its last index - the node's match),
    and entries it holds but has not applied yet."""
    behind = int(status.get("commit") or 0) - int(status.get("applied") or 0)
    apply = f" (apply {behind})" if behind else ""
    if status is leader:
        return "leader" + apply
    progress = ((leader or {}).get("peers") or {}).get(status.get("nodeId"))
    return ("?" if progress is None else str(progress.get("lag"))) + apply


def _membership_caption(leader: Mapping[str, Any] | None) -> str | None:
    """Learners, a pending membership change and a transfer under way, as the leader knows them."""
    if leader is None:
        return None
    parts = []
    if leader.get("learners"):
        parts.append("learners: " + ", ".join(leader["learners"]))
    change = leader.get("pendingConfChange")
    if change:
        parts.append(f"pending membership change: {change['type'].replace('_', ' ')} {change['node']} "
                     f"(index {change['index']})")
    if leader.get("transferringTo"):
        parts.append(f"transferring leadership to {leader['transferringTo']}")
    return "; ".join(parts) or None


def _namesrv_caption(leader: Mapping[str, Any] | None) -> str | None:
    """The NameServer role as the leader holds it: topics, registered brokers, route health."""
    ns = (leader or {}).get("namesrv")
    if not ns:
        return None
    text = f"NameServer: {ns['topics']:,} topics, {ns['registeredBrokers']:,} brokers registered"
    orphans = ns["topicsWithoutBroker"]
    return text + (f", [bold red]{orphans:,} topics with no registered broker[/]" if orphans else "")


def _alarms_text(status: Mapping[str, Any]) -> str:
    """e.g. "DISK FULL 12s (3 writes refused)", "REPAIRING (to index 812)"; docs/operations.md says
    what to do."""
    return " ".join(f"[bold red]{str(alarm.get('alarm', '?')).replace('_', ' ').upper()}[/] {_alarm_detail(alarm)}"
                    for alarm in status.get("alarms") or []) or "-"


def _ready_text(status: Mapping[str, Any]) -> str:
    """The node's health checks (`rmqc admin health`, /readyz): "yes", or "no" and the failed ones."""
    checks = status.get("health")
    if checks is None:
        return "-"  # a Java controller, or an rmqc without the checks
    failed = [str(check.get("check")) for check in checks if not check.get("ok")]
    return "yes" if not failed else f"[red]no[/] ({', '.join(failed)})"


def _alarm_detail(alarm: Mapping[str, Any]) -> str:
    if alarm.get("alarm") == "repairing":
        target = alarm.get("targetIndex")
        return "(waiting for a leader)" if target is None else f"(to index {target})"
    return f"{int(alarm.get('forMs') or 0) // 1000}s ({alarm.get('refusedWrites', 0)} writes refused)"


def _num(value: Any) -> str:
    return "-" if value is None else str(value)


def _yes(flag: bool) -> str:
    return "yes" if flag else "[red]no[/]"


# ---- events ---------------------------------------------------------------------------------------


def render_event(event: Mapping[str, Any]) -> None:
    """One line of `rmqc events`: when, what, and the detail of its kind."""
    import datetime

    describe = _EVENT_LINES.get(event["kind"], lambda e: orjson.dumps(e).decode())
    stamp = ""
    if event.get("timeMs") is not None:
        stamp = datetime.datetime.fromtimestamp(event["timeMs"] / 1000, datetime.UTC).strftime("%H:%M:%S.%f")[:-3] + " "
    console().print(f"[dim]{stamp}[/]{describe(event)}", soft_wrap=True)


def _failover_line(e: Mapping[str, Any]) -> str:
    late = "" if e.get("deadlineMissedByMs") is None else f" by {e['deadlineMissedByMs']} ms"
    what = (f"master {_num(e['oldMaster'])} -> {e['newMaster']}" if e["newMaster"] is not None
            else f"no master (was {_num(e['oldMaster'])})")
    candidates = ", ".join(
        f"{c['brokerId']} (epoch {c['epoch']}, offset {c['maxOffset']}, priority {c['priority']}"
        f"{'' if c['inSyncStateSet'] else ', not in sync'})" for c in e["candidates"]) or "none alive"
    t = e["timeline"]
    return (f"[bold]failover[/] {e['brokerName']}: {what} at masterEpoch {e['masterEpoch']}; "
            f"reason {e['reason'] or e['trigger']}{late}; candidates {candidates}; {_timeline_text(t)}")


def _timeline_text(t: Mapping[str, Any]) -> str:
    """The committed steps, each as ms after the master was last alive (or after the proposal)."""
    start = t["masterLastAliveMs"] if t["masterLastAliveMs"] is not None else t["proposedMs"]
    steps = [("detected", t["detectedMs"]), ("proposed", t["proposedMs"]), ("committed", t["committedMs"])]
    told = ", ".join(f"{name} +{at - start} ms" for name, at in steps if at is not None)
    return f"last alive -> {told}" if t["masterLastAliveMs"] is not None else told


def _step_line(e: Mapping[str, Any]) -> str:
    head = f"  {e['brokerName']} masterEpoch {e['masterEpoch']}: "
    if e["step"] == "notified":
        return head + f"1008 sent to broker {e['brokerId']} ({e['address']}) {e['afterCommitMs']} ms after commit"
    return head + f"broker {e['brokerId']} heartbeat names epoch {e['epoch']}, {e['afterCommitMs']} ms after commit"


_EVENT_LINES: dict[str, Any] = {
    "failover": _failover_line,
    "failover_step": _step_line,
    "leader_changed": lambda e: f"[bold]leader[/] {_num(e['previous'])} -> {_num(e['leader'])} (term {e['term']})",
    "membership_changed": lambda e: f"[bold]membership[/] at index {e['index']}: voters {', '.join(e['voters'])}"
                                    + (f"; learners {', '.join(e['learners'])}" if e["learners"] else ""),
    "alarm": lambda e: f"[bold red]alarm[/] {e['alarm']} {'raised' if e['raised'] else 'cleared'}",
    "missed": lambda e: f"[yellow]fell behind: {e['count']} events dropped by the node before they were read[/]",
    "restarted": lambda e: f"[yellow]{e['node']} restarted: its events start again[/]",
}


# ---- chaos ---------------------------------------------------------------------------------------


class ChaosProgress:
    """The live view of `rmqc chaos run` on stderr (stdout stays for --json): on a terminal a table
    per fault kind redrawn after every window; elsewhere (a pipe, a CI log) one line per window."""

    def __init__(self, total: int) -> None:
        from rich.live import Live

        self.total = total
        self.done = 0
        self.kinds: dict[str, list[int]] = {}  # kind -> [windows, not recovered]
        self.last = ""
        self._console = error_console()
        self._live = (Live(self._table(), console=self._console, auto_refresh=False)
                      if self._console.is_terminal else None)

    def __enter__(self) -> ChaosProgress:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc_info)

    def window(self, window: Mapping[str, Any]) -> None:
        self.done += 1
        counts = self.kinds.setdefault(window["kind"], [0, 0])
        counts[0] += 1
        counts[1] += bool(window["problems"])
        problems = window["problems"]
        state = f"[red]not recovered[/red] {problems[:3]}" if problems else "[green]recovered[/green]"
        seconds = (window["end"] - window["start"]) / 1e9
        self.last = f"{window['kind']}: {window['detail']} -> {state} ({seconds:.1f} s)"
        if self._live is not None:
            self._live.update(self._table(), refresh=True)
        else:
            self._console.print(f"window {self.done}/{self.total} {self.last}")

    def _table(self) -> Table:
        table = Table(title=f"chaos: window {self.done}/{self.total}", caption=self.last or None)
        for column in ("fault", "windows", "not recovered"):
            table.add_column(column, justify="left" if column == "fault" else "right")
        for kind, (windows, bad) in sorted(self.kinds.items()):
            table.add_row(kind, str(windows), f"[red]{bad}[/red]" if bad else "0")
        return table


def render_chaos_summary(summary: Mapping[str, Any], out_dir: str) -> None:
    """The one-screen summary at the end of `rmqc chaos run` (on stderr: stdout stays for --json)."""
    table = Table(title=f"chaos: {summary['windows']} windows, seed {summary['seed']}, {summary['nodes']} nodes")
    for column in ("fault", "windows", "write RTO p50 ms", "p99", "max", "masters RTO p50 ms", "p99", "max",
                   "unrecovered"):
        table.add_column(column, justify="left" if column == "fault" else "right")
    for kind, row in summary["faults"].items():
        w, m = row["rto_write_ms"], row["rto_masters_ms"]
        table.add_row(kind, str(row["windows"]), *(_num(w[k]) for k in ("p50", "p99", "max")),
                      *(_num(m[k]) for k in ("p50", "p99", "max")), str(row["unrecovered"]))
    out = error_console()
    out.print(table)
    out.print(f"acknowledged writes {summary['acknowledged_writes']:,}, reads {summary['reads']:,}, "
              f"lost {summary['lost']}, duplicates {summary['duplicates']}, "
              f"failed writes in quiet phases {summary['quiet_errors']}")
    targets = summary.get("rto_targets")
    if targets and targets["kinds"]:
        missed = [f"{kind} p99 {row['p99']} ms" + (f" (from the restart {row['from_restart']['p99']} ms)"
                                                  if "from_restart" in row else "")
                  for kind, row in targets["kinds"].items() if not row["met"]]
        out.print(f"RTO target p99 <= {targets['target_p99_ms']:,.0f} ms from the fault's start: "
                  + ("[green]met by every kind[/green]" if not missed
                     else f"[yellow]missed by {', '.join(missed)}[/yellow]"))
    designations = summary.get("designations")
    if designations:
        out.print(f"master designations: {designations['sent']} sent, {designations['elected']} elected, "
                  f"{designations['refused']} refused, {designations['unanswered']} unanswered")
    for violation in summary["violations"][:10]:
        out.print(f"[red]violation:[/red] {violation}")
    verdict = "[red]FAIL[/red]" if summary["violations"] else "[green]PASS[/green]"
    out.print(f"{verdict}: {len(summary['violations'])} violations; report in {out_dir}/report.md")


def render_migration(migration: Any) -> None:
    """`rmqc migrate from-java`: the groups read (the import), what rmqc did, the verification."""
    out = console()
    table = Table(title=f"{len(migration.rows)} broker group(s) read from the {migration.source}")
    for column in ("cluster", "broker group", "broker ids (address)", "master", "masterEpoch", "SyncStateSet",
                   "syncStateSetEpoch", "next id"):
        table.add_column(column)
    for cluster, name, next_id, replicas, master, master_epoch, in_sync, in_sync_epoch in migration.rows:
        ids = ", ".join(f"{broker_id} ({address})" for broker_id, address, _ in replicas)
        table.add_row(cluster, name, ids, _num(master), str(master_epoch), str(list(in_sync)), str(in_sync_epoch),
                      str(next_id))
    out.print(table)
    if not migration.imported:
        out.print("dry run: nothing written to rmqc")
        return
    out.print("rmqc held these groups already: nothing written" if migration.unchanged
              else "imported into rmqc as one replicated command (`rmqc log dump` shows it)")
    if not migration.differences:
        out.print(f"verified: rmqc answers 1006, 1004 and 1012 for all {len(migration.rows)} group(s) as Java does")
        return
    diff = Table(title="answers that differ")
    for column in ("broker group", "field", "Java", "rmqc"):
        diff.add_column(column)
    for difference in migration.differences:
        diff.add_row(difference.broker_name, difference.field, str(difference.java), str(difference.rmqc))
    out.print(diff)
