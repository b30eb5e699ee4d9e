"""PyTorch DistributedDataParallel sample (PyTorchJob)."""
