"""The operator: the run-time half of kubetrain (``kubetrain operator``).

Importing this package loads nothing else: the operator's configuration and RBAC
(:mod:`kubetrain.controller.config`, :mod:`kubetrain.controller.rbac`), which the
constructs render, can be imported without loading the plugins or the Kubernetes client.
"""
