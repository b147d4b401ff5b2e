"""RocketMQ ACL, pure: signatures against values computed by hand (and Java's own test vector), frames
signed as the Java client and ali-ons sign them, plain_acl.yml, address patterns, and every
decision of the check."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest

from rmqc.acl import (
    ANONYMOUS,
    AclConfigError,
    Allowed,
    Credentials,
    Refusal,
    Refused,
    RequestGate,
    SigningKey,
    check_request,
    parse_address_pattern,
    parse_plain_acl,
    signature,
    signature_content,
    signature_matches,
)
from rmqc.remoting import (
    RMQC_IMPORT_GROUPS,
    RMQC_MEMBERS_ADD,
    RMQC_MEMBERS_LIST,
    RMQC_MEMBERS_PROMOTE,
    RMQC_MEMBERS_REMOVE,
    RMQC_SNAPSHOT_SAVE,
    RMQC_TRANSFER_LEADER,
    FrameDecoder,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode,
    make_request,
)


def hmac_sha1_base64(key: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(key.encode(), content, hashlib.sha1).digest()).decode()


def test_java_acl_signer_test_vector() -> None:
    # org.apache.rocketmq.acl.common.AclSignerTest: calSignature("RocketMQ", "12345678")
    assert signature("12345678", b"RocketMQ") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_java_client_signed_elect_master_frame() -> None:
    """What AclClientRPCHook sends for mqadmin electMaster with tools.yml rocketmq2/12345678: the
    header's fields plus AccessKey, values concatenated in key order (upper case sorts first)."""
    ext = {"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerId": "2",
           "designateElect": "true", "invokeTime": "1700000000000", "AccessKey": "rocketmq2"}
    by_hand = b"rocketmq2" + b"2" + b"broker-a" + b"DefaultCluster" + b"true" + b"1700000000000"
    assert signature_content(ext, None) == by_hand
    golden = hmac_sha1_base64("12345678", by_hand)
    request = make_request(RequestCode.CONTROLLER_ELECT_MASTER, 7, {**ext, "Signature": golden},
                           serialize_type=SerializeType.ROCKETMQ)
    (decoded,) = FrameDecoder().feed(encode(request))  # as it arrives, binary header and all
    assert signature_matches(decoded, "12345678")
    assert not signature_matches(decoded, "12345679")
    decoded.ext_fields["brokerId"] = "3"  # a changed field breaks it
    assert not signature_matches(decoded, "12345678")


def test_ali_ons_signed_frame_with_channel_token_and_body() -> None:
    """ali-ons adds OnsChannel (and a SecurityToken for STS credentials); the body follows the
    values. The 1009 body `key=value` lines are signed with it."""
    body = b"enableElectUncleanMaster=true\n"
    ext = {"AccessKey": "ons-key-1", "OnsChannel": "ALIYUN", "SecurityToken": "sts-token"}
    by_hand = b"ons-key-1" + b"ALIYUN" + b"sts-token" + body
    golden = hmac_sha1_base64("ons-secret-1", by_hand)
    request = make_request(RequestCode.UPDATE_CONTROLLER_CONFIG, 9, {**ext, "Signature": golden}, body)
    (decoded,) = FrameDecoder().feed(encode(request))
    assert signature_matches(decoded, "ons-secret-1")
    decoded.body = b"enableElectUncleanMaster=false\n"
    assert not signature_matches(decoded, "ons-secret-1")


def test_keys_sort_in_java_utf16_order_not_code_point_order() -> None:
    # U+10000 is the surrogate pair D800 DC00 in UTF-16, below U+FFFF: Java puts it first
    ext = {"\uffff": "B", "\U00010000": "A"}
    assert signature_content(ext, None) == b"AB"


def test_client_credentials_sign_what_the_server_verifies() -> None:
    request = make_request(RequestCode.CONTROLLER_REGISTER_BROKER, 1, {"brokerName": "b", "brokerId": 1}, b"{}")
    Credentials("broker-key", "broker-secret").sign(request)
    fields = request.ext_fields or {}
    assert fields["AccessKey"] == "broker-key"
    assert fields["Signature"] == hmac_sha1_base64("broker-secret", b"broker-key" + b"1" + b"b" + b"{}")
    assert "broker-secret" not in repr(Credentials("broker-key", "broker-secret"))


SAMPLE = """
# RocketMQ's own sample plain_acl.yml, with a controller admin added
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
    groupPerms:
      - groupA=DENY

  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
"""


def rules():  # type: ignore[no-untyped-def]
    return parse_plain_acl(SAMPLE)


def signed(code: int, key: str, secret: str, ext: dict | None = None, body: bytes | None = None):  # type: ignore[no-untyped-def]
    request = make_request(code, 1, ext or {}, body)
    Credentials(key, secret).sign(request)
    return request


