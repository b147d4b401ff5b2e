"""The sans-IO remoting connection (rmqc.remoting.RemotingConnection) and the port's first-bytes
classification: framing across feeds, the in-flight and unsent-bytes bounds, the idle deadline."""

from __future__ import annotations

import pytest

from rmqc.remoting import (
    FIRST_BYTES_TIMEOUT_S,
    MAX_IN_FLIGHT_PER_CONNECTION,
    MAX_UNSENT_BYTES_PER_CONNECTION,
    TLS_HANDSHAKE_RECORD,
    FrameDecoder,
    FrameTooLarge,
    IdleTimeout,
    Opening,
    RemotingConnection,
    RemotingProtocolError,
    RequestCode,
    RequestsInFlightExceeded,
    classify_opening,
    encode,
    first_bytes_timeout_s,
    make_request,
)

IDLE_S = 5.0
PEER_MAGIC = b"RMQP"


def connection(now: float = 100.0, max_frame_bytes: int = 1024) -> RemotingConnection:
    return RemotingConnection(max_frame_bytes, IDLE_S, now)


def frame(opaque: int) -> bytes:
    return encode(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, opaque, {"topic": "t"}))


def opaques(conn: RemotingConnection, data: bytes) -> list[int]:
    return [command.opaque for command in conn.receive(data)]


def test_a_frame_split_across_feeds_comes_out_once_whole() -> None:
    conn = connection()
    data = frame(1) + frame(2)
    cut = len(frame(1)) + 3
    assert opaques(conn, data[:5]) == []
    assert opaques(conn, data[5:cut]) == [1]
    assert opaques(conn, data[cut:]) == [2]
    conn.receive_eof()


def test_the_end_inside_a_frame_is_a_protocol_error() -> None:
    conn = connection()
    assert opaques(conn, frame(1)[:-1]) == []
    with pytest.raises(RemotingProtocolError, match="closed inside a frame"):
        conn.receive_eof()


def test_a_frame_over_the_bound_is_refused_from_its_length_field() -> None:
    conn = connection(max_frame_bytes=64)
    with pytest.raises(FrameTooLarge, match="exceeds the limit of 64"):
        opaques(conn, (1000).to_bytes(4, "big"))


def test_the_deadline_moves_only_when_a_frame_was_completed_since_the_last_wait() -> None:
    conn = connection(now=100.0)
    assert conn.frame_deadline(now=101.0) == 100.0 + IDLE_S  # nothing completed yet: the first deadline
    data = frame(1)
    assert opaques(conn, data[:-1]) == []  # slowloris: bytes, but no frame
    assert conn.frame_deadline(now=103.0) == 100.0 + IDLE_S
    assert opaques(conn, data[-1:]) == [1]
    assert conn.frame_deadline(now=104.0) == 104.0 + IDLE_S
    assert conn.frame_deadline(now=108.0) == 104.0 + IDLE_S  # asked again: no new frame, no new deadline
    assert opaques(conn, frame(2) + frame(3)) == [2, 3]
    assert conn.frame_deadline(now=108.5) == 108.5 + IDLE_S


def test_the_decoder_counts_decoded_bytes_only_of_completed_frames() -> None:
    decoder = FrameDecoder()
    first, second = frame(1), frame(2)
    assert decoder.feed(first + second[:3]) != [] and decoder.decoded_bytes == len(first)
    assert decoder.feed(second[3:-1]) == [] and decoder.decoded_bytes == len(first)
    commands = decoder.iter_feed(second[-1:])
    assert next(commands).opaque == 2
    assert list(commands) == [] and decoder.decoded_bytes == len(first) + len(second)


def test_the_idle_error_names_the_bound() -> None:
    error = connection().idle_error()
    assert isinstance(error, IdleTimeout)
    assert str(error) == "no complete frame within 5000 ms (idle_timeout_ms)"


