"""The discrete-event loop on the real embedded cluster: arrivals, completions, cycles only when something
can change, evictions with and without checkpoints, node failures and drains, jobs that cannot run,
workload controllers, and determinism for a seed."""

from __future__ import annotations

from pathlib import Path

from kai.sim.timesim import Overrides, load_input, simulate
from tests.timesim.helpers import jobs, node, pod, queue, run, simulation

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "two-teams-over-time"
PERIOD = simulation(schedulePeriod="10s")


def test_jobs_arrive_run_and_finish_with_one_cycle_per_event() -> None:
    out = run(
        queue("team-a", 8),
        node("n1", 8),
        pod("p1", "team-a", 2, duration="1h"),
        pod("p2", "team-a", 2, duration="10m", arrival="30m"),
        PERIOD,
    )
    got = {k: (j["submitted"], j["started"], j["finished"]) for k, j in jobs(out).items()}
    assert got == {"default/pg-p1": (0.0, 0.0, 3600.0), "default/pg-p2": (1800.0, 1800.0, 2400.0)}
    # cycles at 0 (p1 binds), 1800 (p2 arrives and binds), 2400 and 3600 (completions); none between
    assert out.metrics["simulation"]["cycles"] == 4
    assert out.metrics["simulation"]["end"] == 3600.0
    assert out.cluster.store.count("Pod") == 0  # finished jobs are collected
    assert out.cluster.store.count("PodGroup") == 0


def test_queued_jobs_start_when_the_one_before_finishes() -> None:
    out = run(
        queue("team-a", 8),
        node("n1", 8),
        *(pod(f"j{i}", "team-a", 8, duration="1h") for i in range(3)),
        PERIOD,
    )
    waits = sorted(j["waitSeconds"] for j in out.metrics["jobs"])
    assert waits == [0.0, 3600.0, 7200.0]
    assert sorted(j["completionSeconds"] for j in out.metrics["jobs"]) == [3600.0, 7200.0, 10800.0]
    summary = out.metrics["summary"]
    assert summary["waitSeconds"]["p50"] == 3600.0
    assert summary["allocation"] == 1.0  # 8 of 8 GPUs for the whole 3 hours
    # 3 hours at a 10 s period would be 1081 cycles; idle waiting backs off to one cycle per 5 minutes
    assert out.metrics["simulation"]["cycles"] < 60
    assert summary["failedPlacements"]["Unschedulable"]["jobs"] == 2


def test_idle_recheck_zero_runs_a_cycle_every_period_while_work_waits() -> None:
    out = run(
        queue("team-a", 8),
        node("n1", 8),
        pod("big", "team-a", 16, duration="1h"),
        simulation(schedulePeriod="1m", idleRecheck="0s", duration="1h"),
    )
    assert out.metrics["simulation"]["cycles"] == 61  # 0, 1m, ..., 60m


def test_a_job_larger_than_the_cluster_is_reported_and_the_run_still_finishes() -> None:
    docs = (
        queue("team-a", 8),
        node("n1", 8),
        pod("big", "team-a", 16, duration="1h"),
        pod("ok", "team-a", 4, duration="1h"),
    )
    out = run(*docs, PERIOD)  # no horizon: the run ends when nothing can change any more
    summary = out.metrics["summary"]
    assert summary["cannotRun"] == [
        {
            "podGroup": "default/pg-big",
            "queue": "team-a",
            "reason": "pod big needs 16 GPUs; the largest node has 8 GPUs",
        }
    ]
    assert out.metrics["simulation"]["stalled"] is True
    assert summary["stuck"] == ["default/pg-big"]
    assert jobs(out)["default/pg-ok"]["finished"] == 3600.0
    assert out.metrics["simulation"]["end"] == 3600.0
    week = run(*docs, simulation(schedulePeriod="10s", duration="168h"))  # with a horizon: cheap to the end
    assert week.metrics["simulation"]["stalled"] is False
    assert week.metrics["simulation"]["end"] == 168 * 3600
    assert week.metrics["simulation"]["cycles"] < 168 * 12 + 40  # about one per idle recheck (5 min)


