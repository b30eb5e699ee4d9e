"""TFJob and PyTorchJob ``kubeflow.org/v1beta1`` and ``v1beta2`` -> ``kubeflow.org/v1``.

From the Go types at the tags (tf-operator ``pkg/apis/tensorflow/<version>/types.go`` at
v0.4.0-v0.5.3, pytorch-operator ``pkg/apis/pytorch/<version>/types.go`` at v0.4.0-v0.6.0),
both kinds have the same spec:

- v1beta1: ``cleanPodPolicy``, ``ttlSecondsAfterFinished`` and the replica specs;
- v1beta2: those and ``activeDeadlineSeconds``, ``backoffLimit``.

The run policies move under ``spec.runPolicy`` (as in v1); the replica specs
(``replicas``, ``template``, ``restartPolicy``) and their replica types are unchanged.
The defaults that differ are written out: an unset ``cleanPodPolicy`` was ``Running`` for
a TFJob and ``None`` for a PyTorchJob (``SetDefaults_TFJob`` / ``SetDefaults_PyTorchJob``);
kubetrain's unset policy stops the pods still active. The restart policies (TFJob
``Never``, PyTorchJob ``OnFailure``) and the default ports are the same in v1.
"""

from __future__ import annotations

from typing import Any

from kubetrain.api.convert.moves import (
    drop_unknown,
    into_run_policy,
    old_default,
    replica_specs,
    source_name,
    start,
)
from kubetrain.api.convert.report import Conversion
from kubetrain.api.kinds import KINDS, PYTORCH, TENSORFLOW

#: The run-policy fields at the top of the spec, per version (the same for both kinds).
RUN_POLICY_FIELDS: dict[str, tuple[str, ...]] = {
    "v1beta1": ("cleanPodPolicy", "ttlSecondsAfterFinished"),
    "v1beta2": (
        "activeDeadlineSeconds",
        "backoffLimit",
        "cleanPodPolicy",
        "ttlSecondsAfterFinished",
    ),
}
#: What each kind's defaulter wrote into an unset ``cleanPodPolicy`` in both versions.
OLD_CLEAN_POD_POLICY = {TENSORFLOW.kind: "Running", PYTORCH.kind: "None"}


def convert_tf_pytorch(wire: dict[str, Any], version: str, conv: Conversion) -> None:
    """Fill ``conv.output`` with ``wire`` (a TFJob or PyTorchJob of ``version``, its
    ``spec`` a mapping) as a ``kubeflow.org/v1`` job."""
    info = KINDS[wire["kind"]]
    where = source_name(info, version)
    out = start(wire, info, version, conv)
    spec: dict[str, Any] = wire["spec"]
    field = info.replica_specs_field
    drop_unknown(conv, spec, (field, *RUN_POLICY_FIELDS[version]), "spec", where)
    out_spec: dict[str, Any] = {}
    if field in spec:
        out_spec[field] = replica_specs(conv, spec[field], f"spec.{field}", where)
    run_policy: dict[str, Any] = {}
    for key in RUN_POLICY_FIELDS[version]:
        if key in spec:
            into_run_policy(conv, run_policy, key, spec[key])
    if "cleanPodPolicy" not in run_policy:
        value = OLD_CLEAN_POD_POLICY[info.kind]
        old_default(
            conv,
            run_policy,
            "cleanPodPolicy",
            value,
            f"{where} defaulted it to {value}, kubetrain's unset policy stops the pods "
            "still active",
        )
    out_spec["runPolicy"] = run_policy
    out["spec"] = out_spec
    conv.output = out
