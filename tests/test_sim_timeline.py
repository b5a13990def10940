"""kai sim --at: manifests applied before given cycles, and the per-cycle record (-o json ``timeline``).

The walkthrough end to end (examples/ray-kai, unchanged): the RayCluster's head and worker are placed as
one gang; the RayService arrives, the training gang is evicted as a whole and the inference gang takes the
GPU; the training gang then waits, with a reason, cycle after cycle.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from kai.cli import main
from tests.conftest import NOW, run_sim

SimFn = Callable[..., tuple[int, dict[str, Any] | None, str]]
RAY_KAI = Path(__file__).parent.parent / "examples" / "ray-kai"
QUEUES, TRAIN, SERVE, NODE = (
    str(RAY_KAI / f)
    for f in ("00-queues.yaml", "01-raycluster-train.yaml", "02-rayservice-inference.yaml", "node-a10g.yaml")
)
WALKTHROUGH = [QUEUES, NODE, "--at", f"1:{TRAIN}", "--at", f"2:{SERVE}", "--cycles", "4"]
TRAIN_PG, SERVE_PG = "pg-raycluster-sample", "pg-ray-kai-scheduler-serve-llm"


def statuses(record: dict[str, Any]) -> dict[str, set[str]]:
    """PodGroup → the statuses of its pods in one cycle's record."""
    out: dict[str, set[str]] = {}
    for p in record["pods"]:
        out.setdefault(p["podGroup"], set()).add(p["status"])
    return out


def decided(record: dict[str, Any], kind: str) -> dict[str, set[str]]:
    """PodGroup → pods of one decision type in a cycle."""
    out: dict[str, set[str]] = {}
    for d in record["decisions"]:
        if d["type"] == kind:
            out.setdefault(d["podGroup"], set()).add(d["pod"])
    return out


@pytest.fixture(scope="module")
def walkthrough() -> dict[str, Any]:
    code, doc, err = run_sim(WALKTHROUGH)
    assert code == 0, err
    assert doc is not None
    return doc


def test_timeline_records_every_cycle_with_what_was_applied(walkthrough: dict[str, Any]) -> None:
    timeline = walkthrough["timeline"]
    assert [r["cycle"] for r in timeline] == [1, 2, 3, 4]
    assert [r["applied"] for r in timeline] == [[QUEUES, NODE, TRAIN], [SERVE], [], []]
    assert [r["time"] for r in timeline] == [
        "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:01Z",
        "2026-01-01T00:00:02Z",
        "2026-01-01T00:00:03Z",
    ]


def test_walkthrough_cycle1_head_and_worker_are_placed_together(walkthrough: dict[str, Any]) -> None:
    first = walkthrough["timeline"][0]
    binds = decided(first, "bind")
    assert list(binds) == [TRAIN_PG]
    assert {p.rsplit("-", 1)[0] for p in binds[TRAIN_PG]} == {
        "default/raycluster-sample-head",
        "default/raycluster-sample-worker-worker",
    }
    assert {d["node"] for d in first["decisions"]} == {"gpu-node-a10g"}
    assert statuses(first) == {TRAIN_PG: {"Binding"}}
    assert first["waiting"] == []


def test_walkthrough_cycle2_training_gang_is_evicted_whole_for_inference(walkthrough: dict[str, Any]) -> None:
    first, second = walkthrough["timeline"][:2]
    evicted = decided(second, "evict")
    assert evicted == decided(first, "bind"), "both training pods, the ones bound in cycle 1, and nothing else"
    evictions = [d for d in second["decisions"] if d["type"] == "evict"]
    assert {d["action"] for d in evictions} == {"preempt"}
    assert all(f"default/{SERVE_PG} (priority 125 over 50, queue team-a)" in d["reason"] for d in evictions)
    assert list(decided(second, "pipeline")) == [SERVE_PG]
    assert len(decided(second, "pipeline")[SERVE_PG]) == 2
    assert decided(second, "bind") == {}
    assert statuses(second) == {TRAIN_PG: {"Releasing"}, SERVE_PG: {"Pipelined"}}


def test_walkthrough_training_waits_with_a_reason_while_inference_runs(walkthrough: dict[str, Any]) -> None:
    third, fourth = walkthrough["timeline"][2:]
    assert list(decided(third, "bind")) == [SERVE_PG]
    assert statuses(third) == {SERVE_PG: {"Binding"}, TRAIN_PG: {"Pending"}}
    assert statuses(fourth) == {SERVE_PG: {"Running"}, TRAIN_PG: {"Pending"}}
    assert fourth["decisions"] == []
    for record in (third, fourth):
        (wait,) = record["waiting"]
        assert (wait["podGroup"], wait["reason"]) == (f"default/{TRAIN_PG}", "Unschedulable")
        assert "1 pods while 2 are required for gang scheduling" in wait["message"]
        assert "1 node lacks free GPUs" in wait["message"]
    # the controller recreated the training pods under new names, in the same PodGroup
    old = {p["name"] for p in walkthrough["timeline"][0]["pods"]}
    new = {p["name"] for p in fourth["pods"] if p["podGroup"] == TRAIN_PG}
    assert len(new) == 2 and not old & new


def test_the_last_cycle_is_the_document_as_without_a_timeline(walkthrough: dict[str, Any]) -> None:
    last = walkthrough["timeline"][-1]
    assert walkthrough["cycles"] == 4
    assert [(p["name"], p["status"]) for p in walkthrough["pods"]] == [(p["name"], p["status"]) for p in last["pods"]]
    (train,) = [g for g in walkthrough["podGroups"] if g["name"] == TRAIN_PG]
    assert train["conditions"][0]["message"] == last["waiting"][0]["message"]
    assert [e["cycle"] for e in walkthrough["events"] if e["reason"] == "Evict"] == [2, 2]


