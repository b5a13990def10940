"""The incremental snapshot: after any sequence of changes, ``SnapshotBuilder`` gives what a fresh
``build_snapshot`` of the same objects gives, field by field (``tests.property.snapshots.snapshot_diff``).

The cluster lives in a real ``Store`` (the Store replaces objects, never edits them, as both backends do), and
each step changes it the way a cluster changes between two cycles: pods created (whole GPUs, GPU fractions,
an extended resource, a legacy MIG annotation, another scheduler's, ungrouped ones, host ports, GPU
reservation pods of GPU groups with or without fraction pods), deleted, bound, evicted (a deletionTimestamp
that turns into StuckInReleasing as the clock moves), regrouped, their GPU group labels changed; nodes added,
removed, cordoned, relabelled (GPU memory, MIG strategy), made not Ready; PodGroups added, removed and
changed; Queues and PriorityClasses changed. After every step both snapshots are built and compared, and the
snapshot handed out one step earlier must still equal the fresh build of its own step's objects (the update
never edits what it handed out).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kai.api import constants as C
from kai.api.objects import Node, ObjectMeta, Pod, PodGroup, PriorityClass, Queue, QueueResource, Taint
from kai.api.podspec import HostPort
from kai.scheduler.snapshot import SnapshotBuilder, build_snapshot
from kai.store import Store, key_of
from tests.conftest import run_sim
from tests.property.snapshots import snapshot_diff
from tests.test_scenarios import _args as scenario_args

NOW = 1_700_000_000.0
GI = 2**30
EXTRA = "example.com/widget"
MIG_LEGACY = "nvidia.com/mig-1g.5gb"


def _queue(name: str, parent: str = "", gpu_quota: float = -1.0) -> Queue:
    res = {
        "gpu": QueueResource(gpu_quota, -1.0, 1.0),
        "cpu": QueueResource(-1.0, -1.0, 1.0),
        "memory": QueueResource(-1.0, -1.0, 1.0),
    }
    return Queue(ObjectMeta(name, None, f"q-{name}", creation_timestamp=0.0), parent=parent, resources=res)


def _node(name: str, gpus: int, labels: dict[str, str] | None = None, **fields: Any) -> Node:
    alloc = {C.RESOURCE_CPU: 32_000, C.RESOURCE_MEMORY: 256 * GI, C.RESOURCE_PODS: 110, C.RESOURCE_GPU: gpus}
    return Node(ObjectMeta(name, None, f"n-{name}", labels=dict(labels or {}), creation_timestamp=0.0), alloc, **fields)


class World:
    """The cluster one example changes: a Store, a clock and counters for fresh names."""

    def __init__(self) -> None:
        self.store = Store()
        self.now = NOW
        self.serial = 0
        for q in (_queue("dept"), _queue("team-a", "dept", 8.0), _queue("team-b", "dept", 4.0)):
            self.store.put(q)
        for name, value in (("train", 50), ("build", 100)):
            self.store.put(PriorityClass(ObjectMeta(name, None, f"pc-{name}"), value))
        for i in range(3):
            self.store.put(_node(f"node-{i}", 4 if i else 8, {C.LABEL_GPU_MEMORY: "40000"}))

    def fresh(self, prefix: str) -> str:
        self.serial += 1
        return f"{prefix}{self.serial}"

    def args(self) -> dict[str, Any]:
        s = self.store
        return {
            "nodes": s.list("Node"),
            "pods": s.list("Pod"),
            "podgroups": s.list("PodGroup"),
            "queues": s.list("Queue"),
            "priority_classes": s.list("PriorityClass"),
            "now": self.now,
        }


def _pick(draw: st.DrawFn, objs: list[Any]) -> Any | None:
    return draw(st.sampled_from(objs)) if objs else None


def _new_pod(draw: st.DrawFn, w: World) -> Pod:
    groups = [g.meta.name for g in w.store.list("PodGroup")] + ["nogroup"]
    group = draw(st.sampled_from(groups))
    kind = draw(
        st.sampled_from(["whole", "whole", "fraction", "cpu", "extra", "legacy-mig", "other", "ports", "reservation"])
    )
    name = w.fresh("pod-")
    requests: dict[str, int] = {C.RESOURCE_CPU: 1000, C.RESOURCE_MEMORY: GI, C.RESOURCE_PODS: 1}
    annotations = {C.ANNOTATION_POD_GROUP_NAME: group}
    fields: dict[str, Any] = {}
    if kind == "whole":
        requests[C.RESOURCE_GPU] = draw(st.integers(1, 4))
    elif kind == "fraction":
        annotations[C.ANNOTATION_GPU_FRACTION] = draw(st.sampled_from(["0.5", "0.25"]))
    elif kind == "extra":
        requests[EXTRA] = 1
    elif kind == "legacy-mig":
        annotations[MIG_LEGACY] = "1"
    elif kind == "ports":
        fields["host_ports"] = (HostPort("", "TCP", 8080),)
    scheduler = "default-scheduler" if kind == "other" else C.SCHEDULER_NAME
    labels = {C.LABEL_TASK_PRIORITY: str(draw(st.integers(0, 2)))} if draw(st.booleans()) else {}
    node_name, phase, start = "", "Pending", None
    if draw(st.booleans()) or kind == "reservation":
        nodes = w.store.list("Node")
        if nodes:
            node_name, phase, start = draw(st.sampled_from(nodes)).meta.name, "Running", w.now - 60
    namespace = "ns"
    if kind == "reservation":  # as the binder makes them: bound straight to a node, one GPU, its group's label
        namespace, scheduler, annotations = "kai-resource-reservation", "default-scheduler", {}
        requests = {C.RESOURCE_CPU: 10, C.RESOURCE_GPU: 1}
        labels = {C.LABEL_APP: C.RESERVATION_APP}
    if node_name and kind in ("fraction", "reservation"):
        labels.update(_gpu_group(draw, node_name))
    meta = ObjectMeta(name, namespace, f"uid-{name}", labels=labels, annotations=annotations, creation_timestamp=w.now)
    return Pod(
        meta,
        requests,
        node_name=node_name,
        scheduler_name=scheduler,
        phase=phase,
        start_time=start,
        container_names=("c",),
        **fields,
    )


def _gpu_group(draw: st.DrawFn, node: str) -> dict[str, str]:
    """A GPU group label for a bound fraction or reservation pod: one of two groups of its node, or none."""
    group = draw(st.sampled_from([f"{node}-gpu0", f"{node}-gpu1", ""]))
    return {C.LABEL_GPU_GROUP: group} if group else {}


def _meta(obj: Any, **changes: Any) -> Any:
    return dataclasses.replace(obj, meta=dataclasses.replace(obj.meta, **changes))


def step(draw: st.DrawFn, w: World) -> str:
    """One change to the cluster; returns its name (for the failure report)."""
    s = w.store
    op = draw(
        st.sampled_from(
            [
                "add-pods",
                "add-pods",
                "add-shared-gpu",
                "delete-pod",
                "move-pod",
                "bind",
                "bind",
                "evict",
                "regroup",
                "gpu-group",
                "succeed",
                "add-node",
                "remove-node",
                "cordon",
                "relabel",
                "not-ready",
                "add-podgroup",
                "add-podgroup",
                "remove-podgroup",
                "change-podgroup",
                "rewrite-podgroup",
                "change-queue",
                "rewrite-queue",
                "change-priority-class",
                "clock",
                "nothing",
            ]
        )
    )
    pods, nodes, pgs = s.list("Pod"), s.list("Node"), s.list("PodGroup")
    if op == "add-pods":
        for _ in range(draw(st.integers(1, 4))):
            s.put(_new_pod(draw, w))
    elif op == "add-shared-gpu" and nodes:  # a fraction pod and its group's reservation pod, as the binder leaves
        where = draw(st.sampled_from(nodes)).meta.name
        group = {C.LABEL_GPU_GROUP: f"{where}-gpu{draw(st.integers(0, 1))}"}
        gpu = {C.RESOURCE_GPU: 1}
        for kind, ns, labels, ann, requests, scheduler in (
            ("frac-", "ns", group, {C.ANNOTATION_GPU_FRACTION: "0.5", C.ANNOTATION_POD_GROUP_NAME: "nogroup"}, {},
             C.SCHEDULER_NAME),
            ("resv-", "kai-resource-reservation", {C.LABEL_APP: C.RESERVATION_APP, **group}, {}, gpu,
             "default-scheduler"),
        ):  # fmt: skip
            if pgs and kind == "frac-":
                ann[C.ANNOTATION_POD_GROUP_NAME] = draw(st.sampled_from(pgs)).meta.name
            name = w.fresh(kind)
            meta = ObjectMeta(name, ns, f"uid-{name}", labels=labels, annotations=ann, creation_timestamp=w.now)
            s.put(Pod(meta, requests, node_name=where, scheduler_name=scheduler, phase="Running", start_time=w.now))
    elif op == "delete-pod" and (pod := _pick(draw, pods)) is not None:
        s.delete("Pod", key_of(pod))
    elif op == "move-pod" and (pod := _pick(draw, pods)) is not None:
        # the same object at the end of the order (deleted and put back): the builder must not take the pods'
        # relative order as kept (a job's tied tasks are ordered by it)
        s.delete("Pod", key_of(pod))
        s.put(pod)
    elif op == "bind" and nodes and (pod := _pick(draw, [p for p in pods if not p.node_name])) is not None:
        where = draw(st.sampled_from(nodes)).meta.name
        bound = dataclasses.replace(pod, node_name=where, phase="Running", start_time=w.now)
        if C.ANNOTATION_GPU_FRACTION in pod.meta.annotations or C.LABEL_APP in pod.meta.labels:
            bound = _meta(bound, labels={**pod.meta.labels, **_gpu_group(draw, where)})
        s.put(bound)
    elif op == "evict" and (pod := _pick(draw, [p for p in pods if p.node_name])) is not None:
        s.put(_meta(pod, deletion_timestamp=w.now))
    elif op == "regroup" and (pod := _pick(draw, pods)) is not None:
        group = draw(st.sampled_from([g.meta.name for g in pgs] + ["nogroup"]))
        s.put(_meta(pod, annotations={**pod.meta.annotations, C.ANNOTATION_POD_GROUP_NAME: group}))
    elif op == "gpu-group" and (pod := _pick(draw, [p for p in pods if p.node_name])) is not None:
        labels = {k: v for k, v in pod.meta.labels.items() if k != C.LABEL_GPU_GROUP}
        s.put(_meta(pod, labels={**labels, **_gpu_group(draw, pod.node_name)}))
    elif op == "succeed" and (pod := _pick(draw, [p for p in pods if p.node_name])) is not None:
        s.put(dataclasses.replace(pod, phase="Succeeded"))
    elif op == "add-node":
        s.put(_node(w.fresh("node-"), draw(st.sampled_from([2, 4, 8])), {C.LABEL_GPU_MEMORY: "40000"}))
    elif op == "remove-node" and (node := _pick(draw, nodes)) is not None:
        s.delete("Node", key_of(node))
    elif op == "cordon" and (node := _pick(draw, nodes)) is not None:
        taints = draw(st.sampled_from([(), (Taint("gpu", "busy", "NoSchedule"),)]))
        s.put(dataclasses.replace(node, unschedulable=not node.unschedulable, taints=taints))
    elif op == "relabel" and (node := _pick(draw, nodes)) is not None:
        label = draw(
            st.sampled_from(
                [
                    {"zone": "a"},
                    {"zone": "b"},
                    {C.LABEL_GPU_MEMORY: "80000"},
                    {C.LABEL_MIG_STRATEGY: "mixed"},
                ]
            )
        )
        s.put(_meta(node, labels={**node.meta.labels, **label}))
    elif op == "not-ready" and (node := _pick(draw, nodes)) is not None:
        s.put(dataclasses.replace(node, ready=not node.ready))
    elif op == "add-podgroup":
        name = w.fresh("pg-")
        created = w.now + draw(st.sampled_from([0.0, 1.0, -1000.0]))  # mostly the newest, sometimes older
        meta = ObjectMeta(name, "ns", f"uid-{name}", creation_timestamp=created)
        queue = draw(st.sampled_from(["team-a", "team-b", "dept", "missing"]))
        s.put(PodGroup(meta, min_member=draw(st.integers(1, 3)), queue=queue, priority_class_name="train"))
    elif op == "remove-podgroup" and (pg := _pick(draw, pgs)) is not None:
        s.delete("PodGroup", key_of(pg))
    elif op == "change-podgroup" and (pg := _pick(draw, pgs)) is not None:
        s.put(dataclasses.replace(pg, min_member=draw(st.integers(1, 3)), priority_class_name="build"))
    elif op == "rewrite-podgroup" and (pg := _pick(draw, pgs)) is not None:
        # the same key with another uid and creation: kai's decided PodGroup once the API server has written it
        # (it moves in the job order, mostly to the end), or one deleted and made again between two cycles
        created = w.now + draw(st.sampled_from([0.0, 1.0, -1000.0]))
        s.put(_meta(pg, uid=f"{pg.meta.uid}-w{w.fresh('')}", creation_timestamp=created))
    elif op == "change-queue":
        q = s.get("Queue", ("", draw(st.sampled_from(["team-a", "team-b"]))))
        s.put(dataclasses.replace(q, priority=draw(st.integers(0, 200))))
    elif op == "rewrite-queue":  # a status write: a new object, the same values
        q = s.get("Queue", ("", draw(st.sampled_from(["team-a", "team-b", "dept"]))))
        s.put(dataclasses.replace(q))
    elif op == "change-priority-class":
        pc = s.get("PriorityClass", ("", "train"))
        s.put(dataclasses.replace(pc, value=draw(st.sampled_from([40, 50, 150]))))
    elif op == "clock":
        w.now += draw(st.sampled_from([1.0, 30.0, 600.0]))  # 600 s: evicted Running pods become stuck
    return op


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_incremental_snapshot_equals_a_fresh_build(data: st.DataObject) -> None:
    w = World()
    builder = SnapshotBuilder()
    history: list[str] = []
    previous = None  # (snapshot handed out one step earlier, the fresh build of that step's objects)
    for _ in range(data.draw(st.integers(1, 25))):
        for _ in range(data.draw(st.integers(1, 3))):  # a cycle sees one or more changes
            history.append(step(data.draw, w))
        args = w.args()
        got = builder.build(**args)
        want = build_snapshot(**args)
        diff = snapshot_diff(got, want)
        assert not diff, (history, diff[:5])
        if previous is not None:
            stale = snapshot_diff(*previous)
            assert not stale, ("the last update edited the snapshot handed out before it", history, stale[:5])
        previous = (got, want)


def _cluster() -> World:
    w = World()
    w.store.put(PodGroup(ObjectMeta("pg", "ns", "uid-pg", creation_timestamp=NOW), queue="team-a"))
    for i in range(6):
        meta = ObjectMeta(f"p{i}", "ns", f"uid-p{i}", annotations={C.ANNOTATION_POD_GROUP_NAME: "pg"})
        w.store.put(Pod(meta, {C.RESOURCE_CPU: 1000, C.RESOURCE_GPU: 1}, scheduler_name=C.SCHEDULER_NAME))
    return w


def test_a_stale_snapshot_is_told_apart() -> None:
    """The comparison can fail: one bound pod between two builds is a difference it names."""
    w = _cluster()
    before = build_snapshot(**w.args())
    pod = w.store.get("Pod", ("ns", "p3"))
    w.store.put(dataclasses.replace(pod, node_name="node-1", phase="Running", start_time=NOW))
    after = build_snapshot(**w.args())
    diff = snapshot_diff(before, after)
    assert any(d.startswith("tasks[3].status") for d in diff), diff
    assert any(d.startswith("nodes.used") for d in diff), diff


def test_a_builder_that_missed_a_change_is_told_apart() -> None:
    """A builder handed the old pod list while the Store moved on is caught by the comparison."""
    w = _cluster()
    builder = SnapshotBuilder()
    stale_args = w.args()
    builder.build(**stale_args)
    pod = w.store.get("Pod", ("ns", "p0"))
    w.store.put(dataclasses.replace(pod, node_name="node-0", phase="Running", start_time=NOW))
    missed = builder.build(**stale_args)  # the update never saw the bind
    assert snapshot_diff(missed, build_snapshot(**w.args()))


def test_changes_in_place_patch_the_last_build() -> None:
    """Binds, evictions and new pods at the end patch the last build: no pod is derived again."""
    w = _cluster()
    builder = SnapshotBuilder()
    first = builder.build(**w.args())
    pod = w.store.get("Pod", ("ns", "p2"))
    w.store.put(dataclasses.replace(pod, node_name="node-1", phase="Running", start_time=NOW))
    meta = ObjectMeta("p9", "ns", "uid-p9", annotations={C.ANNOTATION_POD_GROUP_NAME: "pg"})
    w.store.put(Pod(meta, {C.RESOURCE_CPU: 1000, C.RESOURCE_GPU: 1}, scheduler_name=C.SCHEDULER_NAME))
    second = builder.build(**w.args())
    assert (builder.full_builds, builder.updates) == (1, 1)
    assert not snapshot_diff(second, build_snapshot(**w.args()))
    # unchanged tasks are shared, changed ones are new objects; the first snapshot kept its own
    assert second.tasks[0] is first.tasks[0] and second.tasks[2] is not first.tasks[2]
    assert first.tasks[2].node == -1 and second.tasks[2].node >= 0
    assert len(first.tasks) == 6 and len(second.tasks) == 7


def test_a_podgroup_written_anew_keeps_its_place_without_a_full_build() -> None:
    """kai's decided PodGroup (a placeholder uid, the owner's creation) becomes the API server's (its own uid and
    creation, later): the job is made again where it is (jobs are in the Store's slot order), and no task moves;
    a new PodGroup, however old, takes the next place."""
    w = _cluster()
    for name, created in (("pg-b", NOW + 1), ("pg-c", NOW + 2)):
        w.store.put(PodGroup(ObjectMeta(name, "ns", f"uid-{name}", creation_timestamp=created), queue="team-a"))
        meta = ObjectMeta(f"{name}-0", "ns", f"uid-{name}-0", annotations={C.ANNOTATION_POD_GROUP_NAME: name})
        w.store.put(Pod(meta, {C.RESOURCE_CPU: 1000, C.RESOURCE_GPU: 1}, scheduler_name=C.SCHEDULER_NAME))
    builder = SnapshotBuilder()
    first = builder.build(**w.args())
    assert [j.podgroup.meta.name for j in first.jobs] == ["pg", "pg-b", "pg-c"]
    written = w.store.get("PodGroup", ("ns", "pg-b"))
    w.store.put(_meta(written, uid="uid-pg-b-written", creation_timestamp=NOW + 30))  # now the newest
    second = builder.build(**w.args())
    assert not snapshot_diff(second, build_snapshot(**w.args()))
    assert [j.podgroup.meta.name for j in second.jobs] == ["pg", "pg-b", "pg-c"]
    assert second.jobs[1].uid == "uid-pg-b-written" and second.jobs[2] is first.jobs[2]
    assert all(a is b for a, b in zip(first.tasks, second.tasks, strict=True))  # no task moved
    older = ObjectMeta("pg-a", "ns", "uid-pg-a", creation_timestamp=NOW + 0.5)
    w.store.put(PodGroup(older, queue="team-a"))
    third = builder.build(**w.args())
    assert not snapshot_diff(third, build_snapshot(**w.args()))
    assert [j.podgroup.meta.name for j in third.jobs] == ["pg", "pg-b", "pg-c", "pg-a"]
    assert (builder.full_builds, builder.updates) == (1, 2)


def test_a_job_removed_leaves_its_place_to_the_last_one_and_nothing_else_moves() -> None:
    """Jobs finish and leave with their PodGroups while new ones come. In the Store's slot order a removed pod's
    or PodGroup's place is taken by the last one, so the update renumbers only what moved: the moved pods' tasks
    take the removed ones' indices, the moved PodGroup's job takes the removed one's, and every other task and
    job is the last snapshot's object (the churn a busy cluster sees costs what changed, not 50,000 tasks)."""
    w = World()
    for g in range(4):
        name = f"pg-{g}"
        w.store.put(PodGroup(ObjectMeta(name, "ns", f"uid-{name}", creation_timestamp=NOW + g), queue="team-a"))
        for k in range(3):
            meta = ObjectMeta(f"{name}-{k}", "ns", f"uid-{name}-{k}", annotations={C.ANNOTATION_POD_GROUP_NAME: name})
            w.store.put(Pod(meta, {C.RESOURCE_CPU: 1000, C.RESOURCE_GPU: 1}, scheduler_name=C.SCHEDULER_NAME))
    builder = SnapshotBuilder()
    first = builder.build(**w.args())
    assert [t.name for t in first.tasks[:3]] == ["pg-0-0", "pg-0-1", "pg-0-2"]
    for k in range(3):
        w.store.delete("Pod", ("ns", f"pg-0-{k}"))  # pg-3's pods, the last ones, take their slots
    w.store.delete("PodGroup", ("ns", "pg-0"))  # pg-3 takes its place
    pod = w.store.get("Pod", ("ns", "pg-2-1"))
    w.store.put(dataclasses.replace(pod, node_name="node-1", phase="Running", start_time=NOW))
    w.store.put(PodGroup(ObjectMeta("pg-new", "ns", "uid-pg-new", creation_timestamp=NOW - 9), queue="team-a"))
    meta = ObjectMeta("pg-new-0", "ns", "uid-pg-new-0", annotations={C.ANNOTATION_POD_GROUP_NAME: "pg-new"})
    w.store.put(Pod(meta, {C.RESOURCE_CPU: 1000, C.RESOURCE_GPU: 1}, scheduler_name=C.SCHEDULER_NAME))
    second = builder.build(**w.args())
    assert not snapshot_diff(second, build_snapshot(**w.args()))
    assert (builder.full_builds, builder.updates) == (1, 1)
    assert [j.name for j in second.jobs] == ["pg-3", "pg-1", "pg-2", "pg-new"]
    assert sorted(t.name for t in second.tasks[:3]) == ["pg-3-0", "pg-3-1", "pg-3-2"]  # the removed pods' indices
    assert sorted(second.jobs[0].tasks) == [0, 1, 2] and second.jobs[3].tasks == [9]
    assert second.jobs[1] is first.jobs[1]  # untouched: the last snapshot's job
    assert second.jobs[2] is not first.jobs[2] and second.jobs[2].sums.allocated == 1  # its pod was bound
    assert all(second.tasks[i] is first.tasks[i] for i in (3, 4, 5, 6, 8))  # every other task: kept


def test_a_queue_written_with_the_same_values_makes_no_job_again() -> None:
    """A Queue's status write comes back as a new object with the same values: the jobs are kept as they were
    (a busy stream writes queue status every cycle, with thousands of jobs); a changed spec still makes them again."""
    w = _cluster()
    builder = SnapshotBuilder()
    first = builder.build(**w.args())
    q = w.store.get("Queue", ("", "team-a"))
    w.store.put(dataclasses.replace(q))
    second = builder.build(**w.args())
    assert not snapshot_diff(second, build_snapshot(**w.args()))
    assert second.jobs[0] is first.jobs[0] and second.tasks[0] is first.tasks[0]
    w.store.put(dataclasses.replace(q, priority=q.priority + 1))
    third = builder.build(**w.args())
    assert not snapshot_diff(third, build_snapshot(**w.args()))
    assert third.jobs[0] is not first.jobs[0]
    assert (builder.full_builds, builder.updates) == (1, 2)


MULTICYCLE = sorted(p.parent for p in (Path(__file__).parents[1] / "scenarios" / "multicycle").glob("*/expect.yaml"))


def test_every_cycle_of_the_multicycle_scenarios_equals_a_fresh_build(monkeypatch: pytest.MonkeyPatch) -> None:
    """``kai sim`` on the multicycle scenarios (arrivals, evictions, consolidation, pipelines, GPU sharing), with
    every snapshot the embedded cluster builds compared with a fresh build of the same arguments."""
    seen = {"builds": 0, "patched": 0}
    build = SnapshotBuilder.build

    def checked(self: SnapshotBuilder, **kwargs: Any) -> Any:
        full = self.full_builds
        got = build(self, **kwargs)
        diff = snapshot_diff(got, build(SnapshotBuilder(), **kwargs))  # = build_snapshot (not the patched one)
        assert not diff, diff[:5]
        seen["builds"] += 1
        seen["patched"] += self.full_builds == full
        return got

    monkeypatch.setattr(SnapshotBuilder, "build", checked)
    assert MULTICYCLE
    for case in MULTICYCLE:
        expect = yaml.safe_load((case / "expect.yaml").read_text())
        code, _, err = run_sim([str(case / "cluster.yaml"), *scenario_args(case, expect.get("args", []))])
        assert code == 0, (case.name, err)
    assert seen["patched"] > len(MULTICYCLE), seen  # the updates were patches, not full builds


@pytest.mark.parametrize("which", ["old", "new"])
def test_a_podgroup_listed_twice_builds_what_a_fresh_build_does(which: str) -> None:
    """No Store lists an object twice, but the builder is handed lists: a PodGroup object there twice (one the
    last build saw, or a new one) is not taken for a change in place; the update gives what a fresh build gives."""
    w = _cluster()
    builder = SnapshotBuilder()
    builder.build(**w.args())
    if which == "new":
        w.store.put(PodGroup(ObjectMeta("pg-2", "ns", "uid-pg-2", creation_timestamp=NOW + 1), queue="team-a"))
    args = w.args()
    args["podgroups"] = [*args["podgroups"], args["podgroups"][-1]]
    got = builder.build(**args)
    assert not snapshot_diff(got, build_snapshot(**args))
