"""The progress server's CA and serving certificate: made once, shared through one
Secret, renewed before they expire, and verifiable by the pods' TLS clients."""

from __future__ import annotations

import socket
import ssl
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from cryptography import x509

from kubetrain.controller.status_server import tls_context
from kubetrain.controller.status_tls import (
    CA_CERT_KEY,
    TLS_CERT_KEY,
    ServingCertificates,
    next_data,
)

# Real time: the handshakes check validity against the clock.
NOW = datetime.now(UTC).replace(microsecond=0)
HOSTS = ["kubetrain-progress.kubetrain-system.svc"]


class MemoryStore:
    """The Secret, with its resourceVersion; ``races`` writes land first from elsewhere."""

    def __init__(self) -> None:
        self.data: dict[str, str] | None = None
        self.version = 0
        self.writes = 0
        self.races: list[dict[str, str]] = []

    def read(self) -> tuple[dict[str, str], str] | None:
        return None if self.data is None else (dict(self.data), str(self.version))

    def _race(self) -> bool:
        if self.races:
            self.data, self.version = self.races.pop(0), self.version + 1
            return True
        return False

    def create(self, data: dict[str, str]) -> bool:
        if self._race() or self.data is not None:
            return False
        self.data, self.version, self.writes = dict(data), self.version + 1, self.writes + 1
        return True

    def replace(self, data: dict[str, str], resource_version: str) -> bool:
        if self._race() or resource_version != str(self.version):
            return False
        self.data, self.version, self.writes = dict(data), self.version + 1, self.writes + 1
        return True


def cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


def handshake(material_ca: str, server_context: ssl.SSLContext, host: str) -> str:
    """A real TLS handshake over a socket pair, the client verifying ``host`` against the
    CA bundle as the SDK's requests does; the peer certificate's common name."""
    left, right = socket.socketpair()
    client_context = ssl.create_default_context(cadata=material_ca)
    result: dict[str, str] = {}

    def serve() -> None:
        try:
            with server_context.wrap_socket(right, server_side=True) as tls:
                tls.recv(1)
        except ssl.SSLError:
            right.close()  # the client refused the certificate (the failing cases)

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        with client_context.wrap_socket(left, server_hostname=host) as tls:
            peer: Any = tls.getpeercert()
            subject = dict(item[0] for item in peer["subject"])
            result["cn"] = str(subject["commonName"])
            tls.sendall(b"x")
    finally:
        left.close()
        thread.join()
    return result["cn"]


def test_the_first_replica_creates_the_secret_and_the_next_reads_it() -> None:
    store = MemoryStore()
    first = ServingCertificates(store, HOSTS, clock=lambda: NOW).refresh()
    second = ServingCertificates(store, HOSTS, clock=lambda: NOW).refresh()
    assert store.writes == 1 and first == second
    leaf = cert(first.cert_pem)
    assert (
        leaf.extensions.get_extension_for_class(
            x509.SubjectAlternativeName
        ).value.get_values_for_type(x509.DNSName)
        == HOSTS
    )
    assert leaf.not_valid_after_utc == NOW + timedelta(days=90)
    assert handshake(first.ca_bundle, tls_context(first), HOSTS[0]) == HOSTS[0]


def test_fails_verification_for_a_host_the_certificate_does_not_name() -> None:
    material = ServingCertificates(MemoryStore(), HOSTS, clock=lambda: NOW).refresh()
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        handshake(material.ca_bundle, tls_context(material), "other.svc")


def test_an_ip_address_host_is_an_ip_san() -> None:
    material = ServingCertificates(MemoryStore(), ["127.0.0.1"], clock=lambda: NOW).refresh()
    assert handshake(material.ca_bundle, tls_context(material), "127.0.0.1") == "127.0.0.1"


def test_the_serving_certificate_is_renewed_in_its_last_third_and_the_ca_kept() -> None:
    store = MemoryStore()
    clock = [NOW]
    certificates = ServingCertificates(store, HOSTS, clock=lambda: clock[0])
    issued = certificates.refresh()
    clock[0] = NOW + timedelta(days=59)
    assert certificates.refresh() == issued and store.writes == 1
    clock[0] = NOW + timedelta(days=61)
    renewed = certificates.refresh()
    assert store.writes == 2
    assert renewed.cert_pem != issued.cert_pem and renewed.ca_bundle == issued.ca_bundle
    assert renewed.not_after == clock[0] + timedelta(days=90)


def test_a_changed_host_gets_a_new_certificate() -> None:
    store = MemoryStore()
    ServingCertificates(store, HOSTS, clock=lambda: NOW).refresh()
    moved = ServingCertificates(store, ["progress.ops.svc"], clock=lambda: NOW).refresh()
    assert handshake(moved.ca_bundle, tls_context(moved), "progress.ops.svc") == "progress.ops.svc"


def test_a_ca_near_its_end_is_replaced_and_the_old_one_trusted_until_it_expires() -> None:
    data = next_data(None, HOSTS, NOW, serving_days=90)
    assert data is not None
    old_ca = data[CA_CERT_KEY]
    near_end = NOW + timedelta(days=3650 - 100)
    rolled = next_data(data, HOSTS, near_end, serving_days=90)
    assert rolled is not None
    assert rolled[CA_CERT_KEY].startswith(old_ca) and rolled[CA_CERT_KEY] != old_ca
    # The new serving certificate chains to the new CA; pods with the old bundle are
    # told the new one through their ConfigMap, and both are trusted meanwhile.
    leaf = cert(rolled[TLS_CERT_KEY])
    new_ca = cert(rolled[CA_CERT_KEY][len(old_ca) :])
    assert leaf.issuer == new_ca.subject
    leaf.verify_directly_issued_by(new_ca)
    after_old_expired = NOW + timedelta(days=3651)
    pruned = next_data(rolled, HOSTS, after_old_expired, serving_days=90)
    assert pruned is not None and pruned[CA_CERT_KEY].count("BEGIN CERTIFICATE") == 1


def test_a_replica_that_loses_the_race_uses_the_winners_certificate() -> None:
    store = MemoryStore()
    winner = next_data(None, HOSTS, NOW, serving_days=90)
    assert winner is not None
    store.races.append(winner)
    material = ServingCertificates(store, HOSTS, clock=lambda: NOW).refresh()
    assert material.cert_pem == winner[TLS_CERT_KEY] and store.writes == 0


def test_fails_after_five_conflicts_in_a_row() -> None:
    store = MemoryStore()
    for _ in range(6):  # what is there, then a change under each of the five tries
        data = next_data(None, HOSTS, NOW - timedelta(days=80), serving_days=90)
        assert data is not None
        store.races.append(data)
    store.data = store.races.pop(0)
    with pytest.raises(RuntimeError, match="5 conflicts in a row"):
        ServingCertificates(store, HOSTS, clock=lambda: NOW).refresh()
