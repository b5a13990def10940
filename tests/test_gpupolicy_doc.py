"""docs/trace.md shows the real `kai sim` output of examples/gpu-policy (placementStrategy.gpu: fragmentation)."""

from __future__ import annotations

import pytest

from tests.docblocks import REPO, doc_block, sim_output

EXAMPLE = "examples/gpu-policy/cluster.yaml"


def test_doc_block_is_the_example_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    out = sim_output(EXAMPLE)
    assert out == doc_block("docs/trace.md", EXAMPLE), f"stale example block: paste `kai sim {EXAMPLE}`"
    assert any("cpu-job" in line and "node-b" in line for line in out)  # the CPU-only pod spares node-a's GPUs
