"""The environments a platform team edits: one module per stack, each defining
``STACK = Stack(...)``. ``python -m stacks`` is the cdk8s app (see cdk8s.yaml)."""
