"""The local control plane's optional resource metrics: the ``metrics.k8s.io`` API that
the HorizontalPodAutoscaler and ``kubectl top`` read, served from kwok's emulated usage.

kwokctl v0.8.0 wires most of it itself when ``enableMetricsServer`` is set (its binary
runtime): it runs the metrics-server binary it is given beside the other components,
bound to 127.0.0.1, builds metrics-server's release kustomization and applies what a
cluster needs of it (the ``v1beta1.metrics.k8s.io`` APIService pointed at that process
through an ExternalName Service, and the RBAC; the Deployment is dropped), and gives the
kwok controller the ``Metric`` that serves a kubelet's ``/metrics/resource`` for each fake
node at ``/metrics/nodes/<node>/metrics/resource``. kubetrain adds:

- the aggregation layer's request-header authentication on kube-apiserver (kwokctl passes
  only the proxy client certificate): the API server proxies a metrics request to
  metrics-server with the caller's identity in ``X-Remote-User``/``X-Remote-Group``, and
  metrics-server checks it with a SubjectAccessReview instead of seeing every caller as
  the proxy's admin certificate;
- kwok's ``ResourceUsage`` and ``ClusterResourceUsage`` as CRDs (``enableCRDs``), so a
  test declares and changes a pod's emulated CPU and memory through the API;
- on each fake node (``cluster.topology``), the annotation
  ``metrics.k8s.io/resource-metrics-path`` metrics-server (>= 0.7) scrapes instead of
  ``/metrics/resource``, and kwok's address as its InternalIP (the kubelet port is
  already kwok's: ``cluster/stages/node-ready.yaml``);
- HPA settings on kube-controller-manager short enough for a test (``HPA_ARGS``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cluster.tools import Tools

#: The address kwokctl binds every component to, the kwok controller's included: the
#: fake nodes' InternalIP when the cluster has metrics (metrics-server scrapes it).
KWOK_ADDRESS = "127.0.0.1"
#: kwok's kinds the API serves with metrics on (kwok's ``--enable-crds``).
USAGE_KINDS = ("ResourceUsage", "ClusterResourceUsage")
#: The APIService metrics-server registers.
METRICS_API_SERVICE = "v1beta1.metrics.k8s.io"
#: How often metrics-server scrapes the nodes: its minimum (kwokctl passes 15s). A CPU
#: rate needs two scrapes, so a pod's first usage shows about two periods after it starts.
#: metrics-server wants a scrape's timeout under 90% of the period (its default, 10s, is
#: not): kwok answers on 127.0.0.1, so 5s is ample.
METRIC_RESOLUTION = "10s"
KUBELET_REQUEST_TIMEOUT = "5s"
#: kube-controller-manager's HorizontalPodAutoscaler settings on the local control plane,
#: shorter than Kubernetes' defaults so that a test sees a decision within seconds:
#: - sync period 15s -> 2s: how often each HPA is evaluated;
#: - downscale stabilisation 5m -> 10s: the default window over which the HPA takes the
#:   highest recommendation before it scales down (an HPA's own
#:   ``spec.behavior.scaleDown.stabilizationWindowSeconds`` still overrides it; the
#:   scale-up window is 0 either way);
#: - CPU initialization period 5m -> 10s and initial readiness delay 30s -> 5s: how long
#:   after a pod starts its CPU samples may be set aside as not yet representative.
HPA_ARGS = (
    ("horizontal-pod-autoscaler-sync-period", "2s"),
    ("horizontal-pod-autoscaler-downscale-stabilization", "10s"),
    ("horizontal-pod-autoscaler-cpu-initialization-period", "10s"),
    ("horizontal-pod-autoscaler-initial-readiness-delay", "5s"),
)
#: kwokctl's admin client certificate's common name (kwok's pki.DefaultUser): the proxy
#: client certificate kube-apiserver presents to metrics-server.
PROXY_CLIENT_NAME = "kwok-admin"


def metrics_options(tools: Tools) -> dict[str, Any]:
    """kwokctl options that run metrics-server (the binary ``make cluster-tools``
    built, with its release's manifests) and serve kwok's usage kinds."""
    return {
        "enableMetricsServer": True,
        "metricsServerBinary": str(tools.metrics_server),
        "metricsServerManifests": [str(tools.metrics_server_manifests)],
        "enableCRDs": list(USAGE_KINDS),
    }


def metrics_patches(pki_dir: Path) -> list[dict[str, Any]]:
    """kwokctl component patches of a control plane with metrics: request-header
    authentication on kube-apiserver (the front-proxy client is kwokctl's admin
    certificate, signed by the cluster CA), metrics-server's scrape period, and
    kube-controller-manager's HPA settings (``HPA_ARGS``)."""

    def args(*pairs: tuple[str, str], override: frozenset[str] = frozenset()) -> list[Any]:
        return [{"key": k, "value": v, "override": k in override} for k, v in pairs]

    return [
        {
            "name": "kube-apiserver",
            "extraArgs": args(
                ("requestheader-client-ca-file", str(pki_dir / "ca.crt")),
                ("requestheader-allowed-names", PROXY_CLIENT_NAME),
                ("requestheader-username-headers", "X-Remote-User"),
                ("requestheader-group-headers", "X-Remote-Group"),
                ("requestheader-extra-headers-prefix", "X-Remote-Extra-"),
            ),
        },
        {
            "name": "metrics-server",
            "extraArgs": args(
                ("metric-resolution", METRIC_RESOLUTION),
                ("kubelet-request-timeout", KUBELET_REQUEST_TIMEOUT),
                override=frozenset({"metric-resolution"}),
            ),
        },
        {"name": "kube-controller-manager", "extraArgs": args(*HPA_ARGS)},
    ]
