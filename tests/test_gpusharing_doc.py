"""docs/gpu-sharing.md shows the real `kai sim` output of examples/gpu-sharing."""

from __future__ import annotations

import pytest

from tests.docblocks import REPO, doc_block, sim_output

EXAMPLE = "examples/gpu-sharing/cluster.yaml"
DOC = "docs/gpu-sharing.md"


@pytest.mark.parametrize("doc", [DOC, "README.md"])
def test_doc_block_is_the_example_output(monkeypatch: pytest.MonkeyPatch, doc: str) -> None:
    monkeypatch.chdir(REPO)
    assert sim_output(EXAMPLE) == doc_block(doc, EXAMPLE), f"{doc}: stale example block: paste `kai sim {EXAMPLE}`"
