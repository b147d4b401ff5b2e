"""Building requests and responses, so every caller sets flags, opaque and extFields the same way."""

from __future__ import annotations

from collections.abc import Mapping

from rmqc.remoting._command import ONEWAY_FLAG, RESPONSE_FLAG, RemotingCommand, SerializeType
from rmqc.remoting._ext_fields import ext_fields_from

__all__ = ["make_request", "make_response"]


def make_request(
    code: int,
    opaque: int,
    ext: Mapping[str, object] | None = None,
    body: bytes | None = None,
    *,
    oneway: bool = False,
    version: int = 0,
    serialize_type: SerializeType = SerializeType.JSON,
) -> RemotingCommand:
    """A request frame; `ext` values are turned into Java strings (None values left out)."""
    return RemotingCommand(
        code=int(code),
        opaque=opaque,
        flag=ONEWAY_FLAG if oneway else 0,
        version=version,
        ext_fields=None if ext is None else ext_fields_from(ext),
        body=body,
        serialize_type=serialize_type,
    )


def make_response(
    request: RemotingCommand,
    code: int,
    remark: str | None = None,
    ext: Mapping[str, object] | None = None,
    body: bytes | None = None,
) -> RemotingCommand:
    """The answer to `request`: opaque echoed, RESPONSE flag set, JSON header (spec 1.1: a Java
    server answers in its own type whatever the request used, and a controller MAY always use JSON).
    """
    return RemotingCommand(
        code=int(code),
        opaque=request.opaque,
        flag=RESPONSE_FLAG,
        remark=remark,
        ext_fields=None if ext is None else ext_fields_from(ext),
        body=body,
        serialize_type=SerializeType.JSON,
    )