def test_a_gang_larger_than_the_cluster_is_reported() -> None:
    gang = [pod(f"g-{i}", "team-a", 8, duration="1h", pod_group_name="g") for i in range(3)]
    pg = (
        "apiVersion: scheduling.run.ai/v2alpha2\nkind: PodGroup\nmetadata: {name: g, namespace: default}\n"
        "spec: {minMember: 3, queue: team-a}\n"
    )
    out = run(queue("team-a", 16), node("n1", 8), node("n2", 8), pg, *gang, PERIOD)
    assert out.metrics["summary"]["cannotRun"][0]["reason"] == "the gang needs 24 GPUs at once; the cluster has 16"


def _reclaim(checkpoint: str | None):
    extra = {"checkpointInterval": checkpoint} if checkpoint else {}
    return run(
        queue("research", 8),
        queue("a", 4, "research"),
        queue("b", 4, "research"),
        node("n1", 8),
        pod("a1", "a", 4, duration="2h"),
        pod("a2", "a", 4, duration="2h"),
        pod("b1", "b", 4, duration="1h", arrival="1h"),
        simulation(schedulePeriod="10s", **extra),
    )


def test_a_reclaimed_job_restarts_from_scratch_without_checkpoints() -> None:
    out = _reclaim(None)
    j = jobs(out)
    # b1 arrives at 1h, a2 (the newer of a's jobs, a above its quota of 4) is reclaimed; its pod is gone
    # at the next cycle (1h + 10s), b1 binds then; a2 runs again when a1 finishes at 2h: 2h from scratch
    assert (j["default/pg-b1"]["started"], j["default/pg-b1"]["finished"]) == (3610.0, 7210.0)
    assert (j["default/pg-a2"]["evictions"], j["default/pg-a2"]["finished"]) == (1, 4 * 3600.0)
    assert j["default/pg-a2"]["lostGpuHours"] == round(4 * 3610 / 3600, 4)
    assert out.metrics["summary"]["evictions"]["byAction"] == {"reclaim": 1}
    (ev,) = out.metrics["evictions"]
    assert (ev["time"], ev["pod"], ev["queue"], ev["action"]) == (3600.0, "default/a2", "a", "reclaim")
    assert ev["reason"].startswith("Pod default/a2 was preempted by workload default/pg-b1.")


def test_a_reclaimed_job_resumes_from_its_last_checkpoint() -> None:
    out = _reclaim("30m")
    a2 = jobs(out)["default/pg-a2"]
    # 3610 s ran: checkpoints at 30m and 1h kept 1h; the rest (1h) runs from 2h: done at 3h
    assert a2["finished"] == 3 * 3600.0
    assert a2["lostGpuHours"] == round(4 * 10 / 3600, 4)
    assert out.metrics["summary"]["utilization"] > _reclaim(None).metrics["summary"]["utilization"]


def test_a_failed_node_takes_its_pods_and_comes_back_empty_when_repaired() -> None:
    out = run(
        queue("team-a", 8),
        node("node-a", 4),
        node("node-b", 4),
        pod("j1", "team-a", 4, duration="2h"),
        pod("j2", "team-a", 4, duration="2h"),
        simulation(
            schedulePeriod="10s",
            nodeEvents=[
                {"at": "30m", "node": "node-b", "action": "fail"},
                {"at": "1h", "node": "node-b", "action": "repair"},
            ],
        ),
    )
    finished = sorted(j["finished"] for j in out.metrics["jobs"])
    assert finished == [7200.0, 3600.0 + 7200.0]  # the lost one restarts when node-b is back, from scratch
    events = [(e["time"], e["node"], e["action"], e["pods"]) for e in out.metrics["nodeEvents"]]
    assert events == [(1800.0, "node-b", "fail", 1), (3600.0, "node-b", "repair", 0)]
    ts = out.metrics["timeseries"]
    capacity = dict(zip(ts["time"], ts["capacityGpu"], strict=True))
    assert capacity[0.0] == 8.0 and capacity[1800.0] == 4.0 and capacity[3600.0] == 8.0
    assert out.metrics["summary"]["lostGpuHours"] == 2.0  # 4 GPUs x 30 minutes


def test_a_drained_node_is_cordoned_and_its_pods_move() -> None:
    out = run(
        queue("team-a", 8),
        node("node-a", 4),
        node("node-b", 4),
        pod("j1", "team-a", 4, duration="2h"),
        simulation(schedulePeriod="10s", nodeEvents=[{"at": "30m", "node": "node-a", "action": "drain"}]),
    )
    (j1,) = out.metrics["jobs"]
    # j1 binds to node-a (ties go to the lower name); drained at 30m, gone at 30m10s, placed on node-b then
    assert j1["finished"] == 1810.0 + 7200.0
    assert out.metrics["nodeEvents"][0]["pods"] == 1
    last_map = out.metrics["occupancy"]
    assert last_map == []  # no horizon, no instants asked
    assert out.cluster.store.get("Node", ("", "node-a")).unschedulable is True


