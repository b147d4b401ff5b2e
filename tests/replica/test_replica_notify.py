from rmqc.remoting import RemotingCommand, RequestCode
from rmqc.replica import PendingNotifications


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
