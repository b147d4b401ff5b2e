from __future__ import annotations

import pytest

from rmqc.errors import ConfigError, ProtocolError
from rmqc.raft import ConfChange, ConfChangeType, Config, decode_conf_change, encode_conf_change


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", ""),
        ("heartbeat_tick", 0),
        ("election_tick", 1),
        ("lease_drift_ticks", 10),
        ("lease_drift_ticks", -1),
        ("probe_retry_ticks", 0),
        ("probe_retry_ticks", 10),
        ("max_size_per_msg", 0),
        ("max_entries_per_msg", 0),
        ("max_inflight_msgs", 0),
        ("max_inflight_bytes", 10),
        ("max_uncommitted_size", 0),
        ("applied", -1),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    kwargs: dict[str, object] = {"id": "n1", field: value}
    with pytest.raises(ConfigError, match=field):
        Config(**kwargs)  # type: ignore[arg-type]


def test_config_defaults() -> None:
    c = Config(id="n1")
    assert (c.election_tick, c.heartbeat_tick, c.pre_vote, c.check_quorum) == (10, 1, True, True)
    # small enough that a lagging follower's catch-up never stalls either node for long (issue 13)
    assert c.max_size_per_msg == 256 * 1024 and c.max_inflight_bytes == 2 * 1024 * 1024
    assert c.probe_retry_ticks == 2


@pytest.mark.parametrize("kind", list(ConfChangeType))
def test_conf_change_round_trip(kind: ConfChangeType) -> None:
    cc = ConfChange(kind, "n7", b"\x00127.0.0.1:9878")
    assert decode_conf_change(encode_conf_change(cc)) == cc


@pytest.mark.parametrize("garbage", [b"", b"{}", b"[1]", b'{"type": 9, "node_id": "a", "context": ""}'])
def test_conf_change_garbage_raises_protocol_error(garbage: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_conf_change(garbage)
