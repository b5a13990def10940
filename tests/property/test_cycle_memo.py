"""The cycle memo (kai.scheduler.memo) never changes a decision.

Each example is a small cluster in a real ``Store`` that lives through a random sequence of cycles. Between two
cycles the cluster changes the way ``test_incremental_snapshot`` changes it (pods created, deleted, bound,
evicted; nodes, PodGroups, queues, priority classes changed; the clock moved), or not at all (a recheck on an
unchanged cluster, where the memo applies), or only the clock moves, within or past a min-runtime window, a
preemption delay or a stale gang's grace period (where it must not apply). Every cycle runs twice on the same
Snapshot: with the memo the last cycle handed out, and without any. Every decision (binds, pipelines,
evictions, events with their messages, PodGroup and queue status) must be equal. The decisions are then
applied to the Store (binds start their pods, evicted pods go), so running pods gain start times that min
runtime protects, and searches fail and repeat as in a saturated run.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api import constants as C
from kai.api.objects import ObjectMeta, Pod, PodGroup
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.snapshot import SnapshotBuilder
from kai.store import key_of
from tests.property.test_incremental_snapshot import World, step

GI = 2**30
_DECISIONS = ("binds", "pipelines", "evictions", "events", "podgroups", "queues", "job_errors", "action_errors")


def _conf(min_runtime: float) -> SchedulerConf:
    """The default configuration, with min runtime windows (0: none) so the clock matters to the searches."""
    base = SchedulerConf()
    plugins = tuple(
        dataclasses.replace(
            p,
            arguments=(("defaultPreemptMinRuntime", min_runtime), ("defaultReclaimMinRuntime", min_runtime)),
        )
        if p.name == "minruntime"
        else p
        for p in base.plugins
    )
    return dataclasses.replace(base, plugins=plugins)


def _decisions(result: CycleResult) -> dict[str, Any]:
    return {name: getattr(result, name) for name in _DECISIONS}


def _gang(w: World, queue: str, pods: int, gpus: int, *, priority: str = "train", delay: float | None = None) -> None:
    """A PodGroup of *pods* pending pods of *gpus* GPUs each in *queue*."""
    name = w.fresh("job-")
    meta = ObjectMeta(name, "ns", f"uid-{name}", creation_timestamp=w.now)
    w.store.put(PodGroup(meta, min_member=pods, queue=queue, priority_class_name=priority, preemption_delay=delay))
    for i in range(pods):
        pod_meta = ObjectMeta(
            f"{name}-{i}",
            "ns",
            f"uid-{name}-{i}",
            annotations={C.ANNOTATION_POD_GROUP_NAME: name},
            creation_timestamp=w.now,
        )
        requests = {C.RESOURCE_CPU: 1000, C.RESOURCE_MEMORY: GI, C.RESOURCE_PODS: 1, C.RESOURCE_GPU: gpus}
        w.store.put(Pod(pod_meta, requests, scheduler_name=C.SCHEDULER_NAME, container_names=("c",)))


def _apply(w: World, result: CycleResult) -> None:
    """What a binder does with the decisions, in short: bound pods start now, evicted pods are gone."""
    s = w.store
    for b in result.binds:
        pod = s.get("Pod", (b.pod.namespace, b.pod.name))
        if pod is not None:
            s.put(dataclasses.replace(pod, node_name=b.node, phase="Running", start_time=w.now))
    for e in result.evictions:
        pod = s.get("Pod", (e.pod.namespace, e.pod.name))
        if pod is not None:
            s.delete("Pod", key_of(pod))


def _between(draw: st.DrawFn, w: World) -> str:
    """What happens between two cycles: nothing, only time, a new gang, or one of the snapshot test's changes."""
    kind = draw(st.sampled_from(["nothing", "nothing", "time", "gang", "change"]))
    if kind == "time":
        w.now += draw(st.sampled_from([1.0, 20.0, 45.0, 90.0, 400.0]))
    elif kind == "gang":
        _gang(
            w,
            draw(st.sampled_from(["team-a", "team-b"])),
            draw(st.integers(1, 3)),
            draw(st.sampled_from([1, 2, 4])),
            priority=draw(st.sampled_from(["train", "train", "build"])),
            delay=draw(st.sampled_from([None, None, 30.0, 100.0])),
        )
    elif kind == "change":
        return step(draw, w)
    return kind


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_cycles_with_the_memo_decide_as_cycles_without_it(data: st.DataObject) -> None:
    w = World()
    conf = _conf(data.draw(st.sampled_from([0.0, 60.0, 300.0])))
    for _ in range(data.draw(st.integers(2, 5))):  # a busy start: gangs in both team queues
        _gang(w, data.draw(st.sampled_from(["team-a", "team-b"])), data.draw(st.integers(1, 3)), 2)
    builder = SnapshotBuilder()
    memo = None
    history: list[str] = []
    for _ in range(data.draw(st.integers(2, 14))):
        snap = builder.build(**w.args())
        with_memo = run_cycle(snap, conf, memo, keep_memo=True)
        without = run_cycle(snap, conf)
        assert _decisions(with_memo) == _decisions(without), history
        memo = with_memo.memo
        _apply(w, with_memo)
        history.append(_between(data.draw, w))


