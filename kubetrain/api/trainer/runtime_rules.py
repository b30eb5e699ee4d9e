"""The rules of TrainingRuntime and ClusterTrainingRuntime: upstream Trainer v2.3.0's CRD
CEL and its runtime webhook's checks, JobSet's ``dependsOn`` order, and the platform's node
limit (see :mod:`kubetrain.api.trainer.rules` for how a rule is stated)."""

from __future__ import annotations

from typing import Any

from kubetrain.api.crd_generator import ITEMS
from kubetrain.api.errors import FieldError
from kubetrain.api.limits import ReplicaLimits
from kubetrain.api.rules import Rule
from kubetrain.api.trainer.constants import ANCESTOR_LABEL, ANCESTOR_TRAINER, STEP_CONTAINERS
from kubetrain.api.trainer.elastic import elastic_rules
from kubetrain.api.trainer.rules import (
    RUNTIMES,
    nodes_check,
    nodes_message,
)
from kubetrain.api.trainer.runtime import ML_POLICY_SOURCES
from kubetrain.api.wire import as_dict, as_int, as_list, at, items_at

# --- TrainingRuntime and ClusterTrainingRuntime ----------------------------------------------

ONE_FRAMEWORK = (
    f"mlPolicy may configure at most one framework: {', '.join(ML_POLICY_SOURCES[:-1])} or "
    f"{ML_POLICY_SOURCES[-1]}"
)


def _check_one_framework(obj: dict[str, Any]) -> list[FieldError]:
    policy = as_dict(at(obj, "spec", "mlPolicy"))
    present = [name for name in ML_POLICY_SOURCES if name in policy]
    if len(present) > 1:
        return [FieldError("spec.mlPolicy", ONE_FRAMEWORK, present)]
    return []


ONE_POD_GROUP_POLICY = "podGroupPolicy may configure coscheduling or volcano, not both"


def _check_one_pod_group_policy(obj: dict[str, Any]) -> list[FieldError]:
    policy = as_dict(at(obj, "spec", "podGroupPolicy"))
    if "coscheduling" in policy and "volcano" in policy:
        return [FieldError("spec.podGroupPolicy", ONE_POD_GROUP_POLICY, sorted(policy))]
    return []


_STEPS = tuple(STEP_CONTAINERS)
ANCESTOR_REPLICAS = (
    f"a replicatedJob labelled {ANCESTOR_LABEL} ({', '.join(_STEPS)}) must have replicas 1 "
    "(a TrainJob sets the trainer's node count with numNodes)"
)
ANCESTOR_CONTAINER = (
    f"a replicatedJob labelled {ANCESTOR_LABEL} must have its step's container: node for "
    f"{ANCESTOR_TRAINER}, dataset-initializer and model-initializer for those steps"
)
_RJOBS = ("spec", "template", "spec", "replicatedJobs")
_RJOB_PATH = "spec.template.spec.replicatedJobs"


def _step(rjob: dict[str, Any]) -> str | None:
    step = at(rjob, "template", "metadata", "labels", ANCESTOR_LABEL)
    return step if isinstance(step, str) and step in STEP_CONTAINERS else None


