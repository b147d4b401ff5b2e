"""The hold generator's broker beliefs (bench/_beliefs.py) and its 1004 frames (bench/_replica_polls.py),
pure: answers fed by hand, episodes and their lengths checked; frames encoded and parsed back."""

from __future__ import annotations

from bench._beliefs import FleetBeliefs
from bench._replica_polls import OPAQUE_FIRST, OPAQUE_LAST, answer_headers, poll_frame_parts
from rmqc.remoting import FrameDecoder, RequestCode, ResponseCode, encode, make_request, make_response


def test_two_master_episodes_follow_the_beliefs() -> None:
    beliefs = FleetBeliefs(["g0", "g1"])  # brokers 0-2 of g0 have ids 1-3, brokers 3-5 of g1 too
    beliefs.seed(0, 1, 1, now_ms=0)
    beliefs.seed(1, 1, 1, now_ms=0)
    assert [beliefs.masters(0), beliefs.masters(1), beliefs.episodes] == [1, 1, 0]

    # g0 elects broker 2 (epoch 2); broker 2 hears first: two believe themselves master from 1000
    assert beliefs.learn(1, 2, 2, now_ms=1000)
    assert beliefs.masters(0) == 2 and beliefs.episodes == 1
    assert beliefs.learn(2, 2, 2, now_ms=1500)  # a slave's belief changes, the episode goes on
    assert beliefs.episodes == 1 and beliefs.longest_ms(2500) == 1500  # unfinished, counted to now
    # both poll a node still behind (epoch 1): the old master holds that epoch already, the new one
    # ignores the older answer; both stay master, the same episode
    assert not beliefs.learn(0, 1, 1, now_ms=3000)
    assert not beliefs.learn(1, 1, 1, now_ms=3000)
    assert beliefs.answers_older == 1 and beliefs.masters(0) == 2 and beliefs.episodes == 1
    # a newer epoch with no master leaves the belief (the Java broker asks for an election instead)
    assert not beliefs.learn(0, None, 3, now_ms=3500)
    assert beliefs.answers_without_master == 1 and beliefs.epoch[0] == 1
    # the same epoch again changes nothing; the old master learns epoch 2 at 4000: the episode ends
    assert not beliefs.learn(1, 2, 2, now_ms=3600)
    assert beliefs.learn(0, 2, 2, now_ms=4000)
    assert beliefs.masters(0) == 1 and beliefs.episodes == 1 and beliefs.longest_ms(9000) == 3000

    # g1: a shorter episode (longest stays 3000), then one still open at the end (longest grows)
    beliefs.learn(4, 2, 2, now_ms=10_000)
    beliefs.learn(3, 2, 2, now_ms=10_500)
    assert beliefs.episodes == 2 and beliefs.longest_ms(11_000) == 3000
    beliefs.learn(5, 3, 3, now_ms=20_000)
    assert beliefs.masters(1) == 2 and beliefs.episodes == 3
    assert beliefs.longest_ms(26_000) == 6000
    assert beliefs.changes == 6


def test_beliefs_against_the_controllers() -> None:
    beliefs = FleetBeliefs(["g0", "g1", "g2"])
    for group in range(3):
        beliefs.seed(group, 1, 1, now_ms=0)
    beliefs.learn(4, 2, 2, now_ms=1)  # g1's broker 2 hears it is the new master; brokers 1 and 3 do not yet
    controllers = {"g0": ("1", 1), "g1": ("2", 2), "g2": ("3", 4)}
    assert beliefs.against(controllers) == {
        "brokers_behind_controllers": 2 + 3,  # g1's brokers 1 and 3, every broker of g2
        "groups_with_no_broker_believing_master": 0,
        "groups_with_a_master_belief_the_controllers_do_not_hold": 2,  # g1's broker 1, g2's broker 1
    }
    beliefs.learn(6, 3, 4, now_ms=2)  # g2's broker 1 hears that 3 is master; broker 3 does not yet
    assert beliefs.against(controllers)["groups_with_no_broker_believing_master"] == 1


def test_a_poll_frame_takes_any_ten_digit_opaque_and_its_answers_parse() -> None:
    head, tail = poll_frame_parts("scale-00042")
    frames = head + b"%d" % OPAQUE_FIRST + tail + head + b"%d" % OPAQUE_LAST + tail
    requests = FrameDecoder().feed(frames)
    assert [(r.code, r.opaque, r.ext("brokerName")) for r in requests] == [
        (RequestCode.CONTROLLER_GET_REPLICA_INFO, OPAQUE_FIRST, "scale-00042"),
        (RequestCode.CONTROLLER_GET_REPLICA_INFO, OPAQUE_LAST, "scale-00042")]

    ok = make_response(requests[0], ResponseCode.SUCCESS, ext={"masterBrokerId": 2, "masterEpoch": 7},
                       body=b'{"syncStateSet":[1,2,3],"syncStateSetEpoch":4}')
    refused = make_response(requests[1], ResponseCode.SYSTEM_ERROR, "read index not confirmed")
    partial = encode(make_response(make_request(1004, 5), ResponseCode.SUCCESS))[:-3]
    buffer = bytearray(encode(ok) + encode(refused) + partial)
    headers, used = answer_headers(buffer)
    assert used == len(buffer) - len(partial)
    assert [(h["opaque"], h["code"], (h.get("extFields") or {}).get("masterEpoch")) for h in headers] == [
        (OPAQUE_FIRST, ResponseCode.SUCCESS, "7"), (OPAQUE_LAST, ResponseCode.SYSTEM_ERROR, None)]
    assert headers[0]["extFields"]["masterBrokerId"] == "2"
