"""Node configuration: one table of options, five sources, one frozen `NodeConfig`.

Precedence (lowest first): defaults < TOML file (`--config FILE`) < Java controller properties file
(`-c controller.conf`) < environment (`RMQC_<OPTION>`) < command-line flags. Each source yields raw
values keyed by option name; `load_config` merges them in that order and parses every value with its
option's parser, so a bad value raises `ConfigError` naming the option, the source and the value.

The Java keys (spec section 8.1) map onto our options through `Option.java_key`; Java keys we accept
but that have no effect here are listed in `JAVA_KEYS_WITHOUT_EFFECT`; any other key is reported back
as a warning, never fatal, so an operator can switch an existing deployment over.
"""

from __future__ import annotations

import ipaddress
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from rmqc.errors import ConfigError
from rmqc.peerwire import PEER_MAGIC
from rmqc.replica import CONSISTENCY_LEVELS

DEFAULT_PEERS = "n0-127.0.0.1:9878"
# A remoting frame starts with its length; the peer handshake starts with PEER_MAGIC read as a length.
# Keeping every frame bound below that value is what lets one port serve both protocols.
PEER_MAGIC_AS_LENGTH = int.from_bytes(PEER_MAGIC, "big")
LOG_FORMATS = ("text", "json")
TLS_MODES = ("disabled", "permissive", "enforcing")  # RocketMQ's TlsMode names
ENV_PREFIX = "RMQC_"


@dataclass(frozen=True, slots=True)
class Peer:
    id: str
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


PEERS_FORMAT = ("id-host:port items separated by ';' (e.g. \"n0-127.0.0.1:9878;n1-127.0.0.1:9868\"), "
                "or in TOML an array of such items")
_NODE_ID = re.compile(r"[A-Za-z0-9_.]+")  # no '-': it separates the id from the host
_HOST = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?")  # a host name or IPv4 address


def parse_peers(value: str | Sequence[str]) -> tuple[Peer, ...]:
    """Parse the Java `controllerDLegerPeers` syntax, `n0-127.0.0.1:9878;n1-127.0.0.1:9868`, or a
    list of its items (a TOML array). Every item is checked, so a list with the wrong separator
    fails here rather than later as an unknown host."""
    peers = [_parse_peer(item) for item in _peer_items(value)]
    if not peers:
        raise ValueError(f"no peers given; expected {PEERS_FORMAT}")
    ids = [peer.id for peer in peers]
    if len(set(ids)) != len(ids):
        raise ValueError(f"duplicate peer ids in {ids}")
    return tuple(peers)


def _peer_items(value: str | Sequence[str]) -> list[str]:
    if isinstance(value, (list, tuple)):
        if not all(isinstance(item, str) for item in value):
            raise ValueError(f"a peers array holds strings, not {value!r}; expected {PEERS_FORMAT}")
        items = list(value)
    else:
        text = str(value)
        if "," in text:
            raise ValueError(f"{text!r}: peers are separated by ';', not ','; expected {PEERS_FORMAT}")
        items = text.split(";")
    return [item.strip() for item in items if item.strip()]


def _parse_peer(item: str) -> Peer:
    node_id, dash, address = (part.strip() for part in item.partition("-"))
    host, colon, port_text = address.rpartition(":")
    if not (dash and colon and _NODE_ID.fullmatch(node_id) and _HOST.fullmatch(host.strip())):
        raise ValueError(f"peer {item!r} is not id-host:port; expected {PEERS_FORMAT}")
    return Peer(node_id, host.strip(), _parse_port(port_text))


def format_peers(peers: Iterable[Peer]) -> str:
    return ";".join(f"{peer.id}-{peer.address}" for peer in peers)


def _parse_port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise ValueError(f"port {text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range 1..65535")
    return port


def _parse_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "1", "yes", "on"):
        return True
    if text in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"{value!r} is not a boolean")


def _positive_int(value: Any) -> int:
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not an integer")
    number = int(str(value).strip())
    if number <= 0:
        raise ValueError(f"{number} is not positive")
    return number


def _non_negative_int(value: Any) -> int:
    number = int(str(value).strip())
    if number < 0:
        raise ValueError(f"{number} is negative")
    return number


