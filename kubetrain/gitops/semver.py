"""Semantic versions of stacks: parse, compare, bump."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

_SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$")


class Bump(StrEnum):
    PATCH = "patch"
    MINOR = "minor"
    MAJOR = "major"


@dataclass(frozen=True, order=True)
class Version:
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _SEMVER.match(text)
        if not match:
            raise ValueError(f"version ({text!r}) must be MAJOR.MINOR.PATCH, e.g. 1.4.0")
        return cls(int(match[1]), int(match[2]), int(match[3]))

    def bump(self, part: Bump) -> Version:
        if part is Bump.MAJOR:
            return Version(self.major + 1, 0, 0)
        if part is Bump.MINOR:
            return Version(self.major, self.minor + 1, 0)
        return Version(self.major, self.minor, self.patch + 1)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}"
