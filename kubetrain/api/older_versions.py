"""The older versions ``kubetrain convert`` rewrites, per kind, and the hint
``kubetrain validate`` gives when it refuses one.

A leaf module (it imports only the kinds table): the loader reads it for its hint, so it
must not import the loader back.
"""

from __future__ import annotations

from collections.abc import Mapping

from kubetrain.api.kinds import KINDS, MPI, PYTORCH, TENSORFLOW

#: For each kind, the versions of its group that ``kubetrain convert`` reads, oldest
#: first, and the upstream releases whose Go types define them.
OLDER_VERSIONS: Mapping[str, Mapping[str, str]] = {
    TENSORFLOW.kind: {
        "v1beta1": "tf-operator v0.4.0-v0.5.1",
        "v1beta2": "tf-operator v0.5.0-v0.5.3",
    },
    PYTORCH.kind: {
        "v1beta1": "pytorch-operator v0.4.0-v0.5.0",
        "v1beta2": "pytorch-operator v0.5.0-v0.6.0",
    },
    MPI.kind: {
        "v1alpha1": "mpi-operator v0.2.0-v0.3.0",
        "v1alpha2": "mpi-operator v0.2.0-v0.3.0",
        "v1": "mpi-operator v0.2.3-v0.3.0",
    },
}

#: The command named in the hint; ``kubetrain validate`` puts the file's name for FILE.
CONVERT_COMMAND = "kubetrain convert FILE"


def older_version(kind: str, api_version: object) -> str | None:
    """The version part of ``api_version`` when it is an older version of ``kind``'s
    group that ``kubetrain convert`` reads, else None."""
    info = KINDS.get(kind)
    if info is None or not isinstance(api_version, str):
        return None
    group, _, version = api_version.partition("/")
    if group != info.group or version not in OLDER_VERSIONS.get(kind, {}):
        return None
    return version


def older_version_hint(kind: str, api_version: object) -> str:
    """The sentence appended to the loader's refusal of an older apiVersion ("" when
    ``api_version`` is not one ``kubetrain convert`` reads)."""
    if older_version(kind, api_version) is None:
        return ""
    return f" ({api_version} is an older version: `{CONVERT_COMMAND}` converts it)"