def _check_ancestor_replicas(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for index, rjob in items_at(obj, *_RJOBS):
        replicas = as_int(rjob.get("replicas"))
        if _step(rjob) is not None and replicas is not None and replicas != 1:
            errors.append(
                FieldError(f"{_RJOB_PATH}[{index}].replicas", ANCESTOR_REPLICAS, replicas)
            )
    return errors


def _check_ancestor_container(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for index, rjob in items_at(obj, *_RJOBS):
        step = _step(rjob)
        if step is None:
            continue
        containers = as_list(at(rjob, "template", "spec", "template", "spec", "containers"))
        names = [c.get("name") for c in containers if isinstance(c, dict)]
        if STEP_CONTAINERS[step] not in names:
            path = f"{_RJOB_PATH}[{index}].template.spec.template.spec.containers"
            errors.append(FieldError(path, ANCESTOR_CONTAINER, names))
    return errors


_LABELS = "self.template.metadata.labels"
_IS_STEP = (
    f"has(self.template.metadata) && has({_LABELS}) && '{ANCESTOR_LABEL}' in {_LABELS} && "
    f"{_LABELS}['{ANCESTOR_LABEL}'] in [{', '.join(repr(s) for s in _STEPS)}]"
)
_POD = "self.template.spec.template.spec"
# One test per step against constant names: comparing a container name with the label's
# value (a string of unbounded length) costs too much for the API server's estimate.
_HAS_STEP_CONTAINER = (
    " : ".join(
        f"{_LABELS}['{ANCESTOR_LABEL}'] == '{step}' ? "
        f"{_POD}.containers.exists(c, c.name == '{container}')"
        for step, container in STEP_CONTAINERS.items()
    )
    + " : false"
)
_ANCESTOR_CONTAINER_CEL = (
    f"!({_IS_STEP}) || (has(self.template.spec) && has(self.template.spec.template) && "
    f"has({_POD}) && ({_HAS_STEP_CONTAINER}))"
)

# Upstream's own rule and words (its CRD's CEL).
ENV_INJECTION_NOT_NODE = (
    "containerNames must not include the main node container because PET_* envs are always "
    "injected into it"
)


def _check_env_injection(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    keys = ("spec", "mlPolicy", "torch", "envInjection", "targets")
    for index, target in items_at(obj, *keys):
        names = as_list(target.get("containerNames"))
        if "node" in names:
            path = f"spec.mlPolicy.torch.envInjection.targets[{index}].containerNames"
            errors.append(FieldError(path, ENV_INJECTION_NOT_NODE, names))
    return errors


DEPENDS_ON_EARLIER = (
    "dependsOn must name a replicatedJob listed before this one (JobSet's rule: jobs start in "
    "the order they are listed)"
)


def _check_depends_on(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    rjobs = list(items_at(obj, *_RJOBS))
    names = [rjob.get("name") for _, rjob in rjobs]
    for position, (index, rjob) in enumerate(rjobs):
        for d, dependency in items_at(rjob, "dependsOn"):
            if dependency.get("name") not in names[:position]:
                path = f"{_RJOB_PATH}[{index}].dependsOn[{d}].name"
                errors.append(FieldError(path, DEPENDS_ON_EARLIER, dependency.get("name")))
    return errors


# Two-variable comprehensions (index, value): an earlier job is one of a lower index.
_DEPENDS_ON_CEL = (
    "!has(self.replicatedJobs) || self.replicatedJobs.all(i, r, !has(r.dependsOn) || "
    "r.dependsOn.all(d, self.replicatedJobs.exists(j, p, j < i && p.name == d.name)))"
)

# Upstream's (JobSet's) own rule and words.
STARTUP_POLICY_OR_DEPENDS_ON = "StartupPolicy and DependsOn APIs are mutually exclusive"


def _check_startup_policy(obj: dict[str, Any]) -> list[FieldError]:
    in_order = at(obj, "spec", "template", "spec", "startupPolicy", "startupPolicyOrder")
    if in_order == "InOrder" and any("dependsOn" in rjob for _, rjob in items_at(obj, *_RJOBS)):
        return [FieldError("spec.template.spec", STARTUP_POLICY_OR_DEPENDS_ON)]
    return []


_STARTUP_POLICY_CEL = (
    "!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == 'InOrder' && "
    "has(self.replicatedJobs) && self.replicatedJobs.exists(x, has(x.dependsOn)))"
)

# Upstream's (JobSet's) own rule and words.
CLAIM_NAMESPACE = "namespace cannot be set for VolumeClaimPolicies templates"


def _check_claim_namespace(obj: dict[str, Any]) -> list[FieldError]:
    errors = []
    for index, policy in items_at(obj, "spec", "template", "spec", "volumeClaimPolicies"):
        for t, template in items_at(policy, "templates"):
            namespace = at(template, "metadata", "namespace")
            if isinstance(namespace, str) and namespace:
                path = (
                    f"spec.template.spec.volumeClaimPolicies[{index}].templates[{t}]"
                    ".metadata.namespace"
                )
                errors.append(FieldError(path, CLAIM_NAMESPACE, namespace))
    return errors


_CLAIM_NAMESPACE_CEL = (
    "!has(self.templates) || self.templates.all(t, !has(t.metadata) || "
    "!has(t.metadata.namespace) || size(t.metadata.namespace) == 0)"
)


def runtime_rules(limits: ReplicaLimits) -> list[Rule]:
    return [
        Rule(
            "runtime-one-framework",
            RUNTIMES,
            ONE_FRAMEWORK,
            f"[{', '.join(f'has(self.{f})' for f in ML_POLICY_SOURCES)}].filter(x, x).size() <= 1",
            ("spec", "mlPolicy"),
            _check_one_framework,
        ),
        Rule(
            "runtime-nodes-limit",
            RUNTIMES,
            nodes_message(limits),
            f"!has(self.numNodes) || self.numNodes <= {limits.max_replicas_per_type}",
            ("spec", "mlPolicy"),
            nodes_check(("spec", "mlPolicy"), limits),
            ".numNodes",
        ),
        Rule(
            "runtime-env-injection-not-node",
            RUNTIMES,
            ENV_INJECTION_NOT_NODE,
            "!self.exists(c, c == 'node')",
            ("spec", "mlPolicy", "torch", "envInjection", "targets", ITEMS, "containerNames"),
            _check_env_injection,
        ),
        Rule(
            "runtime-one-pod-group-policy",
            RUNTIMES,
            ONE_POD_GROUP_POLICY,
            "!(has(self.coscheduling) && has(self.volcano))",
            ("spec", "podGroupPolicy"),
            _check_one_pod_group_policy,
        ),
        Rule(
            "runtime-ancestor-replicas",
            RUNTIMES,
            ANCESTOR_REPLICAS,
            f"!({_IS_STEP}) || !has(self.replicas) || self.replicas == 1",
            (*_RJOBS, ITEMS),
            _check_ancestor_replicas,
            ".replicas",
        ),
        Rule(
            "runtime-ancestor-container",
            RUNTIMES,
            ANCESTOR_CONTAINER,
            _ANCESTOR_CONTAINER_CEL,
            (*_RJOBS, ITEMS),
            _check_ancestor_container,
            ".template.spec.template.spec.containers",
        ),
        Rule(
            "runtime-depends-on-earlier",
            RUNTIMES,
            DEPENDS_ON_EARLIER,
            _DEPENDS_ON_CEL,
            ("spec", "template", "spec"),
            _check_depends_on,
            ".replicatedJobs",
        ),
        Rule(
            "runtime-startup-policy-or-depends-on",
            RUNTIMES,
            STARTUP_POLICY_OR_DEPENDS_ON,
            _STARTUP_POLICY_CEL,
            ("spec", "template", "spec"),
            _check_startup_policy,
        ),
        Rule(
            "runtime-claim-namespace",
            RUNTIMES,
            CLAIM_NAMESPACE,
            _CLAIM_NAMESPACE_CEL,
            ("spec", "template", "spec", "volumeClaimPolicies", ITEMS),
            _check_claim_namespace,
        ),
        *elastic_rules(limits),
    ]