def test_reading_stops_at_the_in_flight_bound_and_resumes_when_one_is_done() -> None:
    conn = connection()
    for _ in range(MAX_IN_FLIGHT_PER_CONNECTION - 1):
        assert conn.try_start_request()
    assert not conn.requests_at_bound
    assert not conn.request_done()  # below the bound: no reader waits for this slot
    conn.start_request()
    assert conn.try_start_request()
    assert conn.requests_at_bound
    assert not conn.try_start_request()  # the reader waits, and nothing was counted
    with pytest.raises(RequestsInFlightExceeded, match="1024 requests in flight"):
        conn.start_request()
    assert conn.request_done()  # frees the slot the stopped reader waits for
    assert not conn.requests_at_bound
    conn.start_request()
    assert conn.requests_at_bound


def test_answers_the_client_has_not_read_stop_requests_from_starting() -> None:
    conn = connection()
    conn.queue_unsent(b"x" * (MAX_UNSENT_BYTES_PER_CONNECTION + 1))
    assert not conn.try_start_request()
    assert not conn.requests_at_bound  # nothing was counted
    conn.start_request()  # after the wait, the unread answers are not looked at again
    conn.unsent_taken()
    assert conn.try_start_request()


def test_answers_the_socket_did_not_take_go_out_in_order() -> None:
    conn = connection()
    assert not conn.sending and conn.first_unsent() is None
    assert conn.queue_unsent(b"one")  # the first: start sending
    assert not conn.queue_unsent(b"two")  # behind it: the sender takes it next
    assert conn.sending and conn.first_unsent() == b"one"
    conn.unsent_taken()
    assert conn.sending and conn.first_unsent() == b"two"  # a new answer still goes behind it
    conn.unsent_taken()
    assert not conn.sending and conn.first_unsent() is None
    assert conn.queue_unsent(b"three")  # the queue was empty again: start sending again


def test_reading_stops_past_the_unsent_bound_until_the_client_read_it_all() -> None:
    conn = connection()
    half = b"x" * (MAX_UNSENT_BYTES_PER_CONNECTION // 2)
    conn.queue_unsent(half)
    conn.queue_unsent(half)
    assert not conn.answers_unread  # at the bound, not past it
    conn.queue_unsent(b"y")
    assert conn.answers_unread
    conn.unsent_taken()
    assert not conn.answers_unread
    conn.unsent_taken()
    conn.unsent_taken()
    assert not conn.sending


def test_a_failed_connection_drops_its_unsent_answers_and_stops_no_reader() -> None:
    conn = connection()
    conn.queue_unsent(b"x" * (MAX_UNSENT_BYTES_PER_CONNECTION + 1))
    assert conn.answers_unread
    conn.drop_unsent()
    assert not conn.answers_unread and not conn.sending and conn.first_unsent() is None


@pytest.mark.parametrize("tls_mode", ["disabled", "permissive", "enforcing"])
def test_the_peer_magic_opens_a_peer_link_unless_tls_is_enforced(tls_mode: str) -> None:
    expected = Opening.PLAIN_REFUSED if tls_mode == "enforcing" else Opening.PEER
    assert classify_opening(PEER_MAGIC + b"rest", PEER_MAGIC, tls_mode) is expected


@pytest.mark.parametrize("tls_mode", ["disabled", "permissive", "enforcing"])
def test_other_bytes_open_a_remoting_stream_unless_tls_is_enforced(tls_mode: str) -> None:
    expected = Opening.PLAIN_REFUSED if tls_mode == "enforcing" else Opening.REMOTING
    assert classify_opening(frame(1)[:4], PEER_MAGIC, tls_mode) is expected
    assert classify_opening(PEER_MAGIC[:3] + b"X", PEER_MAGIC, tls_mode) is expected


def test_a_handshake_record_is_tls_only_when_tls_is_on() -> None:
    hello = bytes([TLS_HANDSHAKE_RECORD, 3, 1, 0])
    assert classify_opening(hello, PEER_MAGIC, "permissive") is Opening.TLS
    assert classify_opening(hello, PEER_MAGIC, "enforcing") is Opening.TLS
    assert classify_opening(hello, PEER_MAGIC, "disabled") is Opening.REMOTING
    assert classify_opening(hello, PEER_MAGIC) is Opening.REMOTING  # the plaintext inside TLS


def test_the_first_bytes_wait_is_bounded_by_the_idle_timeout_too() -> None:
    assert first_bytes_timeout_s(0.4) == 0.4
    assert first_bytes_timeout_s(3600.0) == FIRST_BYTES_TIMEOUT_S
