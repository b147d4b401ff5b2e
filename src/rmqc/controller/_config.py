"""ControllerConfig (spec 8.1, 8.2): the Java controller's options, as properties text.

1010 answers with every option as properties text; 1009 is checked here (`check_update`, refusing
black-listed and unknown keys) and then replicated: the leader logs it as an UpdateControllerConfig
and every node applies it (`apply_replicated`) once committed. Which keys take effect at once:

* live (read at every use, so 1009 changes behaviour immediately): `electMasterMaxRetryCount`,
  `enableElectUncleanMaster` (both read at each election, spec 15) and `notifyBrokerRoleChanged`
  (read after each election);
* every other key is stored, shown by 1010 and handed to the node for persisting, but only takes
  effect when the node starts (ports, peers, store paths, thread pools and metrics are fixed for a
  process lifetime).

Unlike Java, which silently keeps the old value when a setter cannot parse the text and ignores
keys it does not know, rmqc refuses an update with a value of the wrong type or an unknown key
(29 INVALID_PARAMETER, naming the key and, for an unknown one, the nearest known key), and applies
all keys of one update or none: a typo must not look applied.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import cast

from rmqc.errors import ConfigError
from rmqc.remoting import RemotingProtocolError, dumps_properties, loads_properties


class ConfigBlackListed(ConfigError):
    """1009 named a key that may not be changed at runtime (answered 16 NO_PERMISSION)."""


class ConfigInvalid(ConfigError):
    """1009 named an unknown key or gave a value of the wrong type (answered 29 INVALID_PARAMETER)."""


class PropertiesSyntaxError(ConfigError):
    """Text that is not Java properties (a bad \\u escape, not UTF-8); 1009 answers code 1."""


def parse_properties(text: str | bytes) -> dict[str, str]:
    """Java properties text (`key=value`, `key: value`, comments, continuations, escapes) -> dict.

    Raises ConfigError saying what was wrong; used for 1009 bodies and `rmqc serve -c FILE`.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    try:
        return loads_properties(data)
    except RemotingProtocolError as exc:
        raise PropertiesSyntaxError(f"bad properties text: {exc}") from None


def _parse_bool(text: str) -> bool:
    # Java Boolean.parseBoolean would read anything but "true" as false; a typo would then
    # silently disable an option, so rmqc accepts only true/false.
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise ValueError("expected true or false")
    return lowered == "true"


