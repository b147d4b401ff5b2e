"""Who asked, for a client's own request (rmqc.replica.client_origin): the access key only when the
ACL checked it, the address of the connection, the node; what a follower forwards keeps it."""

from __future__ import annotations

from rmqc.acl import ACCESS_KEY
from rmqc.fsm import Origin
from rmqc.remoting import RemotingCommand
from rmqc.replica import client_origin
from rmqc.replica._audit import forwarded_origin, with_origin

ADDRESS = "10.0.0.7:50311"


def test_an_access_key_is_recorded_only_when_the_acl_checked_it() -> None:
    signed = RemotingCommand(code=1004, ext_fields={ACCESS_KEY: "broker-key"})
    assert client_origin(signed, ADDRESS, "n1", acl_enabled=True) == Origin("broker-key", ADDRESS, "n1")
    assert client_origin(signed, ADDRESS, "n1", acl_enabled=False) == Origin(None, ADDRESS, "n1")
    unsigned = RemotingCommand(code=1004)
    assert client_origin(unsigned, ADDRESS, "n1", acl_enabled=True) == Origin(None, ADDRESS, "n1")


def test_a_forwarded_request_carries_the_clients_origin() -> None:
    origin = client_origin(RemotingCommand(code=1004, ext_fields={ACCESS_KEY: "k"}), "h:1", "n2", acl_enabled=True)
    assert forwarded_origin(with_origin(RemotingCommand(code=1004), origin)) == origin