def test_rocketmq_sample_file_parses() -> None:
    parsed = rules()
    assert sorted(parsed.accounts) == ["RocketMQ", "rocketmq2"]
    assert parsed.accounts["RocketMQ"].secret_key == "12345678"  # YAML read it as a number
    assert not parsed.accounts["RocketMQ"].admin and parsed.accounts["rocketmq2"].admin
    assert parsed.globally_white("10.10.103.7") and not parsed.globally_white("10.10.104.7")


@pytest.mark.parametrize(("text", "match"), [
    ("accounts:\n  - accessKey: abc\n    secretKey: 12345678\n", "accessKey missing or of 6 characters or fewer"),
    # RocketMQ refuses a key of exactly 6 characters too (PlainPermissionManager: length <= 6)
    ("accounts:\n  - accessKey: abcdef\n    secretKey: 12345678\n", "accessKey missing or of 6 characters"),
    ("accounts:\n  - accessKey: abcdefg\n    secretKey: '123456'\n", "secretKey missing or of 6 characters"),
    ("accounts:\n  - accessKey: abcdefg\n", "secretKey missing"),
    ("accounts:\n  - {accessKey: abcdefg, secretKey: 1234567}\n  - {accessKey: abcdefg, secretKey: 7654321}\n",
     "appears twice"),
    ("accounts:\n  - {accessKey: abcdefg, secretKey: 1234567, admin: yes-please}\n", "admin must be true or false"),
    ("globalWhiteRemoteAddresses: [10.0.0.300]\n", "300 is not an octet"),
    ("globalWhiteRemoteAddresses: [10.0.0]\n", "is not an address"),
    ("accounts: {}\n", "accounts must be a list"),
    ("- just\n- a list\n", "top level must be a mapping"),
    ("accounts: [\n", "not valid YAML"),
])
def test_bad_files_are_named(text: str, match: str) -> None:
    with pytest.raises(AclConfigError, match=match):
        parse_plain_acl(text)


@pytest.mark.parametrize(("pattern", "inside", "outside"), [
    ("*", ["1.2.3.4", "::1"], []),
    ("*.*.*.*", ["1.2.3.4"], []),
    ("192.168.1.7", ["192.168.1.7", "::ffff:192.168.1.7"], ["192.168.1.8"]),
    ("192.168.*.*", ["192.168.0.1", "192.168.255.255"], ["192.169.0.1", "::1"]),
    ("192.168.1.10-20", ["192.168.1.10", "192.168.1.20"], ["192.168.1.9", "192.168.1.21"]),
    ("192.168.1-2.*", ["192.168.2.9"], ["192.168.3.9"]),
    ("192.168.1.{7,9}", ["192.168.1.7", "192.168.1.9"], ["192.168.1.8"]),
    ("::1", ["::1", "0:0:0:0:0:0:0:1"], ["127.0.0.1"]),
])
def test_address_patterns(pattern: str, inside: list[str], outside: list[str]) -> None:
    parsed = parse_address_pattern(pattern)
    assert all(parsed.matches(host) for host in inside)
    assert not any(parsed.matches(host) for host in outside)


ELECT = RequestCode.CONTROLLER_ELECT_MASTER
OUTSIDE = "172.16.0.5"


def test_signed_broker_requests_pass_for_any_account() -> None:
    for code, ext in ((RequestCode.CONTROLLER_REGISTER_BROKER, {"brokerName": "b"}),
                      (RequestCode.BROKER_HEARTBEAT, {"brokerName": "b"}),
                      (ELECT, {"brokerName": "b", "designateElect": "false"}),
                      (RequestCode.CONTROLLER_GET_METADATA_INFO, {})):
        assert check_request(rules(), signed(code, "RocketMQ", "12345678", ext), OUTSIDE) == Allowed("RocketMQ")


def test_admin_requests_need_an_admin_account() -> None:
    admin_only = [(ELECT, {"brokerName": "b", "designateElect": "true"}, None),
                  (RequestCode.CLEAN_BROKER_DATA, {"brokerName": "b"}, None),
                  (RequestCode.UPDATE_CONTROLLER_CONFIG, {}, b"a=b\n"),
                  (RMQC_TRANSFER_LEADER, {}, None),
                  (RMQC_SNAPSHOT_SAVE, {}, None),
                  (RMQC_MEMBERS_ADD, {"id": "n3", "address": "10.0.0.4:9878"}, None),
                  (RMQC_MEMBERS_PROMOTE, {"id": "n3"}, None), (RMQC_MEMBERS_REMOVE, {"id": "n3"}, None),
                  (RMQC_IMPORT_GROUPS, {}, b'{"source":"s","groups":[]}')]
    for code, ext, body in admin_only:
        assert check_request(rules(), signed(code, "RocketMQ", "12345678", ext, body), OUTSIDE) is Refusal.NOT_ADMIN
        assert check_request(rules(), signed(code, "rocketmq2", "12345678", ext, body), OUTSIDE) == Allowed("rocketmq2")
    listing = signed(RMQC_MEMBERS_LIST, "RocketMQ", "12345678")  # a read: any account
    assert check_request(rules(), listing, OUTSIDE) == Allowed("RocketMQ")


