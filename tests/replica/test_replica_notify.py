from rmqc.remoting import RemotingCommand, RequestCode
from rmqc.replica import PendingNotifications
from rmqc.replica._notify import NotifierState


def notify(epoch: int) -> RemotingCommand:
    return RemotingCommand(code=RequestCode.NOTIFY_BROKER_ROLE_CHANGED, ext_fields={"masterEpoch": str(epoch)})


def test_a_newer_epoch_supersedes_a_waiting_older_one_never_the_reverse() -> None:
    pending = PendingNotifications()
    assert pending.offer("a:1", notify(3)) is True  # first for the address: it needs a sender
    assert pending.offer("a:1", notify(2)) is False  # older: ignored
    assert pending.offer("a:1", notify(4)) is False  # newer: replaces, the sender already exists
    assert pending.superseded == 1
    command = pending.pop("a:1")
    assert command is not None and command.ext("masterEpoch") == "4"
    assert pending.pop("a:1") is None


def test_addresses_past_the_bound_are_dropped_and_counted() -> None:
    pending = PendingNotifications(max_addresses=2)
    for host in range(3):
        pending.offer(f"10.0.0.{host}:30911", notify(1))
    pending.offer("10.0.0.0:30911", notify(2))  # a waiting address still takes a newer epoch
    assert pending.dropped == 1 and pending.superseded == 1 and len(pending) == 2
    assert pending.pop("10.0.0.2:30911") is None


def test_each_address_gets_one_sender_and_past_the_bound_waits_its_turn_in_order() -> None:
    state: NotifierState[str] = NotifierState(max_senders=2, max_connections=10)
    for address in ("a:1", "b:1", "c:1", "d:1"):
        state.submit(address, notify(1))
    assert state.senders_to_start() == ["a:1", "b:1"]  # c and d wait: both senders busy
    assert state.senders_to_start() == []
    first = state.next_command("a:1")
    state.submit("a:1", notify(2))  # a's sender is busy sending: it takes this one next
    assert state.senders_to_start() == []
    second = state.next_command("a:1")
    assert first is not None and second is not None and second.ext("masterEpoch") == "2"
    assert state.next_command("a:1") is None
    assert state.served("a:1") == "c:1"  # a's sender goes on with the oldest queued address
    assert state.served("b:1") == "d:1"
    assert state.served("c:1") is None and state.served("d:1") is None
    state.submit("e:1", notify(1))
    assert state.senders_to_start() == ["e:1"]  # the senders ended: a new one starts


def test_a_sender_that_ended_is_started_again_for_its_address() -> None:
    state: NotifierState[str] = NotifierState(max_senders=1, max_connections=10)
    state.submit("a:1", notify(1))
    assert state.senders_to_start() == ["a:1"]
    assert state.next_command("a:1") is not None
    assert state.served("a:1") is None
    state.submit("a:1", notify(2))
    assert state.senders_to_start() == ["a:1"]


def test_cached_connections_are_reused_and_the_least_recently_used_evicted() -> None:
    state: NotifierState[str] = NotifierState(max_senders=4, max_connections=2)
    assert state.reuse("a:1") is None  # none yet: connect
    assert state.connected("a:1", "conn-a") == []
    assert state.connected("b:1", "conn-b") == []
    assert state.reuse("a:1") == "conn-a"  # now b is the least recently used
    assert state.connected("c:1", "conn-c") == ["conn-b"]
    assert state.evicted == 1 and state.reuse("b:1") is None
    assert state.forget("a:1") == "conn-a" and state.reuse("a:1") is None and state.forget("a:1") is None
    assert state.forget_all() == ["conn-c"] and state.forget_all() == []


def test_a_broken_cached_connection_is_retried_once_and_other_failures_drop_the_notification() -> None:
    state: NotifierState[str] = NotifierState(max_senders=4, max_connections=2)
    assert state.retry_after_failure(on_cached=True, timed_out=False) is True  # closed or reset: retry
    assert (state.reconnected, state.failed) == (1, 0)
    assert state.retry_after_failure(on_cached=False, timed_out=False) is False  # a new one failed: drop
    assert state.retry_after_failure(on_cached=True, timed_out=True) is False  # the broker stopped reading
    assert state.retry_after_failure(on_cached=False, timed_out=True) is False
    assert (state.reconnected, state.failed, state.sent) == (1, 3, 0)
    state.delivered()
    assert state.sent == 1


def test_the_state_counts_what_its_pending_notifications_superseded_and_dropped() -> None:
    state: NotifierState[str] = NotifierState(max_senders=1, max_connections=1)
    state.submit("a:1", notify(1))
    state.submit("a:1", notify(2))
    assert state.superseded == 1 and state.dropped == 0
    command = state.next_command("a:1")
    assert command is not None and command.ext("masterEpoch") == "2"
