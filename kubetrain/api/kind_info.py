"""What a row of the kinds table (:mod:`kubetrain.api.kinds`) says about a kind: its wire
identity and the facts its tooling shares."""

from __future__ import annotations

from dataclasses import dataclass

#: The API group of Kubeflow's v1 job kinds.
KUBEFLOW_GROUP = "kubeflow.org"


@dataclass(frozen=True, kw_only=True)
class KindInfo:
    """One kind's wire identity and the facts its tooling shares."""

    kind: str
    #: A short lowercase name (``pytorch``, ``tf``, ``mpi``) for identifiers.
    short: str
    group: str
    version: str
    plural: str
    singular: str
    #: Value of ``training.kubeflow.org/operator-name`` on children (upstream's).
    operator_name: str
    #: Wire field of ``spec`` holding the replica specs.
    replica_specs_field: str
    #: Replica types in canonical spelling, leaders first (the order pods start in).
    replica_types: tuple[str, ...]
    #: The container upstream requires in every replica and injects into, if any.
    main_container: str | None = None
    #: Named port of the main container, and its default number.
    port_name: str | None = None
    default_port: int | None = None
    #: (replica type, restart policy when its spec gives none), upstream's defaults.
    default_restart_policies: tuple[tuple[str, str], ...] = ()
    #: Replica type exposed through the scale subresource, if any.
    scale_replica_type: str | None = None
    #: Whether upstream accepts replica types in any letter case (and normalises them).
    case_insensitive_replica_types: bool = False
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"

    def replica_type_message(self) -> str:
        """The message for a replica type the kind does not have."""
        names = ", ".join(self.replica_types)
        if self.case_insensitive_replica_types:
            return f"replica type must be one of: {names} (in any letter case)"
        return f"replica type must be one of: {names}"

    def default_restart_policy(self, replica_type: str) -> str:
        """The restart policy a replica of ``replica_type`` gets when it states none."""
        return dict(self.default_restart_policies).get(replica_type, "Never")
