"""``kubetrain operator``: run the operator (in a cluster, or locally with --kubeconfig)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from kubetrain.controller import logs
from kubetrain.controller.config import OperatorConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The operator's flags (``OperatorConfig``, the log level included) plus connection
    and log format."""
    OperatorConfig.add_arguments(parser)
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig to use (default: in-cluster credentials, else $KUBECONFIG)",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context")
    parser.add_argument("--log-format", choices=("json", "text"), default="json")


def run(args: argparse.Namespace) -> int:
    """Run the operator until SIGTERM/SIGINT; the exit code."""
    try:
        config = OperatorConfig.from_namespace(args)
    except ValueError as err:
        print(f"kubetrain operator: {err}", file=sys.stderr)
        return 2
    logs.configure(config.log_level.value, args.log_format)
    # Imported here: `kubetrain --help` should not load the Kubernetes client.
    from kubetrain.controller.kube import KubeApi
    from kubetrain.controller.operator import Operator

    api = KubeApi.connect(
        args.kubeconfig,
        args.context,
        qps=config.kube_api_qps,
        burst=config.kube_api_burst,
        pool_size=config.workers * 6 + 16,
    )
    # The progress server's own client: its writes are not the reconcilers' (no leader
    # fence, a rate limit of its own), as upstream gives its status server a client.
    progress_api = (
        KubeApi.connect(
            args.kubeconfig,
            args.context,
            qps=config.progress_api_qps,
            burst=config.progress_api_burst,
        )
        if config.progress_server
        else None
    )
    try:
        operator = Operator(config, api, progress_api=progress_api)
    except (ValueError, OSError) as err:
        print(f"kubetrain operator: {err}", file=sys.stderr)
        api.close()
        if progress_api is not None:
            progress_api.close()
        return 2
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return operator.run(stop)
    finally:
        api.close()
        if progress_api is not None:
            progress_api.close()


def main(argv: list[str] | None = None) -> int:
    """``python -m kubetrain.commands.operator``: the same as ``kubetrain operator``."""
    parser = argparse.ArgumentParser(prog="kubetrain operator")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
