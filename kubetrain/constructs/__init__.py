"""cdk8s constructs: reusable building blocks of kubetrain stacks."""

from kubetrain.constructs.crds import KubeflowCrds

__all__ = ["KubeflowCrds"]
