"""RocketMQ's plain_acl.yml: `globalWhiteRemoteAddresses` and `accounts` (accessKey, secretKey,
whiteRemoteAddress, admin). The topic and group permissions of a broker's file (defaultTopicPerm,
topicPerms, ...) mean nothing to a controller and are ignored, so one file can serve both."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._address import AddressPattern, parse_address_pattern
from ._errors import AclConfigError
from ._signature import SigningKey

# RocketMQ refuses keys shorter than this (AclUtils / PlainPermissionManager), and so do we.
MIN_KEY_CHARS = 7  # RocketMQ's PlainPermissionManager refuses keys of 6 characters or fewer
MAX_ACCOUNTS = 10_000  # a bound on what one file may make us hold; real files have a handful


@dataclass(frozen=True, slots=True)
class Account:
    access_key: str
    secret_key: str = field(repr=False)
    white_remote_address: AddressPattern | None
    admin: bool
    signer: SigningKey = field(init=False, repr=False, compare=False)  # made once per file read

    def __post_init__(self) -> None:
        object.__setattr__(self, "signer", SigningKey(self.secret_key))


@dataclass(frozen=True, slots=True)
class AclRules:
    global_white: tuple[AddressPattern, ...]
    accounts: dict[str, Account]

    def globally_white(self, host: str) -> bool:
        # checked for every request: most files list no global addresses, and then this is free
        return bool(self.global_white) and any(pattern.matches(host) for pattern in self.global_white)


def parse_plain_acl(text: str) -> AclRules:
    # imported here: PyYAML costs ~0.1 s of start-up, paid only by nodes with acl_enabled
    import yaml

    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise AclConfigError(f"not valid YAML: {error}") from None
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise AclConfigError("the top level must be a mapping (globalWhiteRemoteAddresses, accounts)")
    white = tuple(parse_address_pattern(str(item)) for item in _list(document, "globalWhiteRemoteAddresses"))
    accounts: dict[str, Account] = {}
    for number, entry in enumerate(_list(document, "accounts"), 1):
        account = _account(entry, number)
        if account.access_key in accounts:
            raise AclConfigError(f"accounts[{number}]: accessKey {account.access_key!r} appears twice")
        accounts[account.access_key] = account
    if len(accounts) > MAX_ACCOUNTS:
        raise AclConfigError(f"{len(accounts)} accounts; at most {MAX_ACCOUNTS}")
    return AclRules(white, accounts)


def _list(document: dict[str, Any], key: str) -> list[Any]:
    value = document.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise AclConfigError(f"{key} must be a list")
    return value


def _account(entry: Any, number: int) -> Account:
    if not isinstance(entry, dict):
        raise AclConfigError(f"accounts[{number}] is not a mapping")
    keys = {}
    for name in ("accessKey", "secretKey"):
        value = entry.get(name)
        # YAML reads 12345678 as a number; RocketMQ's own sample file has such a secret
        text = "" if value is None else str(value)
        if len(text) < MIN_KEY_CHARS:
            raise AclConfigError(f"accounts[{number}]: {name} missing or of {MIN_KEY_CHARS - 1} characters or fewer "
                                 f"(RocketMQ refuses such keys too)")
        keys[name] = text
    white = entry.get("whiteRemoteAddress")
    admin = entry.get("admin", False)
    if not isinstance(admin, bool):
        raise AclConfigError(f"accounts[{number}] ({keys['accessKey']}): admin must be true or false")
    pattern = parse_address_pattern(str(white)) if white not in (None, "") else None
    return Account(keys["accessKey"], keys["secretKey"], pattern, admin)
