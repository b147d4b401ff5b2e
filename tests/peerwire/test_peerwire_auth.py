"""The peer authentication exchange without sockets: the proof's transcript, the secret file's
lines, and a dialer and an acceptor talking through byte buffers: fed whole, fed a byte at a time,
with rotated keys, wrong keys, a forged claim and a replayed proof."""

from __future__ import annotations

import hashlib
import hmac
import struct

import pytest

from rmqc.peerwire import (
    NONCE_BYTES,
    PEER_PROTOCOL_VERSION,
    PROOF_BYTES,
    AcceptorExchange,
    DialerExchange,
    Handshake,
    PeerAuthError,
    PeerProtocolError,
    encode_handshake,
    parse_secrets,
    proof,
)

OLD = "old-secret-0123456789abcdef"
NEW = "new-secret-fedcba9876543210"
DIALER_NONCE, ACCEPTOR_NONCE = b"d" * NONCE_BYTES, b"a" * NONCE_BYTES


def test_proof_is_hmac_sha256_over_the_length_prefixed_transcript() -> None:
    """Computed here by hand from the documented layout (docs/security.md)."""
    dialer_nonce, acceptor_nonce = b"d" * 32, b"a" * 32
    version = struct.pack(">H", PEER_PROTOCOL_VERSION)
    transcript = (b"rmqc-peer-dialer" + version + b"\x00\x00\x00\x04rmqc" + b"\x00\x00\x00\x02n1"
                  + b"\x00\x00\x00\x02n0" + b"\x00\x00\x00\x20" + dialer_nonce + b"\x00\x00\x00\x20" + acceptor_nonce)
    expected = hmac.new(OLD.encode(), transcript, hashlib.sha256).digest()
    assert proof(OLD.encode(), b"rmqc-peer-dialer", "rmqc", "n1", "n0", dialer_nonce, acceptor_nonce) == expected
    # every bound field changes it: role, group, either id, either nonce
    variants = [(b"rmqc-peer-acceptor", "rmqc", "n1", "n0", dialer_nonce, acceptor_nonce),
                (b"rmqc-peer-dialer", "other", "n1", "n0", dialer_nonce, acceptor_nonce),
                (b"rmqc-peer-dialer", "rmqc", "n2", "n0", dialer_nonce, acceptor_nonce),
                (b"rmqc-peer-dialer", "rmqc", "n1", "n2", dialer_nonce, acceptor_nonce),
                (b"rmqc-peer-dialer", "rmqc", "n1", "n0", acceptor_nonce, acceptor_nonce),
                (b"rmqc-peer-dialer", "rmqc", "n1", "n0", dialer_nonce, dialer_nonce)]
    assert all(proof(OLD.encode(), *variant) != expected for variant in variants)


def test_secret_file_lines_comments_and_refusals() -> None:
    assert parse_secrets(f"# rotated 2026-11\n{NEW}\n\n  {OLD}  \n") == (NEW.encode(), OLD.encode())
    with pytest.raises(ValueError, match="no secret"):
        parse_secrets("# nothing\n\n")
    with pytest.raises(ValueError, match="secret 2 is shorter than 16 bytes"):
        parse_secrets(f"{NEW}\nshort\n")
    with pytest.raises(ValueError, match="at most 16"):
        parse_secrets("\n".join(f"{i:020d}" for i in range(17)))


def dialer(nonce: bytes = DIALER_NONCE) -> DialerExchange:
    return DialerExchange("rmqc", "n1", "n0", "127.0.0.1:9878", nonce)


def acceptor(members: frozenset[str] | None = frozenset({"n1", "n2"})) -> AcceptorExchange:
    return AcceptorExchange("rmqc", "n0", members)


def feed(take: object, data: bytes, one_byte_at_a_time: bool) -> bool:
    """Feeds `data` to an exchange's take_* method; whether it reported the message whole."""
    assert callable(take)
    if not one_byte_at_a_time:
        return bool(take(data))
    done = False
    for index in range(len(data)):
        done = bool(take(data[index:index + 1]))
    return done


def run_exchange(dialer_keys: tuple[bytes, ...], acceptor_keys: tuple[bytes, ...], *,
                 one_byte_at_a_time: bool = False, frames: bytes = b"") -> tuple[str, bytes, bytes]:
    """Both sides through byte buffers: the acceptor's proven sender and the bytes each side has left
    after the exchange (the acceptor sends `frames` behind its challenge, the dialer behind its proof)."""
    dialing, accepting = dialer(), acceptor()
    assert feed(accepting.take_hello, dialing.hello(), one_byte_at_a_time)
    challenge = accepting.challenge(ACCEPTOR_NONCE, acceptor_keys)
    assert feed(dialing.take_challenge, challenge + frames, one_byte_at_a_time)
    answer = dialing.answer(dialer_keys)
    assert len(answer) == PROOF_BYTES
    assert feed(accepting.take_proof, answer + frames, one_byte_at_a_time)
    sender, rest = accepting.finish()
    return sender, rest, dialing.rest


@pytest.mark.parametrize("one_byte_at_a_time", [False, True])
def test_same_secret_proves_both_ways_and_keeps_the_bytes_behind_it(one_byte_at_a_time: bool) -> None:
    keys = (OLD.encode(),)
    sender, acceptor_rest, dialer_rest = run_exchange(keys, keys, one_byte_at_a_time=one_byte_at_a_time,
                                                      frames=b"first frames")
    assert (sender, acceptor_rest, dialer_rest) == ("n1", b"first frames", b"first frames")


