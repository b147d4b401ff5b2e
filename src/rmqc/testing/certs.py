"""Certificates for TLS tests, made with the openssl command line in a temporary directory: a CA,
a node certificate for 127.0.0.1 and a client certificate, each signed by the CA; and a second CA
nothing is signed by (a stranger's trust)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Certs:
    ca: Path
    node_cert: Path
    node_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=60)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
             "-keyout", f"{name}.key", "-out", f"{name}.pem", cwd=directory)


def _signed(directory: Path, name: str, ca: str) -> None:
    (directory / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{name}.key",
             "-out", f"{name}.csr", cwd=directory)
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key", "-CAcreateserial",
             "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=directory)


def make_certs(directory: Path) -> Certs:
    for ca in ("ca", "other-ca"):
        _ca(directory, ca)
    for name in ("node", "client"):
        _signed(directory, name, "ca")
    return Certs(directory / "ca.pem", directory / "node.pem", directory / "node.key", directory / "client.pem",
                 directory / "client.key", directory / "other-ca.pem")
