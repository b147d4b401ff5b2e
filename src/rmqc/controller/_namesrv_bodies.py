"""NameServer bodies as the Java NameServer of RocketMQ 5.5.0 writes and reads them (docs/namesrv.md).

Written: TopicRouteData (105) in fastjson's default dialect (bare numeric map keys) or in standard
JSON (`SerializerFeature.BrowserCompatible, QuoteFieldNames, SkipTransientField, MapSortField`:
numeric keys quoted, non-ASCII escaped) as ClientRequestProcessor decides; ClusterInfo (106),
TopicList (206), KVTable (103 answer, 219), DataVersion (322). Bean fields in fastjson's order
(alphabetical), null fields left out.

Read: RegisterBrokerBody (103), plain fastjson JSON, or the zlib-compressed binary form of
`RegisterBrokerBody.encode(true)` when the `compressed` header says so.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rmqc.fsm import MAX_TOPICS_PER_REGISTRATION, BrokerGroup, NamesrvState, QueueData, TopicRow
from rmqc.remoting import dumps_fastjson, loads_fastjson

from ._headers import BadRequestBody

# Why: a registration body is one broker's topic table; the inflated form of a compressed one is
# bounded so a small hostile body (a zip bomb) cannot make the node allocate without limit.
MAX_INFLATED_BYTES = 64 * 1024 * 1024
# Why: a plain registration of MAX_TOPICS_PER_REGISTRATION topics is about 16 MiB (~250 bytes a
# topic); twice that leaves room for long names, and more is refused before any JSON is parsed.
MAX_REGISTER_BODY_BYTES = 32 * 1024 * 1024
PERM_READ_WRITE = 6  # PermName.PERM_READ | PERM_WRITE, TopicConfig's default perm
DEFAULT_QUEUE_NUMS = 16  # TopicConfig.defaultReadQueueNums / defaultWriteQueueNums


class RegistrationTooLarge(BadRequestBody):
    """A 103 body past a bound (bytes or topics), refused before it is decoded in full."""


@dataclass(frozen=True, slots=True)
class RegisterBody:
    """What rmqc keeps of a RegisterBrokerBody."""

    data_version: tuple[int, int, int]  # (stateVersion, timestamp, counter)
    topics: tuple[TopicRow, ...]  # sorted by topic


# ---- RegisterBrokerBody (103) ---------------------------------------------------------------------


def parse_register_body(body: bytes | None, compressed: bool) -> RegisterBody:
    """Java's extractRegisterBrokerBodyFromRequest: no body is an empty table at DataVersion 0/0/0."""
    if not body:
        return RegisterBody((0, 0, 0), ())
    if len(body) > MAX_REGISTER_BODY_BYTES:
        raise RegistrationTooLarge(f"103 body of {len(body)} bytes exceeds the bound of {MAX_REGISTER_BODY_BYTES}")
    if compressed:
        return _parse_compressed(body)
    # every TopicConfig names itself: counted in the raw bytes (one C scan), the topics of a huge
    # table are refused before the JSON is parsed
    _check_topic_count(body.count(b'"topicName"'))
    document = loads_fastjson(body)
    wrapper = document.get("topicConfigSerializeWrapper") if isinstance(document, dict) else None
    if wrapper is None:
        wrapper = {}
    if not isinstance(wrapper, dict):
        raise BadRequestBody("103 body: topicConfigSerializeWrapper is not an object")
    table = wrapper.get("topicConfigTable") or {}
    if not isinstance(table, dict):
        raise BadRequestBody("103 body: topicConfigTable is not an object")
    rows = [_topic_row(name, config) for name, config in table.items()]
    return RegisterBody(parse_data_version(wrapper.get("dataVersion")), tuple(sorted(rows)))


def parse_data_version(raw: object) -> tuple[int, int, int]:
    """A DataVersion object ({"counter":..,"stateVersion":..,"timestamp":..}; absent fields 0)."""
    if raw is None:
        return (0, 0, 0)
    if not isinstance(raw, dict):
        raise BadRequestBody("DataVersion is not an object")
    values = [raw.get(name, 0) for name in ("stateVersion", "timestamp", "counter")]
    if not all(type(v) is int for v in values):
        raise BadRequestBody("DataVersion fields must be integers")
    return (values[0], values[1], values[2])