def _parse_int(text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError("expected a whole number") from None  # not "invalid literal for int() with base 10"


_PARSERS: dict[type, Callable[[str], object]] = {bool: _parse_bool, int: _parse_int, str: str}


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    default: object
    live: bool = False

    @property
    def kind(self) -> type:
        return type(self.default)


CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("rocketmqHome", ""),
    ConfigKey("configStorePath", "~/controller/controller.properties"),
    ConfigKey("controllerType", "DLedger"),
    ConfigKey("scanNotActiveBrokerInterval", 5000),
    ConfigKey("controllerThreadPoolNums", 16),
    ConfigKey("controllerRequestThreadPoolQueueCapacity", 50000),
    ConfigKey("controllerDLegerGroup", "rmqc"),
    ConfigKey("controllerDLegerPeers", "n0-127.0.0.1:9878"),
    ConfigKey("controllerDLegerSelfId", "n0"),
    ConfigKey("mappedFileSize", 1073741824),
    ConfigKey("controllerStorePath", ""),
    ConfigKey("electMasterMaxRetryCount", 3, live=True),
    ConfigKey("enableElectUncleanMaster", False, live=True),
    ConfigKey("isProcessReadEvent", False),
    ConfigKey("notifyBrokerRoleChanged", True, live=True),
    # rmqc's own: refuse a request naming a broker group registered under another cluster (issue 15)
    ConfigKey("clusterNameCheck", True, live=True),
    ConfigKey("scanInactiveMasterInterval", 5000),
    ConfigKey("metricsExporterType", "DISABLE"),
    ConfigKey("metricsGrpcExporterTarget", ""),
    ConfigKey("metricsGrpcExporterHeader", ""),
    ConfigKey("metricGrpcExporterTimeOutInMills", 3000),
    ConfigKey("metricGrpcExporterIntervalInMills", 60000),
    ConfigKey("metricLoggingExporterIntervalInMills", 10000),
    ConfigKey("metricsPromExporterPort", 5557),
    ConfigKey("metricsPromExporterHost", ""),
    ConfigKey("metricsLabel", ""),
    ConfigKey("metricsInDelta", False),
    ConfigKey("configBlackList", "configBlackList;configStorePath"),
    ConfigKey("jRaftElectionTimeoutMs", 1000),
    ConfigKey("jRaftScanWaitTimeoutMs", 1000),
    ConfigKey("jRaftSnapshotIntervalSecs", 3600),
    ConfigKey("jRaftGroupId", "jRaft-Controller"),
    ConfigKey("jRaftServerId", "localhost:9880"),
    ConfigKey("jRaftInitConf", "localhost:9880,localhost:9881,localhost:9882"),
    ConfigKey("jRaftControllerRPCAddr", "localhost:9770,localhost:9771,localhost:9772"),
    ConfigKey("listenPort", 9878),
)
_KEYS: dict[str, ConfigKey] = {key.name: key for key in CONFIG_KEYS}
# Java's setter for the field `isProcessReadEvent` is `setProcessReadEvent`, so 1009 uses this name.
_ALIASES = {"processReadEvent": "isProcessReadEvent"}
LIVE_UPDATABLE_KEYS: frozenset[str] = frozenset(key.name for key in CONFIG_KEYS if key.live)
_ALWAYS_BLACK_LISTED = frozenset({"configBlackList", "configStorePath", "rocketmqHome"})

# Why: properties come from an operator's file or a 1009 body (bounded by the frame size); this
# caps how many unknown keys a node keeps and echoes in 1010.
MAX_EXTRA_KEYS = 1024


