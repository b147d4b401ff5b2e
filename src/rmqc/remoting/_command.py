"""The decoded form of one RocketMQ remoting frame (spec section 1)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

RESPONSE_FLAG = 1  # flag bit 0: this frame is a response
ONEWAY_FLAG = 2  # flag bit 1: the receiver never answers


class SerializeType(IntEnum):
    JSON = 0
    ROCKETMQ = 1


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    language: str = "PYTHON"
    version: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes | None = None
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def ext(self, key: str) -> str | None:
        return None if self.ext_fields is None else self.ext_fields.get(key)
