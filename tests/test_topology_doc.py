"""docs/topology.md shows the real `kai sim` output of examples/topology, and the example tells its story."""

from __future__ import annotations

import pytest

from tests.conftest import run_sim
from tests.docblocks import REPO, doc_block, sim_output

EXAMPLE = "examples/topology/cluster.yaml"
DOC = "docs/topology.md"


@pytest.mark.parametrize("doc", [DOC, "README.md"])
def test_doc_block_is_the_example_output(monkeypatch: pytest.MonkeyPatch, doc: str) -> None:
    monkeypatch.chdir(REPO)
    assert sim_output(EXAMPLE) == doc_block(doc, EXAMPLE), f"{doc}: stale example block: paste `kai sim {EXAMPLE}`"


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