def _optional_port(value: Any) -> int | None:
    if value is None or str(value).strip().lower() in ("", "none", "off"):
        return None
    return _parse_port(str(value).strip())


def _choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    def parse(value: Any) -> str:
        text = str(value).strip()
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return parse


def _lower_choice(choices: tuple[str, ...]) -> Callable[[Any], str]:
    parse = _choice(choices)
    return lambda value: parse(str(value).strip().lower())


def _text(value: Any) -> str:
    text = str(value).strip()
    if not text:
        raise ValueError("empty")
    return text


def _any_text(value: Any) -> str:
    return str(value)


def _directory(value: Any) -> str:
    """A directory path; refused when it, or the nearest part of it that exists, is not a directory
    (creating the LMDB files there would fail later with a bare "File exists")."""
    text = _text(value)
    existing = Path(text)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        raise ValueError(f"{str(existing)!r} is a file, not a directory")
    return text


def _address(value: Any) -> str:
    """One `host:port`, checked as a peer's address is."""
    host, colon, port_text = _text(value).rpartition(":")
    if not (colon and _HOST.fullmatch(host)):
        raise ValueError(f"{value!r} is not host:port")
    return f"{host}:{_parse_port(port_text)}"


def _addresses(value: Any) -> str:
    """`host:port` items separated by ';' (any member, for --join); "" = none."""
    items = [item.strip() for item in str(value).split(";") if item.strip()]
    return ";".join(_address(item) for item in items)


def _peers_value(value: Any) -> tuple[Peer, ...]:
    if isinstance(value, tuple) and all(isinstance(peer, Peer) for peer in value):
        return value
    return parse_peers(value)