def parse_topic_route_queues(body: bytes | None) -> tuple[TopicRow, ...]:
    """The queueDatas of a TopicRouteData body (217), as rows keyed by broker name; the rest of the
    route is ignored, as Java's registerTopicToNamesrv ignores it."""
    document = loads_fastjson(body) if body else None
    queues = document.get("queueDatas") if isinstance(document, dict) else None
    if not queues:
        return ()
    if not isinstance(queues, list) or len(queues) > MAX_TOPICS_PER_REGISTRATION:
        raise BadRequestBody(f"217 body: queueDatas must be a list of at most {MAX_TOPICS_PER_REGISTRATION}")
    rows = {}
    for queue in queues:
        if not isinstance(queue, dict) or type(queue.get("brokerName")) is not str:
            raise BadRequestBody("217 body: a queueData has no brokerName")
        row = _topic_row(queue["brokerName"], {**queue, "topicName": queue["brokerName"]})
        rows[row[0]] = row
    return tuple(sorted(rows.values()))


def data_version_body(version: tuple[int, int, int]) -> bytes:
    state_version, timestamp, counter = version
    return dumps_fastjson({"counter": counter, "stateVersion": state_version, "timestamp": timestamp})


def _topic_row(name: object, config: object) -> TopicRow:
    # written out field by field: a 103 of 100 topics calls this 100 times (a loop over the field
    # names took twice as long)
    if type(config) is not dict:
        raise BadRequestBody(f"103 body: topic config of {name!r} is not an object")
    get = config.get
    topic = get("topicName", name)
    read, write = get("readQueueNums", DEFAULT_QUEUE_NUMS), get("writeQueueNums", DEFAULT_QUEUE_NUMS)
    perm, flag = get("perm", PERM_READ_WRITE), get("topicSysFlag", 0)
    if (type(topic) is not str or type(read) is not int or type(write) is not int or type(perm) is not int
            or type(flag) is not int):
        raise BadRequestBody(f"103 body: topic config of {name!r} has fields of the wrong type")
    return (topic, read, write, perm, flag)


def _parse_compressed(body: bytes) -> RegisterBody:
    """RegisterBrokerBody.encode(true): zlib (Deflater) of big-endian int32-length-prefixed parts:
    the DataVersion JSON, the topic count, each TopicConfig.encode() text
    ("name read write perm FILTER_TYPE {attributes}": no topicSysFlag, so 0), the filter server
    list JSON, and (5.x) the topic queue mappings, which rmqc does not keep."""
    inflater = zlib.decompressobj()
    try:
        data = inflater.decompress(body, MAX_INFLATED_BYTES)
    except zlib.error as exc:
        raise BadRequestBody(f"103 body is not zlib data: {exc}") from None
    if inflater.unconsumed_tail:
        raise BadRequestBody(f"103 body inflates to more than {MAX_INFLATED_BYTES} bytes")
    reader = _Reader(data)
    version_doc = loads_fastjson(reader.chunk())
    count = reader.int32()
    _check_topic_count(count)
    rows = []
    for _ in range(count):
        parts = reader.chunk().decode("utf-8", "replace").split(" ")
        if len(parts) < 5:
            continue  # Java's TopicConfig.decode leaves such a config empty
        try:
            rows.append((parts[0], int(parts[1]), int(parts[2]), int(parts[3]), 0))
        except ValueError:
            raise BadRequestBody(f"103 compressed topic config {parts[0]!r} has a bad number") from None
    return RegisterBody(parse_data_version(version_doc), tuple(sorted(rows)))


def _check_topic_count(count: int) -> None:
    if count > MAX_TOPICS_PER_REGISTRATION:
        raise RegistrationTooLarge(f"{count} topics in one registration exceed the bound of "
                                   f"{MAX_TOPICS_PER_REGISTRATION}")


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.position = data, 0

    def int32(self) -> int:
        if self.position + 4 > len(self.data):
            raise BadRequestBody("103 compressed body ends inside a length")
        (value,) = struct.unpack_from(">i", self.data, self.position)
        self.position += 4
        if value < 0:
            raise BadRequestBody("103 compressed body has a negative length")
        return int(value)

    def chunk(self) -> bytes:
        length = self.int32()
        if self.position + length > len(self.data):
            raise BadRequestBody("103 compressed body ends inside a part")
        self.position += length
        return self.data[self.position - length:self.position]


