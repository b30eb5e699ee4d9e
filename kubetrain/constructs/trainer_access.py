"""``TrainerUserAccess``: what data scientists using the Kubeflow SDK
(``TrainerClient``) need on a cluster where kubetrain serves TrainJobs:

- ClusterRole ``<prefix>-edit`` (aggregated into the built-in ``edit`` and ``admin``
  roles, so whoever may edit a namespace may train there): TrainJobs create, get, list,
  watch, patch, delete, and their ``scale`` subresource get, update, patch (an elastic
  TrainJob's ``kubectl scale``; kubetrain's extension); TrainingRuntimes get, list, watch;
  pods, ``pods/log`` and events get, list, watch (the SDK's ``get_job``, ``get_job_logs``,
  ``get_job_events``);
- ClusterRole ``<prefix>-view-cluster-runtimes``: ClusterTrainingRuntimes get, list,
  watch, bound to ``runtime_viewers`` (default every authenticated user: the SDK's
  ``list_runtimes`` fails without it, and runtimes hold no secrets);
- the ConfigMap ``kubeflow-trainer-public`` (key ``kubeflow_trainer_version``) in
  ``public_namespace``, readable by every authenticated user, which the SDK reads when a
  client starts (it warns on every start without it).

The same rights as upstream Trainer's ``kubeflow-trainer-edit``,
``kubeflow-trainer-view-cluster-runtimes`` and ``kubeflow-trainer-public`` roles.
"""

from __future__ import annotations

from dataclasses import dataclass

import constructs

from kubetrain.api.kinds import CLUSTER_TRAINING_RUNTIME, TRAINING_RUNTIME, TRAINJOB
from kubetrain.constructs.objects import api_object

RBAC_API = "rbac.authorization.k8s.io/v1"
#: The Trainer API version kubetrain serves (what the public ConfigMap announces).
TRAINER_API_RELEASE = "v2.3.0"
PUBLIC_CONFIG_MAP = "kubeflow-trainer-public"
AUTHENTICATED = {
    "kind": "Group",
    "apiGroup": "rbac.authorization.k8s.io",
    "name": "system:authenticated",
}


@dataclass(frozen=True, kw_only=True)
class TrainerUserAccessProps:
    """Props of :class:`TrainerUserAccess`."""

    prefix: str = "kubetrain-trainer"
    """Prefix of the ClusterRoles' names. Default: kubetrain-trainer."""
    public_namespace: str = "kubeflow-system"
    """Namespace of the ``kubeflow-trainer-public`` ConfigMap (the SDK's
    ``KUBEFLOW_SYSTEM_NAMESPACE``). Default: kubeflow-system (created)."""
    create_public_namespace: bool = True
    """Create ``public_namespace``. Default: true."""
    runtime_viewers: tuple[dict[str, str], ...] = (AUTHENTICATED,)
    """Subjects that may list ClusterTrainingRuntimes. Default: every authenticated user."""
    aggregate_to_edit: bool = True
    """Aggregate the edit role into the built-in ``edit`` and ``admin`` ClusterRoles.
    Default: true."""

    def __post_init__(self) -> None:
        for name, value in (("prefix", self.prefix), ("public_namespace", self.public_namespace)):
            if not value or len(value) > 63 or not value.replace("-", "a").isalnum():
                raise ValueError(
                    f"{name} ({value!r}) must be a DNS-1123 label: lowercase letters, digits "
                    "and '-', at most 63 characters"
                )
            if value != value.lower() or value.startswith("-") or value.endswith("-"):
                raise ValueError(f"{name} ({value!r}) must be a DNS-1123 label")


def _rule(group: str, resources: list[str], verbs: list[str]) -> dict[str, list[str]]:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


class TrainerUserAccess(constructs.Construct):
    """The SDK users' roles and the public ConfigMap (see the module docs)."""

    def __init__(
        self,
        scope: constructs.Construct,
        id: str,
        props: TrainerUserAccessProps | None = None,
    ) -> None:
        super().__init__(scope, id)
        props = props or TrainerUserAccessProps()
        read = ["get", "list", "watch"]
        edit_labels = (
            {
                "rbac.authorization.k8s.io/aggregate-to-edit": "true",
                "rbac.authorization.k8s.io/aggregate-to-admin": "true",
            }
            if props.aggregate_to_edit
            else {}
        )
        api_object(
            self,
            "EditRole",
            {
                "apiVersion": RBAC_API,
                "kind": "ClusterRole",
                "metadata": {"name": f"{props.prefix}-edit", "labels": edit_labels},
                "rules": [
                    _rule(
                        TRAINJOB.group,
                        [TRAINJOB.plural],
                        ["create", "get", "list", "watch", "patch", "delete"],
                    ),
                    # kubetrain's extension: an elastic TrainJob's scale subresource
                    # (kubectl scale trainjob), which upstream's role has no need for.
                    _rule(TRAINJOB.group, [f"{TRAINJOB.plural}/scale"], ["get", "update", "patch"]),
                    _rule(TRAINING_RUNTIME.group, [TRAINING_RUNTIME.plural], read),
                    _rule("", ["pods", "pods/log", "events"], read),
                ],
            },
        )
        view = f"{props.prefix}-view-cluster-runtimes"
        api_object(
            self,
            "ViewClusterRuntimesRole",
            {
                "apiVersion": RBAC_API,
                "kind": "ClusterRole",
                "metadata": {"name": view},
                "rules": [
                    _rule(CLUSTER_TRAINING_RUNTIME.group, [CLUSTER_TRAINING_RUNTIME.plural], read)
                ],
            },
        )
        api_object(
            self,
            "ViewClusterRuntimesBinding",
            {
                "apiVersion": RBAC_API,
                "kind": "ClusterRoleBinding",
                "metadata": {"name": view},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": view,
                },
                "subjects": [dict(s) for s in props.runtime_viewers],
            },
        )
        namespace = props.public_namespace
        if props.create_public_namespace:
            api_object(
                self,
                "PublicNamespace",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
        api_object(
            self,
            "PublicConfigMap",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": PUBLIC_CONFIG_MAP, "namespace": namespace},
                "data": {"kubeflow_trainer_version": TRAINER_API_RELEASE},
            },
        )
        public_meta = {"name": PUBLIC_CONFIG_MAP, "namespace": namespace}
        api_object(
            self,
            "PublicRole",
            {
                "apiVersion": RBAC_API,
                "kind": "Role",
                "metadata": dict(public_meta),
                "rules": [
                    {
                        "apiGroups": [""],
                        "resources": ["configmaps"],
                        "resourceNames": [PUBLIC_CONFIG_MAP],
                        "verbs": ["get"],
                    }
                ],
            },
        )
        api_object(
            self,
            "PublicRoleBinding",
            {
                "apiVersion": RBAC_API,
                "kind": "RoleBinding",
                "metadata": dict(public_meta),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": PUBLIC_CONFIG_MAP,
                },
                "subjects": [dict(AUTHENTICATED)],
            },
        )
