"""kubetrain's one quantity parser: the same numbers as the Kubernetes client's
``parse_quantity`` on every string the API server accepts, and a clear refusal of what it
refuses (which the client lets through)."""

from __future__ import annotations

import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kubernetes.utils.quantity import parse_quantity

from kubetrain.api.base import QUANTITY_PATTERN
from kubetrain.api.quantity import MULTIPLIERS, amount

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("500m", Decimal("0.5")),
        ("16Gi", Decimal(16 * 2**30)),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1E", Decimal(10**18)),
        ("2.0", Decimal(2)),
        (".5", Decimal("0.5")),
        ("-1k", Decimal(-1000)),
        ("+3", Decimal(3)),
        ("100n", Decimal("1e-7")),
        (8, Decimal(8)),
        (2.0, Decimal(2)),
    ],
)
def test_amount(value: object, expected: Decimal) -> None:
    assert amount(value) == expected


@pytest.mark.parametrize("value", ["1K", "NaN", "Infinity", "", " 1", "1.5.5", "1ki", "1e", "5Gb"])
def test_refuses_what_the_api_server_refuses(value: str) -> None:
    assert not re.fullmatch(QUANTITY_PATTERN, value)
    with pytest.raises(ValueError, match=re.escape(f"{value!r} is not a quantity: expected")):
        amount(value)


@pytest.mark.parametrize("value", [True, float("inf"), float("nan")])
def test_refuses_what_is_not_a_number(value: object) -> None:
    with pytest.raises(ValueError, match="is not a quantity"):
        amount(value)


_DIGITS = st.text("0123456789", min_size=1, max_size=6)
_NUMBERS = st.one_of(
    _DIGITS,
    st.builds(lambda a, b: f"{a}.{b}", _DIGITS, st.text("0123456789", max_size=4)),
    st.builds(lambda b: f".{b}", _DIGITS),
)
_SUFFIXES = st.one_of(
    st.sampled_from(sorted(MULTIPLIERS)),
    st.builds(lambda sign, e: f"e{sign}{e}", st.sampled_from(["", "+", "-"]), _DIGITS),
)


@given(st.sampled_from(["", "+", "-"]), _NUMBERS, _SUFFIXES)
def test_agrees_with_the_kubernetes_client(sign: str, number: str, suffix: str) -> None:
    text = f"{sign}{number}{suffix}"
    assert re.fullmatch(QUANTITY_PATTERN, text)
    assert amount(text) == Decimal(str(parse_quantity(text)))  # type: ignore[no-untyped-call]


def test_synth_does_not_import_the_kubernetes_client(tmp_path: Path) -> None:
    # `kubetrain synth` (every construct, a whole stack) runs without the client package,
    # whose import alone costs about 0.3 s of CPU per synth.
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['kubetrain', 'synth', 'local', '--out', {str(tmp_path)!r}]\n"
        "try:\n"
        "    runpy.run_module('kubetrain.cli', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=REPO
    )
    assert (tmp_path / "local").is_dir()
    assert done.stdout.splitlines()[-1] == "[]"
