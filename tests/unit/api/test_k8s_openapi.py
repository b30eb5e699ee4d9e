"""The committed pod-template schema is exactly what the pinned Kubernetes OpenAPI gives."""

from __future__ import annotations

import pytest

from kubetrain.api import k8s_openapi


def test_int_or_string_and_quantity_become_structural() -> None:
    template = k8s_openapi.embedded_schema("io.k8s.api.core.v1.PodTemplateSpec")
    container = template["properties"]["spec"]["properties"]["containers"]["items"]
    limits = container["properties"]["resources"]["properties"]["limits"]["additionalProperties"]
    assert limits["x-kubernetes-int-or-string"] is True
    assert "pattern" in limits
    http_port = container["properties"]["livenessProbe"]["properties"]["httpGet"]["properties"][
        "port"
    ]
    assert http_port == {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }


def test_rejects_unknown_embedded_type() -> None:
    with pytest.raises(KeyError, match="make schemas"):
        k8s_openapi.embedded_schema("io.k8s.api.core.v1.Pod")


def test_fails_clearly_without_the_openapi(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    with pytest.raises(FileNotFoundError, match="make openapi"):
        k8s_openapi.convert(tmp_path)
