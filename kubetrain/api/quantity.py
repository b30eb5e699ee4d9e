"""Kubernetes resource quantities (``500m``, ``16Gi``, ``1e3``, the SDK's ``2.0``) as exact
numbers: the one parser the operator, the local runner and the constructs share.

Not the ``kubernetes`` client's ``parse_quantity``: importing it runs the client package's
``__init__`` (its config loaders and every API model), about 0.3 s of CPU that a
``kubetrain synth`` or ``validate`` would pay for a handful of numbers, and it takes what
the API server refuses (``1K``, ``NaN``, ``Infinity``). This follows the grammar the CRDs
and the typed models check (:data:`kubetrain.api.base.QUANTITY_PATTERN`).
"""

from __future__ import annotations

import re
from decimal import Decimal

_NUMBER = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
_PARTS = re.compile(rf"({_NUMBER})(?:([KMGTPE]i|[numkMGTPE])|[eE]([+-]?[0-9]+))?")

MULTIPLIERS: dict[str, Decimal] = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
"""What each suffix multiplies by."""


def amount(value: object) -> Decimal:
    """The number a quantity stands for. Integers and finite floats are taken as they
    are; a string must be a Kubernetes quantity, else ValueError names it."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity: expected e.g. 8, 500m, 16Gi or 1e3")
    if isinstance(value, int | Decimal):
        return Decimal(value)
    text = str(value)  # a float as the SDK writes it: 2.0 -> "2.0"; inf/nan do not match
    match = _PARTS.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a quantity: expected e.g. 8, 500m, 16Gi or 1e3")
    number, suffix, exponent = match.groups()
    if exponent is not None:
        return Decimal(number).scaleb(int(exponent))
    return Decimal(number) * MULTIPLIERS[suffix or ""]