@dataclass(frozen=True, slots=True)
class Option:
    name: str
    parse: Callable[[Any], Any]
    help: str
    java_key: str | None = None

    @property
    def env_var(self) -> str:
        return ENV_PREFIX + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option("node_id", _text, "this node's id; must appear in peers (unless listen is given without peers)",
           "controllerDLegerSelfId"),
    Option("peers", _peers_value, "all voters, Java syntax id-host:port;...; own entry = listen address",
           "controllerDLegerPeers"),
    Option("listen", _address, "this node's host:port; default its own entry in peers (with join, peers may be "
                               "left out: the node learns the membership from the group)"),
    Option("join_address", _addresses,
           "host:port of any member (';' between several): with an empty data directory, ask the group to add "
           "this node as a learner (rmqc serve --join); ignored once the node holds the log"),
    Option("data_dir", _directory, "directory of the LMDB log, hard state and snapshots", "controllerStorePath"),
    Option("group", _text, "Raft group name; peers of another group are refused", "controllerDLegerGroup"),
    Option("peer_secret_file", _any_text,
           "file holding the cluster's peer secret(s): the first line signs, every line verifies"),
    Option("allow_insecure_peers", _parse_bool,
           "let peers off loopback join without a peer secret (trusted networks only)"),
    Option("acl_enabled", _parse_bool, "require RocketMQ ACL signatures on remoting requests (acl_file)"),
    Option("acl_file", _any_text, "RocketMQ plain_acl.yml: accounts and whitelisted addresses; re-read when changed"),
    Option("tls_mode", _lower_choice(TLS_MODES), "disabled, permissive (TLS and plain on the port) or enforcing",
           "tls.server.mode"),
    Option("tls_cert_path", _any_text, "PEM certificate (chain) of this node", "tls.server.certPath"),
    Option("tls_key_path", _any_text, "PEM private key of this node", "tls.server.keyPath"),
    Option("tls_trust_cert_path", _any_text, "PEM CA certificate(s) that client and peer certificates must chain to",
           "tls.server.trustCertPath"),
    Option("tls_auth_client", _parse_bool, "require and verify client certificates (mutual TLS)",
           "tls.server.authClient"),
    Option("tls_notify", _parse_bool,
           "send 1008 to brokers over TLS, checking their certificates against tls_trust_cert_path"),
    Option("tick_ms", _positive_int, "length of one Raft tick"),
    Option("election_tick", _positive_int, "election timeout in ticks (randomised up to twice this)"),
    Option("heartbeat_tick", _positive_int, "leader heartbeat interval in ticks"),
    Option("idle_heartbeat_tick", _non_negative_int,
           "leader heartbeat interval in ticks after an election timeout without writes or reads (0: heartbeat_tick)"),
    Option("lease_drift_ticks", _non_negative_int, "clock drift bound subtracted from the leader lease"),
    Option("lease_ticks", _positive_int,
           "longest leader lease in ticks; a leader that takes over from a dead-looking one waits it out"),
    Option("snapshot_every_entries", _positive_int, "snapshot the state and compact the log every N entries"),
    Option("forward_writes", _parse_bool, "forward leader-only requests from followers (false: answer 2007)"),
    Option("default_consistency", _choice(CONSISTENCY_LEVELS), "read consistency when a request names none"),
    Option("max_connections", _positive_int, "bound on open remoting connections"),
    Option("max_connections_per_ip", _positive_int,
           "bound on open connections from one remote address (loopback counts only towards the total)"),
    Option("idle_timeout_ms", _positive_int,
           "a remoting connection that completes no frame for this long is closed (idle or slowloris)"),
    Option("max_frame_bytes", _positive_int, "bound on one remoting frame"),
    Option("max_peer_frame_bytes", _positive_int, "bound on one peer frame (snapshots travel in one)"),
    Option("peer_outbox_messages", _positive_int, "bound on queued Raft messages per peer (oldest dropped)"),
    Option("max_entries_per_append", _positive_int, "bound on entries in one Raft append message"),
    Option("max_appends_in_flight", _positive_int, "Raft append messages sent to a peer and not yet acknowledged"),
    Option("group_commit", _parse_bool,
           "batch every waiting request into one append (false: one request in the log at a time)"),
    Option("digest_interval_ms", _positive_int, "how often followers forward liveness digests"),
    Option("request_timeout_ms", _positive_int, "wait for commit before answering SYSTEM_ERROR"),
    Option("metrics_port", _optional_port, "Prometheus port; none = no metrics endpoint"),
    Option("metrics_host", _text, "address the metrics port (/metrics, /livez, /readyz) listens on"),
    Option("log_format", _choice(LOG_FORMATS), "stderr log format"),
    # The controller keys of spec section 8.1 that change behaviour here.
    Option("enable_elect_unclean_master", _parse_bool, "allow masters outside the sync state set",
           "enableElectUncleanMaster"),
    Option("notify_broker_role_changed", _parse_bool, "send 1008 after elections", "notifyBrokerRoleChanged"),
    Option("cluster_name_check", _parse_bool,
           "refuse (2005) a request naming a broker group registered under another cluster name",
           "clusterNameCheck"),
    Option("elect_master_max_retry_count", _non_negative_int,
           "controller-triggered election attempts; 0 = none", "electMasterMaxRetryCount"),
    Option("scan_not_active_broker_interval_ms", _positive_int,
           "Java scan period; here only an upper bound on expiry lateness", "scanNotActiveBrokerInterval"),
    Option("scan_inactive_master_interval_ms", _positive_int,
           "how often the leader re-checks sets whose master is dead", "scanInactiveMasterInterval"),
    Option("process_read_event", _parse_bool, "Java isProcessReadEvent (reads append an entry)",
           "processReadEvent"),
    Option("config_black_list", _any_text, "keys 1009 may not change, ;-separated", "configBlackList"),
    Option("config_store_path", _any_text, "where 1009 writes the merged configuration", "configStorePath"),
)
OPTIONS_BY_NAME = {option.name: option for option in OPTIONS}
OPTIONS_BY_JAVA_KEY = {option.java_key: option for option in OPTIONS if option.java_key}
# Java keys we accept without complaint although they change nothing in rmqc (thread pools, DLedger
# file sizes, OpenTelemetry exporters); listed so they are not reported as unknown.
JAVA_KEYS_WITHOUT_EFFECT = frozenset({
    "rocketmqHome", "controllerType", "controllerThreadPoolNums", "controllerRequestThreadPoolQueueCapacity",
    "mappedFileSize", "isProcessReadEvent", "metricsExporterType", "metricsGrpcExporterTarget",
    "metricsGrpcExporterHeader", "metricGrpcExporterTimeOutInMills", "metricGrpcExporterIntervalInMills",
    "metricLoggingExporterIntervalInMills", "metricsPromExporterPort", "metricsPromExporterHost",
    "metricsLabel", "metricsInDelta", "listenPort", "namesrvAddr",
})


@dataclass(frozen=True, slots=True)
class NodeConfig:
    node_id: str = "n0"
    peers: tuple[Peer, ...] = field(default_factory=lambda: parse_peers(DEFAULT_PEERS))
    # "" = the own entry of peers. Given with peers, it must match that entry; given without
    # (build_config then leaves peers empty), the node bootstraps no membership: it is a joining
    # node, or a member restarted on its data directory, whose membership is in its log.
    listen: str = ""
    join_address: str = ""  # members to ask for a place in the group ("" = not joining)
    data_dir: str = "./rmqc-data"
    group: str = "rmqc"
    peer_secret_file: str = ""
    allow_insecure_peers: bool = False
    acl_enabled: bool = False  # off by default, as in RocketMQ
    acl_file: str = ""
    # RocketMQ servers default to permissive, but TLS needs a certificate: without one, disabled.
    tls_mode: str = "disabled"
    tls_cert_path: str = ""
    tls_key_path: str = ""
    tls_trust_cert_path: str = ""
    tls_auth_client: bool = False
    tls_notify: bool = False
    # 50 ms ticks, a heartbeat every tick, elections after 0.5-1 s of silence. A leader whose
    # process dies is replaced much faster than that: its port refuses reconnection and a
    # designated survivor takes over at once (node/_node.py on_peer_down) and commits after the
    # old leader's lease (lease_ticks below), measured at 0.19 s (p50 and p99) to the first
    # committed write (docs/benchmarks.md). The election timeout only matters for hung or partitioned
    # leaders, and is kept long enough that a leader stalled by a slow fsync on a busy machine is
    # not deposed (0.15 s flapped under load in our measurements). Ticks of 10 ms (5 per
    # heartbeat) woke every idle node 100 times a second, ~6 % CPU each, and that contention on
    # two cores doubled the 1-client write p99 (A/B: 13.5-15.9 ms -> 5.5-8.2 ms).
    tick_ms: int = 50
    election_tick: int = 10
    heartbeat_tick: int = 1
    # An idle leader (no write, ReadIndex or lease read for election_tick ticks) heartbeats every
    # 3rd tick: a third of the idle wake-ups on every node. Its followers still hear it at least
    # 7 ticks before their election timeout; the first read after idling renews the lease with one
    # ReadIndex round and brings back a heartbeat every tick (issue 21).
    idle_heartbeat_tick: int = 3
    lease_drift_ticks: int = 1
    # The leader serves lease reads for lease_ticks - lease_drift_ticks ticks (100 ms) after a
    # heartbeat round it sent was acked; a survivor that takes over from a leader whose port
    # refuses it waits up to lease_ticks + 1 ticks (150-200 ms) before committing, because the old
    # leader may be alive behind a REJECT rule (rmqc.reads._lease). Longer leases slow that
    # failover down; shorter ones make lease reads fall back to ReadIndex when acks are late.
    lease_ticks: int = 3
    snapshot_every_entries: int = 10_000
    forward_writes: bool = True
    default_consistency: str = "linearizable"
    max_connections: int = 4096
    # A broker opens one connection per controller, an admin host a few: 256 from one address is
    # far beyond any honest need and keeps one host from taking every slot of max_connections.
    max_connections_per_ip: int = 256
    # Java closes a connection idle for serverChannelMaxIdleTimeSeconds (120 s); brokers heartbeat
    # every second or two, so only silent or stalling clients meet it.
    idle_timeout_ms: int = 120_000
    max_frame_bytes: int = 16 * 1024 * 1024  # the Java frameMaxLength default
    max_peer_frame_bytes: int = 256 * 1024 * 1024  # a whole snapshot travels in one frame
    peer_outbox_messages: int = 4096
    # Batching and pipelining. group_commit=false with 1 entry per append and 1 append in flight is
    # the single-queue design of the Java controller (one request through the log at a time).
    max_entries_per_append: int = 1024
    max_appends_in_flight: int = 256
    group_commit: bool = True
    digest_interval_ms: int = 30
    request_timeout_ms: int = 5000  # Java waits 5 s for a commit before answering SYSTEM_ERROR
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"  # 0.0.0.0 (or the pod's address) for Kubernetes httpGet probes
    log_format: str = "text"
    enable_elect_unclean_master: bool = False
    notify_broker_role_changed: bool = True
    cluster_name_check: bool = True
    elect_master_max_retry_count: int = 3
    scan_not_active_broker_interval_ms: int = 5000
    scan_inactive_master_interval_ms: int = 5000
    process_read_event: bool = False
    config_black_list: str = "configBlackList;configStorePath"
    config_store_path: str = ""

    def __post_init__(self) -> None:
        check_config(self)

    @property
    def join(self) -> bool:
        """Whether this node joins a running group (the replica then starts from an empty membership
        instead of bootstrapping `peers`, as long as its storage is empty)."""
        return bool(self.join_address)

    @property
    def join_addresses(self) -> tuple[str, ...]:
        return tuple(item for item in self.join_address.split(";") if item)

    @property
    def self_peer(self) -> Peer:
        if self.listen:
            host, _colon, port = self.listen.rpartition(":")
            return Peer(self.node_id, host, int(port))
        return next(peer for peer in self.peers if peer.id == self.node_id)

    @property
    def listen_address(self) -> str:
        return self.self_peer.address

    @property
    def peer_ids(self) -> tuple[str, ...]:
        return tuple(peer.id for peer in self.peers)

    def peer(self, node_id: str) -> Peer | None:
        return next((peer for peer in self.peers if peer.id == node_id), None)

    def with_changes(self, **changes: Any) -> NodeConfig:
        return replace(self, **changes)


