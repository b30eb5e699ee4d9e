"""A stack delivered by the real Argo CD from a git repository: ``make demo-argocd``.

1. starts the local control plane with its real node (or reuses the one ``make cluster-up
   REAL_NODE=1`` started) and imports the images the stack's manifests name (built by
   ``make images``) into the node;
2. synthesizes the stack (``local`` by default) with its GitOps repository set to a git
   repository in the work directory, commits it there, as a platform team's CI does;
3. runs Argo CD's application controller and repo server (``cluster/argocd.py``) with the
   health checks the stack synthesized (``argocd/argocd-cm-health.yaml``) in ``argocd-cm``;
4. applies the stack's root Application (the app-of-apps) and prints every change of the
   Applications' sync status and health, with the time since the start, until all are
   Synced and Healthy; the operator then runs as the pods of its Deployment on the node.

The stack's sample jobs are left out unless ``--samples`` is given: they train for real,
and the ``local`` stack's need more CPU than a 2-core machine has.

Argo CD keeps running afterwards (``--down`` stops it and the control plane it started).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from cluster.argocd import NAMESPACE, LocalArgoCd
from cluster.gitops_repo import GitOpsRepo, app_names, health_config, images_of
from cluster.local import LocalCluster
from cluster.node_images import ImageError, podman_image_id
from cluster.topology import default_topology
from kubetrain.gitops.stack import Samples, load_stacks
from kubetrain.manifest import parse_yaml

DEFAULT_WORKDIR = Path("build/cluster")
TIMEOUT_SECONDS = 600.0


def applications(cluster: LocalCluster) -> dict[str, tuple[str, str]]:
    """Each Application's (sync status, health status)."""
    out = cluster.kubectl("-n", NAMESPACE, "get", "applications.argoproj.io", "-o", "yaml")
    found: dict[str, tuple[str, str]] = {}
    for app in parse_yaml(out.stdout).get("items", []):
        status = app.get("status") or {}
        found[app["metadata"]["name"]] = (
            (status.get("sync") or {}).get("status", "-"),
            (status.get("health") or {}).get("status", "-"),
        )
    return found


def watch(
    cluster: LocalCluster, names: tuple[str, ...], start: float, *, timeout: float = TIMEOUT_SECONDS
) -> None:
    """Print every change of the Applications ``names`` until all are Synced and Healthy."""
    seen: dict[str, tuple[str, str]] = {}
    deadline = time.monotonic() + timeout
    while True:
        now = {name: state for name, state in applications(cluster).items() if name in names}
        for name, state in sorted(now.items()):
            if seen.get(name) != state:
                print(f"{time.monotonic() - start:6.1f}s  {name:28} {state[0]:10} {state[1]}")
        seen = now
        if set(now) == set(names) and all(state == ("Synced", "Healthy") for state in now.values()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"not every Application was Synced and Healthy after {timeout:.0f}s")
        time.sleep(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=DEFAULT_WORKDIR)
    parser.add_argument("--stack", default="local", help="the stack to deliver (stacks/)")
    parser.add_argument("--down", action="store_true", help="stop everything at the end")
    parser.add_argument(
        "--samples",
        action="store_true",
        help="deliver the stack's sample jobs too (they train for real on the node: the "
        "local stack's need 3.5 CPUs, so on a 2-core machine some wait for CPU and their "
        "Application stays Progressing)",
    )
    parser.add_argument(
        "--operator-replicas",
        type=int,
        metavar="N",
        help="run the operator as N replicas (one leads, the others stand by; default: "
        "the stack's own)",
    )
    args = parser.parse_args(argv)
    if args.operator_replicas is not None and args.operator_replicas < 1:
        parser.error(f"--operator-replicas must be 1 or more, not {args.operator_replicas}")

    # No fake CPU nodes: every CPU pod (the operator, the samples) lands on the real node.
    topology = default_topology(cpu_nodes=0, gpu_nodes=2)
    cluster = LocalCluster(args.workdir, topology=topology, real_node=True)
    started_cluster = not cluster.is_running()
    argocd = LocalArgoCd(cluster)
    start = time.monotonic()
    try:
        if started_cluster:
            print(f"starting the local control plane with a real node in {args.workdir}")
            cluster.up()
        node = cluster.real_node
        if node is None or not node.is_running():
            raise SystemExit(
                f"the control plane in {args.workdir} has no real node: stop it "
                "(make cluster-down) and run this again, or start it with REAL_NODE=1"
            )
        repo = GitOpsRepo(cluster.workdir / "gitops")
        stacks = load_stacks()
        if args.stack not in stacks:
            raise SystemExit(
                f"no stack {args.stack!r}: expected one of {', '.join(sorted(stacks))}"
            )
        stack = repo.stack(stacks[args.stack])
        if not args.samples:
            stack = dataclasses.replace(stack, samples=Samples())
        if args.operator_replicas is not None:
            operator = dataclasses.replace(stack.operator, replicas=args.operator_replicas)
            stack = dataclasses.replace(stack, operator=operator)
        version_dir = repo.commit_version(stack)
        print(f"committed {stack.name} {stack.version} to {repo.path} ({repo.head()[:12]})")
        built = []
        for ref in images_of(version_dir):
            try:
                podman_image_id(ref)
                built.append(ref)
            except ImageError:
                print(f"image {ref} not built here (make images): its pods will not start")
        node.import_images(built)
        print(f"images in the node: {', '.join(built) or 'none'}")
        if argocd.is_running():
            argocd.configure(health_config(version_dir))
        else:
            print("starting Argo CD (application controller, repo server, redis)")
            argocd.start(config=health_config(version_dir))
        root = version_dir / "argocd" / "root-application.yaml"
        cluster.kubectl("apply", "-f", str(root))
        print(f"applied {root.relative_to(repo.path)}\n")
        watch(cluster, app_names(version_dir), start)
        took = time.monotonic() - start
        print(f"\nevery Application Synced and Healthy {took:.0f}s after the start")
        print(cluster.kubectl("-n", stack.operator.namespace, "get", "pods", "-o", "wide").stdout)
    finally:
        if args.down:
            argocd.stop()
            if started_cluster:
                cluster.down()
    return 0


if __name__ == "__main__":
    sys.exit(main())
