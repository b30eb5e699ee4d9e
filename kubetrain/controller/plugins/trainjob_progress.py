"""What a TrainJob's trainer pods get so the Kubeflow SDK's ``update_trainjob_status``
reaches the operator's progress server (upstream's ``TrainJobStatus`` runtime plugin):

- ConfigMap ``<trainjob>-tls-config`` with the CA bundle the server's certificate chains
  to (``ca.crt``), re-applied when the bundle changes;
- in every container of the trainer's replicated job: ``KUBEFLOW_TRAINER_SERVER_URL``
  (this TrainJob's status path on the server), ``KUBEFLOW_TRAINER_SERVER_CA_CERT`` and
  ``KUBEFLOW_TRAINER_SERVER_TOKEN`` (set over the container's own values, as upstream
  does), and a read-only mount at ``/var/run/secrets/kubeflow/trainer`` of a projected
  volume: a ServiceAccount token for this TrainJob's audience (an hour, refreshed by the
  kubelet) and the CA bundle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubetrain.api.common import JobBase as Job
from kubetrain.api.trainer import progress as P
from kubetrain.controller.plugins import children


@dataclass(frozen=True)
class ProgressInjection:
    """Where the progress server is (``https://host:port``) and the CA bundle it uses."""

    base_url: str
    ca_bundle: Callable[[], str]

    def url(self, job: Job) -> str:
        return self.base_url + P.status_path(children.namespace_of(job), job.name)

    def config_map(self, job: Job) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": children.metadata(
                job, P.tls_config_map_name(job.name), children.job_labels(job)
            ),
            "data": {P.CA_FILE: self.ca_bundle()},
        }

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
            container["env"] = kept + env
            mounts = [m for m in container.get("volumeMounts") or [] if m.get("name") != P.VOLUME]
            container["volumeMounts"] = [*mounts, mount]
        volumes = [v for v in pod_spec.get("volumes") or [] if v.get("name") != P.VOLUME]
        volumes.append(
            {
                "name": P.VOLUME,
                "projected": {
                    "sources": [
                        {
                            "serviceAccountToken": {
                                "audience": P.token_audience(children.namespace_of(job), job.name),
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
