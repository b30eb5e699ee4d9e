"""Building blocks shared by the job models: the base model, scalar types and markers.

Wire names are camelCase (generated from the snake_case attribute names), unknown
fields are rejected, and models are immutable: defaulting returns a new object.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, StrictStr
from pydantic.alias_generators import to_camel


@dataclass(frozen=True)
class SchemaFormat:
    """OpenAPI ``format`` for the CRD schema (int32, int64, date-time)."""

    name: str


@dataclass(frozen=True)
class SchemaPattern:
    """OpenAPI ``pattern`` for a value checked by a validator function."""

    regex: str


@dataclass(frozen=True)
class ListType:
    """``x-kubernetes-list-type`` of a list field: ``atomic``, ``set`` or ``map``; a map
    list names its ``keys`` (unique together, as the API server requires) and the
    defaults of keys its items do not require (the server needs one for each)."""

    kind: str
    keys: tuple[str, ...] = ()
    key_defaults: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class StoredDefault:
    """The value the API server writes into a stored object where the field is absent:
    the CRD schema's ``default``. Parsing still leaves the field unset; the defaulting steps
    (``kubetrain.api.defaults``, ``kubetrain.api.trainer.defaults``) fill it the same way
    (``kubetrain.api.stored_defaults``), so a job defaulted in code equals the stored one."""

    value: str | int | bool


@dataclass(frozen=True)
class K8sSchema:
    """Marks a free-form dict whose schema is a type of the pinned Kubernetes OpenAPI."""

    definition: str


@dataclass(frozen=True)
class CelRule:
    """A CEL rule placed on a schema node (``x-kubernetes-validations``).

    ``message`` is shared with the Python check of the same invariant so that
    ``kubetrain validate`` and the API server say the same thing.
    """

    rule: str
    message: str
    field_path: str | None = None

    def to_schema(self) -> dict[str, str]:
        out = {"rule": self.rule, "message": self.message}
        if self.field_path:
            out["fieldPath"] = self.field_path
        return out


class KubeModel(BaseModel):
    """Base of every wire model: camelCase aliases, unknown fields rejected, frozen."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=True,
        use_enum_values=False,
        validate_default=False,
    )
    # CEL rules placed on this model's schema node.
    cel_rules: ClassVar[tuple[CelRule, ...]] = ()

    def to_wire(self) -> dict[str, Any]:
        """The camelCase wire form, without unset (None) fields."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

Int32 = Annotated[StrictInt, Field(ge=-(2**31), le=INT32_MAX), SchemaFormat("int32")]
NonNegInt32 = Annotated[StrictInt, Field(ge=0, le=INT32_MAX), SchemaFormat("int32")]
PositiveInt32 = Annotated[StrictInt, Field(ge=1, le=INT32_MAX), SchemaFormat("int32")]
NonNegInt64 = Annotated[StrictInt, Field(ge=0, le=INT64_MAX), SchemaFormat("int64")]
Port = Annotated[StrictInt, Field(ge=1, le=65535), SchemaFormat("int32")]

# Kubernetes' resource.Quantity grammar (an integer is also accepted on the wire).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)


def _check_quantity(value: int | str) -> int | str:
    # fullmatch: the API server's (Go) ``$`` does not match before a trailing newline.
    if isinstance(value, str) and not _QUANTITY_RE.fullmatch(value):
        raise ValueError("must be a Kubernetes quantity such as 8, 500m, 16Gi or 1e3")
    return value


Quantity = Annotated[
    StrictInt | StrictStr, AfterValidator(_check_quantity), SchemaPattern(QUANTITY_PATTERN)
]


_RFC3339 = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})"
)


def _check_time(value: str) -> str:
    # The API server parses times as RFC 3339 (a date alone, or no zone, is refused).
    try:
        if not _RFC3339.fullmatch(value):
            raise ValueError(value)
        datetime.fromisoformat(value.upper().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError("must be an RFC 3339 time such as 2026-01-02T15:04:05Z") from None
    return value


Time = Annotated[StrictStr, AfterValidator(_check_time), SchemaFormat("date-time")]

PodTemplateSpec = Annotated[dict[str, Any], K8sSchema("io.k8s.api.core.v1.PodTemplateSpec")]
LabelSelector = Annotated[
    dict[str, Any], K8sSchema("io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector")
]
MetricSpec = Annotated[dict[str, Any], K8sSchema("io.k8s.api.autoscaling.v2.MetricSpec")]

# DNS-1035 label: what a job name must be so that its pods and services can be named.
DNS1035_PATTERN = r"^[a-z]([-a-z0-9]*[a-z0-9])?$"