def test_a_workload_controller_job_runs_its_pods_one_after_the_other_and_is_collected() -> None:
    job = """
apiVersion: batch/v1
kind: Job
metadata:
  name: train
  namespace: default
  labels: {kai.scheduler/queue: team-a}
  annotations: {kai.sim/arrival: 1h}
spec:
  completions: 2
  parallelism: 1
  template:
    metadata:
      annotations: {kai.sim/duration: 10m}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        resources: {requests: {cpu: "1", nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 1}}
"""
    out = run(queue("team-a", 8), node("n1", 8), job, PERIOD)
    (rec,) = out.metrics["jobs"]
    assert (rec["submitted"], rec["started"], rec["finished"]) == (3600.0, 3600.0, 3600.0 + 1200.0)
    assert out.cluster.store.count("Job") == 0 and out.cluster.store.count("Pod") == 0


def test_occupancy_maps_are_taken_at_the_chosen_instants() -> None:
    out = run(
        queue("team-a", 8),
        node("n1", 4),
        pod("p1", "team-a", 3, duration="1h"),
        simulation(schedulePeriod="10s", duration="2h", occupancyAt=["30m", "90m"]),
    )
    maps = out.metrics["occupancy"]
    assert [m["time"] for m in maps] == [1800.0, 5400.0]
    assert maps[0]["nodes"] == [{"name": "n1", "gpus": 4, "schedulable": True, "cells": ["team-a"] * 3 + [None]}]
    assert maps[1]["nodes"][0]["cells"] == [None] * 4


def _example(seed: int | None, until: float = 6 * 3600) -> dict:
    texts = [(str(p), p.read_text()) for p in sorted(EXAMPLE.glob("*.yaml"))]
    objects, _, spec = load_input(texts)
    return simulate(objects, spec, Overrides(until=until, seed=seed)).metrics


def test_a_seed_fixes_the_whole_run() -> None:
    first, again, other = _example(None), _example(None), _example(8)
    assert first == again
    assert first["jobs"] != other["jobs"]
    assert first["simulation"]["seed"] == 7 and other["simulation"]["seed"] == 8
    # the generators made the jobs the document asks for, in their queues and namespaces
    queues = {j["queue"] for j in first["jobs"]}
    assert queues == {"team-a", "team-b"}
    assert all(j["podGroup"].startswith(("team-a/a-train-", "team-b/b-")) for j in first["jobs"])


def test_a_pod_given_running_counts_as_started_and_finishes_its_duration_from_the_start() -> None:
    running = (
        pod("r", "team-a", 4, duration="30m").replace("spec:\n", "spec:\n  nodeName: n1\n", 1)
        + "status: {phase: Running}\n"
    )
    out = run(queue("team-a", 8), node("n1", 8), running, PERIOD)
    (rec,) = out.metrics["jobs"]
    assert (rec["started"], rec["finished"], rec["waitSeconds"]) == (0.0, 1800.0, 0.0)


def _shared(name: str, fraction: str, duration: str) -> str:
    return pod(name, "team-a", 0, duration=duration, gpu_fraction=fraction)


def test_shared_gpu_pods_count_their_fraction_and_share_one_cell_of_the_map() -> None:
    out = run(
        queue("team-a", 8),
        node("n1", 2),
        _shared("s1", "0.5", "1h"),
        _shared("s2", "0.5", "2h"),
        simulation(schedulePeriod="10s", duration="3h", occupancyAt=["30m"]),
    )
    by = jobs(out)
    assert (by["default/pg-s1"]["gpus"], by["default/pg-s1"]["finished"]) == (0.5, 3600.0)
    assert by["default/pg-s2"]["finished"] == 7200.0
    (snapshot,) = out.metrics["occupancy"]
    assert snapshot["nodes"][0]["cells"] == ["team-a", None]  # both halves on one GPU (gpupack-like binpack)
    ts = out.metrics["timeseries"]
    assert ts["allocatedGpu"][0] == 1.0
    assert out.metrics["summary"]["fragmentation"]["shapes"][0]["gpus"] == 0.5
