"""A small Dockerfile reader: instructions, COPY sources, ENV, the images FROM names.

Used by the image builder (``images.build``: what a build reads, for its cache key) and by
the Dockerfile tests.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath


@dataclass(frozen=True)
class Instruction:
    """One instruction: keyword (upper case), its flags (``--from=build``) and arguments."""

    keyword: str
    arguments: list[str]
    flags: dict[str, str] = field(default_factory=dict)
    line: int = 0


def _words(rest: str) -> list[str]:
    rest = rest.strip()
    if rest.startswith("["):
        words = json.loads(rest)
        assert isinstance(words, list)
        return [str(word) for word in words]
    return shlex.split(rest, comments=False)


def parse(text: str) -> list[Instruction]:
    """Instructions in order, with line continuations joined and comments dropped."""
    instructions: list[Instruction] = []
    pending = ""
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):
            continue  # comments may sit inside a continued instruction
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical = pending + line
        pending = ""
        keyword, _, rest = logical.partition(" ")
        flags: dict[str, str] = {}
        keyword = keyword.upper()
        if keyword in ("COPY", "ADD", "RUN", "FROM"):
            while rest.lstrip().startswith("--"):
                flag, _, rest = rest.lstrip().partition(" ")
                name, _, value = flag[2:].partition("=")
                flags[name] = value
        arguments = rest.strip() if keyword == "RUN" else rest
        words = [arguments] if keyword == "RUN" else _words(arguments)
        instructions.append(Instruction(keyword, words, flags, start))
    assert not pending, "the Dockerfile ends inside a continued line"
    return instructions


@dataclass(frozen=True)
class Copy:
    """A COPY from the build context: sources (context-relative) into ``destination``."""

    sources: list[str]
    destination: PurePosixPath
    line: int
    into_directory: bool
    """The destination ends in ``/``: files are copied into it under their own names."""


def final_stage(instructions: list[Instruction]) -> list[Instruction]:
    """The instructions of the last stage (the image that ships)."""
    starts = [i for i, ins in enumerate(instructions) if ins.keyword == "FROM"]
    return instructions[starts[-1] :]


def context_copies(instructions: list[Instruction]) -> list[Copy]:
    """COPYs from the build context (not ``--from`` a stage), destinations made absolute."""
    workdir = PurePosixPath("/")
    copies = []
    for ins in instructions:
        if ins.keyword == "FROM":
            workdir = PurePosixPath("/")
        elif ins.keyword == "WORKDIR":
            workdir = workdir / ins.arguments[0]
        elif ins.keyword == "COPY" and "from" not in ins.flags:
            *sources, destination = ins.arguments
            target = PurePosixPath(destination)
            if not target.is_absolute():
                target = workdir / target
            copies.append(Copy(sources, target, ins.line, destination.endswith("/")))
    return copies


def env(instructions: list[Instruction]) -> dict[str, str]:
    """ENV values set in these instructions (``KEY=VALUE`` form)."""
    values: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "ENV":
            for word in ins.arguments:
                key, sep, value = word.partition("=")
                assert sep, f"line {ins.line}: ENV {word!r} must be KEY=VALUE"
                values[key] = value
    return values


def last(instructions: list[Instruction], keyword: str) -> Instruction | None:
    """The last instruction with this keyword."""
    found = [ins for ins in instructions if ins.keyword == keyword]
    return found[-1] if found else None


def materialize(copies: list[Copy], context: Path, root: Path) -> None:
    """Lay out the files these COPYs put into an image under ``root``."""
    for copy in copies:
        for source in copy.sources:
            src = context / source
            dest = root / str(copy.destination).lstrip("/")
            if copy.into_directory and not src.is_dir():
                dest = dest / src.name  # a directory's contents go into the destination
            if src.is_dir():
                for file in src.rglob("*"):
                    if file.is_file() and "__pycache__" not in file.parts:
                        target = dest / file.relative_to(src)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        target.write_bytes(file.read_bytes())
            else:
                dest.parent.mkdir(parents=True, exist_ok=True)
                dest.write_bytes(src.read_bytes())
                dest.chmod(src.stat().st_mode)


_VARIABLE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")


def substitute(text: str, values: dict[str, str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by their values (unknown names become empty)."""
    return _VARIABLE.sub(lambda match: values.get(match.group(1) or match.group(2), ""), text)


def global_args(instructions: list[Instruction], build_args: dict[str, str]) -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults or the given values."""
    values: dict[str, str] = {}
    for ins in instructions:
        if ins.keyword == "FROM":
            break
        if ins.keyword == "ARG":
            name, has_default, default = ins.arguments[0].partition("=")
            if name in build_args:
                values[name] = build_args[name]
            elif has_default:
                values[name] = substitute(default, values)
    return values


def base_images(instructions: list[Instruction], build_args: dict[str, str]) -> list[str]:
    """The images the stages start FROM, in order, leaving out earlier stages' names."""
    values = global_args(instructions, build_args)
    stages: set[str] = set()
    images: list[str] = []
    for ins in instructions:
        if ins.keyword != "FROM":
            continue
        reference = substitute(ins.arguments[0], values)
        if reference not in stages and reference not in images:
            images.append(reference)
        if len(ins.arguments) == 3 and ins.arguments[1].upper() == "AS":
            stages.add(ins.arguments[2])
    return images