def check_config(config: NodeConfig) -> None:
    """Cross-option rules; each failure names the option it blames."""
    _check_own_address(config)
    if config.heartbeat_tick >= config.election_tick:
        raise ConfigError(
            f"heartbeat_tick: {config.heartbeat_tick} must be below election_tick {config.election_tick}"
        )
    if config.idle_heartbeat_tick and not config.heartbeat_tick <= config.idle_heartbeat_tick < config.election_tick:
        raise ConfigError(
            f"idle_heartbeat_tick: {config.idle_heartbeat_tick} must be 0 or from heartbeat_tick "
            f"{config.heartbeat_tick} to below election_tick {config.election_tick}"
        )
    if config.lease_drift_ticks >= config.election_tick:
        raise ConfigError(
            f"lease_drift_ticks: {config.lease_drift_ticks} must be below election_tick {config.election_tick}"
        )
    if not config.lease_drift_ticks < config.lease_ticks <= config.election_tick:
        raise ConfigError(
            f"lease_ticks: {config.lease_ticks} must be above lease_drift_ticks {config.lease_drift_ticks} "
            f"and at most election_tick {config.election_tick}"
        )
    _check_peer_security(config)
    _check_tls(config)
    if config.acl_enabled and not config.acl_file:
        raise ConfigError("acl_file: must name a plain_acl.yml when acl_enabled is true (docs/security.md)")
    for name in ("max_frame_bytes", "max_peer_frame_bytes"):
        if getattr(config, name) >= PEER_MAGIC_AS_LENGTH:
            raise ConfigError(f"{name}: must be below {PEER_MAGIC_AS_LENGTH} (the peer handshake magic)")


def _check_own_address(config: NodeConfig) -> None:
    """peers names this node (at `listen`, if given), or is empty and `listen` says where it is."""
    entry = config.peer(config.node_id)
    if not config.peers and config.listen:
        return
    if entry is None:
        raise ConfigError(f"node_id: {config.node_id!r} is not in peers {format_peers(config.peers)!r}")
    if config.listen and entry.address != config.listen:
        raise ConfigError(f"listen: {config.listen} differs from {config.node_id}'s entry {entry.address} in peers")


