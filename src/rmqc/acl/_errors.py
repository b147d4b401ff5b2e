from __future__ import annotations

from rmqc.errors import ConfigError


class AclConfigError(ConfigError):
    """A plain_acl.yml that cannot be used; the message names the account or entry at fault."""
