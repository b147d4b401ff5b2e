"""rmqc.migrate's pure part: a group's view from 1006 + 1004 + 1012 answers, the import row built
from it, and the field-by-field difference of two views."""

from __future__ import annotations

import pytest

from rmqc.fsm import ControllerState, ImportGroups, row_of_group
from rmqc.migrate import MigrationError, diff_views, row_of_view, views_of_answers
from rmqc.remoting import dumps_fastjson, make_request, make_response

N = "broker-a"
TABLE = {N: {
    "masterBrokerId": 2, "masterAddress": "10.0.0.2:10911", "masterEpoch": 7, "syncStateSetEpoch": 12,
    "inSyncReplicas": [{"brokerName": N, "brokerId": 2, "brokerAddress": "10.0.0.2:10911", "alive": True},
                       {"brokerName": N, "brokerId": 1, "brokerAddress": "10.0.0.1:10911", "alive": False}],
    "notInSyncReplicas": [{"brokerName": N, "brokerId": 3, "brokerAddress": "10.0.0.3:10911", "alive": True}],
}}


def answer(code: int = 0, ext: dict | None = None, body: object = None):
    request = make_request(1004, 1, None)
    return make_response(request, code, None, ext, None if body is None else dumps_fastjson(body))


def info(master: int | None = 2, epoch: int = 7, in_sync: list[int] | None = None, in_sync_epoch: int = 12):
    ext = {"masterAddress": "10.0.0.2:10911", "masterEpoch": epoch} | ({"masterBrokerId": master} if master else {})
    return answer(0, ext, {"syncStateSet": in_sync or [1, 2], "syncStateSetEpoch": in_sync_epoch})


def test_a_view_reads_every_answer_and_its_row_is_what_rmqc_imports() -> None:
    views = views_of_answers("java", TABLE, {N: info()}, {N: answer(0, {"nextBrokerId": 4})})
    view = views[N]
    assert view is not None and view.replica_ids == [1, 2, 3]
    assert (view.master_id, view.master_epoch, view.in_sync, view.not_in_sync) == \
        (2, 7, ((1, "10.0.0.1:10911"), (2, "10.0.0.2:10911")), ((3, "10.0.0.3:10911"),))
    row = row_of_view("C", view)
    assert row == ("C", N, 4, ((1, "10.0.0.1:10911", ""), (2, "10.0.0.2:10911", ""), (3, "10.0.0.3:10911", "")),
                   2, 7, (1, 2), 12)
    state = ControllerState()
    assert state.apply(ImportGroups("java", (row,), 1)).ok
    assert row_of_group(state.group(N)) == row


def test_next_id_never_names_a_taken_id() -> None:
    """Java's counter stays behind when a broker applied a larger id itself."""
    view = views_of_answers("java", TABLE, {N: info()}, {N: answer(0, {"nextBrokerId": 2})})[N]
    assert view is not None and view.next_broker_id == 4


def test_a_group_the_controller_does_not_have_is_none() -> None:
    views = views_of_answers("java", {}, {N: answer(2008)}, {})
    assert views == {N: None}


def test_a_malformed_answer_names_the_controller_and_the_group() -> None:
    broken = {N: TABLE[N] | {"inSyncReplicas": "x"}}
    with pytest.raises(MigrationError, match="java: the answers about broker group broker-a cannot be read"):
        views_of_answers("java", broken, {N: info()}, {N: answer(0, {"nextBrokerId": 4})})
    with pytest.raises(MigrationError, match="1012 answered 1"):
        views_of_answers("java", TABLE, {N: info()}, {N: answer(1)})


def test_diff_names_every_field_that_differs_and_a_missing_group() -> None:
    java = views_of_answers("java", TABLE, {N: info()}, {N: answer(0, {"nextBrokerId": 4})})
    same = views_of_answers("rmqc", TABLE, {N: info()}, {N: answer(0, {"nextBrokerId": 4})})
    assert diff_views(java, same) == []
    moved = views_of_answers("rmqc", TABLE, {N: info(epoch=8, in_sync=[2], in_sync_epoch=13)},
                             {N: answer(0, {"nextBrokerId": 4})})
    differences = [(d.field, d.java, d.rmqc) for d in diff_views(java, moved)]
    assert differences == [("1004 masterEpoch", 7, 8), ("1004 syncStateSet", [1, 2], [2]),
                           ("1004 syncStateSetEpoch", 12, 13)]
    absent = diff_views(java, {N: None})
    assert [(d.broker_name, d.field, d.java, d.rmqc) for d in absent] == [(N, "group", "present", "absent")]
