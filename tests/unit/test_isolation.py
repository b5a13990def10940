"""One job's failure costs only that job: ``Session.drop_job`` and the guards in every action.

The engine never raises for its input (edge validation keeps bad objects out), but a bug that one job's
shape triggers must not stop the cycle for everyone (issue 14). These tests *inject* such a bug: a function
the action calls is wrapped so that it raises for one named job only, as an internal inconsistency would.
Then: the other jobs are scheduled exactly as without that job, everything the failing attempt changed is
undone (committed or not), the job gets a Warning event and a condition, and ``CycleResult.job_errors``
names it. The clusters are real manifests through the embedded cluster; nothing else is replaced.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from kai.api.manifests import load_manifests
from kai.scheduler import cycle as cycle_module
from kai.scheduler.actions import allocate as allocate_module
from kai.scheduler.actions import stalegang as stalegang_module
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import SCHEDULING_ERROR, UNSCHEDULABLE_CONDITION, run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.plugins import proportion as proportion_module
from kai.sim.cluster import EmbeddedCluster
from tests.unit.test_statement import NOW, node, pod, podgroup, queue


def cluster(docs: list[dict[str, Any]]) -> EmbeddedCluster:
    objects, _ = load_manifests([("test.yaml", yaml.safe_dump_all(docs))])
    c = EmbeddedCluster(now=NOW)
    c.apply(objects)
    return c


def two_jobs() -> list[dict[str, Any]]:
    """node0 (4 GPUs); queue team; job good (2 x 1 GPU, gang) and job bad (2 x 1 GPU, gang), both pending."""
    docs = [node("node0", gpu=4), queue("dept"), queue("team", "dept")]
    for name in ("bad", "good"):
        docs.append(podgroup(name, "team", min_member=2))
        docs += [pod(f"{name}-{i}", name) for i in range(2)]
    return docs


def raising_for(job_name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """*func*, except that it raises for the job named *job_name* (the injected bug)."""

    def wrapped(ssn: Any, *args: Any, **kwargs: Any) -> Any:
        for a in args:
            job = a if hasattr(a, "podgroup") else None
            tasks = a if isinstance(a, list) else None
            if job is not None and job.name == job_name:
                raise RuntimeError(f"injected fault for {job_name}")
            if tasks and hasattr(tasks[0], "job") and ssn.snap.jobs[tasks[0].job].name == job_name:
                # the fault comes after the first task was placed: the undo must take that back too
                result = func(ssn, *args, **kwargs)
                raise RuntimeError(f"injected fault for {job_name} after {result}")
        return func(ssn, *args, **kwargs)

    return wrapped


def bound(result: CycleResult) -> set[str]:
    return {b.pod.name for b in result.binds} | {p.pod.name for p in result.pipelines}


def test_a_job_whose_allocate_raises_is_left_out_and_the_rest_scheduled(monkeypatch: pytest.MonkeyPatch) -> None:
    c = cluster(two_jobs())
    monkeypatch.setattr(allocate_module, "_place", raising_for("bad", allocate_module._place))
    result = run_cycle(c.snapshot(), SchedulerConf(actions=("allocate",)))
    assert bound(result) == {"good-0", "good-1"}
    assert [(e.podgroup, e.action) for e in result.job_errors] == [("default/bad", "allocate")]
    assert "injected fault for bad" in result.job_errors[0].message
    events = [e for e in result.events if e.reason == SCHEDULING_ERROR]
    assert [e.object for e in events] == ["PodGroup/default/bad"]
    (status,) = [s for s in result.podgroups if s.name == "bad"]
    assert [(c.type, c.reason) for c in status.conditions] == [(UNSCHEDULABLE_CONDITION, SCHEDULING_ERROR)]


def test_the_failed_attempt_is_undone_even_what_it_placed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault strikes after bad's pods were placed in its Statement: the GPUs they took are free again,
    so a third job that needs them gets them in the same cycle."""
    docs = two_jobs()
    docs.append(podgroup("third", "team", min_member=2))
    docs += [pod(f"third-{i}", "third") for i in range(2)]
    c = cluster(docs)
    monkeypatch.setattr(allocate_module, "_place", raising_for("bad", allocate_module._place))
    result = run_cycle(c.snapshot(), SchedulerConf(actions=("allocate",)))
    assert bound(result) == {"good-0", "good-1", "third-0", "third-1"}


