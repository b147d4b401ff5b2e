"""Checkers over a chaos history (rmqc.chaos._history records). Pure functions: the run calls them
once at the end, and the tests feed them planted histories.

What each one proves:
- lost: every acknowledged 1013 of id k leaves nextBrokerId >= k + 1 for ever; the final
  linearizable read of each group after the last recovery must show it (RPO 0).
- duplicates: no two brokers of one group ever hold the same broker id.
- split brain: no two brokers of one group are MASTER with the same masterEpoch (a new master
  always comes with a new epoch); with Java brokers, whose epoch cache can lag an election, no two
  brokers answering MASTER in one sample.
- linearizability of `linearizable` and `lease` reads per group (rmqc.linearizability).
- stale reads going back in time: on one node (one incarnation of it), a `stale` read never returns
  less than a `stale` read that completed before it began.
- designations: an admin's 1002 (designateElect) answered SUCCESS made the broker it named
  master; the masterEpochs answered to designations never go back in real time (one invoked after
  another completed gets at least its epoch, a new election a higher one); and the brokers
  followed every acknowledged election (a later sample shows the group's master at its epoch or a
  newer one: an acknowledged election is never lost).
- recovery: at the end of each recovery phase every node runs, a write made after the heal was
  acknowledged, and every broker group has one agreed, notified master.
- lost messages (Java brokers): every send the Producer saw acknowledged (SEND_OK) is read back by
  the Consumer at the end, from the topic's first offset.
- aborted: the run broke off (a node that did not start again, a bound exceeded); what it recorded
  until then is still checked.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from rmqc.linearizability import Op, SearchBoundExceeded, check_history
from rmqc.remoting import ResponseCode

# The value of nextBrokerId of a group nobody has registered in yet.
INITIAL_NEXT_ID = "1"
CHECKED_LEVELS = ("linearizable", "lease")
# A violation list longer than this is cut: the first ones name the bug, the rest only repeat it.
MAX_VIOLATIONS_LISTED = 50

Record = dict[str, Any]


def lost_writes(records: Sequence[Record]) -> list[str]:
    acked: dict[str, int] = defaultdict(int)
    for record in records:
        if record["type"] == "write" and record["complete"] is not None:
            acked[record["key"]] = max(acked[record["key"]], record["id"])
    final = {record["key"]: record["value"] for record in records if record["type"] == "final"}
    lost = []
    for key, top in sorted(acked.items()):
        if key not in final:
            lost.append(f"{key}: no final read answered, id {top} acknowledged unverified")
        elif int(final[key]) < top + 1:
            lost.append(f"{key}: id {top} acknowledged but the final nextBrokerId is {final[key]}")
    return lost


def message_counts(records: Iterable[Record]) -> dict[str, Any]:
    """The Java Producer's sends: acknowledged, failed, consumed (distinct bodies read back at the
    end), and the acknowledged ones never read back (`lost_bodies`). `verified` is False when no
    Consumer ran (the run broke off first): then every acknowledged message counts as lost."""
    acked, failed, consumed, verified = set(), 0, set(), False
    for record in records:
        if record["type"] == "send":
            if record["ok"]:
                acked.add(f"rmqc-{record['seq']}")
            else:
                failed += 1
        elif record["type"] == "recv":
            consumed.add(record["body"])
        elif record["type"] == "consumed":
            verified = True
    lost = sorted(acked - consumed, key=lambda body: int(body.rsplit("-", 1)[1]))
    return {"acknowledged": len(acked), "failed_sends": failed, "consumed": len(consumed), "lost": len(lost),
            "lost_bodies": lost, "verified": verified}


def lost_messages(records: Sequence[Record]) -> list[str]:
    counts = message_counts(records)
    if counts["acknowledged"] and not counts["verified"]:
        return [f"{counts['acknowledged']} acknowledged messages never verified: no Consumer read the topic back"]
    return [f"message {body} acknowledged (SEND_OK) but never consumed" for body in counts["lost_bodies"]]


def duplicate_ids(records: Iterable[Record]) -> list[str]:
    duplicates = set()
    for record in records:
        if record["type"] != "brokers":
            continue
        holders: dict[tuple[str, int], set[int]] = defaultdict(set)
        for group, slot, broker_id in record["brokers"]:
            if broker_id is not None:
                holders[(group, broker_id)].add(slot)
        duplicates |= {f"{group}: broker id {broker_id} held by slots {sorted(slots)}"
                       for (group, broker_id), slots in holders.items() if len(slots) > 1}
    return sorted(duplicates)


def split_brains(records: Iterable[Record]) -> list[str]:
    masters: dict[tuple[str, int], set[int]] = defaultdict(set)
    for record in records:
        if record["type"] == "masters":
            for group, claims in record["groups"].items():
                for broker_id, epoch in claims:
                    masters[(group, epoch)].add(broker_id)
    return [f"{group}: brokers {sorted(ids)} all MASTER with masterEpoch {epoch}"
            for (group, epoch), ids in sorted(masters.items()) if len(ids) > 1]


def simultaneous_masters(records: Iterable[Record]) -> list[str]:
    """Java brokers: two brokers answering MASTER in one sample (each broker's own 907 answer).
    Reported once per set of brokers, with how many samples showed it."""
    seen: dict[tuple[int, ...], tuple[list[list[int]], int]] = {}
    for record in records:
        if record["type"] == "java_masters" and len(record["claims"]) > 1:
            ids = tuple(sorted(broker_id for broker_id, _ in record["claims"]))
            first, count = seen.get(ids, (record["claims"], 0))
            seen[ids] = (first, count + 1)
    return [f"brokers {list(ids)} all MASTER at once (id, cached epoch: {claims}) in {count} samples"
            for ids, (claims, count) in sorted(seen.items())]


def history_ops(records: Iterable[Record]) -> list[Op]:
    """The writes and the linearizable/lease reads as the register checker takes them."""
    ops = []
    for record in records:
        if record["type"] == "write":
            ops.append(Op("writer", record["key"], "write", str(record["id"] + 1), record["invoke"],
                          record["complete"]))
        elif record["type"] == "read" and record["level"] in CHECKED_LEVELS:
            ops.append(Op(f"{record['node']}@{record['level']}", record["key"], "read", record["value"],
                          record["invoke"], record["complete"]))
    return ops


def linearizability(records: Sequence[Record]) -> tuple[list[str], list[str]]:
    """(violations, groups the search gave up on) for linearizable and lease reads."""
    violations, unchecked = [], []
    ops = history_ops(records)
    keys = sorted({op.key for op in ops})
    for key in keys:
        try:
            (result,) = check_history([op for op in ops if op.key == key], initial=INITIAL_NEXT_ID)
        except SearchBoundExceeded:
            unchecked.append(key)
            continue
        if not result.ok:
            violations.append(f"{key}: not linearizable: {result.witness}")
    return violations, unchecked


def stale_going_back(records: Iterable[Record]) -> list[str]:
    by_node: dict[tuple[str, int, str], list[Record]] = defaultdict(list)
    for record in records:
        if record["type"] == "read" and record["level"] == "stale":
            by_node[(record["node"], record["incarnation"], record["key"])].append(record)
    found = []
    for (node, incarnation, key), reads in sorted(by_node.items()):
        found += _went_back(node, incarnation, key, reads)
    return found


def _went_back(node: str, incarnation: int, key: str, reads: list[Record]) -> list[str]:
    """Reads that returned less than a read completed before they began (one sweep)."""
    done = sorted(reads, key=lambda r: r["complete"])
    done_at = [r["complete"] for r in done]
    best_before: list[int] = []  # best_before[i]: the highest value among done[:i+1]
    for read in done:
        best_before.append(max(int(read["value"]), best_before[-1] if best_before else 0))
    found = []
    for read in reads:
        i = bisect.bisect_left(done_at, read["invoke"])
        if i and int(read["value"]) < best_before[i - 1]:
            found.append(f"{node} (incarnation {incarnation}) {key}: stale read {read['value']} after "
                         f"{best_before[i - 1]} had been read there")
    return found


ELECTED = ResponseCode.SUCCESS
STILL_MASTER = ResponseCode.CONTROLLER_MASTER_STILL_EXIST


def designations(records: Sequence[Record]) -> list[str]:
    answered = [r for r in records if r["type"] == "designate" and r["code"] in (ELECTED, STILL_MASTER)
                and r["epoch"] is not None]
    found = [f"{r['key']}: designated {r['id']}, answered SUCCESS with master {r['master']}"
             for r in answered if r["code"] == ELECTED and r["master"] != r["id"]]
    by_group: dict[str, list[Record]] = defaultdict(list)
    for record in answered:
        by_group[record["key"]].append(record)
    for group, group_answers in sorted(by_group.items()):
        found += _epochs_went_back(group, group_answers)
    return found + _elections_not_followed(records, answered)


def _epochs_went_back(group: str, answers: list[Record]) -> list[str]:
    done = sorted(answers, key=lambda r: r["complete"])
    done_at = [r["complete"] for r in done]
    best_before: list[int] = []  # best_before[i]: the highest epoch among done[:i+1]
    for answer in done:
        best_before.append(max(answer["epoch"], best_before[-1] if best_before else 0))
    found = []
    for answer in answers:
        i = bisect.bisect_left(done_at, answer["invoke"])
        best = best_before[i - 1] if i else 0
        if answer["epoch"] < best or (answer["code"] == ELECTED and answer["epoch"] == best):
            found.append(f"{group}: designation of {answer['id']} answered masterEpoch {answer['epoch']} "
                         f"(code {answer['code']}) after masterEpoch {best} had been answered")
    return found


def _elections_not_followed(records: Sequence[Record], answered: list[Record]) -> list[str]:
    """Acknowledged elections that no later sample of the brokers reached (epoch or newer)."""
    samples: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for record in records:
        if record["type"] == "masters":
            for group, claims in record["groups"].items():
                samples[group].append((record["t"], max(epoch for _, epoch in claims)))
    newest_from: dict[str, list[int]] = {}  # newest_from[group][i]: the highest epoch in samples[i:]
    for group, group_samples in samples.items():
        group_samples.sort()
        suffix = [-1] * (len(group_samples) + 1)
        for i in range(len(group_samples) - 1, -1, -1):
            suffix[i] = max(group_samples[i][1], suffix[i + 1])
        newest_from[group] = suffix
    found = []
    for answer in (r for r in answered if r["code"] == ELECTED):
        group_samples = samples.get(answer["key"], [])
        i = bisect.bisect_right(group_samples, (answer["complete"], float("inf")))
        newest = newest_from.get(answer["key"], [-1])[i]
        if newest < answer["epoch"]:
            found.append(f"{answer['key']}: the election of {answer['id']} at masterEpoch {answer['epoch']} was "
                         f"acknowledged, but no broker followed it (newest seen after: {newest})")
    return found


def unrecovered(records: Iterable[Record]) -> list[str]:
    """Windows whose recovery phase ended at its bound: brokers still disagreeing about their
    master, a node not running, or no write acknowledged since the heal."""
    return [f"window {r['window']} ({r['kind']}): not recovered: {r['problems'][:3]}"
            for r in records if r["type"] == "window" and r["problems"]]


def all_violations(records: Sequence[Record]) -> dict[str, Any]:
    lin, unchecked = linearizability(records)
    found = {"lost": lost_writes(records), "duplicates": duplicate_ids(records),
             "split_brain": split_brains(records) + simultaneous_masters(records), "linearizability": lin,
             "stale_going_back": stale_going_back(records), "designations": designations(records),
             "recovery": unrecovered(records), "lost_messages": lost_messages(records),
             "aborted": [r["reason"] for r in records if r["type"] == "aborted"]}
    violations = [f"{name}: {text}" for name, texts in found.items() for text in texts]
    return {**found, "unchecked_groups": unchecked, "violations": violations[:MAX_VIOLATIONS_LISTED],
            "violation_count": len(violations)}


# A running node that no fault touched and that answers no 1005 for this long is reported: the
# design allows no unpaused node silent for more than 100 ms, but the monitor asks with a 150 ms
# bound, four times a second, on a shared 2-core machine, so shorter silences are noise.
STALL_REPORT_S = 1.0
# Faults that silence the node they name by design (a held fsync holds the node's driver too).
_NODE_FAULTS = ("SIGKILL", "SIGSTOP", "disk-stall")


def stalls(records: Sequence[Record], min_s: float = STALL_REPORT_S) -> list[dict[str, Any]]:
    """Intervals in which a node that was neither killed, stopped nor disk-stalled answered no role query:
    `node`, `at_s` (since the first sample) and `for_s`. Reported, not counted as violations."""
    samples = [r for r in records if r["type"] == "role"]
    if not samples:
        return []
    origin = samples[0]["t"]
    touched = [(w["fault"], w["end"], w["detail"]) for w in records
               if w["type"] == "window" and w["detail"].startswith(_NODE_FAULTS)]
    found = []
    for node in sorted(samples[0]["roles"]):
        silent_since = None
        for sample in samples:
            silent = sample["roles"].get(node) == "down" and not _under_fault(node, sample["t"], touched)
            if silent and silent_since is None:
                silent_since = sample["t"]
            elif not silent and silent_since is not None:
                if sample["t"] - silent_since >= min_s * 1e9:
                    found.append({"node": node, "at_s": round((silent_since - origin) / 1e9, 1),
                                  "for_s": round((sample["t"] - silent_since) / 1e9, 1)})
                silent_since = None
    return found


def _under_fault(node: str, t: int, touched: list[tuple[int, int, str]]) -> bool:
    return any(start <= t <= end and node in detail.split(" ", 1)[1].split(",") for start, end, detail in touched)
