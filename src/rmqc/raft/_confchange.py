"""Payload codec of CONF_CHANGE entries (a small JSON object; the context travels as hex)."""

from __future__ import annotations

import orjson

from rmqc.errors import ProtocolError

from ._types import ConfChange, ConfChangeType


def encode_conf_change(cc: ConfChange) -> bytes:
    return orjson.dumps({"type": int(cc.type), "node_id": cc.node_id, "context": cc.context.hex()})


def decode_conf_change(data: bytes) -> ConfChange:
    try:
        obj = orjson.loads(data)
        return ConfChange(
            type=ConfChangeType(obj["type"]),
            node_id=str(obj["node_id"]),
            context=bytes.fromhex(obj["context"]),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"bad conf change payload {data[:64]!r}: {exc}") from exc
