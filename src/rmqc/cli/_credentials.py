"""`--access-key` / `--secret-key` (or RMQC_ACCESS_KEY / RMQC_SECRET_KEY): the RocketMQ ACL account
the client commands sign their requests with (docs/security.md). The environment keeps the secret
out of the process list; the flags are there for parity with mqadmin's tools.yml."""

from __future__ import annotations

from typing import Annotated, Any, Optional

import typer

from rmqc.cli._render import ExitCode, fail

ACCESS_KEY_ENV = "RMQC_ACCESS_KEY"
SECRET_KEY_ENV = "RMQC_SECRET_KEY"

AccessKeyOption = Annotated[Optional[str], typer.Option(
    "--access-key", envvar=ACCESS_KEY_ENV, help="ACL access key to sign requests with (controllers with acl_enabled)")]
SecretKeyOption = Annotated[Optional[str], typer.Option(
    "--secret-key", envvar=SECRET_KEY_ENV, show_default=False,
    help=f"ACL secret key (prefer the environment variable {SECRET_KEY_ENV})")]


def credentials_of(access_key: str | None, secret_key: str | None) -> Any:
    """rmqc.acl.Credentials, or None when neither is given; exit 2 when only one is."""
    if access_key is None and secret_key is None:
        return None
    if not access_key or not secret_key:
        fail(ExitCode.USAGE, "--access-key and --secret-key go together",
             hint=f"set both (or {ACCESS_KEY_ENV} and {SECRET_KEY_ENV}), or neither")
    from rmqc.acl import Credentials

    return Credentials(access_key, secret_key)
