"""The dashboard's document from a dry run on files: the same reasons as ``kai explain``, the GPU map, and
a history that keeps one queue sample per few seconds but every eviction and cycle."""

from __future__ import annotations

from pathlib import Path

from kai.api import constants as C
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


def test_the_gpu_map_shows_every_pod_that_holds_a_gpu() -> None:
    """A GPU is free on the map only if no pod holds it: kai's tasks, another scheduler's pod, and a pod of
    kai's whose PodGroup the Store does not have yet (on a cluster: bound by a Binding that outran its
    PodGroup's create) all hold theirs; a GPU reservation pod is drawn as the shared pods of its GPU."""
    from kai.explain._nodes import NO_QUEUE, gpu_map
    from tests.unit.builders import node, pod, podgroup, queue, snapshot_of

    reservation = pod("gpu-reservation-x", "", gpu=1, node_name="n0", labels={C.LABEL_APP: C.RESERVATION_APP})
    reservation["metadata"]["namespace"] = C.RESERVATION_NAMESPACE
    reservation["metadata"]["annotations"] = {}
    snap = snapshot_of(
        [
            node("n0", gpu=8),
            queue("team"),
            podgroup("pg-train", "team"),
            pod("train", "pg-train", gpu=2, node_name="n0", labels={C.LABEL_QUEUE: "team"}),
            pod("half", "pg-train", fraction="0.5", node_name="n0", gpu_groups=("g1",)),
            pod("lost", "pg-not-there-yet", gpu=1, node_name="n0", labels={C.LABEL_QUEUE: "team"}),
            pod("web", "", gpu=2, node_name="n0", scheduler="default-scheduler"),
            reservation,
        ],
        bare_pods_return=False,
    )
    assert {t.name for t in snap.tasks} == {"train", "half"}  # the others only take capacity
    (row,) = gpu_map(snap)["nodes"]
    held = [[(h["pod"], h["queue"], h["share"]) for h in cell] for cell in row["gpus"]]
    assert sorted(held) == sorted(
        [
            [("default/half", "team", 0.5)],
            [("default/lost", "team", 1.0)],
            [("default/train", "team", 1.0)],
            [("default/train", "team", 1.0)],
            [("default/web", NO_QUEUE, 1.0)],
            [("default/web", NO_QUEUE, 1.0)],
            [],
            [],
        ]
    )
