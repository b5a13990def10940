"""docs/topology.md shows the real `kai sim` output of examples/topology, and the example tells its story."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kai.cli import main
from tests.conftest import run_sim

REPO = Path(__file__).parent.parent
EXAMPLE = "examples/topology/cluster.yaml"
DOC = "docs/topology.md"


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


def test_example_keeps_the_gang_in_one_rack() -> None:
    code, doc, err = run_sim([str(REPO / EXAMPLE)])
    assert code == 0, err
    assert doc is not None
    nodes = {p["name"]: p["node"] for p in doc["pods"] if p["name"].startswith("llm-pretrain-")}
    assert len(nodes) == 4 and {n[:2] for n in nodes.values()} == {"a2"}  # rack-a2's nodes only
    finetune = [p for p in doc["pods"] if p["name"].startswith("llm-finetune-")]
    assert len(finetune) == 3 and all(p["status"] == "Pending" for p in finetune)
    (pg,) = [g for g in doc["podGroups"] if g["name"] == "pg-llm-finetune"]
    assert "no rack of topology cluster-topology has 24 free GPUs; the best has 16" in pg["conditions"][0]["message"]
