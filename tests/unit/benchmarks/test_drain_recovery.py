"""benchmarks/drain_recovery.py reads the lines the real-node tests print per trial."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from benchmarks.drain_recovery import DRAIN, EVICTION, main

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(("measured", "figures"), [(DRAIN, 3), (EVICTION, 2)])
def test_each_pattern_reads_the_line_its_test_prints(
    measured: tuple[str, str, re.Pattern[str], tuple[str, ...]], figures: int
) -> None:
    test, variable, line, labels = measured
    source = (ROOT / test).read_text(encoding="utf-8")
    assert variable in source
    # The test's print call, its f-string's fields replaced by numbers.
    printed = re.search(r'print\(\s*(f".*?)\s*\)\n', source, re.DOTALL)
    assert printed is not None, test
    text = "".join(re.findall(r'f?"(.*?)"', printed.group(1)))
    text = re.sub(r"\{[^}]*\}", "2", text)
    (found,) = line.findall(text)
    assert len(found) == figures == len(labels), (text, found)


def test_nothing_to_measure_is_refused() -> None:
    with pytest.raises(SystemExit, match="nothing to measure"):
        main(["--trials", "0"])
    with pytest.raises(SystemExit, match=r"--evictions \(-1\) must be at least 0"):
        main(["--evictions", "-1"])
