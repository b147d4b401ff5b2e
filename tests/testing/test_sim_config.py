"""The simulator runs its replicas with `rmqc serve`'s configuration class and defaults: only the
knobs it varies, its scale (SIM_SCALE) and the node's identity differ, so a default changed in
NodeConfig reaches the simulator and no second copy of the defaults can drift from it."""

from __future__ import annotations

import dataclasses

import pytest

from rmqc.config import NodeConfig
from rmqc.errors import ConfigError
from rmqc.testing._simreplica import SIM_DATA_DIR, SIM_GROUP, SIM_SCALE, NodeKnobs, sim_node_config

KNOB_FIELDS = {"tick_ms", "election_tick", "heartbeat_tick", "idle_heartbeat_tick", "lease_drift_ticks",
               "lease_ticks", "snapshot_every_entries"}
IDENTITY_FIELDS = {"node_id", "peers", "join_address", "group", "data_dir"}
ADDRESSES = {"n0": "127.0.0.1:9000", "n1": "127.0.0.1:9001", "n2": "127.0.0.1:9002"}


def differences(config: NodeConfig) -> set[str]:
    defaults = NodeConfig()
    return {field.name for field in dataclasses.fields(NodeConfig)
            if getattr(config, field.name) != getattr(defaults, field.name)}


def test_every_other_field_is_rmqc_serves_default() -> None:
    config = sim_node_config("n1", ADDRESSES, NodeKnobs())
    assert differences(config) <= KNOB_FIELDS | IDENTITY_FIELDS | set(SIM_SCALE)
    assert {name: getattr(config, name) for name in SIM_SCALE} == SIM_SCALE
    assert (config.group, config.data_dir, config.listen_address) == (SIM_GROUP, SIM_DATA_DIR, "127.0.0.1:9001")
    assert config.peer_ids == ("n0", "n1", "n2") and not config.join


def test_knobs_reach_the_config_and_lease_ticks_defaults_to_the_election_timeout() -> None:
    knobs = NodeKnobs(tick_ms=7, election_tick=12, lease_drift_ticks=5, snapshot_every_entries=33)
    config = sim_node_config("n0", ADDRESSES, knobs)
    assert (config.tick_ms, config.election_tick, config.lease_drift_ticks, config.lease_ticks,
            config.snapshot_every_entries) == (7, 12, 5, 12, 33)
    assert sim_node_config("n0", ADDRESSES, dataclasses.replace(knobs, lease_ticks=9)).lease_ticks == 9


def test_a_joiner_starts_with_only_itself_and_the_members_to_ask() -> None:
    config = sim_node_config("n3", {"n3": "127.0.0.1:9003"}, NodeKnobs(), ["127.0.0.1:9000", "127.0.0.1:9001"])
    assert config.join and config.peer_ids == ("n3",)
    assert config.join_addresses == ("127.0.0.1:9000", "127.0.0.1:9001")


def test_knobs_rmqc_serve_would_refuse_are_refused_in_the_simulator_too() -> None:
    with pytest.raises(ConfigError, match="lease_drift_ticks"):
        sim_node_config("n0", ADDRESSES, NodeKnobs(lease_drift_ticks=10))
