"""cdk8s charts: each one deployable unit, one folder of manifests."""

from kubetrain.charts.crds import CrdsChart

__all__ = ["CrdsChart"]
