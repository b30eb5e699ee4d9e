"""``python -m cluster up|down|status|kueue|import-images``: the local control plane from the
command line (``up --real-node`` adds one real node; ``import-images REF...`` copies images
from the local containers storage into that node's containerd).

The make targets (``make cluster-up``, ``make kueue-up`` and friends, in cluster/cluster.mk)
call this.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from cluster.kueue import Kueue
from cluster.local import SCHEDULERS, ClusterError, LocalCluster
from cluster.node import NodeError
from cluster.node_images import ImageError
from cluster.tools import ToolsMissingError
from cluster.topology import DEFAULT_TOPOLOGY_LABEL, default_topology

DEFAULT_WORKDIR = Path("build/cluster")


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise SystemExit(f"{name}={raw!r} is not a whole number") from None


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m cluster", description=__doc__)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path(os.environ.get("KUBETRAIN_CLUSTER_DIR", DEFAULT_WORKDIR)),
        help="work directory of the cluster (default $KUBETRAIN_CLUSTER_DIR or build/cluster)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="start the control plane and register the nodes")
    up.add_argument("--cpu-nodes", type=int, default=_env_int("KUBETRAIN_CPU_NODES", 2))
    up.add_argument("--gpu-nodes", type=int, default=_env_int("KUBETRAIN_GPU_NODES", 4))
    up.add_argument("--gpus-per-node", type=int, default=_env_int("KUBETRAIN_GPUS_PER_NODE", 8))
    up.add_argument("--nodes-per-block", type=int, default=_env_int("KUBETRAIN_NODES_PER_BLOCK", 2))
    up.add_argument("--topology-label", default=DEFAULT_TOPOLOGY_LABEL)
    up.add_argument(
        "--scheduler",
        choices=SCHEDULERS,
        default=os.environ.get("KUBETRAIN_SCHEDULER") or "kube",
        help="kube (kube-scheduler, the default) or coscheduling (scheduler-plugins, "
        "gang scheduling of PodGroups)",
    )
    up.add_argument(
        "--real-node",
        action="store_true",
        default=os.environ.get("KUBETRAIN_REAL_NODE", "") not in ("", "0"),
        help="also start one real node (kubelet, containerd, kube-proxy, CoreDNS) named "
        "kubetrain-node ($KUBETRAIN_REAL_NODE=1)",
    )
    up.add_argument(
        "--metrics",
        action="store_true",
        default=os.environ.get("KUBETRAIN_METRICS", "") not in ("", "0"),
        help="also serve the resource metrics API (metrics-server over kwok's emulated pod "
        "usage) with short HPA settings, for autoscaling ($KUBETRAIN_METRICS=1)",
    )
    up.add_argument("--timeout", type=float, default=180.0, help="seconds to wait (180)")
    commands.add_parser("down", help="stop the control plane and delete its state")
    commands.add_parser("status", help="say whether it runs, where, and its memory use")
    images = commands.add_parser(
        "import-images", help="copy images from podman's storage into the real node"
    )
    images.add_argument(
        "refs", nargs="+", help="image references, e.g. ghcr.io/kubetrain/operator:0.1.0"
    )
    kueue = commands.add_parser("kueue", help="run Kueue against the running control plane")
    kueue.add_argument("action", choices=("up", "down", "status"))
    kueue.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (120)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "up":
            topology = default_topology(
                cpu_nodes=args.cpu_nodes,
                gpu_nodes=args.gpu_nodes,
                gpus_per_node=args.gpus_per_node,
                nodes_per_block=args.nodes_per_block,
                topology_label=args.topology_label,
            )
            cluster = LocalCluster(
                args.workdir,
                topology=topology,
                scheduler=args.scheduler,
                real_node=args.real_node,
                metrics=args.metrics,
            )
            if cluster.is_running():
                print(f"already running in {cluster.workdir}")
                print(cluster.usage())
                return 0
            started = time.monotonic()
            cluster.up(timeout=args.timeout)
            print(f"up in {time.monotonic() - started:.1f}s")
            print(cluster.usage())
        elif args.command == "import-images":
            return _import_images(LocalCluster(args.workdir), args.refs)
        elif args.command == "kueue":
            return _kueue(LocalCluster(args.workdir), args.action, args.timeout)
        elif args.command == "down":
            cluster = LocalCluster(args.workdir)
            saved = cluster.down()
            print(
                f"stopped; component logs kept in {cluster.saved_logs_dir}"
                if saved
                else f"no control plane in {cluster.workdir}"
            )
        else:
            cluster = LocalCluster(args.workdir)
            if not cluster.is_running():
                print(f"not running (work directory {cluster.workdir})")
                return 1
            print(f"running: KUBECONFIG={cluster.kubeconfig} server {cluster.server_url()}")
            rss = cluster.memory_rss_bytes()
            width = max([len(name) for name in rss] + [24])
            pids = cluster.pids()
            for component, value in sorted(rss.items()):
                pid = str(pids.get(component, "-"))
                print(f"  {component:<{width}} pid {pid:<8} RSS {value / 2**20:7.1f} MiB")
            print(f"  {'total':<{width + 13}} RSS {sum(rss.values()) / 2**20:7.1f} MiB")
    except (ClusterError, NodeError, ToolsMissingError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


def _import_images(cluster: LocalCluster, refs: list[str]) -> int:
    node = cluster.real_node
    if node is None or not node.is_running():
        print(
            f"error: no real node runs in {cluster.workdir}: start one with "
            "`python -m cluster up --real-node` (make cluster-up REAL_NODE=1)",
            file=sys.stderr,
        )
        return 1
    started = time.monotonic()
    try:
        imported = node.import_images(refs)
    except ImageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    took = time.monotonic() - started
    for ref in refs:
        print(f"{ref}: imported" if ref in imported else f"{ref}: already there")
    if imported:
        print(f"imported {len(imported)} image(s) in {took:.1f}s")
    return 0


def _kueue(cluster: LocalCluster, action: str, timeout: float) -> int:
    kueue = Kueue(cluster)
    if action == "up":
        if kueue.is_running():
            print("Kueue already runs")
        else:
            started = time.monotonic()
            kueue.start(timeout=timeout)
            print(f"Kueue up in {time.monotonic() - started:.1f}s")
        print(kueue.usage())
    elif action == "down":
        stopped = kueue.stop()
        print("Kueue stopped" if stopped else f"Kueue was not running against {cluster.workdir}")
    else:
        if not kueue.is_running():
            print(f"Kueue is not running against {cluster.workdir}")
            return 1
        print(kueue.usage())
    return 0


if __name__ == "__main__":
    sys.exit(main())
