"""Strong types for construct props: images, quantities and resources.

Each type checks its value when it is made and says what is wrong, the value and what
is expected, so a bad prop fails at the line that set it rather than at Argo CD sync.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api.base import QUANTITY_PATTERN

_QUANTITY = re.compile(QUANTITY_PATTERN)
_IMAGE = re.compile(
    r"^(?P<repository>[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*)"
    r"(:(?P<tag>[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}))?"
    r"(@(?P<digest>sha256:[a-f0-9]{64}))?$"
)
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
)
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_dns_label(prop: str, value: str) -> None:
    """Raise unless ``value`` is a DNS-1123 label (object names, namespaces)."""
    if not DNS1123_LABEL.match(value) or len(value) > 63:
        raise ValueError(
            f"{prop} ({value!r}) must be a DNS-1123 label: lowercase letters, digits and '-', "
            "starting and ending with a letter or digit, at most 63 characters"
        )


def check_labels(prop: str, labels: dict[str, str]) -> None:
    """Raise unless every key is a qualified name and every value a label value."""
    for key, value in labels.items():
        if not _QUALIFIED_NAME.match(key.split("/")[-1]) or not _QUALIFIED_NAME.match(key):
            raise ValueError(
                f"{prop} key ({key!r}) must be a qualified name such as 'example.com/pool'"
            )
        if not _LABEL_VALUE.match(value) or len(value) > 63:
            raise ValueError(
                f"{prop}[{key!r}] ({value!r}) must be a label value: at most 63 alphanumerics, "
                "'-', '_' or '.', starting and ending with an alphanumeric"
            )


TOLERATION_OPERATORS = ("Exists", "Equal")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")


def check_toleration(prop: str, toleration: dict[str, Any]) -> None:
    """Raise unless ``toleration`` is a Kubernetes Toleration (the fields the API server
    checks: known keys, operator, effect, a value only with ``Equal``)."""
    unknown = sorted(set(toleration) - set(_TOLERATION_FIELDS))
    if unknown:
        raise ValueError(
            f"{prop} has unknown field(s) {', '.join(unknown)}: use {', '.join(_TOLERATION_FIELDS)}"
        )
    operator = toleration.get("operator", "Equal")
    if operator not in TOLERATION_OPERATORS:
        raise ValueError(f"{prop}.operator ({operator!r}) must be Exists or Equal")
    effect = toleration.get("effect", "")
    if effect and effect not in TOLERATION_EFFECTS:
        raise ValueError(
            f"{prop}.effect ({effect!r}) must be one of {', '.join(TOLERATION_EFFECTS)}"
        )
    key = toleration.get("key", "")
    if key and not _QUALIFIED_NAME.match(key):
        raise ValueError(
            f"{prop}.key ({key!r}) must be a qualified name such as 'example.com/pool'"
        )
    if operator == "Exists" and toleration.get("value"):
        raise ValueError(
            f"{prop}.value ({toleration['value']!r}) must be empty with operator Exists"
        )
    if not key and operator != "Exists":
        raise ValueError(f"{prop}.key is empty: an empty key needs operator Exists")
    seconds = toleration.get("tolerationSeconds")
    if seconds is not None and (not isinstance(seconds, int) or effect != "NoExecute"):
        raise ValueError(
            f"{prop}.tolerationSeconds ({seconds!r}) must be an integer, with effect NoExecute"
        )


@dataclass(frozen=True)
class Quantity:
    """A Kubernetes resource quantity (``16Gi``, ``500m``, ``8``)."""

    value: str

    def __post_init__(self) -> None:
        if not _QUANTITY.match(self.value):
            raise ValueError(
                f"quantity ({self.value!r}) is not a Kubernetes quantity: use e.g. 8, 500m, 16Gi"
            )

    @classmethod
    def of(cls, value: str | int) -> Quantity:
        return cls(str(value))

    @classmethod
    def gibibytes(cls, amount: int) -> Quantity:
        if amount < 0:
            raise ValueError(f"gibibytes ({amount}) must be >= 0")
        return cls(f"{amount}Gi")

    @classmethod
    def mebibytes(cls, amount: int) -> Quantity:
        if amount < 0:
            raise ValueError(f"mebibytes ({amount}) must be >= 0")
        return cls(f"{amount}Mi")

    @classmethod
    def millicores(cls, amount: int) -> Quantity:
        if amount < 0:
            raise ValueError(f"millicores ({amount}) must be >= 0")
        return cls(f"{amount}m")

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Image:
    """A container image pinned by tag or digest (``:latest`` and untagged are refused:
    GitOps output must say exactly what runs)."""

    reference: str

    def __post_init__(self) -> None:
        match = _IMAGE.match(self.reference)
        if not match:
            raise ValueError(
                f"image ({self.reference!r}) is not a valid image reference: expected "
                "registry/repository:tag or registry/repository@sha256:<64 hex>"
            )
        if not match.group("tag") and not match.group("digest"):
            raise ValueError(
                f"image ({self.reference!r}) is not pinned: add a tag (e.g. ':1.2.3') or a digest"
            )
        if match.group("tag") == "latest" and not match.group("digest"):
            raise ValueError(
                f"image ({self.reference!r}) uses ':latest': pin a version tag or a digest"
            )

    def __str__(self) -> str:
        return self.reference


@dataclass(frozen=True, kw_only=True)
class Resources:
    """Container resources. ``gpus`` become ``nvidia.com/gpu`` limits (GPUs are not
    overcommittable, so requests equal limits)."""

    cpu: Quantity | None = None
    memory: Quantity | None = None
    gpus: int = 0
    cpu_limit: Quantity | None = None
    memory_limit: Quantity | None = None
    extended: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.gpus < 0:
            raise ValueError(f"gpus ({self.gpus}) must be >= 0")
        for name, count in self.extended.items():
            if count < 0:
                raise ValueError(f"extended[{name!r}] ({count}) must be >= 0")

    def to_wire(self) -> dict[str, Any]:
        requests: dict[str, Any] = {}
        limits: dict[str, Any] = {}
        if self.cpu is not None:
            requests["cpu"] = str(self.cpu)
        if self.memory is not None:
            requests["memory"] = str(self.memory)
        if self.cpu_limit is not None:
            limits["cpu"] = str(self.cpu_limit)
        memory_limit = self.memory_limit or self.memory
        if memory_limit is not None:
            limits["memory"] = str(memory_limit)
        if self.gpus:
            limits[K.GPU_RESOURCE] = self.gpus
        for name, count in sorted(self.extended.items()):
            if count:
                limits[name] = count
        out: dict[str, Any] = {}
        if requests:
            out["requests"] = requests
        if limits:
            out["limits"] = limits
        return out
