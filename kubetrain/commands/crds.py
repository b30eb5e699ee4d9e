"""``kubetrain crds``: print the generated CRDs as one YAML stream."""

from __future__ import annotations

import argparse
import sys

from kubetrain.api import all_crds
from kubetrain.api.kinds import JOB_KINDS, TRAINER_KINDS
from kubetrain.manifest import dump_all

KINDS = (*JOB_KINDS, *TRAINER_KINDS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kind",
        action="append",
        choices=KINDS,
        help="only this kind (repeatable; default: all)",
    )


def run(args: argparse.Namespace) -> int:
    crds = [c for c in all_crds() if not args.kind or c["spec"]["names"]["kind"] in args.kind]
    sys.stdout.write(dump_all(crds))
    return 0
