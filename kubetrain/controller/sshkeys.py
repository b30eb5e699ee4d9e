"""The SSH key pair an MPI launcher (MPIJob, or an MPI TrainJob) uses to reach its
workers (no ``pods/exec``), and the Secret that holds it.

ECDSA P-521, like upstream mpi-operator: the private key in PEM (``ssh-privatekey``) and
the public key in OpenSSH form (``ssh-publickey``, also used as ``authorized_keys``).
Generated once per job; the Secret holding it is created and never overwritten.
"""

from __future__ import annotations

import base64
import hashlib
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


#: The alphabet and length of the suffix (the API server's own for ``generateName``).
NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
NAME_SUFFIX_LENGTH = 5


def ssh_secret_name(prefix: str, job_uid: str) -> str:
    """``<prefix><suffix>``, the suffix derived from the job's uid: the same name in every
    reconcile and after a crash (the operator cannot read Secrets, so a 409 on create can
    only be its own earlier create), unknown before the job exists, and a new one for a
    new job of the same name. Recorded in the job's status once created."""
    if not job_uid:
        raise ValueError(f"cannot name the SSH Secret {prefix}...: the job has no uid yet")
    value = int.from_bytes(hashlib.sha256(job_uid.encode()).digest()[:8], "big")
    suffix = ""
    for _ in range(NAME_SUFFIX_LENGTH):
        value, digit = divmod(value, len(NAME_SUFFIX_ALPHABET))
        suffix += NAME_SUFFIX_ALPHABET[digit]
    return prefix + suffix


def ssh_secret(metadata: Mapping[str, Any], keys: SshKeyPair) -> dict[str, Any]:
    """An immutable ``kubernetes.io/ssh-auth`` Secret holding ``keys``, created under
    ``metadata`` (named by :func:`ssh_secret_name`, or as the job's status records)."""
    meta = dict(metadata)

    def b64(text: str) -> str:
        return base64.b64encode(text.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/ssh-auth",
        "immutable": True,
        "metadata": meta,
        "data": {
            "ssh-privatekey": b64(keys.private_pem),
            "ssh-publickey": b64(keys.public_openssh),
        },
    }