def _check_peer_security(config: NodeConfig) -> None:
    """Secure by default: without a peer secret anyone who reaches the port could speak as a member
    (vote, append, depose the leader), which is tolerable only when every member is this machine."""
    if config.peer_secret_file or config.allow_insecure_peers or mutual_tls_enforced(config):
        return
    remote = [f"peer {peer.id} at {peer.address}" for peer in config.peers or (config.self_peer,)
              if not is_loopback(peer.host)]
    remote += [f"join address {address}" for address in config.join_addresses
               if not is_loopback(address.rpartition(":")[0])]
    if remote:
        raise ConfigError(
            f"peer_secret_file: not set, and {remote[0]} is not on loopback, "
            "so anyone reaching the port could join the Raft group. Create a secret once "
            "(`head -c 32 /dev/urandom | base64 > peer.secret && chmod 600 peer.secret`), copy the file to "
            "every node and set peer_secret_file to its path, or enforce mutual TLS (tls_mode = enforcing, "
            "tls_auth_client = true; docs/security.md); on a trusted network, allow_insecure_peers = true "
            "starts without either"
        )


def mutual_tls_enforced(config: NodeConfig) -> bool:
    """Only TLS on every connection with verified client certificates authenticates peers: in
    permissive mode a stranger could still connect in plain."""
    return config.tls_mode == "enforcing" and config.tls_auth_client


def _check_tls(config: NodeConfig) -> None:
    if config.tls_mode != "disabled" and not config.tls_cert_path:
        raise ConfigError(f"tls_cert_path: tls_mode {config.tls_mode} needs this node's certificate")
    if config.tls_auth_client and not config.tls_trust_cert_path:
        raise ConfigError("tls_trust_cert_path: tls_auth_client needs the CA that client certificates chain to")
    if config.tls_mode != "disabled" and not config.tls_trust_cert_path and _may_have_peers(config):
        raise ConfigError("tls_trust_cert_path: peers check each other's certificates against it: needed as soon as "
                          "the group has another member (peers names others, join is given, or a member restarts "
                          "on its data directory); a node alone (peers names only itself) starts without it")
    if config.tls_notify and not config.tls_trust_cert_path:
        raise ConfigError("tls_trust_cert_path: tls_notify checks the brokers' certificates against it")


def _may_have_peers(config: NodeConfig) -> bool:
    """False only for a node configured alone (its own entry in peers, not joining)."""
    return config.join or [peer.id for peer in config.peers] != [config.node_id]


