"""How the client commands reach secured controllers (docs/security.md):

- `--access-key` / `--secret-key` (or RMQC_ACCESS_KEY / RMQC_SECRET_KEY): the RocketMQ ACL account
  requests are signed with. The environment keeps the secret out of the process list; the flags
  are there for parity with mqadmin's tools.yml.
- `--tls`, `--tls-ca FILE`, `--tls-cert FILE --tls-key FILE` (or RMQC_TLS, RMQC_TLS_CA, ...):
  connect with TLS, trusting the CA file (else the system's roots), with a client certificate for
  controllers that require one (tls_auth_client)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from rmqc.cli._render import ExitCode, fail

ACCESS_KEY_ENV = "RMQC_ACCESS_KEY"
SECRET_KEY_ENV = "RMQC_SECRET_KEY"

AccessKeyOption = Annotated[str | None, typer.Option(
    "--access-key", envvar=ACCESS_KEY_ENV, help="ACL access key to sign requests with (controllers with acl_enabled)")]
SecretKeyOption = Annotated[str | None, typer.Option(
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


TLS_ENV = {"tls": "RMQC_TLS", "ca": "RMQC_TLS_CA", "cert": "RMQC_TLS_CERT", "key": "RMQC_TLS_KEY"}
TlsOption = Annotated[bool, typer.Option("--tls", envvar=TLS_ENV["tls"], help="connect with TLS")]
TlsCaOption = Annotated[str | None, typer.Option("--tls-ca", envvar=TLS_ENV["ca"],
                                                 help="CA file the controllers' certificates chain to (implies --tls)")]
TlsCertOption = Annotated[str | None, typer.Option("--tls-cert", envvar=TLS_ENV["cert"],
                                                   help="client certificate, for tls_auth_client controllers")]
TlsKeyOption = Annotated[str | None, typer.Option("--tls-key", envvar=TLS_ENV["key"], help="its private key")]


def tls_of(tls: bool, ca: str | None, cert: str | None, key: str | None) -> Any:
    """An ssl.SSLContext, or None for plain TCP; exit 2 when a file cannot be used."""
    if not (tls or ca or cert):
        return None
    import ssl

    from rmqc.client import client_tls_context

    try:
        return client_tls_context(ca, cert, key)
    except (OSError, ssl.SSLError) as error:
        fail(ExitCode.USAGE, f"--tls-ca/--tls-cert/--tls-key: {error}", hint="give PEM files that exist")


def tls_env(tls: bool, ca: str | None, cert: str | None, key: str | None) -> dict[str, str]:
    """The same TLS choice as environment variables, for child processes."""
    values = {"tls": "true" if tls or ca or cert else None, "ca": ca, "cert": cert, "key": key}
    return {TLS_ENV[name]: value for name, value in values.items() if value}
