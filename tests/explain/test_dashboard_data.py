"""The dashboard's document from a dry run on files: the same reasons as ``kai explain``, the GPU map, and
a history that keeps one queue sample per few seconds but every eviction and cycle."""

from __future__ import annotations

from pathlib import Path

from kai.dashboard import History, overview
from kai.explain import explain, run
from kai.explain.command import state_from_files

DATA = Path(__file__).parent / "data"


def test_the_document_says_what_kai_explain_says() -> None:
    state = state_from_files((str(DATA / "ending.yaml"),), (), None, "2026-01-01T12:00:00Z")
    history = History()
    dry = run(state)
    for t in (0.0, 1.0, 6.0):  # three cycles seen: two queue samples (5 s apart at least), three cycle rows
        history.record(state.now + t, dry.result, {"engine": dry.seconds}, real=False)
    doc = overview(dry, history, now=state.now, source="test")
    assert [(q["queue"], q["depth"]) for q in doc["queues"]] == [("research", 0), ("team-a", 1)]
    second = next(p for p in doc["pending"] if p["podGroup"] == "ml/pg-second")
    told = explain(state, "podgroup", "ml/pg-second", whatif=False)
    assert told["reason"]["message"].startswith(second["reason"]) and second["code"] == told["reason"]["code"]
    (node,) = doc["gpuMap"]["nodes"]
    assert node["name"] == "node-0" and [[h["pod"] for h in cell] for cell in node["gpus"]] == [["ml/first"]] * 4
    assert len(doc["history"]) == 2 and len(doc["cycles"]) == 3 and doc["cycles"][0]["real"] is False
    assert doc["history"][0]["queues"]["team-a"] == [4.0, 4.0, 10.0]  # allocated, fair share, requested GPUs