def _saturated() -> tuple[World, SchedulerConf]:
    """team-b holds every GPU with preemptible pods that started just now; team-a, under its quota, waits for a
    4-GPU pod that reclaim cannot place while min runtime (60 s) protects team-b's pods."""
    w = World()
    conf = _conf(60.0)
    for _ in range(4):
        _gang(w, "team-b", 1, 4)
    first = run_cycle(SnapshotBuilder().build(**w.args()), conf)
    _apply(w, first)
    assert len(first.binds) == 4  # 16 GPUs, all team-b's
    _gang(w, "team-a", 1, 4)
    return w, conf


def _repeated(result: CycleResult) -> bool:
    return result.stats.get("cycle_repeated") == 1.0


def test_an_unchanged_cluster_repeats_the_last_cycle() -> None:
    """The memo is used (this is what makes the saturated week cheaper), and a repeated cycle decides the same:
    reclaim's failed search and its note included."""
    w, conf = _saturated()
    builder = SnapshotBuilder()
    first = run_cycle(builder.build(**w.args()), conf, keep_memo=True)
    assert not first.evictions and not _repeated(first)
    assert any("reclaim:" in e.message for e in first.events), "the reclaim search ran and failed"
    memo = first.memo
    for _ in range(3):  # rechecks ten seconds apart: nothing changed, no protection ran out
        w.now += 10.0
        snap = builder.build(**w.args())
        again = run_cycle(snap, conf, memo, keep_memo=True)
        assert _repeated(again)
        assert _decisions(again) == _decisions(run_cycle(snap, conf))
        memo = again.memo
    again.events.clear()  # the caller owns its result: the memo keeps its own lists
    assert run_cycle(builder.build(**w.args()), conf, memo).events == first.events


def test_the_memo_is_dropped_when_a_protection_runs_out() -> None:
    """Past team-b's min runtime the same search has a new answer: the memo must not hide it."""
    w, conf = _saturated()
    builder = SnapshotBuilder()
    first = run_cycle(builder.build(**w.args()), conf, keep_memo=True)
    assert not first.evictions
    w.now += 61.0
    later = run_cycle(builder.build(**w.args()), conf, first.memo)
    assert not _repeated(later)
    assert later.evictions, "team-a reclaims once team-b's pods are no longer protected"
    assert _decisions(later) == _decisions(run_cycle(builder.build(**w.args()), conf))


def test_the_memo_is_dropped_when_the_cluster_changed() -> None:
    w, conf = _saturated()
    builder = SnapshotBuilder()
    first = run_cycle(builder.build(**w.args()), conf, keep_memo=True)
    pod = next(p for p in w.store.list("Pod") if p.node_name)
    w.store.put(dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, labels={"changed": "yes"})))
    assert not _repeated(run_cycle(builder.build(**w.args()), conf, first.memo))


def test_the_memo_is_dropped_when_the_configuration_changed() -> None:
    w, conf = _saturated()
    builder = SnapshotBuilder()
    first = run_cycle(builder.build(**w.args()), conf, keep_memo=True)
    assert not _repeated(run_cycle(builder.build(**w.args()), _conf(30.0), first.memo))
    assert _repeated(run_cycle(builder.build(**w.args()), _conf(60.0), first.memo))  # an equal one, made anew
