"""Errors of a migration."""

from __future__ import annotations

from rmqc.errors import RmqcError


class MigrationError(RmqcError):
    """A controller's answer could not be used (an error code, a missing group, a malformed body);
    the message names the controller, the request and the group."""


class MigrationRefused(MigrationError):
    """rmqc refused the import (not empty, or the groups contradict themselves): its remark."""
