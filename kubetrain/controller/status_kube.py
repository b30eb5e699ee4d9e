"""The progress server's API calls, through the operator's client
(:mod:`kubetrain.controller.kube`): TokenReviews, the pod a token is bound to, the
``status.trainerStatus`` apply, and the certificate Secret."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from kubetrain.api.kinds import TRAINJOB
from kubetrain.api.trainer import progress
from kubetrain.controller.errors import ApiError
from kubetrain.controller.kube import JOB_RESOURCES, PODS, SECRETS, KubeApi, Resource

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

    # -- StatusWriter --------------------------------------------------------------------

    def apply_trainer_status(
        self, namespace: str, name: str, trainer_status: Mapping[str, Any]
    ) -> None:
        body = {
            "apiVersion": TRAINJOB.api_version,
            "kind": TRAINJOB.kind,
            "metadata": {"name": name, "namespace": namespace},
            "status": {"trainerStatus": dict(trainer_status)},
        }
        self.api.request(
            "PATCH",
            JOB_RESOURCES[TRAINJOB.kind].path(namespace, name, "status"),
            query={"fieldManager": progress.FIELD_MANAGER, "force": "true"},
            body=body,
            content_type="application/apply-patch+yaml",
        )

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
