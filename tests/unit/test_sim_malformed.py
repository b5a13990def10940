"""Every malformed input to ``kai sim`` is an error naming the file, the object and the field, with exit 2.

The cases are data (tests/data/malformed/cases.yaml, 140-odd of them): bad quantities, numbers that are NaN,
infinite or out of range, selectors, annotations (GPU sharing included, as the sim contract promises), broken
references, over-committed nodes, duplicate objects, workloads asking for millions of pods, YAML alias bombs
and recursive or deeply nested documents. Each runs beside a valid base cluster through the real command,
bounded in time: no traceback, no hang, nothing on stdout, and stderr names what is wrong.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from kai.cli import main
from tests.unit.test_bad_input import BASE

CASES = yaml.safe_load((Path(__file__).parents[1] / "data" / "malformed" / "cases.yaml").read_text())
SECONDS_PER_CASE = 20.0  # generous on a loaded 2-core machine; a hang (an alias bomb walked) takes minutes


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_malformed_input_is_refused_with_its_place(case: dict, tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    bad = tmp_path / "case.yaml"
    bad.write_text(case["text"])
    start = time.monotonic()
    result = CliRunner().invoke(main, ["sim", str(base), str(bad), "--now", "2026-01-01T00:00:00Z", "-o", "json"])
    elapsed = time.monotonic() - start
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code == 2, f"exit {result.exit_code}: {result.stdout[:300]}"
    assert result.stdout == ""
    assert "case.yaml" in result.stderr, result.stderr
    for needle in case["needles"]:
        assert needle in result.stderr, f"{needle!r} not in {result.stderr!r}"
    assert elapsed < SECONDS_PER_CASE


def test_the_cases_are_many_and_distinct() -> None:
    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)) >= 120