def test_refusals_name_the_reason() -> None:
    heartbeat = RequestCode.BROKER_HEARTBEAT
    assert check_request(rules(), make_request(heartbeat, 1, {}), OUTSIDE) is Refusal.ADDRESS_NOT_ALLOWED
    assert check_request(rules(), signed(heartbeat, "nobody", "12345678"), OUTSIDE) is Refusal.UNKNOWN_ACCESS_KEY
    assert check_request(rules(), signed(heartbeat, "RocketMQ", "87654321"), OUTSIDE) is Refusal.BAD_SIGNATURE
    unsigned_with_key = make_request(heartbeat, 1, {"AccessKey": "RocketMQ"})
    assert check_request(rules(), unsigned_with_key, OUTSIDE) is Refusal.BAD_SIGNATURE
    assert "signature" not in Refusal.UNKNOWN_ACCESS_KEY.value  # nothing hints at which part failed


def test_whitelisted_addresses_pass_unsigned_as_in_rocketmq() -> None:
    clean = make_request(RequestCode.CLEAN_BROKER_DATA, 1, {"brokerName": "b"})
    assert check_request(rules(), clean, "192.168.0.3") == Allowed(ANONYMOUS)  # global whitelist
    # an account's whiteRemoteAddress: its key, no signature needed, from those addresses only
    clean.ext_fields = {"brokerName": "b", "AccessKey": "rocketmq2"}
    assert check_request(rules(), clean, "192.168.1.3") == Allowed("rocketmq2")
    assert check_request(rules(), clean, OUTSIDE) is Refusal.BAD_SIGNATURE


def test_the_gate_answers_refused_requests_drops_refused_oneways_and_counts_both() -> None:
    """RequestGate: the decision the node's gate (rmqc.node._acl) and the simulator both run."""
    gate = RequestGate()
    allowed = signed(ELECT, "rocketmq2", "12345678", {"brokerName": "b", "designateElect": "true"})
    assert gate.check(rules(), allowed, OUTSIDE) == Allowed("rocketmq2")
    not_admin = signed(ELECT, "RocketMQ", "12345678", {"brokerName": "b", "designateElect": "true"})
    refused = gate.check(rules(), not_admin, OUTSIDE)
    assert isinstance(refused, Refused) and refused.refusal is Refusal.NOT_ADMIN and refused.answer is not None
    assert refused.answer.code == ResponseCode.NO_PERMISSION and refused.answer.opaque == not_admin.opaque
    assert refused.answer.remark == f"NO_PERMISSION: {Refusal.NOT_ADMIN.value}" and refused.answer.is_response
    heartbeat = make_request(RequestCode.BROKER_HEARTBEAT, 2, {"brokerName": "b"}, oneway=True)
    assert gate.check(rules(), heartbeat, OUTSIDE) == Refused(Refusal.ADDRESS_NOT_ALLOWED, None)
    assert gate.check(rules(), heartbeat, "10.10.103.9") == Allowed(ANONYMOUS)  # globally white
    assert dict(gate.refused) == {"NOT_ADMIN": 1, "ADDRESS_NOT_ALLOWED": 1} and gate.dropped_oneway == 1


def test_the_acl_package_stays_pure() -> None:
    """No clock, socket or node code: the simulator runs the gate deterministically."""
    import ast
    from pathlib import Path

    import rmqc.acl

    forbidden = {"trio", "socket", "threading", "time", "asyncio", "logging", "rmqc.node", "rmqc.testing"}
    for path in Path(rmqc.acl.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            for name in names:
                assert not any(name == bad or name.startswith(bad + ".") for bad in forbidden), \
                    f"{path.name} imports {name}"


@pytest.mark.parametrize("secret", ["12345678", "k" * 64, "long-" * 40, "sécret-ключ"])
def test_the_prepared_key_signs_as_hmac_sha1(secret: str) -> None:
    content = b"rocketmq22broker-aDefaultClustertrue1700000000000" * 3
    expected = base64.b64encode(hmac.digest(secret.encode(), content, "sha1"))
    assert SigningKey(secret).signature(content) == expected


def test_key_orders_are_cached_up_to_a_bound_and_stay_right_beyond_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from rmqc.acl import _signature

    monkeypatch.setattr(_signature, "_ORDERS", {})
    monkeypatch.setattr(_signature, "MAX_CACHED_ORDERS", 2)
    for n in range(5):
        fields = {f"k{i}": str(i) for i in range(n, -1, -1)} | {"Signature": "x"}
        assert signature_content(fields, None) == "".join(str(i) for i in range(n + 1)).encode()
    assert len(_signature._ORDERS) == 2
