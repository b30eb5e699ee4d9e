"""What the Kueue constructs share: the API version they write, quota values, quantity
arithmetic, names and metadata."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from kubetrain.api import keys as K
from kubetrain.api import quantity as kubernetes_quantity
from kubetrain.constructs.types import Quantity

#: Written by every Kueue construct (see :data:`kubetrain.api.keys.KUEUE_API_VERSION`).
API_VERSION = K.KUEUE_API_VERSION
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_PLAIN = re.compile(r"^([0-9]+)([A-Za-z]*)$")
PART_OF = {"app.kubernetes.io/part-of": "kubetrain"}


def check_subdomain(prop: str, value: str) -> None:
    """Raise unless ``value`` is a DNS-1123 subdomain (how Kueue's CRDs check the names of
    flavors, cluster queues and cohorts)."""
    if not isinstance(value, str) or not _SUBDOMAIN.match(value) or len(value) > 253:
        raise ValueError(
            f"{prop} ({value!r}) must be a DNS-1123 subdomain: lowercase letters, digits, "
            "'-' and '.', starting and ending with a letter or digit, at most 253 characters"
        )


def amount(quantity: Quantity) -> Decimal:
    """The number a quantity stands for, to compare two of them."""
    return kubernetes_quantity.amount(quantity.value)


_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}


def canonical(quantity: Quantity) -> Quantity:
    """``quantity`` as Kubernetes' Go ``resource.Quantity`` prints it (``4096Gi`` ->
    ``4Ti``, ``1000`` -> ``1k``, ``0.5`` -> ``500m``). Kueue's objects pass through its
    conversion webhook (v1beta2 is not the stored version), which rewrites quotas in this
    form; writing them so keeps a re-apply from changing anything."""
    value = amount(quantity)
    binary = quantity.value.rstrip().endswith("i")
    if binary and abs(value) >= 1024 and value == value.to_integral_value():
        whole = int(value)
        power = 0
        while power < len(_BINARY) - 1 and whole % 1024 ** (power + 1) == 0:
            power += 1
        return Quantity(f"{whole // 1024**power}{_BINARY[power]}")
    if value == 0:
        return Quantity("0")
    exponent = -9
    while (
        exponent < 18
        and (value / Decimal(10) ** (exponent + 3))
        == (value / Decimal(10) ** (exponent + 3)).to_integral_value()
    ):
        exponent += 3
    mantissa = value / Decimal(10) ** exponent
    if mantissa != mantissa.to_integral_value():
        return quantity  # finer than nano: left as written
    return Quantity(f"{int(mantissa)}{_DECIMAL[exponent]}")


def scaled(prop: str, quantity: Quantity | int | str, factor: int) -> Quantity:
    """``quantity`` x ``factor`` written in the quantity's own unit (``5120Mi`` x 4 =
    ``20480Mi``): per-node amounts of a pool times its nodes."""
    text = str(quantity)
    match = _PLAIN.match(text)
    if not match:
        raise ValueError(
            f"{prop} ({text!r}) must be a whole number with an optional unit (8, 5120Mi) to "
            "be multiplied by a node count"
        )
    return Quantity(f"{int(match.group(1)) * factor}{match.group(2)}")


@dataclass(frozen=True, kw_only=True)
class Quota:
    """One resource's quota in one flavor of a ClusterQueue.

    Build it with :meth:`of`: ``Quota.of(32, borrowing_limit=16)``."""

    nominal: Quantity
    """What the queue owns (``nominalQuota``). Required."""
    borrowing_limit: Quantity | None = None
    """The most it may borrow from its cohort beyond ``nominal``. Default: no limit (all
    the cohort has unused). Needs a cohort."""
    lending_limit: Quantity | None = None
    """The most of ``nominal`` the cohort may borrow from it (at most ``nominal``).
    Default: all of it. Needs a cohort."""

    def __post_init__(self) -> None:
        for prop in ("nominal", "borrowing_limit", "lending_limit"):
            value = getattr(self, prop)
            if value is None:
                continue
            if not isinstance(value, Quantity):
                raise ValueError(
                    f"{prop} ({value!r}) must be a Quantity: build quotas with Quota.of(...)"
                )
            if amount(value) < 0:
                raise ValueError(f"{prop} ({value.value!r}) must not be negative")
        if self.lending_limit is not None and amount(self.lending_limit) > amount(self.nominal):
            raise ValueError(
                f"lending_limit ({self.lending_limit.value!r}) must not exceed nominal "
                f"({self.nominal.value!r}): a queue can lend only what it owns"
            )

    @classmethod
    def of(
        cls,
        nominal: Quantity | int | str,
        *,
        borrowing_limit: Quantity | int | str | None = None,
        lending_limit: Quantity | int | str | None = None,
    ) -> Quota:
        """A quota from numbers or quantity strings (``Quota.of("512Gi")``)."""

        def quantity(value: Quantity | int | str | None) -> Quantity | None:
            if value is None or isinstance(value, Quantity):
                return value
            if isinstance(value, bool):
                raise ValueError(f"quota ({value!r}) must be a number or a quantity string")
            return Quantity.of(value)

        nominal_quantity = quantity(nominal)
        assert nominal_quantity is not None
        return cls(
            nominal=nominal_quantity,
            borrowing_limit=quantity(borrowing_limit),
            lending_limit=quantity(lending_limit),
        )

    @property
    def has_limits(self) -> bool:
        return self.borrowing_limit is not None or self.lending_limit is not None

    def to_wire(self, resource: str) -> dict[str, Any]:
        """The quota on the wire, quantities in canonical form (see :func:`canonical`)."""
        out: dict[str, Any] = {"name": resource, "nominalQuota": canonical(self.nominal).value}
        if self.borrowing_limit is not None:
            out["borrowingLimit"] = canonical(self.borrowing_limit).value
        if self.lending_limit is not None:
            out["lendingLimit"] = canonical(self.lending_limit).value
        return out


ZERO = Quota.of(0)
"""The quota of a covered resource a flavor does not provide."""


def metadata(name: str, labels: dict[str, str], *, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {**labels, **PART_OF}}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta
