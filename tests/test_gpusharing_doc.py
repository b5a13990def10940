"""docs/gpu-sharing.md shows the real `kai sim` output of examples/gpu-sharing."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kai.cli import main

REPO = Path(__file__).parent.parent
EXAMPLE = "examples/gpu-sharing/cluster.yaml"


def _doc_block() -> list[str]:
    text = (REPO / "docs" / "gpu-sharing.md").read_text()
    start = text.index(f"$ kai sim {EXAMPLE}\n")
    block = text[start:].split("```", 1)[0]
    return [line.rstrip() for line in block.rstrip("\n").split("\n")[1:]]


def test_doc_block_is_the_example_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["sim", EXAMPLE])
    assert result.exit_code == 0, result.stderr
    got = [line.rstrip() for line in result.stdout.rstrip("\n").split("\n")]
    assert got == _doc_block(), f"docs/gpu-sharing.md's example block is stale: paste `kai sim {EXAMPLE}`"
