"""The progress server's certificates: a CA the operator makes once and a serving
certificate it signs and re-issues before it expires, kept in one Secret in the
operator's namespace so every replica serves the same certificate.

- CA: ECDSA P-256, valid ``CA_DAYS`` (10 years); pods trust it (``<trainjob>-tls-config``).
- Serving certificate: ECDSA P-256, valid ``SERVING_DAYS``, for the host names the pods
  use (the Service's DNS names, or an IP address); re-issued by whichever replica first
  sees it within ``RENEW_FRACTION`` of its lifetime from the end, or naming other hosts.
  A CA within the same fraction of its end is replaced too, and the Secret keeps the old
  one in ``ca.crt`` beside the new one until every certificate it signed has expired, so
  pods that read the bundle before the change keep trusting the server.
- Concurrent replicas: the Secret is created (409: another replica did; read it) or
  replaced with its resourceVersion (409: read it again), never overwritten blindly.
"""

from __future__ import annotations

import ipaddress
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_DAYS = 3650
SERVING_DAYS = 90
#: Re-issue a certificate once less than this fraction of its lifetime is left.
RENEW_FRACTION = 1 / 3
CA_CERT_KEY = "ca.crt"
CA_KEY_KEY = "ca.key"
TLS_CERT_KEY = "tls.crt"
TLS_KEY_KEY = "tls.key"


class SecretStore(Protocol):
    """The Secret's decoded data and writes (``status_server.KubeSecretStore``)."""

    def read(self) -> tuple[dict[str, str], str] | None:
        """(data, resourceVersion), or None when there is no Secret."""
        ...

    def create(self, data: dict[str, str]) -> bool:
        """False when it exists already."""
        ...

    def replace(self, data: dict[str, str], resource_version: str) -> bool:
        """False when ``resource_version`` is stale."""
        ...


@dataclass(frozen=True)
class ServingMaterial:
    """What the server presents and what pods trust."""

    ca_bundle: str
    cert_pem: str
    key_pem: str
    not_after: datetime


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _subject_names(hosts: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


def issue_ca(
    now: datetime, *, days: int = CA_DAYS, name: str = "kubetrain progress server CA"
) -> tuple[str, str]:
    """A new CA named ``name``: (certificate PEM, key PEM)."""
    key = _key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    ski = x509.SubjectKeyIdentifier.from_public_key(key.public_key())
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(now + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(ski, critical=False)
        .sign(key, hashes.SHA256())
    )
    return _cert_pem(cert), _key_pem(key)


def issue_serving(
    ca_cert_pem: str, ca_key_pem: str, hosts: Sequence[str], now: datetime, *, days: int
) -> tuple[str, str]:
    """A serving certificate for ``hosts`` signed by the CA: (certificate PEM, key PEM)."""
    if not hosts:
        raise ValueError("hosts is empty: a serving certificate needs a DNS name or IP")
    ca_cert = x509.load_pem_x509_certificate(ca_cert_pem.encode())
    ca_key = serialization.load_pem_private_key(ca_key_pem.encode(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key is not an ECDSA key")
    key = _key()
    not_after = min(now + timedelta(days=days), ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=5))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(_subject_names(hosts)), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _cert_pem(cert), _key_pem(key)


def _due(cert: x509.Certificate, now: datetime) -> bool:
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return end - now < (end - start) * RENEW_FRACTION


def _hosts_of(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [str(n.value) for n in san]


def _pems(bundle: str) -> list[str]:
    marker = "-----END CERTIFICATE-----"
    return [part.strip() + "\n" + marker + "\n" for part in bundle.split(marker) if part.strip()]


def next_data(
    data: dict[str, str] | None, hosts: Sequence[str], now: datetime, *, serving_days: int
) -> dict[str, str] | None:
    """The Secret's data after this check: None when nothing needs to change."""
    data = dict(data or {})
    changed = False
    ca_pem, ca_key = data.get(CA_CERT_KEY, ""), data.get(CA_KEY_KEY, "")
    bundle = _pems(ca_pem)
    current_ca = x509.load_pem_x509_certificate(bundle[-1].encode()) if bundle else None
    if current_ca is None or not ca_key or _due(current_ca, now):
        new_ca, ca_key = issue_ca(now)
        kept = [pem for pem in bundle if _still_valid(pem, now)]
        bundle, changed = [*kept, new_ca], True
        data[CA_KEY_KEY] = ca_key
    else:
        alive = [pem for pem in bundle if _still_valid(pem, now)]
        changed = alive != bundle
        bundle = alive
    data[CA_CERT_KEY] = "".join(bundle)
    serving = data.get(TLS_CERT_KEY)
    leaf = x509.load_pem_x509_certificate(serving.encode()) if serving else None
    if (
        changed
        or leaf is None
        or not data.get(TLS_KEY_KEY)
        or _due(leaf, now)
        or sorted(_hosts_of(leaf)) != sorted(hosts)
    ):
        cert, key = issue_serving(bundle[-1], data[CA_KEY_KEY], hosts, now, days=serving_days)
        data[TLS_CERT_KEY], data[TLS_KEY_KEY] = cert, key
        changed = True
    return data if changed else None


def _still_valid(pem: str, now: datetime) -> bool:
    return x509.load_pem_x509_certificate(pem.encode()).not_valid_after_utc > now


class ServingCertificates:
    """Keeps the Secret's certificates current and tells the server when they change."""

    def __init__(
        self,
        store: SecretStore,
        hosts: Sequence[str],
        *,
        serving_days: int = SERVING_DAYS,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.store = store
        self.hosts = list(hosts)
        self.serving_days = serving_days
        self.clock = clock
        self._lock = threading.Lock()
        self._material: ServingMaterial | None = None

    @property
    def material(self) -> ServingMaterial | None:
        return self._material

    def refresh(self) -> ServingMaterial:
        """Read the Secret, create or renew what is missing or due; the current material."""
        with self._lock:
            for _attempt in range(5):
                found = self.store.read()
                data = dict(found[0]) if found is not None else {}
                wanted = next_data(data, self.hosts, self.clock(), serving_days=self.serving_days)
                if wanted is None:
                    self._material = _material_of(data)
                    return self._material
                if found is None:
                    written = self.store.create(wanted)
                else:
                    written = self.store.replace(wanted, found[1])
                if written:
                    self._material = _material_of(wanted)
                    return self._material
            raise RuntimeError(
                "the progress server's certificate Secret kept changing under this replica "
                "(5 conflicts in a row)"
            )


def _material_of(data: dict[str, str]) -> ServingMaterial:
    leaf = x509.load_pem_x509_certificate(data[TLS_CERT_KEY].encode())
    return ServingMaterial(
        ca_bundle=data[CA_CERT_KEY],
        cert_pem=data[TLS_CERT_KEY],
        key_pem=data[TLS_KEY_KEY],
        not_after=leaf.not_valid_after_utc,
    )
