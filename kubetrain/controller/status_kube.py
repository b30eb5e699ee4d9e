"""The progress server's API calls, through the operator's client
(:mod:`kubetrain.controller.kube`): TokenReviews, the pod a token is bound to (and an MPI
launcher's batch Job), the report's status write, and the certificate Secret."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubetrain.api import progress
from kubetrain.api.kind_info import KindInfo
from kubetrain.api.kinds import TRAINJOB
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import BATCH_JOBS, JOB_RESOURCES, PODS, SECRETS, KubeApi, Resource

TOKEN_REVIEWS = Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False)


class KubeProgressApi:
    """``AuthApi``, ``StatusWriter`` and the certificate ``SecretStore`` on a KubeApi."""

    def __init__(self, api: KubeApi, *, secret_namespace: str, secret_name: str) -> None:
        self.api = api
        self.secret_namespace = secret_namespace
        self.secret_name = secret_name

    # -- AuthApi -------------------------------------------------------------------------

    def review_token(self, token: str, audience: str) -> Mapping[str, Any]:
        review = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        result = self.api.request("POST", TOKEN_REVIEWS.path(), body=review)
        found: Mapping[str, Any] = result.get("status") or {}
        return found

    def pod(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.api.get(PODS, namespace, name)

    def batch_job(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self.api.get(BATCH_JOBS, namespace, name)

    # -- StatusWriter --------------------------------------------------------------------

    def write_report(
        self,
        info: KindInfo,
        namespace: str,
        name: str,
        report: progress.Report,
        reporter: progress.Reporter,
    ) -> None:
        """A JSON merge patch of the status subresource: ``trainerStatus`` replaced whole
        (when the report has one), kubetrain's ``progress`` updated (what the report
        leaves out stays)."""
        status: dict[str, Any] = {}
        if report.trainer_status is not None:
            status["trainerStatus"] = progress.trainer_status_patch(report.trainer_status)
        ours = progress.progress_patch(report, reporter, datetime.now(UTC))
        if info.kind == TRAINJOB.kind:
            status["kubetrain"] = {"progress": ours}
        else:
            status["progress"] = ours
        self.api.request(
            "PATCH",
            JOB_RESOURCES[info.kind].path(namespace, name, "status"),
            query={"fieldManager": progress.FIELD_MANAGER},
            body={"status": status},
            content_type="application/merge-patch+json",
        )

    def read_progress(self, info: KindInfo, namespace: str, name: str) -> dict[str, Any] | None:
        job = self.api.get(JOB_RESOURCES[info.kind], namespace, name)
        if job is None:
            raise ApiError(404, "NotFound", f"{info.kind} {namespace}/{name} not found")
        status = job.get("status") or {}
        if info.kind == TRAINJOB.kind:
            status = status.get("kubetrain") or {}
        found: dict[str, Any] | None = status.get("progress")
        return found

    # -- SecretStore ---------------------------------------------------------------------

    def read(self) -> tuple[dict[str, str], str] | None:
        secret = self.api.get(SECRETS, self.secret_namespace, self.secret_name)
        if secret is None:
            return None
        data = {
            key: base64.b64decode(value).decode()
            for key, value in (secret.get("data") or {}).items()
        }
        return data, str((secret.get("metadata") or {}).get("resourceVersion") or "")

    def _secret(self, data: Mapping[str, str], resource_version: str = "") -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": self.secret_name,
            "namespace": self.secret_namespace,
            "labels": {"app.kubernetes.io/component": "progress-server"},
        }
        if resource_version:
            meta["resourceVersion"] = resource_version
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": meta,
            "type": "Opaque",
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in sorted(data.items())},
        }

    def create(self, data: dict[str, str]) -> bool:
        try:
            self.api.create(self._secret(data))
        except ApiError as err:
            if err.status == 409:
                return False
            raise
        return True

    def replace(self, data: dict[str, str], resource_version: str) -> bool:
        try:
            self.api.replace(self._secret(data, resource_version))
        except ApiError as err:
            if err.status == 409:
                return False
            raise
        return True
