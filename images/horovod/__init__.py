"""Horovod with PyTorch sample (MPIJob)."""
