"""docs/gpu-sharing.md shows the real `kai sim` output of examples/gpu-sharing."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kai.cli import main

REPO = Path(__file__).parent.parent
EXAMPLE = "examples/gpu-sharing/cluster.yaml"
DOC = "docs/gpu-sharing.md"


def _doc_block(doc: str) -> list[str]:
    text = (REPO / doc).read_text()
    start = text.index(f"$ kai sim {EXAMPLE}\n")
    block = text[start:].split("```", 1)[0]
    return [line.rstrip() for line in block.rstrip("\n").split("\n")[1:]]


@pytest.mark.parametrize("doc", [DOC, "README.md"])
def test_doc_block_is_the_example_output(monkeypatch: pytest.MonkeyPatch, doc: str) -> None:
    monkeypatch.chdir(REPO)
    result = CliRunner().invoke(main, ["sim", EXAMPLE])
    assert result.exit_code == 0, result.stderr
    got = [line.rstrip() for line in result.stdout.rstrip("\n").split("\n")]
    assert got == _doc_block(doc), f"{doc}: the example block is stale: paste `kai sim {EXAMPLE}`"