def test_the_proofs_are_the_documented_hmacs() -> None:
    dialing, accepting = dialer(), acceptor()
    accepting.take_hello(dialing.hello())
    challenge = accepting.challenge(ACCEPTOR_NONCE, (OLD.encode(),))
    args = ("rmqc", "n1", "n0", DIALER_NONCE, ACCEPTOR_NONCE)
    assert challenge == ACCEPTOR_NONCE + proof(OLD.encode(), b"rmqc-peer-acceptor", *args)
    dialing.take_challenge(challenge)
    assert dialing.answer((OLD.encode(),)) == proof(OLD.encode(), b"rmqc-peer-dialer", *args)


def test_rotation_signs_with_the_first_key_and_verifies_with_every_one() -> None:
    # mid-rotation: one node signs with the new secret, the other still with the old; both verify both
    assert run_exchange((NEW.encode(), OLD.encode()), (OLD.encode(), NEW.encode()))[0] == "n1"
    assert run_exchange((OLD.encode(), NEW.encode()), (NEW.encode(), OLD.encode()))[0] == "n1"
    # moving the new one first before every node holds it is refused (docs/security.md's order)
    with pytest.raises(PeerAuthError, match="claims to be n1 but failed"):
        run_exchange((NEW.encode(), OLD.encode()), (OLD.encode(),))


def test_a_dialer_refuses_an_acceptor_with_another_secret() -> None:
    with pytest.raises(PeerAuthError, match=r"peer n0 at 127.0.0.1:9878 failed the peer secret proof"):
        run_exchange((OLD.encode(),), (NEW.encode(),))


def test_an_acceptor_refuses_a_dialer_with_another_secret_or_none() -> None:
    dialing, accepting = dialer(), acceptor()
    accepting.take_hello(dialing.hello())
    accepting.challenge(ACCEPTOR_NONCE, (OLD.encode(),))
    accepting.take_proof(proof(b"", b"rmqc-peer-dialer", "rmqc", "n1", "n0", DIALER_NONCE, ACCEPTOR_NONCE))
    with pytest.raises(PeerAuthError, match="claims to be n1 but failed the peer secret proof"):
        accepting.finish()


def test_an_acceptor_proof_never_passes_as_a_dialer_proof() -> None:
    """Anyone who connects gets an acceptor's proof for nonces of its choosing: sent back, it fails."""
    dialing, accepting = dialer(), acceptor()
    accepting.take_hello(dialing.hello())
    challenge = accepting.challenge(ACCEPTOR_NONCE, (OLD.encode(),))
    accepting.take_proof(challenge[NONCE_BYTES:])
    with pytest.raises(PeerAuthError, match="failed the peer secret proof"):
        accepting.finish()


def test_a_recorded_proof_fails_against_a_fresh_acceptor_nonce() -> None:
    dialing, accepting = dialer(), acceptor()
    accepting.take_hello(dialing.hello())
    accepting.challenge(b"b" * NONCE_BYTES, (OLD.encode(),))
    accepting.take_proof(proof(OLD.encode(), b"rmqc-peer-dialer", "rmqc", "n1", "n0", DIALER_NONCE, ACCEPTOR_NONCE))
    with pytest.raises(PeerAuthError, match="failed the peer secret proof"):
        accepting.finish()


@pytest.mark.parametrize(("hello", "members", "reason"), [
    (Handshake("n1", "other", "n0", DIALER_NONCE), None, "claims n1 of group 'other'; we are group 'rmqc'"),
    (Handshake("n0", "rmqc", "n0", DIALER_NONCE), None, "claims id 'n0', which is not another member"),
    (Handshake("n3", "rmqc", "n0", DIALER_NONCE), frozenset({"n1", "n2"}),
     r"claims id 'n3', which is not another member \(n1, n2\)"),
    (Handshake("n1", "rmqc", "n2", DIALER_NONCE), None, "n1 dialled 'n2', but this is 'n0'"),
])
def test_claims_outside_the_group_or_membership_are_refused_before_any_challenge(
        hello: Handshake, members: frozenset[str] | None, reason: str) -> None:
    with pytest.raises(PeerAuthError, match=reason):
        acceptor(members).take_hello(encode_handshake(hello))


def test_a_joining_node_accepts_any_other_id_of_its_group() -> None:
    assert acceptor(None).take_hello(encode_handshake(Handshake("n7", "rmqc", "n0", DIALER_NONCE)))


def test_a_handshake_comes_in_pieces_and_garbage_is_a_protocol_error() -> None:
    accepting = acceptor()
    hello = dialer().hello()
    assert not accepting.take_hello(hello[:10])
    assert accepting.take_hello(hello[10:])
    with pytest.raises(PeerProtocolError, match="magic"):
        acceptor().take_hello(b"GET / HTTP/1.1\r\n")


def test_an_exchange_used_out_of_order_says_so() -> None:
    with pytest.raises(PeerAuthError, match="take_hello first"):
        acceptor().challenge(ACCEPTOR_NONCE, (OLD.encode(),))
    accepting = acceptor()
    accepting.take_hello(dialer().hello())
    accepting.take_proof(b"\0" * PROOF_BYTES)
    with pytest.raises(PeerAuthError, match="challenge first"):
        accepting.finish()
