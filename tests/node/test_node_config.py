"""NodeConfig: defaults, every source, precedence, and errors that name the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from rmqc.config import OPTIONS, NodeConfig, Peer, format_peers, load_config, parse_java_properties, parse_peers
from rmqc.errors import ConfigError

THREE_PEERS = "n0-127.0.0.1:9878;n1-127.0.0.1:9868;n2-127.0.0.1:9858"


def test_defaults_are_a_single_node_on_9878() -> None:
    config = load_config(environ={}).config
    assert config.node_id == "n0"
    assert config.peers == (Peer("n0", "127.0.0.1", 9878),)
    assert config.listen_address == "127.0.0.1:9878"
    assert config.data_dir == "./rmqc-data"
    assert config.forward_writes is True


def test_parse_peers_reads_java_syntax_and_round_trips() -> None:
    peers = parse_peers(THREE_PEERS + ";")
    assert [peer.id for peer in peers] == ["n0", "n1", "n2"]
    assert peers[1].address == "127.0.0.1:9868"
    assert format_peers(peers) == THREE_PEERS


@pytest.mark.parametrize("text", ["", "n0", "n0-127.0.0.1", "n0-127.0.0.1:0", "n0-h:1;n0-h:2", "-h:1",
                                  "n0-h:x", "n0-h h:1", "n 0-h:1", "n0-:1"])
def test_parse_peers_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match=r"expected id-host:port items separated by ';'|duplicate|port"):
        parse_peers(text)


def test_peers_separated_by_commas_are_refused_saying_the_separator() -> None:
    """Accepted before as one peer n0 on the host "localhost:9900,n1-localhost" (port 9901)."""
    with pytest.raises(ConfigError, match=r"peers: .*separated by ';', not ','; expected id-host:port"):
        load_config(environ={}, flags={"peers": "n0-localhost:9900,n1-localhost:9901"})


def test_every_peer_is_checked_not_only_the_own_one() -> None:
    with pytest.raises(ConfigError, match=r"peer 'n1-127.0.0.1:98x8' is not|port '98x8' is not a number"):
        load_config(environ={}, flags={"peers": "n0-127.0.0.1:9878;n1-127.0.0.1:98x8"})


def test_peers_as_a_toml_array(tmp_path: Path) -> None:
    toml = write(tmp_path / "rmqc.toml", 'peers = ["n0-127.0.0.1:9878", "n1-127.0.0.1:9868"]\n')
    config = load_config(toml_path=toml, environ={}).config
    assert format_peers(config.peers) == "n0-127.0.0.1:9878;n1-127.0.0.1:9868"
    bad = write(tmp_path / "bad.toml", "peers = [9878, 9868]\n")
    with pytest.raises(ConfigError, match="a peers array holds strings"):
        load_config(toml_path=bad, environ={})


def test_a_data_dir_that_is_a_file_is_refused_naming_the_option(tmp_path: Path) -> None:
    a_file = tmp_path / "notes.txt"
    a_file.write_text("not a directory")
    for path in (a_file, a_file / "below"):
        with pytest.raises(ConfigError, match=rf"data_dir: bad value .* from command line: '{a_file}' is a file"):
            load_config(environ={}, flags={"data_dir": str(path)})
    assert load_config(environ={}, flags={"data_dir": str(tmp_path / "new" / "dir")}).config.data_dir


def test_node_must_be_in_peers() -> None:
    with pytest.raises(ConfigError, match="node_id"):
        load_config(environ={}, flags={"node_id": "n9", "peers": THREE_PEERS})


def test_bad_value_names_option_and_source() -> None:
    with pytest.raises(ConfigError, match=r"tick_ms: bad value 'fast' from environment"):
        load_config(environ={"RMQC_TICK_MS": "fast"})
    with pytest.raises(ConfigError, match="default_consistency"):
        load_config(environ={}, flags={"default_consistency": "eventual"})


def test_heartbeat_must_be_below_election() -> None:
    with pytest.raises(ConfigError, match="heartbeat_tick"):
        NodeConfig(heartbeat_tick=20, election_tick=10)


@pytest.mark.parametrize("idle_heartbeat_tick", [1, 10])
def test_idle_heartbeat_must_lie_from_heartbeat_to_below_election(idle_heartbeat_tick: int) -> None:
    with pytest.raises(ConfigError, match="idle_heartbeat_tick"):
        NodeConfig(idle_heartbeat_tick=idle_heartbeat_tick, heartbeat_tick=2, election_tick=10)
    assert NodeConfig(idle_heartbeat_tick=0).idle_heartbeat_tick == 0  # off: heartbeat_tick always
    assert load_config(environ={"RMQC_IDLE_HEARTBEAT_TICK": "5"}).config.idle_heartbeat_tick == 5


@pytest.mark.parametrize("lease_ticks", [1, 11])
def test_lease_must_fit_between_drift_and_election_timeout(lease_ticks: int) -> None:
    with pytest.raises(ConfigError, match="lease_ticks"):
        NodeConfig(lease_ticks=lease_ticks, lease_drift_ticks=1, election_tick=10)


def test_frame_bound_must_stay_below_peer_magic() -> None:
    with pytest.raises(ConfigError, match="max_frame_bytes"):
        NodeConfig(max_frame_bytes=0x524D5150)


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_precedence_defaults_toml_properties_env_flags(tmp_path: Path) -> None:
    toml = write(tmp_path / "rmqc.toml", f'peers = "{THREE_PEERS}"\nnode_id = "n1"\ntick_ms = 20\n'
                 'election_tick = 30\n[node]\ngroup = "from-toml"\nheartbeat_tick = 3\n')
    conf = write(tmp_path / "controller.conf", "controllerDLegerGroup = from-conf\ncontrollerDLegerSelfId=n2\n")
    loaded = load_config(toml_path=toml, java_properties_path=conf,
                         environ={"RMQC_NODE_ID": "n0", "RMQC_TICK_MS": "15"},
                         flags={"tick_ms": "12", "data_dir": None})
    config = loaded.config
    assert config.election_tick == 30  # TOML over default
    assert config.heartbeat_tick == 3  # TOML [node] table
    assert config.group == "from-conf"  # properties over TOML
    assert config.node_id == "n0"  # environment over properties
    assert config.tick_ms == 12  # flags over environment
    assert config.data_dir == "./rmqc-data"  # a flag given as None is unset


def test_java_controller_conf_maps_keys_and_warns_on_unknown(tmp_path: Path) -> None:
    conf = write(tmp_path / "controller.conf", "\n".join([
        "# a Java controller.conf",
        "controllerDLegerGroup = group1",
        f"controllerDLegerPeers = {THREE_PEERS}",
        "controllerDLegerSelfId = n1",
        f"controllerStorePath = {tmp_path / 'store'}",
        "enableElectUncleanMaster = true",
        "notifyBrokerRoleChanged = false",
        "scanNotActiveBrokerInterval = 2000",
        "isProcessReadEvent = true",
        "controllerThreadPoolNums = 8",
        "someFutureKey = 1",
    ]))
    loaded = load_config(java_properties_path=conf, environ={})
    config = loaded.config
    assert (config.group, config.node_id, config.listen_address) == ("group1", "n1", "127.0.0.1:9868")
    assert config.data_dir == str(tmp_path / "store")
    assert config.enable_elect_unclean_master is True
    assert config.notify_broker_role_changed is False
    assert config.scan_not_active_broker_interval_ms == 2000
    assert config.process_read_event is True
    assert loaded.warnings == ("unknown controller property 'someFutureKey' ignored",)


def test_empty_java_store_path_keeps_default(tmp_path: Path) -> None:
    conf = write(tmp_path / "controller.conf", "controllerStorePath=\n")
    assert load_config(java_properties_path=conf, environ={}).config.data_dir == "./rmqc-data"


def test_unknown_toml_option_is_an_error(tmp_path: Path) -> None:
    toml = write(tmp_path / "bad.toml", "tick_msec = 3\n")
    with pytest.raises(ConfigError, match="tick_msec"):
        load_config(toml_path=toml, environ={})


def test_invalid_toml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(toml_path=write(tmp_path / "x.toml", "tick_ms = = 3"), environ={})
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(java_properties_path=str(tmp_path / "absent.conf"), environ={})


def test_properties_syntax_continuations_and_colons() -> None:
    text = "! comment\na:1\nb = two \\\n  parts\nflag\n"
    assert parse_java_properties(text) == {"a": "1", "b": "two parts", "flag": ""}


def test_every_option_is_documented_with_its_env_var() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "configuration.md").read_text()
    for option in OPTIONS:
        assert f"`{option.name}`" in docs, option.name
        assert option.env_var in docs, option.env_var
        if option.java_key:
            assert option.java_key in docs, option.java_key


def test_listen_without_peers_bootstraps_no_membership_and_join_takes_any_members() -> None:
    """A joining node (rmqc serve --id n3 --listen ... --join ...) names no peers, not even the
    default n0 entry: it must not bootstrap a group of its own; a restarted member is started the
    same way without --join (its membership is in its log)."""
    flags = {"node_id": "n3", "listen": "127.0.0.1:9900", "join_address": "127.0.0.1:9878; 127.0.0.1:9868"}
    config = load_config(environ={}, flags=flags).config
    assert config.peers == () and config.peer_ids == ()
    assert config.self_peer == Peer("n3", "127.0.0.1", 9900) and config.listen_address == "127.0.0.1:9900"
    assert config.join and config.join_addresses == ("127.0.0.1:9878", "127.0.0.1:9868")
    assert not load_config(environ={}, flags={"node_id": "n3", "listen": "127.0.0.1:9900"}).config.join


def test_listen_must_agree_with_the_own_entry_of_peers() -> None:
    same = load_config(environ={}, flags={"node_id": "n1", "listen": "127.0.0.1:9868", "peers": THREE_PEERS}).config
    assert same.peers == parse_peers(THREE_PEERS)
    with pytest.raises(ConfigError, match=r"listen: 127.0.0.1:9000 differs from n1's entry 127.0.0.1:9868"):
        load_config(environ={}, flags={"node_id": "n1", "listen": "127.0.0.1:9000", "peers": THREE_PEERS})
    with pytest.raises(ConfigError, match="join_address: bad value 'somewhere'"):
        load_config(environ={}, flags={"node_id": "n3", "listen": "127.0.0.1:9000", "join_address": "somewhere"})


def test_a_join_address_off_loopback_needs_a_peer_secret() -> None:
    with pytest.raises(ConfigError, match=r"join address 10.0.0.1:9878 is not on loopback"):
        NodeConfig(node_id="n3", peers=(), listen="127.0.0.1:9900", join_address="10.0.0.1:9878")
    with pytest.raises(ConfigError, match=r"peer n3 at 10.0.0.2:9900 is not on loopback"):
        NodeConfig(node_id="n3", peers=(), listen="10.0.0.2:9900")


@pytest.mark.parametrize("encoding", ["iso-8859-1", "utf-8"])
def test_java_controller_conf_in_latin_1_or_utf_8(tmp_path: Path, encoding: str) -> None:
    """Java's Properties.load reads ISO-8859-1: a Latin-1 comment crashed serve (UnicodeDecodeError)."""
    conf = tmp_path / "controller.conf"
    conf.write_bytes("# maintained by J\u00fcrgen\ncontrollerDLegerGroup = from-conf\n".encode(encoding))
    loaded = load_config(java_properties_path=str(conf), environ={})
    assert loaded.config.group == "from-conf"