def is_loopback(host: str) -> bool:
    """True for addresses that only this machine can reach; a name other than localhost counts as
    remote (it may resolve anywhere)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class LoadedConfig:
    config: NodeConfig
    warnings: tuple[str, ...] = ()


def read_toml(path: str) -> dict[str, Any]:
    """Options from a TOML file: top-level keys are option names (a `[node]` table is also read)."""
    try:
        with open(path, "rb") as handle:
            document = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"--config: cannot read {path}: {error}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"--config: {path} is not valid TOML: {error}") from error
    values = dict(document.pop("node", {}))
    values.update(document)
    unknown = sorted(set(values) - set(OPTIONS_BY_NAME))
    if unknown:
        raise ConfigError(f"--config: unknown option(s) {', '.join(unknown)} in {path}")
    return values


def parse_java_properties(text: str) -> dict[str, str]:
    """The subset of Java properties syntax controller.conf files use: key=value or key: value,
    `#`/`!` comments, backslash line continuations."""
    properties: dict[str, str] = {}
    pending = ""
    for raw_line in text.splitlines():
        line = pending + raw_line.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        key, value = _split_property(line)
        properties[key] = value
    if pending:
        key, value = _split_property(pending)
        properties[key] = value
    return properties


def _split_property(line: str) -> tuple[str, str]:
    cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
    if cut < 0:
        return line.strip(), ""
    return line[:cut].strip(), line[cut + 1:].strip()


def read_java_properties(path: str) -> tuple[dict[str, Any], list[str]]:
    """Options from a Java controller.conf, plus warnings for keys rmqc does not know."""
    try:
        properties = parse_java_properties(_properties_text(path))
    except OSError as error:
        raise ConfigError(f"-c: cannot read {path}: {error}") from error
    tls_file = properties.get("tls.config.file")
    if tls_file:  # RocketMQ's tls.properties: its tls.* keys, under the ones controller.conf sets itself
        try:
            properties = {**parse_java_properties(_properties_text(tls_file)), **properties}
        except OSError as error:
            raise ConfigError(f"tls.config.file: cannot read {tls_file}: {error}") from error
    return java_properties_to_options(properties)


def _properties_text(path: str) -> str:
    """A properties file's text: UTF-8, or else ISO-8859-1, the encoding of Java's Properties.load
    (a comment `# J\xfcrgen` written by a Latin-1 editor is not valid UTF-8)."""
    with open(path, "rb") as handle:
        data = handle.read()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("iso-8859-1")


def java_properties_to_options(properties: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    values: dict[str, Any] = {}
    warnings: list[str] = []
    for key, value in properties.items():
        option = OPTIONS_BY_JAVA_KEY.get(key)
        if option is not None and value == "":
            continue  # Java reads an empty value as "use the default" (e.g. controllerStorePath)
        if option is not None:
            values[option.name] = value
        elif key == "isProcessReadEvent":
            values["process_read_event"] = value
        elif key == "tls.server.need.client.auth":  # RocketMQ: none | optional | require
            values.setdefault("tls_auth_client", str(value.strip().lower() == "require"))
        elif key == "tls.config.file":
            pass  # read by read_java_properties
        elif key == "controllerType" and value != "DLedger":
            warnings.append(f"controllerType={value}: rmqc is always a Raft group (DLedger-style ports)")
        elif key not in JAVA_KEYS_WITHOUT_EFFECT:
            warnings.append(f"unknown controller property {key!r} ignored")
    return values, warnings


def read_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    return {option.name: environ[option.env_var] for option in OPTIONS if option.env_var in environ}


def build_config(sources: Iterable[tuple[str, Mapping[str, Any]]]) -> NodeConfig:
    """Merge (source name, raw values) pairs, later sources winning, and parse each value."""
    chosen: dict[str, tuple[str, Any]] = {}
    for source, values in sources:
        for name, value in values.items():
            if name not in OPTIONS_BY_NAME:
                raise ConfigError(f"{name}: unknown option (from {source})")
            chosen[name] = (source, value)
    parsed = {name: _parse_option(name, source, value) for name, (source, value) in chosen.items()}
    if parsed.get("listen") and "peers" not in parsed:
        parsed["peers"] = ()  # not the default n0 entry: `listen` alone makes this node's own entry
    return NodeConfig(**parsed)


def _parse_option(name: str, source: str, value: Any) -> Any:
    try:
        return OPTIONS_BY_NAME[name].parse(value)
    except (ValueError, TypeError) as error:
        raise ConfigError(f"{name}: bad value {value!r} from {source}: {error}") from error


def load_config(
    *,
    toml_path: str | None = None,
    java_properties_path: str | None = None,
    environ: Mapping[str, str] | None = None,
    flags: Mapping[str, Any] | None = None,
) -> LoadedConfig:
    """Defaults < TOML < Java properties < environment < flags (flags with value None are unset)."""
    sources: list[tuple[str, Mapping[str, Any]]] = []
    warnings: list[str] = []
    if toml_path:
        sources.append((f"TOML file {toml_path}", read_toml(toml_path)))
    if java_properties_path:
        java_values, java_warnings = read_java_properties(java_properties_path)
        sources.append((f"properties file {java_properties_path}", java_values))
        warnings.extend(java_warnings)
    sources.append(("environment", read_environment(os.environ if environ is None else environ)))
    sources.append(("command line", {k: v for k, v in (flags or {}).items() if v is not None}))
    return LoadedConfig(build_config(sources), tuple(warnings))


def option_names() -> tuple[str, ...]:
    return tuple(f.name for f in fields(NodeConfig))


def java_properties_of(config: NodeConfig) -> dict[str, str]:
    """The Java controller keys (spec 8.1) that `config` determines, as properties text values."""
    properties: dict[str, str] = {}
    for option in OPTIONS:
        if option.java_key is None:
            continue
        value = getattr(config, option.name)
        if option.name == "peers":
            value = format_peers(value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        properties[option.java_key] = str(value)
    if config.listen or config.peer(config.node_id) is not None:
        properties["listenPort"] = str(config.self_peer.port)  # the port it serves on, not Java's default
    return properties
