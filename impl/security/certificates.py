"""A self-signed certificate authority and the certificates it signs (``cryptography``).

Used by ``logproof cluster up --security sasl_ssl`` and by the tests: one CA, a certificate per
broker (``CN=broker-<id>``, subject alternative names ``localhost`` and ``127.0.0.1`` plus the
host asked for), and client certificates (``CN=<name>``) for mutual TLS. Files are PEM; a
broker's ``ssl.keystore.location`` file holds its private key followed by its certificate and
the CA's (Kafka's PEM keystore layout).
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

#: How long the certificates are valid.
VALIDITY_DAYS: Final = 825


@dataclass(frozen=True)
class Authority:
    """A CA: its key and certificate, and where its certificate is written."""

    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate
    path: Path


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "logproof"),
                      x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _pem(certificate: x509.Certificate) -> bytes:
    return certificate.public_bytes(serialization.Encoding.PEM)


def create_authority(directory: Path, name: str = "logproof-ca") -> Authority:
    """Create a CA and write its certificate to ``directory/ca.pem``."""
    directory.mkdir(parents=True, exist_ok=True)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(name)).issuer_name(_name(name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(key, hashes.SHA256())
    )
    path = directory / "ca.pem"
    path.write_bytes(_pem(certificate))
    return Authority(key, certificate, path)


def issue(authority: Authority, directory: Path, common_name: str,
          hosts: tuple[str, ...] = ("localhost", "127.0.0.1")) -> Path:
    """A certificate for ``common_name`` signed by ``authority``, valid for ``hosts``, written
    with its key and chain to ``directory/<common_name>.pem`` (mode 0600); its path."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    certificate = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(authority.certificate.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALIDITY_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                              ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(authority.key, hashes.SHA256())
    )
    path = directory / f"{common_name}.pem"
    path.touch(mode=0o600)
    path.write_bytes(_pem_key(key) + _pem(certificate) + _pem(authority.certificate))
    return path


def write_split(path: Path) -> tuple[Path, Path]:
    """Split a keystore PEM into ``<stem>.key`` and ``<stem>.crt`` (for clients such as
    librdkafka's ``ssl.key.location``/``ssl.certificate.location``)."""
    text = path.read_text()
    marker = "-----END PRIVATE KEY-----\n"
    key_text, _, certificates = text.partition(marker)
    key_path = path.with_suffix(".key")
    cert_path = path.with_suffix(".crt")
    key_path.touch(mode=0o600)
    key_path.write_text(key_text + marker)
    cert_path.write_text(certificates)
    return key_path, cert_path
