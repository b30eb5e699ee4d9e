"""GitOps delivery: stacks, versioned output, lock files, diffs and Argo CD."""
