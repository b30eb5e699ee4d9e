"""Running upstream Trainer v2.3.0's e2e binary (``trainer-e2e.test``, built by ``make
cluster-tools``) and reading its JSON report: shared by the kwok run
(``operator/test_upstream_e2e.py``) and the real node's (``realnode/test_progress_pod.py``)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cluster.tools import Tools


def focus_of(texts: Iterable[str]) -> str:
    """A Ginkgo focus matching exactly these specs' full texts (no anchors: Ginkgo matches
    them against its own joined text)."""
    return "|".join(re.sub(r"([().*+?\[\]{}|^$\\])", r"\\\1", text) for text in texts)


def run_suite(
    tools: Tools, kubeconfig: Path, report: Path, focus: str, home: Path
) -> subprocess.CompletedProcess[str]:
    """The suite, unchanged, on the cluster of ``kubeconfig``, its specs matching
    ``focus``; the JSON report in ``report``."""
    return subprocess.run(
        [
            str(tools.path("trainer-e2e.test")),
            f"-ginkgo.focus={focus}",
            f"-ginkgo.json-report={report}",
            "-ginkgo.no-color",
            "-ginkgo.v",
            "-ginkgo.timeout=9m",
        ],
        env={"KUBECONFIG": str(kubeconfig), "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def specs(report: Path) -> dict[str, dict[str, Any]]:
    """The suite's JSON report: each spec run (not skipped) by its full text."""
    suites = json.loads(report.read_text(encoding="utf-8"))
    found: dict[str, dict[str, Any]] = {}
    for suite in suites:
        for spec in suite.get("SpecReports") or []:
            if spec.get("LeafNodeType") != "It" or spec.get("State") == "skipped":
                continue
            text = " ".join([*spec.get("ContainerHierarchyTexts", []), spec["LeafNodeText"]])
            found[text] = spec
    return found


def failures(found: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each spec that did not pass, with its failure message."""
    return {
        text: (spec.get("Failure") or {}).get("Message", spec.get("State"))
        for text, spec in found.items()
        if spec.get("State") != "passed"
    }
