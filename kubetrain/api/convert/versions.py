"""The version converters, one per (kind, older version): the older versions of each
kind (``kubetrain.api.older_versions``) to the version kubetrain serves."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from kubetrain.api.convert.report import Conversion
from kubetrain.api.convert.versions_mpi import convert_mpi
from kubetrain.api.convert.versions_tf_pytorch import convert_tf_pytorch
from kubetrain.api.errors import FieldError, JobValidationError
from kubetrain.api.kinds import MPI, PYTORCH, TENSORFLOW
from kubetrain.api.older_versions import OLDER_VERSIONS

Converter = Callable[[dict[str, Any], str, Conversion], None]

#: Which function converts each older version of each kind.
CONVERTERS: dict[tuple[str, str], Converter] = {
    **{(TENSORFLOW.kind, v): convert_tf_pytorch for v in OLDER_VERSIONS[TENSORFLOW.kind]},
    **{(PYTORCH.kind, v): convert_tf_pytorch for v in OLDER_VERSIONS[PYTORCH.kind]},
    **{(MPI.kind, v): convert_mpi for v in OLDER_VERSIONS[MPI.kind]},
}


def convert_version(wire: dict[str, Any], kind: str, version: str, source: str) -> Conversion:
    """``wire`` (a ``kind`` of the older ``version``) in the served version, with the notes
    on how; :class:`JobValidationError` when it cannot be converted."""
    spec = wire.get("spec")
    if not isinstance(spec, dict):
        expected = "a mapping (the job's spec)"
        error = (
            FieldError("spec", expected, kind="required")
            if spec is None
            else FieldError("spec", f"must be {expected}", spec)
        )
        raise JobValidationError([error], source)
    conv = Conversion(output={}, source=source)
    try:
        CONVERTERS[(kind, version)](copy.deepcopy(wire), version, conv)
    except JobValidationError as exc:
        raise JobValidationError(exc.errors, source) from None
    return conv