def test_single_shot_output_has_no_timeline(sim: SimFn) -> None:
    code, doc, err = sim([QUEUES, NODE, TRAIN])
    assert code == 0, err
    assert doc is not None
    assert "timeline" not in doc


def test_at_cycle_one_is_the_same_as_giving_the_files(sim: SimFn) -> None:
    _, plain, _ = sim([QUEUES, NODE, TRAIN, SERVE, "--cycles", "2"])
    _, stepped, _ = sim([QUEUES, NODE, "--at", f"1:{TRAIN},{SERVE}", "--cycles", "2"])
    assert plain is not None and stepped is not None
    for key in ("pods", "podGroups", "queues"):
        assert plain[key] == stepped[key], key


def test_two_values_for_one_cycle_apply_in_the_order_given(sim: SimFn) -> None:
    code, doc, err = sim([QUEUES, "--at", f"2:{NODE}", "--at", f"2:{TRAIN}", "--cycles", "2"])
    assert code == 0, err
    assert doc is not None
    first, second = doc["timeline"]
    assert statuses(first) == {}
    assert second["applied"] == [NODE, TRAIN]
    assert statuses(second) == {TRAIN_PG: {"Binding"}}


def test_a_node_arriving_later_lets_the_waiting_gang_start(sim: SimFn) -> None:
    code, doc, err = sim([QUEUES, TRAIN, "--at", f"3:{NODE}", "--cycles", "3"])
    assert code == 0, err
    assert doc is not None
    one, two, three = doc["timeline"]
    assert statuses(one) == statuses(two) == {TRAIN_PG: {"Pending"}}
    assert [w["reason"] for w in two["waiting"]] == ["Unschedulable"]
    assert statuses(three) == {TRAIN_PG: {"Binding"}}
    assert three["waiting"] == []


BAD_STEPS = [
    pytest.param(["--at", f"5:{TRAIN}", "--cycles", "4"], ["--at", "cycle 5 is beyond the last cycle (4)"], id="late"),
    pytest.param(["--at", f"0:{TRAIN}"], ["--at", "cycle '0' is not a cycle number"], id="zero"),
    pytest.param(["--at", TRAIN], ["--at", "is not N:FILE[,FILE...]"], id="no_cycle"),
    pytest.param(["--at", "2:"], ["--at", "'2:' is not N:FILE[,FILE...]"], id="no_file"),
    pytest.param(["--at", f"two:{TRAIN}"], ["--at", "is not N:FILE[,FILE...]"], id="cycle_not_a_number"),
    pytest.param(["--at", "1:missing.yaml"], ["missing.yaml", "cannot read"], id="missing_file"),
]


@pytest.mark.parametrize(("args", "needles"), BAD_STEPS)
def test_bad_steps_are_errors_before_anything_runs(sim: SimFn, args: list[str], needles: list[str]) -> None:
    code, doc, err = sim([QUEUES, NODE, *args])
    assert (code, doc) == (2, None)
    for needle in needles:
        assert needle in err, f"{needle!r} not in {err!r}"


def test_a_scheduling_shard_cannot_arrive_later(sim: SimFn, tmp_path: Path) -> None:
    shard = tmp_path / "shard.yaml"
    shard.write_text("apiVersion: kai.scheduler/v1\nkind: SchedulingShard\nmetadata: {name: default}\nspec: {}\n")
    code, _, err = sim([QUEUES, "--at", f"2:{shard}", "--cycles", "2"])
    assert code == 2
    assert "shard.yaml" in err and "SchedulingShard/default" in err and "arrives at cycle 2" in err


def test_a_late_arrival_with_a_bad_reference_names_file_field_and_cycle(sim: SimFn, tmp_path: Path) -> None:
    bad = tmp_path / "late.yaml"
    bad.write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: {kai.scheduler/queue: nope}}\n"
        "spec: {containers: [{name: c}]}\n"
    )
    code, doc, err = sim([QUEUES, NODE, "--at", f"2:{bad}", "--cycles", "3"])
    assert (code, doc) == (2, None)
    for needle in ("late.yaml", "Pod/default/p", "kai.scheduler/queue", "'nope' does not exist", "at cycle 2"):
        assert needle in err, f"{needle!r} not in {err!r}"


def test_table_output_shows_each_cycle_like_kubectl_with_one_line_per_decision() -> None:
    result = CliRunner().invoke(main, ["sim", *WALKTHROUGH, "--now", NOW])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    cycles = out.split("\n\n")
    assert [c.splitlines()[0] for c in cycles] == [
        "Cycle 1 (t+0s)",
        "Cycle 2 (t+1s)",
        "Cycle 3 (t+2s)",
        "Cycle 4 (t+3s)",
    ]
    assert cycles[0].splitlines()[2].split() == ["NAME", "READY", "STATUS", "AGE", "NODE", "NOMINATED", "NODE"]
    evicts = [line for line in cycles[1].splitlines() if line.startswith("    evict ")]
    assert len(evicts) == 2 and all(" (preempt): Pod" in line for line in evicts)
    assert sum(line.startswith("    pipeline ") for line in cycles[1].splitlines()) == 2
    assert "Terminating" in cycles[1] and "ContainerCreating" in cycles[2]
    assert cycles[3].count("    wait  pg-raycluster-sample Unschedulable:") == 1
