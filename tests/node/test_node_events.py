"""RMQC_EVENTS (60008) in the node shell: a long poll answered when an event is recorded, or empty
when its wait ends (or the node stops); a bad cursor answered with an error that names it; with ACL
on, a real node admits the request signed and refuses it unsigned, and `rmqc events` says so."""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
import trio.testing
from node_helpers import ACL, BROKER, free_ports, wait_until
from typer.testing import CliRunner

from rmqc.cli.main import app
from rmqc.client import ControllerClient
from rmqc.config import NodeConfig, parse_peers
from rmqc.node import ControllerNode
from rmqc.node._events import MAX_WAITING_READERS, EventReaders
from rmqc.remoting import RMQC_EVENTS, RemotingCommand, ResponseCode, make_request
from rmqc.replica import EventLog


def ask(**ext: object) -> RemotingCommand:
    return make_request(RMQC_EVENTS, 1, ext)


async def test_a_long_poll_is_answered_as_soon_as_an_event_is_recorded() -> None:
    events, readers = EventLog(), EventReaders()
    events.listener = readers.wake
    answers: list[RemotingCommand] = []

    async def read() -> None:
        answers.append(await readers.answer(events, ask(after=0, waitMs=60_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        assert readers.waiting == 1 and answers == []
        events.record("alarm", 1, {"alarm": "disk_full", "raised": True})
    [answer] = answers
    body = orjson.loads(answer.body or b"")
    assert answer.code == ResponseCode.SUCCESS and [e["alarm"] for e in body["events"]] == ["disk_full"]
    assert body["lastSeq"] == 1 and body["missed"] == 0 and readers.waiting == 0


async def test_a_long_poll_with_nothing_new_ends_empty_when_its_wait_ends() -> None:
    events, readers = EventLog(), EventReaders()
    events.record("alarm", 1, {})
    answer = await readers.answer(events, ask(after=1, waitMs=1))
    assert orjson.loads(answer.body or b"") == {"events": [], "missed": 0, "lastSeq": 1}


async def test_a_stopping_node_answers_its_waiting_readers_at_once() -> None:
    events, readers = EventLog(), EventReaders()
    answers: list[RemotingCommand] = []

    async def read() -> None:
        answers.append(await readers.answer(events, ask(after=0, waitMs=60_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read)
        await trio.testing.wait_all_tasks_blocked()
        readers.release()  # the graceful stop's drain does not wait out the long poll
    assert [orjson.loads(a.body or b"")["events"] for a in answers] == [[]]
    with trio.fail_after(5):  # and a reader that comes later is not held either
        await readers.answer(events, ask(after=0, waitMs=60_000))


async def test_readers_beyond_the_bound_are_answered_at_once() -> None:
    events, readers = EventLog(), EventReaders()
    readers.waiting = MAX_WAITING_READERS
    with trio.fail_after(5):  # not held: there is no room for another waiting reader
        answer = await readers.answer(events, ask(after=0, waitMs=60_000))
    assert orjson.loads(answer.body or b"")["events"] == []


async def test_a_bad_field_is_named() -> None:
    readers = EventReaders()
    for ext, field in (({"after": "x"}, "after"), ({"waitMs": "-1"}, "waitMs"), ({"limit": "1.5"}, "limit")):
        answer = await readers.answer(EventLog(), ask(**ext))
        assert answer.code == ResponseCode.SYSTEM_ERROR
        assert answer.remark == f"RMQC_EVENTS: {field} must be a non-negative integer, got {next(iter(ext.values()))!r}"


async def test_a_node_answers_signed_event_requests_and_refuses_unsigned_ones(tmp_path: Path) -> None:
    """Over real TCP with ACL on: the request is admitted like any other (every account may read)."""
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL)
    (port,) = free_ports(1)
    config = NodeConfig(peers=parse_peers(f"n0-127.0.0.1:{port}"), data_dir=str(tmp_path / "n0"),
                        acl_enabled=True, acl_file=str(acl_file))
    async with trio.open_nursery() as nursery:
        node = ControllerNode(config)
        await nursery.start(node.run)
        await wait_until(lambda: node.replica is not None and node.replica.serving_as_leader, what="serving")
        async with ControllerClient([config.listen_address], credentials=BROKER, max_retries=0) as client:
            answer = await client.request(RMQC_EVENTS, {"after": 0}, address=config.listen_address)
        body = orjson.loads(answer.body or b"")
        assert answer.code == ResponseCode.SUCCESS
        assert [(e["kind"], e["leader"]) for e in body["events"]] == [("leader_changed", "n0")]
        async with ControllerClient([config.listen_address], max_retries=0) as client:
            refused = await client.request(RMQC_EVENTS, {"after": 0}, address=config.listen_address)
        assert refused.code == ResponseCode.NO_PERMISSION
        # the command says so and exits 1 (run in a thread: it runs its own event loop)
        result = await trio.to_thread.run_sync(
            lambda: CliRunner().invoke(app, ["events", "-a", config.listen_address]))
        assert result.exit_code == 1 and "answered the events request 16" in result.output, result.output
        nursery.cancel_scope.cancel()
