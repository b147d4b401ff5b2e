"""TLS on the one port, with RocketMQ's modes (TlsMode: DISABLED, PERMISSIVE, ENFORCING).

Which connections are TLS, plain or refused, by their first byte and the mode, is
rmqc.remoting.classify_opening's decision; this module wraps and unwraps them.

Peers dial each other with TLS whenever it is not disabled, presenting the node's certificate and
checking the other's against `tls_trust_cert_path` (peers are addressed by IP, so, as RocketMQ
clients, without host name checks: the trust file is what decides).
"""

from __future__ import annotations

import contextlib
import ssl

import trio

from rmqc.config import NodeConfig
from rmqc.errors import ConfigError

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


def notify_client_context(config: NodeConfig) -> ssl.SSLContext | None:
    """The context the notifier dials brokers with (tls_notify); None: plain TCP. It checks the
    broker's certificate against tls_trust_cert_path (by the CA: brokers are addressed by IP) and
    presents this node's certificate, if it has one, to brokers that ask for a client's."""
    if not config.tls_notify:
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    context.check_hostname = False
    if config.tls_cert_path:
        _load_identity(context, config)
    _load_trust(context, config)
    return context


def _load_identity(context: ssl.SSLContext, config: NodeConfig) -> None:
    try:
        context.load_cert_chain(config.tls_cert_path, config.tls_key_path or None)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"tls_cert_path/tls_key_path: cannot load {config.tls_cert_path}: {error}") from error


def _load_trust(context: ssl.SSLContext, config: NodeConfig) -> None:
    """No file (a node alone, see _config._check_tls): nothing is trusted, so a dial to a member
    added later fails its handshake (certificate verify failed) rather than going unchecked."""
    if not config.tls_trust_cert_path:
        return
    try:
        context.load_verify_locations(config.tls_trust_cert_path)
    except (OSError, ssl.SSLError) as error:
        raise ConfigError(f"tls_trust_cert_path: cannot load {config.tls_trust_cert_path}: {error}") from error


# Plaintext taken from the TLS object per read call (a record holds at most 16 KiB).
READ_BYTES = 64 * 1024
RECEIVE_BYTES = 64 * 1024


class TlsStream(trio.abc.Stream):
    """TLS over a Trio socket stream, sans-IO: an ssl.SSLObject between two memory BIOs.

    Besides being a Stream, it lets a caller encrypt and decrypt synchronously around its own
    non-blocking reads and writes of the socket (`fd`), which is how the remoting connections and
    the peer links serve TLS on the same fast path as plain TCP: one 64 KiB read of the socket is
    decrypted at once into every complete record it holds, and an answer is encrypted and written
    to the socket in the caller's own step. (trio.SSLStream hands out at most one record, 16 KiB,
    per receive_some, each a pass through the scheduler, and cannot write without a task.)

    Bytes written to the socket must leave in the order they were encrypted: callers that queue
    ciphertext (what the socket did not take at once) send the queue through `transport`."""

    def __init__(self, transport: trio.SocketStream, context: ssl.SSLContext, *, server_side: bool,
                 prefix: bytes = b"") -> None:
        self.transport = transport
        self.fd = transport.socket.fileno()
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=server_side)
        self._incoming.write(prefix)  # bytes read before we knew this was TLS
        self._plain = b""  # decrypted, not yet returned by receive_some (beyond its max_bytes)
        self._closed_by_peer = False

    async def do_handshake(self) -> None:
        """Complete the handshake (a failed one raises trio.BrokenResourceError from the SSLError)."""
        while True:
            try:
                # In a worker thread (OpenSSL releases the GIL): a handshake's private-key operation
                # costs milliseconds, and a storm of new connections (brokers reconnecting at once,
                # or an attacker) run in the event loop held the node's driver for most of a second
                # per pass, long enough for the followers to depose a live leader (seen at 256 clients).
                await trio.to_thread.run_sync(self._tls.do_handshake)
                done = True
            except ssl.SSLWantReadError:
                done = False
            except ssl.SSLError as error:
                await self._flush_alert()
                raise trio.BrokenResourceError(f"TLS handshake failed: {error}") from error
            if self._outgoing.pending:
                await self.transport.send_all(self._outgoing.read())
            if done:
                return
            data = await self.transport.receive_some(RECEIVE_BYTES)
            if not data:
                raise trio.BrokenResourceError("connection closed during the TLS handshake")
            self._incoming.write(data)

    async def _flush_alert(self) -> None:
        """Tell the other side why (a TLS alert), if the socket takes it."""
        if self._outgoing.pending:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await self.transport.send_all(self._outgoing.read())

    def decrypt(self, data: bytes) -> bytes:
        """The plaintext of every complete record once `data` (read from the socket) is added;
        b"" while a record is incomplete, or after the peer's close_notify (`closed_by_peer`)."""
        if data:
            self._incoming.write(data)
        chunks = []
        while True:
            try:
                chunk = self._tls.read(READ_BYTES)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLError as error:
                raise trio.BrokenResourceError(f"TLS error: {error}") from error
            if not chunk:  # CPython's answer to the peer's close_notify
                self._closed_by_peer = True
                break
            chunks.append(chunk)
        # A read may make the TLS object answer (a TLS 1.3 key update): it stays in the outgoing
        # BIO and leaves, in order, before the next encrypted bytes (encrypt reads the whole BIO).
        return b"".join(chunks)

    @property
    def closed_by_peer(self) -> bool:
        return self._closed_by_peer

    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes:
        """The bytes to write to the socket for `data` (with anything the TLS object has pending)."""
        try:
            self._tls.write(data)
        except ssl.SSLError as error:
            raise trio.BrokenResourceError(f"TLS error: {error}") from error
        return self._outgoing.read()

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        limit = max_bytes or RECEIVE_BYTES
        if not self._plain:
            self._plain = self.decrypt(b"")  # records that arrived with the handshake's last bytes
        while not self._plain and not self._closed_by_peer:
            data = await self.transport.receive_some(RECEIVE_BYTES)
            if not data:
                return b""
            self._plain = self.decrypt(data)
        result, self._plain = self._plain[:limit], self._plain[limit:]
        return result

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.transport.send_all(self.encrypt(data))

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        await self.transport.aclose()


async def accept_tls(stream: trio.SocketStream, first: bytes, context: ssl.SSLContext) -> TlsStream:
    """The server side of a TLS connection whose first bytes were read already."""
    tls = TlsStream(stream, context, server_side=True, prefix=first)
    with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
        await tls.do_handshake()
    return tls


async def dial_tls(stream: trio.SocketStream, context: ssl.SSLContext) -> TlsStream:
    tls = TlsStream(stream, context, server_side=False)
    with trio.fail_after(TLS_HANDSHAKE_TIMEOUT_S):
        await tls.do_handshake()
    return tls
