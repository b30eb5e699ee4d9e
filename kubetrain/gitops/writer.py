"""Writing rendered stacks to ``dist/<stack>/<version>/`` with version discipline.

Layout of one version::

    <NN>-<chart>/<NNNN>-<kind>-<name>.yaml   one file per object, numbered in apply order
    <NN>-<chart>/kustomization.yaml          the chart's objects, in order
    kustomization.yaml                        every chart, in order
    manifest.lock.json                        sha256 per object file, kubetrain version
    argocd/applications/*.yaml                one Application per chart (sync waves)
    argocd/root-application.yaml              app-of-apps for this version
    argocd/argocd-cm-health.yaml              health checks to merge into argocd-cm
    files/prometheus-rules.yaml               with monitoring: the alert rules as a plain
    files/grafana-dashboard.json              Prometheus rules file, the dashboard as JSON

A version is immutable: writing an existing version whose content changed fails and
lists the changed objects; ``bump`` writes the next version instead. Writes go to a
staging folder renamed into place, so a failure never leaves a half-written version.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubetrain import __version__
from kubetrain.constructs.monitoring import dashboard_file, rules_file
from kubetrain.gitops import argocd as argo
from kubetrain.gitops.render import RenderedChart, argocd_objects, root_application
from kubetrain.gitops.stack import Stack
from kubetrain.manifest import dump, parse_yaml

LOCK_FILE = "manifest.lock.json"
#: The plain files of a stack with monitoring (for a Prometheus or Grafana run by hand).
RULES_FILE = "files/prometheus-rules.yaml"
DASHBOARD_FILE = "files/grafana-dashboard.json"


class VersionConflict(ValueError):
    """An existing version's content would change."""

    def __init__(self, stack: str, version: str, changes: dict[str, list[str]]) -> None:
        self.changes = changes
        lines = [f"dist for stack {stack!r} version {version} already exists with other content:"]
        for label in ("changed", "added", "removed"):
            for path in changes.get(label, []):
                lines.append(f"  {label}: {path}")
        lines.append(
            f"a version is immutable: bump it with `kubetrain synth {stack} --bump "
            f"patch|minor|major` (updates version= in stacks/{stack.replace('-', '_')}.py)"
        )
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class WriteResult:
    path: Path
    version: str
    charts: list[RenderedChart]
    unchanged: bool


def _file_name(index: int, obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    return f"{index:04d}-{obj['kind'].lower()}-{meta.get('name', 'unnamed')}.yaml"


def _kustomization(resources: list[str]) -> str:
    return dump(
        {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "resources": resources,
        }
    )


def render_files(stack: Stack, charts: list[RenderedChart]) -> dict[str, str]:
    """Every file of one version, by path relative to the version folder."""
    files: dict[str, str] = {}
    for chart in charts:
        names = []
        for index, obj in enumerate(chart.objects):
            name = _file_name(index, obj)
            names.append(name)
            files[f"{chart.folder}/{name}"] = dump(obj)
        files[f"{chart.folder}/kustomization.yaml"] = _kustomization(names)
    files["kustomization.yaml"] = _kustomization([c.folder for c in charts])
    for app in argocd_objects(stack, charts):
        files[f"argocd/applications/{app['metadata']['name']}.yaml"] = dump(app)
    files["argocd/root-application.yaml"] = dump(root_application(stack))
    files["argocd/argocd-cm-health.yaml"] = dump(argo.argocd_cm_patch(stack.argocd))
    if stack.monitoring is not None:
        files[RULES_FILE] = dump(rules_file(stack.monitoring, stack.operator))
        dashboard = dashboard_file(stack.monitoring, stack.operator)
        files[DASHBOARD_FILE] = json.dumps(dashboard, indent=2) + "\n"
    lock = {
        "kubetrainVersion": __version__,
        "stack": stack.name,
        "version": stack.version,
        "files": {
            path: "sha256:" + hashlib.sha256(text.encode()).hexdigest()
            for path, text in sorted(files.items())
        },
    }
    files[LOCK_FILE] = json.dumps(lock, indent=2, sort_keys=True) + "\n"
    return files


def _objects(files: dict[str, str]) -> dict[str, str]:
    """Object label (``Kind namespace/name``) -> YAML, for the chart object files."""
    out: dict[str, str] = {}
    for path, text in files.items():
        if (
            "/" not in path
            or path.startswith(("argocd/", "files/"))
            or path.endswith("kustomization.yaml")
        ):
            continue
        obj = parse_yaml(text)
        meta = obj.get("metadata", {})
        where = (
            f"{meta['namespace']}/{meta.get('name')}" if meta.get("namespace") else meta.get("name")
        )
        out[f"{obj['kind']} {where}"] = text
    return out


def _compare(existing: Path, files: dict[str, str]) -> dict[str, list[str]]:
    """What differs between a written version and new content, object by object (other
    files are listed by path only when no object changed)."""
    old = {str(p.relative_to(existing)): p.read_text() for p in existing.rglob("*") if p.is_file()}
    old.pop(LOCK_FILE, None)
    new = {p: t for p, t in files.items() if p != LOCK_FILE}
    if old == new:
        # The usual case (synth again, nothing changed): no need to parse every object to
        # find what changed; this was most of a re-synth's CPU.
        return {}
    before, after = _objects(old), _objects(new)
    changes = {
        "changed": sorted(k for k in after if k in before and before[k] != after[k]),
        "added": sorted(k for k in after if k not in before),
        "removed": sorted(k for k in before if k not in after),
    }
    if not any(changes.values()):
        changes = {
            "changed": sorted(p for p in new if p in old and old[p] != new[p]),
            "added": sorted(p for p in new if p not in old),
            "removed": sorted(p for p in old if p not in new),
        }
    return {k: v for k, v in changes.items() if v}


def write_version(stack: Stack, charts: list[RenderedChart], out_dir: Path) -> WriteResult:
    """Write ``stack`` at its version under ``out_dir`` (see the module docs)."""
    files = render_files(stack, charts)
    target = out_dir / stack.name / stack.version
    if target.exists():
        changes = _compare(target, files)
        if changes:
            raise VersionConflict(stack.name, stack.version, changes)
        return WriteResult(target, stack.version, charts, unchanged=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{stack.version}.", dir=target.parent))
    staging.chmod(0o755)
    try:
        for rel, text in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        os.replace(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return WriteResult(target, stack.version, charts, unchanged=False)
