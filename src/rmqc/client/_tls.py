"""TLS for rmqc's client, CLI and broker simulator (controllers with tls_mode permissive or
enforcing; docs/security.md)."""

from __future__ import annotations

import ssl


def client_tls_context(ca_file: str | None = None, cert_file: str | None = None,
                       key_file: str | None = None) -> ssl.SSLContext:
    """Trust `ca_file` (else the system's roots) and present `cert_file` when the controllers
    require client certificates (tls_auth_client). Controllers are named by IP in every RocketMQ
    setting, so the CA decides, not host names."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=ca_file)
    context.check_hostname = False
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    return context
