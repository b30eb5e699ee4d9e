"""The SSH key pair an MPIJob's launcher uses to reach its workers (no ``pods/exec``).

ECDSA P-521, like upstream mpi-operator: the private key in PEM (``ssh-privatekey``) and
the public key in OpenSSH form (``ssh-publickey``, also used as ``authorized_keys``).
Generated once per job; the Secret holding it is created and never overwritten.
"""

from __future__ import annotations

from dataclasses import dataclass

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
