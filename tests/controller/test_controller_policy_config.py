"""Election policy (spec 5.1) and ControllerConfig / properties (spec 3.11, 8.1)."""

from __future__ import annotations

import pytest

from rmqc.controller import LIVE_UPDATABLE_KEYS, ConfigBlackListed, ControllerConfig, choose_master, parse_properties
from rmqc.errors import ConfigError
from rmqc.fsm import BrokerGroup, Replica
from rmqc.liveness import LiveInfo


def group(master: int | None, sss: set[int], ids: tuple[int, ...] = (1, 2, 3)) -> BrokerGroup:
    replicas = {i: Replica(f"h{i}:1", f"h{i}:1;0") for i in ids}
    return BrokerGroup("C", "b", len(ids) + 1, replicas, master, 1, frozenset(sss), 1)


def info(epoch: int = 1, offset: int = 0, priority: int = 2**31 - 1) -> LiveInfo:
    return LiveInfo("h:1", 0, 10_000, epoch, offset, -1, priority)


def choose(g: BrokerGroup, live: dict[int, LiveInfo], *, unclean: bool = False, preferred: int | None = None):
    return choose_master(g, unclean=unclean, preferred=preferred,
                         is_alive=lambda i: i in live, live_info=live.get)


def test_live_old_master_is_kept() -> None:
    assert choose(group(1, {1, 2}), {1: info(), 2: info(epoch=9)}) == 1


def test_higher_epoch_then_higher_offset_then_lower_priority_then_smaller_id() -> None:
    g = group(None, {1, 2, 3})
    assert choose(g, {1: info(1, 500), 2: info(2, 0), 3: info(1, 900)}) == 2
    assert choose(g, {1: info(1, 500), 2: info(1, 400), 3: info(1, 900)}) == 3
    assert choose(g, {1: info(1, 5, 3), 2: info(1, 5, 2), 3: info(1, 5, 1)}) == 3
    assert choose(g, {3: info(1, 5, 1), 2: info(1, 5, 1)}) == 2


def test_offsets_are_compared_as_64_bit_values() -> None:
    # Java casts the difference to int: 2**32 + 1 vs 1 would compare as equal (or backwards).
    g = group(None, {1, 2})
    assert choose(g, {1: info(1, 1), 2: info(1, 2**32 + 1)}) == 2
    assert choose(g, {1: info(1, 2**31 + 10), 2: info(1, 5)}) == 1


def test_only_live_sync_state_set_members_unless_unclean() -> None:
    g = group(1, {1})
    assert choose(g, {2: info(), 3: info()}) is None
    assert choose(g, {2: info(), 3: info(offset=7)}, unclean=True) == 3


def test_preferred_id_must_be_live_in_the_candidate_set() -> None:
    g = group(1, {1, 2})
    assert choose(g, {1: info(), 2: info()}, preferred=2) == 2
    assert choose(g, {1: info(), 3: info()}, preferred=3) is None
    assert choose(g, {1: info(), 3: info()}, preferred=3, unclean=True) == 3
    assert choose(g, {1: info(), 2: info()}, preferred=1) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a=1\nb = 2\n", {"a": "1", "b": "2"}),
        ("# comment\n! also\n\n  k: v  \n", {"k": "v  "}),
        ("k v\n", {"k": "v"}),
        ("k=a\\\n   b\n", {"k": "ab"}),
        ("k=\\u0041\\t\n", {"k": "A\t"}),
        ("a\\=b=c\n", {"a=b": "c"}),
    ],
)
def test_parse_properties(text: str, expected: dict) -> None:
    assert parse_properties(text) == expected


def test_parse_properties_rejects_a_bad_escape() -> None:
    with pytest.raises(ConfigError, match="bad properties text"):
        parse_properties("k=\\u00G1\n")


def test_config_defaults_and_startup_file() -> None:
    config = ControllerConfig.from_properties(
        "controllerDLegerGroup=group1\nenableElectUncleanMaster=true\nprocessReadEvent=true\nmyKey=x\n")
    assert config.controller_group == "group1" and config.enable_elect_unclean_master
    assert config.get("isProcessReadEvent") is True and config.elect_master_max_retry_count == 3
    text = config.to_properties().decode()
    assert "myKey=x\n" in text and "isProcessReadEvent=true\n" in text


def test_update_is_all_or_nothing_and_bumps_the_revision() -> None:
    config = ControllerConfig()
    with pytest.raises(ConfigError):
        config.update_from_properties("enableElectUncleanMaster=true\nelectMasterMaxRetryCount=x\n")
    assert not config.enable_elect_unclean_master and config.revision == 0
    with pytest.raises(ConfigError, match="unknown key 'unknown'"):
        config.update_from_properties("electMasterMaxRetryCount=5\nunknown=1\n")
    assert config.update_from_properties("electMasterMaxRetryCount=5\n") == {"electMasterMaxRetryCount": 5}
    assert config.revision == 1


def test_black_list_includes_the_configured_keys() -> None:
    config = ControllerConfig()
    with pytest.raises(ConfigBlackListed):
        config.update_from_properties("configBlackList=x\n")
    config = ControllerConfig({"configBlackList": "configBlackList;configStorePath;listenPort"})
    with pytest.raises(ConfigBlackListed):
        config.update_from_properties("listenPort=1\n")


def test_typed_construction_rejects_bad_values() -> None:
    with pytest.raises(ConfigError):
        ControllerConfig({"electMasterMaxRetryCount": True})
    with pytest.raises(ConfigError):
        ControllerConfig({"noSuchKey": 1})
    assert ControllerConfig({"electMasterMaxRetryCount": "7"}).elect_master_max_retry_count == 7


def test_live_updatable_keys_are_the_documented_three_and_rmqcs_cluster_name_check() -> None:
    assert LIVE_UPDATABLE_KEYS == {"electMasterMaxRetryCount", "enableElectUncleanMaster", "notifyBrokerRoleChanged",
                                   "clusterNameCheck"}