def test_without_the_fault_the_same_cluster_schedules_both() -> None:
    """The control for the two tests above: the fault, not the cluster, keeps bad out."""
    result = run_cycle(cluster(two_jobs()).snapshot(), SchedulerConf(actions=("allocate",)))
    assert bound(result) == {"bad-0", "bad-1", "good-0", "good-1"}
    assert result.job_errors == []


def preempt_cluster() -> list[dict[str, Any]]:
    """node0 (2 GPUs) full of a train job; two inference jobs (bad, good) of 1 GPU each wait to preempt."""
    docs = [node("node0", gpu=2), queue("dept"), queue("team", "dept")]
    docs.append(podgroup("train", "team", min_member=1))
    docs += [pod(f"train-{i}", "train", node_name="node0") for i in range(2)]
    for name in ("bad", "good"):
        docs.append(podgroup(name, "team", min_member=1, priority_class="inference"))
        docs.append(pod(f"{name}-0", name))
    return docs


def test_a_job_whose_victim_search_raises_costs_only_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    c = cluster(preempt_cluster())
    patched = staticmethod(raising_for("bad", proportion_module.check_capacity))
    monkeypatch.setattr(proportion_module.Proportion, "job_over_capacity", patched)
    result = run_cycle(c.snapshot(), SchedulerConf(actions=("preempt",)))
    assert {p.pod.name for p in result.pipelines} == {"good-0"}
    assert len(result.evictions) == 1
    assert [(e.podgroup, e.action) for e in result.job_errors] == [("default/bad", "preempt")]


def test_stale_gang_check_that_raises_costs_only_its_job(monkeypatch: pytest.MonkeyPatch) -> None:
    docs = [node("node0", gpu=4), queue("dept"), queue("team", "dept")]
    for name in ("bad", "good"):  # each gang has 1 of its 2 pods running: both are stale past the grace
        pg = podgroup(name, "team", min_member=2)
        pg["metadata"]["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": "2025-12-31T00:00:00Z"}
        docs.append(pg)
        docs.append(pod(f"{name}-0", name, node_name="node0"))
        failed = pod(f"{name}-1", name)
        failed["status"] = {"phase": "Failed"}
        docs.append(failed)
    c = cluster(docs)
    monkeypatch.setattr(stalegang_module, "_unsatisfied", raising_for("bad", stalegang_module._unsatisfied))
    result = run_cycle(c.snapshot(), SchedulerConf(actions=("stalegangeviction",)))
    assert [e.pod.name for e in result.evictions] == ["good-0"]
    assert [(e.podgroup, e.action) for e in result.job_errors] == [("default/bad", "stalegangeviction")]


def test_an_action_that_raises_outside_any_job_is_undone_and_the_next_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault in the action's own set-up (not one job's) undoes that action; the following actions run."""
    c = cluster(two_jobs())

    class Broken:
        name = "consolidation"

        def execute(self, ssn: Any) -> None:
            raise RuntimeError("injected fault in the action")

    monkeypatch.setitem(cycle_module.ACTIONS, "consolidation", Broken())
    result = run_cycle(c.snapshot(), SchedulerConf(actions=("consolidation", "allocate")))
    assert result.action_errors == [("consolidation", "RuntimeError: injected fault in the action")]
    assert bound(result) == {"bad-0", "bad-1", "good-0", "good-1"}


def test_job_errors_are_counted_by_action_in_the_metrics(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kai_cycle_job_errors_total{action}`` counts what ``CycleResult.job_errors`` reports; its only label is
    the action, so its series stay bounded however many jobs fail."""
    from kai.k8s._metrics import Metrics

    c = cluster(two_jobs())
    monkeypatch.setattr(allocate_module, "_place", raising_for("bad", allocate_module._place))
    result = run_cycle(c.snapshot(), SchedulerConf(actions=("allocate",)))
    metrics = Metrics()
    metrics.record_cycle(result, e2e_s=0.1, snapshot_s=0.01, apply_s=0.01)
    metrics.record_cycle(result, e2e_s=0.1, snapshot_s=0.01, apply_s=0.01)
    text = metrics.exposition().decode()
    assert 'kai_cycle_job_errors_total{action="allocate"} 2.0' in text