def compressed_register_body(data_version: tuple[int, int, int], topics: list[TopicRow],
                             filter_servers: list[str] | None = None) -> bytes:
    """RegisterBrokerBody.encode(true) as Java writes it (tests and the broker simulator)."""
    parts = [data_version_body(data_version)]
    out = [_chunk(parts[0]), struct.pack(">i", len(topics))]
    for topic, read, write, perm, _flag in topics:
        out.append(_chunk(f"{topic} {read} {write} {perm} SINGLE_TAG {{}}".encode()))
    out.append(_chunk(dumps_fastjson(filter_servers or [])))
    out.append(struct.pack(">i", 0))  # no topic queue mappings
    return zlib.compress(b"".join(out), 9)


def _chunk(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def register_body(data_version: tuple[int, int, int], topics: list[TopicRow]) -> bytes:
    """RegisterBrokerBody.encode(false), as a 5.5.0 broker sends it (tests)."""
    state_version, timestamp, counter = data_version
    table = {topic: {"attributes": {}, "order": False, "perm": perm, "readQueueNums": read,
                     "topicFilterType": "SINGLE_TAG", "topicName": topic, "topicSysFlag": flag,
                     "writeQueueNums": write} for topic, read, write, perm, flag in topics}
    return dumps_fastjson({"filterServerList": [], "topicConfigSerializeWrapper": {
        "dataVersion": {"counter": counter, "stateVersion": state_version, "timestamp": timestamp},
        "topicConfigTable": table, "topicQueueMappingDetailMap": {}, "topicQueueMappingInfoMap": {}}})


# ---- answers ----------------------------------------------------------------------------------------


def _broker_data(state: NamesrvState, broker_name: str, group: BrokerGroup | None) -> dict[str, Any]:
    return {
        "brokerAddrs": dict(sorted(state.broker_addrs(broker_name, group).items())),
        "brokerName": broker_name,
        "cluster": state.cluster_of(broker_name) or (group.cluster_name if group else ""),
        "enableActingMaster": False,
    }


def _queue_data(broker_name: str, q: QueueData) -> dict[str, Any]:
    return {"brokerName": broker_name, "perm": q.perm, "readQueueNums": q.read_queue_nums,
            "topicSysFlag": q.topic_sys_flag, "writeQueueNums": q.write_queue_nums}


def topic_route(state: NamesrvState, topic: str, groups: Mapping[str, BrokerGroup]) -> dict[str, Any] | None:
    """TopicRouteData of `topic`, or None (Java's pickupTopicRouteData: no queue data, or none of
    its broker names registered)."""
    queues = state.topics.get(topic)
    if not queues:
        return None
    registered = set(state.broker_names())
    names = sorted(name for name in queues if name in registered)
    if not names:
        return None
    return {
        "brokerDatas": [_broker_data(state, name, groups.get(name)) for name in names],
        "filterServerTable": {},
        "queueDatas": [_queue_data(name, queues[name]) for name in sorted(queues)],
    }


def route_body(route: dict[str, Any], standard_json: bool) -> bytes:
    if not standard_json:
        return dumps_fastjson(route)
    # BrowserCompatible writes numeric map keys as strings and escapes non-ASCII; MapSortField keeps
    # the maps in key order (the numeric order of the ids, already so in `route`).
    return json.dumps(route, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def cluster_info_body(state: NamesrvState, groups: Mapping[str, BrokerGroup]) -> bytes:
    table = {name: _broker_data(state, name, groups.get(name)) for name in state.broker_names()}
    return dumps_fastjson({"brokerAddrTable": table, "clusterAddrTable": state.clusters()})


def topic_list_body(topics: list[str]) -> bytes:
    return dumps_fastjson({"topicList": sorted(topics)})


def kv_table_body(table: Mapping[str, str]) -> bytes:
    return dumps_fastjson({"table": dict(table)})
