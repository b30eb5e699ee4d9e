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
they share with their reference to the reference's version. For most the reference is
``cluster/tools/kubernetes``, the control plane's (its patch release of Kubernetes' own
libraries, and whatever it selects of the rest): the longest build, the one whose versions
the integration tests are about, and never changed for this. kwok, built in the control
plane's step but on a newer Kubernetes than it can compile against, follows Trainer's
module instead (upstream's go.mod unchanged, which ``make`` checks): Trainer's e2e suite,
built later, then finds its ``k8s.io/api``, ``apimachinery`` and ``client-go`` compiled (301
of its 397 packages outside the standard library, against 87 before). A module a tool
cannot build with at its reference's version stays at its own, named in ``EXCEPTIONS``
with the reason.

``python -m cluster.go_align`` rewrites the aligned tools' ``go.mod`` after a pin moves
(then ``go mod tidy`` in each); ``misaligned()`` is what the unit tier checks.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

TOOL_MODULES_DIR = Path(__file__).resolve().parent / "tools"
#: The module whose versions most others follow: the control plane's.
REFERENCE = "kubernetes"
#: Each aligned tool module, and the module whose versions it follows.
ALIGNED: dict[str, str] = {
    **{
        tool: REFERENCE
        for tool in (
            "scheduler-plugins",
            "helm",
            "kueue",
            "argocd",
            "metrics-server",
            "coredns",
            "volcano",
        )
    },
    "kwok": "trainer",
}
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
    "volcano": {
        "golang.org/x/tools": "controller-gen v0.18.0 reads packages.Package.Dir, which x/tools "
        "v0.26.0 (the control plane's) does not have"
    },
    "kwok": {
        module: "kwok v0.8.0's otel SDK imports otel/semconv/v1.41.0, which otel v1.43.0 "
        "(Trainer's) does not have"
        for module in ("go.opentelemetry.io/otel", "go.opentelemetry.io/otel/trace")
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
    "// Aligned with {what} by\n"
    "// `python -m cluster.go_align`: the packages both build are compiled once, for both,\n"
    "// by Go's build cache."
)
_HEADER_NAMES = {
    REFERENCE: "the control plane's module (cluster/tools/kubernetes)",
    "trainer": "Trainer's module (cluster/tools/trainer)",
}

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


def misaligned(
    tool: str, modules_dir: Path = TOOL_MODULES_DIR, reference_tool: str | None = None
) -> dict[str, tuple[str, str]]:
    """The modules ``tool`` selects at another version than its reference does (``ALIGNED``'s,
    or ``reference_tool``), by path: (the tool's version, the reference's), exceptions aside."""
    reference_tool = reference_tool or ALIGNED.get(tool, REFERENCE)
    reference = GoMod.read(modules_dir / reference_tool / "go.mod").selected()
    ours = GoMod.read(modules_dir / tool / "go.mod").selected()
    allowed = EXCEPTIONS.get(tool, {})
    return {
        path: (version, reference[path])
        for path, version in sorted(ours.items())
        if path in reference and reference[path] != version and path not in allowed
    }


def align(
    tool: str, modules_dir: Path = TOOL_MODULES_DIR, reference_tool: str | None = None
) -> dict[str, tuple[str, str]]:
    """Rewrite ``tool``'s go.mod so that every module it shares with its reference is
    replaced by the reference's version: its existing replace lines of such a module
    change their version, the others go into a replace block of their own at the end.
    Returns what moved; ``go mod tidy`` then settles the go.mod and go.sum."""
    reference_tool = reference_tool or ALIGNED.get(tool, REFERENCE)
    moves = misaligned(tool, modules_dir, reference_tool)
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
        header = HEADER.format(
            what=_HEADER_NAMES.get(reference_tool, f"cluster/tools/{reference_tool}")
        )
        if header not in "\n".join(lines):
            lines += ["", *header.splitlines(), "replace ("]
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
