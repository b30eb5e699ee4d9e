"""The SSH key pair an MPI launcher (MPIJob, or an MPI TrainJob) uses to reach its
workers (no ``pods/exec``), and the Secret that holds it.

ECDSA P-521, like upstream mpi-operator: the private key in PEM (``ssh-privatekey``) and
the public key in OpenSSH form (``ssh-publickey``, also used as ``authorized_keys``).
Generated once per job; the Secret holding it is created and never overwritten.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec


@dataclass(frozen=True)
class SshKeyPair:
    """A private key (PEM) and its public key (OpenSSH ``authorized_keys`` line)."""

    private_pem: str
    public_openssh: str


def generate_ssh_keys() -> SshKeyPair:
    """A fresh ECDSA P-521 key pair."""
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.TraditionalOpenSSL,
        encryption_algorithm=serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(
            encoding=serialization.Encoding.OpenSSH,
            format=serialization.PublicFormat.OpenSSH,
        )
        .decode()
    )
    return SshKeyPair(private_pem=private, public_openssh=public + "\n")


def ssh_secret(metadata: Mapping[str, Any], prefix: str, keys: SshKeyPair | None) -> dict[str, Any]:
    """An immutable ``kubernetes.io/ssh-auth`` Secret holding ``keys``, created under
    ``metadata``. Without a name (and without keys: nothing is created from it) it asks
    for one, ``<prefix><random>``, which the operator chooses and records in the job's
    status before it creates the Secret under that name (it never reads Secrets)."""
    meta = dict(metadata)
    if not meta.get("name"):
        meta.pop("name", None)
        meta["generateName"] = prefix

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "metadata": meta,
        "data": {}
        if keys is None
        else {
            "ssh-privatekey": b64(keys.private_pem),
            "ssh-publickey": b64(keys.public_openssh),
        },
    }
