"""kubetrain: Kubeflow-compatible distributed training on Kubernetes, from typed Python."""

__version__ = "0.1.0"
