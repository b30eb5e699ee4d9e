"""``OperatorRbac``: what the operator's ServiceAccount may do, as (Cluster)Roles and their
bindings. The rules come from :mod:`kubetrain.controller.rbac`, the code the operator runs
with, so the manifests grant exactly what the operator calls."""

from __future__ import annotations

from dataclasses import dataclass, field

import constructs

from kubetrain.constructs.objects import api_object, metadata
from kubetrain.constructs.types import check_dns_label, check_labels
from kubetrain.controller.config import OperatorConfig
from kubetrain.controller.rbac import (
    PolicyRule,
    cluster_rules,
    leader_election_rules,
    operator_rules,
    progress_rules,
)

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_API = f"{RBAC_GROUP}/v1"


@dataclass(frozen=True, kw_only=True)
class OperatorRbacProps:
    """Props of :class:`OperatorRbac`."""

    name: str
    """The operator's ServiceAccount, the subject of every binding, and the roles' name
    (``<name>-leader-election`` and ``<name>-progress`` for the Lease and progress roles).
    Required."""
    namespace: str
    """The ServiceAccount's namespace, where the Lease and progress roles are. Required."""
    config: OperatorConfig
    """The configuration the operator runs with (``TrainingOperatorProps.effective_config()``):
    its job kinds, watched namespaces, leader election and progress server decide the
    rules. Required."""
    labels: dict[str, str] = field(default_factory=dict)
    """Labels on every role and binding. Default: none."""

    def __post_init__(self) -> None:
        check_dns_label("name", self.name)
        check_dns_label("namespace", self.namespace)
        check_labels("labels", self.labels)


class OperatorRbac(constructs.Construct):
    """The operator's ClusterRole and binding (or, watching some namespaces, a Role and
    RoleBinding in each, plus a ClusterRole for the cluster-scoped rules when there are
    any), the Lease role with leader election and the progress server's role.

    Child ids: ``ClusterRole``/``ClusterRoleBinding``, ``Role-<ns>``/``RoleBinding-<ns>``,
    ``LeaderElectionRole``/``LeaderElectionRoleBinding`` and
    ``ProgressRole``/``ProgressRoleBinding``.
    """

    def __init__(self, scope: constructs.Construct, id: str, props: OperatorRbacProps) -> None:
        super().__init__(scope, id)
        self.props = props
        config = props.config
        rules = operator_rules(config)
        cluster = cluster_rules(config)
        if config.cluster_wide:
            self._grant("ClusterRole", rules + cluster, name=props.name, namespace=None)
        else:
            for ns in config.namespaces:
                self._grant("Role", rules, name=props.name, namespace=ns, id_suffix=f"-{ns}")
            if cluster:
                self._grant("ClusterRole", cluster, name=props.name, namespace=None)
        if config.leader_elect:
            self._grant(
                "Role",
                leader_election_rules(),
                name=f"{props.name}-leader-election",
                namespace=props.namespace,
                id_prefix="LeaderElection",
            )
        progress = progress_rules(config)
        if progress:
            self._grant(
                "Role",
                progress,
                name=f"{props.name}-progress",
                namespace=props.namespace,
                id_prefix="Progress",
            )

    def _grant(
        self,
        role_kind: str,
        rules: list[PolicyRule],
        *,
        name: str,
        namespace: str | None,
        id_prefix: str = "",
        id_suffix: str = "",
    ) -> None:
        """A ``role_kind`` holding ``rules`` and its binding to the ServiceAccount, under
        construct ids ``<id_prefix><role_kind><id_suffix>`` and
        ``<id_prefix><role_kind>Binding<id_suffix>``."""
        role = {
            "apiVersion": RBAC_API,
            "kind": role_kind,
            "metadata": metadata(name, self.props.labels, namespace),
            "rules": [rule.to_wire() for rule in rules],
        }
        api_object(self, f"{id_prefix}{role_kind}{id_suffix}", role)
        account = {"kind": "ServiceAccount", "name": self.props.name}
        binding = {
            "apiVersion": RBAC_API,
            "kind": f"{role_kind}Binding",
            "metadata": metadata(name, self.props.labels, namespace),
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
            "subjects": [{**account, "namespace": self.props.namespace}],
        }
        api_object(self, f"{id_prefix}{role_kind}Binding{id_suffix}", binding)