class ControllerConfig:
    """The options of one node. Known keys are typed; unknown keys from the startup file are kept
    (1010 shows them, as Java does) but unknown keys in a 1009 update are refused (Java ignores
    them)."""

    def __init__(self, values: Mapping[str, object] | None = None) -> None:
        self._values: dict[str, object] = {key.name: key.default for key in CONFIG_KEYS}
        self._extra: dict[str, str] = {}
        self.revision = 0  # bumped by every successful update; the node persists on change
        for name, value in (values or {}).items():
            self._set_typed(name, value)

    @classmethod
    def from_properties(cls, text: str | bytes) -> ControllerConfig:
        """The startup `-c controller.conf`: known keys typed, unknown keys kept as text."""
        config = cls()
        parsed = parse_properties(text)
        config._apply(config._typed_known(parsed))
        extra = {k: v for k, v in parsed.items() if _ALIASES.get(k, k) not in _KEYS}
        if len(extra) > MAX_EXTRA_KEYS:
            raise ConfigError(f"{len(extra)} unknown keys exceed the bound of {MAX_EXTRA_KEYS}")
        config._extra.update(extra)
        return config

    # ---- reading ---------------------------------------------------------------------------

    def get(self, name: str) -> object:
        return self._values[_ALIASES.get(name, name)]

    @property
    def elect_master_max_retry_count(self) -> int:
        return cast(int, self._values["electMasterMaxRetryCount"])  # stored as its key's type

    @property
    def enable_elect_unclean_master(self) -> bool:
        return bool(self._values["enableElectUncleanMaster"])

    @property
    def notify_broker_role_changed(self) -> bool:
        return bool(self._values["notifyBrokerRoleChanged"])

    @property
    def self_id(self) -> str:
        """This controller node's id (controllerDLegerSelfId)."""
        return str(self._values["controllerDLegerSelfId"])

    @property
    def cluster_name_check(self) -> bool:
        return bool(self._values["clusterNameCheck"])

    @property
    def controller_group(self) -> str:
        return str(self._values["controllerDLegerGroup"])

    def black_list(self) -> frozenset[str]:
        listed = str(self._values["configBlackList"]).split(";")
        return _ALWAYS_BLACK_LISTED | {name.strip() for name in listed if name.strip()}

    def to_properties(self) -> bytes:
        """1010's body: every option, `key=value` per line, sorted by key."""
        merged: dict[str, object] = dict(self._extra)
        merged.update({name: _text_of(value) for name, value in self._values.items()})
        return dumps_properties(merged)

    # ---- updating --------------------------------------------------------------------------

    def update_from_properties(self, text: str | bytes) -> dict[str, object]:
        """1009: apply all known keys of `text` or none. Returns what changed.

        Raises ConfigBlackListed (-> 16), PropertiesSyntaxError for bad text (-> 1), ConfigInvalid
        for an unknown key or a bad value (-> 29).
        """
        typed = self._checked(parse_properties(text))
        self._apply(typed)
        return typed

    def check_update(self, text: str | bytes) -> dict[str, str]:
        """What `update_from_properties(text)` checks, without changing anything: the parsed
        properties (key -> text) if all of them would be applied. Same exceptions."""
        parsed = parse_properties(text)
        self._checked(parsed)
        return parsed

    def apply_replicated(self, properties: Mapping[str, str]) -> dict[str, object]:
        """A committed 1009 (UpdateControllerConfig) on this node: every key this configuration
        accepts, each on its own (the leader checked them against its configuration; a key this
        node black-lists or cannot parse keeps its value here). Returns what was set."""
        typed: dict[str, object] = {}
        for name, text in properties.items():
            try:
                typed.update(self._checked({name: text}))
            except ConfigError:
                continue
        self._apply({name: value for name, value in typed.items() if self._values.get(name) != value})
        return typed

    def _checked(self, parsed: Mapping[str, str]) -> dict[str, object]:
        forbidden = sorted(name for name in parsed if _ALIASES.get(name, name) in self.black_list())
        if forbidden:
            raise ConfigBlackListed(f"keys {forbidden} are in the black list")
        unknown = [name for name in parsed if _ALIASES.get(name, name) not in _KEYS]
        if unknown:
            raise ConfigInvalid("; ".join(_unknown_key(name) for name in unknown))
        try:
            return self._typed_known(parsed)
        except ConfigError as exc:
            raise ConfigInvalid(str(exc)) from None

    def _typed_known(self, parsed: Mapping[str, str]) -> dict[str, object]:
        typed = {}
        for name, text in parsed.items():
            key = _KEYS.get(_ALIASES.get(name, name))
            if key is not None:
                typed[key.name] = _parse_value(key, text)
        return typed

    def _apply(self, typed: Mapping[str, object]) -> None:
        if typed:
            self._values.update(typed)
            self.revision += 1

    def _set_typed(self, name: str, value: object) -> None:
        key = _KEYS.get(_ALIASES.get(name, name))
        if key is None:
            raise ConfigError(f"unknown controller option {name!r}")
        if isinstance(value, str) and key.kind is not str:
            value = _parse_value(key, value)
        if type(value) is not key.kind:
            raise ConfigError(f"option {name!r} must be {key.kind.__name__}, got {value!r}")
        self._values[key.name] = value


def _unknown_key(name: str) -> str:
    known = {key.replace("_", "").lower(): key for key in [*_KEYS, *_ALIASES]}  # tickms, electmaster...: any case
    nearest = difflib.get_close_matches(name.replace("_", "").lower(), list(known), n=1)
    return f"unknown key {name!r}" + (f" (did you mean {known[nearest[0]]!r}?)" if nearest else "")


def _parse_value(key: ConfigKey, text: str) -> object:
    try:
        return _PARSERS[key.kind](text)
    except ValueError as exc:
        raise ConfigError(f"bad value for {key.name}: {text!r} ({exc})") from None


def _text_of(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
