"""A GitOps repository on the local disk, as a platform team's CI keeps one: stack
versions synthesized into ``<repo>/<path_prefix>`` and committed, for Argo CD to sync
(``cluster/argocd.py``; ``repoURL: file://<repo>``).
"""

from __future__ import annotations

import dataclasses
import subprocess
from pathlib import Path
from typing import Any

from kubetrain.gitops.argocd import SYNC_WAVE_ANNOTATION as SYNC_WAVE
from kubetrain.gitops.render import render_charts
from kubetrain.gitops.stack import Stack
from kubetrain.gitops.writer import write_version
from kubetrain.manifest import parse_yaml, parse_yaml_all

#: Who commits (the repository has no configuration of its own).
COMMITTER = ("kubetrain", "gitops@kubetrain.dev")


class GitOpsRepoError(RuntimeError):
    """A git command failed."""


class GitOpsRepo:
    """A git repository at ``path`` on branch ``main`` (created on first use)."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        if not (self.path / ".git").exists():
            self.path.mkdir(parents=True, exist_ok=True)
            self.git("init", "--quiet", "--initial-branch=main")

    @property
    def url(self) -> str:
        return f"file://{self.path}"

    def git(self, *args: str) -> str:
        """Run git in the repository; return its output, or raise ``GitOpsRepoError``."""
        name, email = COMMITTER
        identity = ["-c", f"user.name={name}", "-c", f"user.email={email}"]
        done = subprocess.run(
            ["git", *identity, "-C", str(self.path), *args],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise GitOpsRepoError(
                f"`git {' '.join(args)}` in {self.path} exited with status {done.returncode}, "
                f"expected 0: {done.stderr.strip()}"
            )
        return done.stdout

    def head(self) -> str:
        return self.git("rev-parse", "HEAD").strip()

    def stack(self, stack: Stack) -> Stack:
        """``stack`` with its GitOps repository set to this one."""
        return dataclasses.replace(
            stack, argocd=dataclasses.replace(stack.argocd, repo_url=self.url)
        )

    def commit_version(self, stack: Stack, message: str | None = None) -> Path:
        """Synthesize ``stack`` (see ``stack``) as ``kubetrain synth --out`` does and commit
        it; return the version's folder."""
        if stack.argocd.repo_url != self.url:
            raise ValueError(
                f"stack {stack.name} syncs from {stack.argocd.repo_url!r}, not this repository "
                f"({self.url}): pass it through GitOpsRepo.stack first"
            )
        written = write_version(stack, render_charts(stack), self.path / stack.argocd.path_prefix)
        self.commit(message or f"{stack.name} {stack.version}")
        return written.path

    def commit(self, message: str) -> str:
        """Commit every change in the work tree; return the new commit."""
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def revert(self) -> str:
        """Revert the last commit (a new commit); return it."""
        self.git("revert", "--no-edit", "HEAD")
        return self.head()


def images_of(version_dir: Path) -> list[str]:
    """Every container image the version's manifests name, sorted."""
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "image" and isinstance(value, str):
                    found.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in sorted(version_dir.rglob("*.yaml")):
        for doc in parse_yaml_all(path.read_text(encoding="utf-8")):
            walk(doc)
    return sorted(found)


def health_config(version_dir: Path) -> dict[str, str]:
    """The ``argocd-cm`` data of the version's ``argocd/argocd-cm-health.yaml``."""
    path = version_dir / "argocd" / "argocd-cm-health.yaml"
    return dict(parse_yaml(path.read_text(encoding="utf-8"))["data"])


def app_names(version_dir: Path) -> tuple[str, ...]:
    """The Argo CD Applications of a synthesized stack version: the root's name first,
    then the children's in sync-wave order."""
    argocd = version_dir / "argocd"
    root = parse_yaml((argocd / "root-application.yaml").read_text(encoding="utf-8"))
    children = [
        parse_yaml(path.read_text(encoding="utf-8"))
        for path in sorted((argocd / "applications").glob("*.yaml"))
    ]
    children.sort(key=lambda app: int(app["metadata"]["annotations"][SYNC_WAVE]))
    return (str(root["metadata"]["name"]), *(str(app["metadata"]["name"]) for app in children))
