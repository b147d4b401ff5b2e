"""Errors of a migration."""

from __future__ import annotations

from rmqc.errors import RmqcError


class MigrationError(RmqcError):
    """A controller's answer could not be used (an error code, a missing group, a malformed body);
    the message names the controller, the request and the group."""


class MigrationRefused(MigrationError):
    """rmqc refused the import (not empty, the groups contradict themselves, or its ACL): the
    answer's code and remark."""

    def __init__(self, code: int, remark: str | None) -> None:
        super().__init__(f"rmqc refused the import ({code}): {remark}")
        self.code = code
        self.remark = remark
