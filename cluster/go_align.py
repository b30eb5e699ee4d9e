"""The Go tools that build on Kubernetes' libraries use the control plane's versions of
every module they share with it, so Go's build cache compiles those packages once.

Go's build cache reuses a compiled package only when the package and everything it
imports are the same: one module at another version (``go-logr/logr`` v1.4.3 instead of
v1.4.2, imported by klog and so by all of client-go) makes every package above it compile
again. Each tool module pins what its upstream release pins, so before this alignment the
scheduler-plugins scheduler, although built on the same Kubernetes release as the control
plane, compiled 73% of its Go files again, Kueue 89%, Argo CD 90% (measured with
``go list -deps``, files compiled by no earlier tool of ``make cluster-tools``).

The tools named in ``ALIGNED`` therefore carry ``replace`` directives that move each module
they share with ``cluster/tools/kubernetes`` to the control plane's version (its patch
release of Kubernetes' own libraries, and whatever it selects of the rest). The control
plane's module is the reference and never changes for this: it is the longest build and
the one whose versions the integration tests are about. A module a tool cannot build with
at the control plane's version stays at its own, named in ``EXCEPTIONS`` with the reason.

``python -m cluster.go_align`` rewrites the aligned tools' ``go.mod`` after a pin moves
(then ``go mod tidy`` in each); ``misaligned()`` is what the unit tier checks.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

TOOL_MODULES_DIR = Path(__file__).resolve().parent / "tools"
#: The module whose versions the others follow: the control plane's.
REFERENCE = "kubernetes"
#: The tool modules built on the same Kubernetes libraries as the control plane.
ALIGNED = ("scheduler-plugins", "helm", "kueue", "argocd", "metrics-server", "coredns")
#: Modules a tool keeps at its own version, and why.
EXCEPTIONS: dict[str, dict[str, str]] = {
    "helm": {
        "github.com/spf13/pflag": "helm's root command calls FlagSet.ParseErrorsAllowlist, "
        "which pflag v1.0.6 (the control plane's) does not have",
    },
    "coredns": {
        module: "CoreDNS v1.12.4's otel SDK imports otel/semconv/v1.34.0, which otel v1.35.0 "
        "(the control plane's) does not have"
        for module in (
            "go.opentelemetry.io/otel",
            "go.opentelemetry.io/otel/metric",
            "go.opentelemetry.io/otel/sdk",
            "go.opentelemetry.io/otel/trace",
            "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
        )
    },
    "argocd": {
        module: "at the control plane's older genproto, the httpbody package is found in "
        "two modules (Go's 'ambiguous import')"
        for module in (
            "google.golang.org/genproto/googleapis/api",
            "google.golang.org/genproto/googleapis/rpc",
        )
    },
}
HEADER = (
    "// Aligned with the control plane's module (cluster/tools/kubernetes) by\n"
    "// `python -m cluster.go_align`: the packages both build are compiled once, for both,\n"
    "// by Go's build cache."
)

_REQUIRE = re.compile(r"^\s*(?:require\s+)?(?P<path>[^\s()/][^\s()]*)\s+(?P<version>v\S+)")
_REPLACE = re.compile(
    r"^\s*(?:replace\s+)?(?P<path>\S+)(?:\s+(?P<old>v\S+))?\s+=>\s+(?P<new>\S+)\s+(?P<version>v\S+)"
)


@dataclass(frozen=True)
class GoMod:
    """The versions a ``go.mod`` selects: each required module at its required version,
    or at its replacement's where a replace directive names one (a replace of a module
    path by another path at a version counts as that version)."""

    required: dict[str, str]
    replaced: dict[str, str]

    @classmethod
    def read(cls, path: Path) -> GoMod:
        required: dict[str, str] = {}
        replaced: dict[str, str] = {}
        block = ""
        for raw in path.read_text().splitlines():
            line = raw.split("//", 1)[0].rstrip()
            if not line.strip():
                continue
            opening = re.match(r"^(require|replace|exclude|retract)\s*\($", line.strip())
            if opening:
                block = opening.group(1)
                continue
            if line.strip() == ")":
                block = ""
                continue
            kind = block or line.split()[0]
            if kind == "replace":
                found = _REPLACE.match(line)
                if found and not found.group("old"):
                    replaced[found.group("path")] = found.group("version")
            elif kind == "require":
                found = _REQUIRE.match(line)
                if found:
                    required[found.group("path")] = found.group("version")
        return cls(required, replaced)

    def selected(self) -> dict[str, str]:
        """Each required module's version as built."""
        return {path: self.replaced.get(path, v) for path, v in self.required.items()}


def misaligned(tool: str, modules_dir: Path = TOOL_MODULES_DIR) -> dict[str, tuple[str, str]]:
    """The modules ``tool`` selects at another version than the control plane does, by
    path: (the tool's version, the control plane's), exceptions aside."""
    reference = GoMod.read(modules_dir / REFERENCE / "go.mod").selected()
    ours = GoMod.read(modules_dir / tool / "go.mod").selected()
    allowed = EXCEPTIONS.get(tool, {})
    return {
        path: (version, reference[path])
        for path, version in sorted(ours.items())
        if path in reference and reference[path] != version and path not in allowed
    }


def align(tool: str, modules_dir: Path = TOOL_MODULES_DIR) -> dict[str, tuple[str, str]]:
    """Rewrite ``tool``'s go.mod so that every module it shares with the control plane is
    replaced by the control plane's version: its existing replace lines of such a module
    change their version, the others go into a replace block of their own at the end.
    Returns what moved; ``go mod tidy`` then settles the go.mod and go.sum."""
    moves = misaligned(tool, modules_dir)
    if not moves:
        return moves
    go_mod = modules_dir / tool / "go.mod"
    lines = go_mod.read_text().splitlines()
    done: set[str] = set()
    block = ""
    for i, line in enumerate(lines):
        stripped = line.split("//", 1)[0].strip()
        if re.match(r"^replace\s*\($", stripped):
            block = "replace"
            continue
        if stripped == ")":
            block = ""
            continue
        if block != "replace" and not stripped.startswith("replace "):
            continue
        found = _REPLACE.match(line)
        if found and not found.group("old") and found.group("path") in moves:
            path = found.group("path")
            lines[i] = (
                line[: found.start("version")] + moves[path][1] + line[found.end("version") :]
            )
            done.add(path)
    rest = [path for path in moves if path not in done]
    if rest:
        if HEADER not in "\n".join(lines):
            lines += ["", *HEADER.splitlines(), "replace ("]
            lines += [f"\t{path} => {path} {moves[path][1]}" for path in rest]
            lines.append(")")
        else:
            # The block this command wrote before: its closing parenthesis is the last line.
            close = len(lines) - 1 - lines[::-1].index(")")
            lines[close:close] = [f"\t{path} => {path} {moves[path][1]}" for path in rest]
    go_mod.write_text("\n".join(lines) + "\n")
    return moves


def main(argv: list[str]) -> int:
    tools = argv or list(ALIGNED)
    unknown = [t for t in tools if t not in ALIGNED]
    if unknown:
        print(
            f"not an aligned tool module: {', '.join(unknown)} (expected one of "
            f"{', '.join(ALIGNED)})",
            file=sys.stderr,
        )
        return 2
    for tool in tools:
        moved = align(tool)
        for path, (old, new) in moved.items():
            print(f"{tool}: {path} {old} -> {new}")
        if moved:
            print(f"{tool}: now run `go mod tidy` in cluster/tools/{tool}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
