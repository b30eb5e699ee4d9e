"""What a job's pods get so the Kubeflow SDK's ``update_trainjob_status`` (and
kubetrain's own reporting helper) reaches the operator's progress server (upstream's
``TrainJobStatus`` runtime plugin, for TrainJobs; the same for the v1 kinds):

- ConfigMap ``<job>-tls-config`` with the CA bundle the server's certificate chains
  to (``ca.crt``), re-applied when the bundle changes;
- in every container of a TrainJob's trainer pods (every pod of a v1 job that reports,
  ``reports_progress``): ``KUBEFLOW_TRAINER_SERVER_URL`` (this job's status path on the
  server), ``KUBEFLOW_TRAINER_SERVER_CA_CERT`` and ``KUBEFLOW_TRAINER_SERVER_TOKEN`` (set
  over the container's own values, as upstream does), and a read-only mount at
  ``/var/run/secrets/kubeflow/trainer`` of a projected volume: a ServiceAccount token for
  this job's audience (an hour, refreshed by the kubelet) and the CA bundle;
- in an OpenMPI launcher's containers (those with ``OMPI_MCA_orte_default_hostfile``):
  the three variables added to ``OMPI_MCA_mca_base_env_list``, so ``mpirun`` forwards them
  to the ranks it starts over SSH (whose sessions do not inherit the worker's env; each
  rank reads its own pod's token at the same path). Intel MPI and MPICH forward the
  launcher's whole environment already.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubetrain.api import env_names as E
from kubetrain.api import keys as K
from kubetrain.api import progress as P
from kubetrain.api.common import JobBase as Job
from kubetrain.controller.plugins import children


def reports_progress(job: Job) -> bool:
    """Whether a v1 job's pods get the progress environment: annotated
    ``kubetrain.dev/report-progress: "true"``, or given a progress timeout of its own."""
    annotations = job.metadata.annotations or {}
    return annotations.get(K.REPORT_PROGRESS_ANNOTATION) == "true" or any(
        key in annotations for key in K.PROGRESS_TIMEOUT_ANNOTATIONS
    )


@dataclass(frozen=True)
class ProgressInjection:
    """Where the progress server is (``https://host:port``) and the CA bundle it uses."""

    base_url: str
    ca_bundle: Callable[[], str]

    def url(self, job: Job) -> str:
        info = P.REPORTING_KINDS[job.kind]
        return self.base_url + P.status_path(children.namespace_of(job), job.name, info)

    def config_map(self, job: Job) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": children.metadata(
                job, P.tls_config_map_name(job.name), children.job_labels(job)
            ),
            "data": {P.CA_FILE: self.ca_bundle()},
        }

    def inject_all(self, job: Job, built: list[dict[str, Any]]) -> None:
        """Inject into every pod (and batch Job's pod template) of ``built``, in place."""
        for child in built:
            if child["kind"] == "Pod":
                self.inject(job, child["spec"])
            elif child["kind"] == "Job":
                self.inject(job, child["spec"]["template"]["spec"])

    def inject(self, job: Job, pod_spec: dict[str, Any]) -> None:
        """Add the env, mount and volume to a trainer pod's spec (in place)."""
        env = [
            {"name": P.URL_ENV, "value": self.url(job)},
            {"name": P.CA_CERT_ENV, "value": f"{P.MOUNT_PATH}/{P.CA_FILE}"},
            {"name": P.TOKEN_ENV, "value": f"{P.MOUNT_PATH}/{P.TOKEN_FILE}"},
        ]
        ours = {item["name"] for item in env}
        mount = {"name": P.VOLUME, "mountPath": P.MOUNT_PATH, "readOnly": True}
        for container in pod_spec.get("containers") or []:
            kept = [e for e in container.get("env") or [] if e.get("name") not in ours]
            container["env"] = _forwarded_by_mpirun(kept, sorted(ours)) + env
            mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != P.VOLUME]
            container["volumeMounts"] = [*mounts, mount]
        namespace, info = children.namespace_of(job), P.REPORTING_KINDS[job.kind]
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") != P.VOLUME]
        volumes.append(
            {
                "name": P.VOLUME,
                "projected": {
                    "sources": [
                        {
                            "serviceAccountToken": {
                                "audience": P.token_audience(namespace, job.name, info),
                                "expirationSeconds": P.TOKEN_EXPIRY_SECONDS,
                                "path": P.TOKEN_FILE,
                            }
                        },
                        {
                            "configMap": {
                                "name": P.tls_config_map_name(job.name),
                                "items": [{"key": P.CA_FILE, "path": P.CA_FILE}],
                            }
                        },
                    ]
                },
            }
        )
        pod_spec["volumes"] = volumes


def _forwarded_by_mpirun(env: list[dict[str, Any]], names: list[str]) -> list[dict[str, Any]]:
    """``env`` with ``names`` in OpenMPI's forwarded list when it is an OpenMPI launcher's
    (see the module); other containers' ``env`` unchanged."""
    if not any(e.get("name") == E.OMPI_HOSTFILE for e in env):
        return env
    current = next((e for e in env if e.get("name") == E.OMPI_ENV_LIST), None)
    listed = [n for n in str((current or {}).get("value") or "").split(";") if n]
    value = ";".join([*listed, *(n for n in names if n not in listed)])
    others = [e for e in env if e.get("name") != E.OMPI_ENV_LIST]
    return [*others, {"name": E.OMPI_ENV_LIST, "value": value}]
