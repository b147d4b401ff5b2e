"""TLS on the one port, with RocketMQ's modes (TlsMode: DISABLED, PERMISSIVE, ENFORCING).

A TLS connection starts with a handshake record (first byte 0x16); no remoting frame length and no
peer magic does (that would be a frame of over 369 MB, above every frame bound), so in permissive
mode the first byte tells TLS from plain, as RocketMQ's TlsModeHandler does. Enforcing refuses
plain connections; disabled treats every connection as plain.

Peers dial each other with TLS whenever it is not disabled, presenting the node's certificate and
checking the other's against `tls_trust_cert_path` (peers are addressed by IP, so, as RocketMQ
clients, without host name checks: the trust file is what decides).
"""

from __future__ import annotations

import ssl

import trio

from rmqc.errors import ConfigError

from ._config import NodeConfig

TLS_HANDSHAKE_RECORD = 0x16
# A TLS handshake between members completes in milliseconds; one that stalls is an attack.
TLS_HANDSHAKE_TIMEOUT_S = 5.0


def server_context(config: NodeConfig) -> ssl.SSLContext | None:
    """The context the port accepts TLS with; None when tls_mode is disabled."""
    if config.tls_mode == "disabled":
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load_identity(context, config)
    if config.tls_auth_client:
        context.verify_mode = ssl.CERT_REQUIRED
        _load_trust(context, config)
    return context


def peer_client_context(config: NodeConfig) -> ssl.SSLContext | None:
    """The context a node dials its peers with; None when tls_mode is disabled."""
    if config.tls_mode == "disabled":
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = False  # peers are dialled by IP; the trust file decides
    _load_identity(context, config)
    _load_trust(context, config)
    return context


def _load_identity(context: ssl.SSLContext, config: NodeConfig) -> None:
    try:
        context.load_cert_chain(config.tls_cert_path, config.tls_key_path or None)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"tls_cert_path/tls_key_path: cannot load {config.tls_cert_path}: {error}") from error


def _load_trust(context: ssl.SSLContext, config: NodeConfig) -> None:
    try:
        context.load_verify_locations(config.tls_trust_cert_path)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"tls_trust_cert_path: cannot load {config.tls_trust_cert_path}: {error}") from error


class PrefixedStream(trio.abc.Stream):
    """A stream whose first bytes were already read (to tell TLS from plain): they come first."""

    def __init__(self, stream: trio.SocketStream, prefix: bytes) -> None:
        self._stream = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            data, self._prefix = self._prefix, b""
            return data
        return await self._stream.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        await self._stream.send_eof()

    async def aclose(self) -> None:
        await self._stream.aclose()


async def accept_tls(stream: trio.SocketStream, first: bytes, context: ssl.SSLContext) -> trio.SSLStream:
    """The server side of a TLS connection whose first bytes were read already."""
    tls = trio.SSLStream(PrefixedStream(stream, first), context, server_side=True)
    with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
        await tls.do_handshake()
    return tls


async def dial_tls(stream: trio.SocketStream, context: ssl.SSLContext) -> trio.SSLStream:
    tls = trio.SSLStream(stream, context, server_hostname=None)
    with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
        await tls.do_handshake()
    return tls
