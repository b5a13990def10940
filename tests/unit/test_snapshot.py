"""Store -> Snapshot (kai.scheduler.snapshot.build_snapshot): what one cycle's read-only picture holds.

Clusters are real manifests through the real parsers (tests.unit.builders, the Kubernetes backend's road: no
embedded-cluster checks, so over-committed nodes and oversize requests reach the snapshot as they can on a
cluster). Covered: pod statuses, scheduling signatures, the per-GPU table of shared GPUs (slots, names,
releasing groups, over-commitment), the whole-releasing clamp, saturation of oversize amounts, task order,
PodDisruptionBudget allowances, the queue tree (orphans, loops, units), priorities, capacity totals.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kai.api import constants as C
from kai.api.objects import parse_node, parse_pod, parse_podgroup, parse_priority_class
from kai.api.quantity import MAX_AMOUNT
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.model import CPU, GPU, MEMORY, MILLI, TaskStatus
from kai.scheduler.snapshot import (
    INVALID_GPU_REQUEST,
    INVALID_REQUEST,
    SATURATED,
    build_snapshot,
    resolve_priority,
    task_status,
)
from kai.sim.cluster import default_priority_classes
from tests.unit.builders import (
    NOW,
    job,
    job_docs,
    node,
    pod,
    podgroup,
    qi,
    queue,
    row,
    snapshot_of,
    task,
)

QUEUES = [queue("dept"), queue("team", "dept")]
CAP = C.DEFAULT_GPU_MEMORY_MIB * 1000  # units of one GPU without a gpu.memory label


# --- pod statuses (docs/reference/kai-behaviour.md §1.4) ---------------------------------------------------------


def _gated(doc: dict[str, Any]) -> dict[str, Any]:
    doc["spec"]["schedulingGates"] = [{"name": "example.com/wait"}]
    return doc


STATUS_CASES = [
    ("pending", pod("p", "j"), TaskStatus.PENDING),
    ("gated", _gated(pod("p", "j")), TaskStatus.GATED),
    ("pending, being deleted", pod("p", "j", releasing=True), TaskStatus.RELEASING),
    ("bound, not running yet", pod("p", "j", node_name="n0", phase="Pending"), TaskStatus.BOUND),
    ("running", pod("p", "j", node_name="n0"), TaskStatus.RUNNING),
    ("running, being deleted", pod("p", "j", node_name="n0", releasing=True), TaskStatus.RELEASING),
    ("succeeded", pod("p", "j", node_name="n0", phase="Succeeded"), TaskStatus.SUCCEEDED),
    ("failed", pod("p", "j", node_name="n0", phase="Failed"), TaskStatus.FAILED),
    ("failed before binding", pod("p", "j", phase="Failed"), TaskStatus.FAILED),
]


@pytest.mark.parametrize(("doc", "want"), [(d, w) for _, d, w in STATUS_CASES], ids=[c[0] for c in STATUS_CASES])
def test_task_status(doc: dict[str, Any], want: TaskStatus) -> None:
    assert task_status(parse_pod(doc)) == want
    snap = snapshot_of([node("n0"), *QUEUES, podgroup("j", "team"), doc])
    assert task(snap, "p").status == want


def test_what_each_status_holds_on_its_node() -> None:
    """Running and bound pods use their node; a releasing pod's use is releasing too; finished pods hold nothing."""
    docs = [
        node("n0", gpu=8),
        *QUEUES,
        podgroup("j", "team", min_member=1),
        pod("run", "j", node_name="n0", gpu=1),
        pod("bound", "j", node_name="n0", phase="Pending", gpu=2),
        pod("leaving", "j", node_name="n0", releasing=True, gpu=3),
        pod("done", "j", node_name="n0", phase="Succeeded", gpu=4),
        pod("wait", "j", gpu=4),
    ]
    snap = snapshot_of(docs)
    assert snap.nodes.used[0, GPU] == 6 * MILLI
    assert snap.nodes.releasing[0, GPU] == 3 * MILLI
    assert snap.nodes.used[0, CPU] == 3000
    assert job(snap, "j").last_start == pytest.approx(NOW - 3600)


# --- scheduling signatures ---------------------------------------------------------------------------------------


def test_signatures_group_pods_that_fit_the_same_nodes() -> None:
    """Same nodeSelector, tolerations, node affinity and GPU share: one signature (its predicates are computed
    once); any difference, including the share, makes another. Requests are no part of it."""

    def p(name: str, selector: dict[str, str] | None = None, toleration: bool = False, **kw: Any) -> dict[str, Any]:
        doc = pod(name, "j", **kw)
        if selector:
            doc["spec"]["nodeSelector"] = selector
        if toleration:
            doc["spec"]["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        return doc

    docs = [
        node("n0"),
        *QUEUES,
        podgroup("j", "team", min_member=1),
        p("plain"),
        p("bigger", gpu=3, cpu="4"),
        p("selector", {"pool": "a"}),
        p("selector-too", {"pool": "a"}, gpu=2),
        p("other-pool", {"pool": "b"}),
        p("tolerant", toleration=True),
        p("half", fraction="0.5"),
        p("half-too", fraction="0.5", cpu="3"),
        p("quarter", fraction="0.25"),
    ]
    snap = snapshot_of(docs)
    sig = {t.name: t.signature for t in snap.tasks}
    assert sig["plain"] == sig["bigger"]
    assert sig["selector"] == sig["selector-too"]
    assert sig["half"] == sig["half-too"]
    distinct = ["plain", "selector", "other-pool", "tolerant", "half", "quarter"]
    assert len({sig[n] for n in distinct}) == len(distinct)
    assert [snap.signature_pods[sig[n]].meta.name for n in distinct] == distinct  # the first pod stands for it


# --- the per-GPU table of shared GPUs ----------------------------------------------------------------------------


def _shared(name: str, on: str, fraction: str, groups: tuple[str, ...], **kw: Any) -> list[dict[str, Any]]:
    return job_docs(name, "team", 1, on=on, fraction=fraction, gpu_groups=groups, **kw)


def test_gpu_groups_map_to_slots() -> None:
    """kai's own group names ``<node>-gpu<k>`` keep slot k; other names (KAI's UUIDs) take the lowest free slots in
    name order; a multi-device pod sits on one slot per device. Each slot holds the GPU's memory units minus the
    portions on it, and every group takes one whole GPU out of the node's pool."""
    docs = [
        node("g", gpu=4),
        *QUEUES,
        *_shared("s1", "g", "0.5", ("g-gpu2",)),
        *_shared("s2", "g", "0.25", ("g-gpu2",)),
        *_shared("s3", "g", "0.5", ("team-x-uuid",)),
        *_shared("s4", "g", "0.3", ("aaa", "bbb"), devices=2),
    ]
    snap = snapshot_of(docs)
    g = snap.gpus
    assert g.names[0] == ("aaa", "bbb", "g-gpu2", "team-x-uuid")
    assert g.pods[0].tolist() == [1, 1, 2, 1]
    assert g.idle[0].tolist() == [CAP * 7 // 10, CAP * 7 // 10, CAP // 4, CAP // 2]
    assert g.rel[0].tolist() == [0, 0, 0, 0] and g.gone[0].tolist() == [0, 0, 0, 0]
    assert {t.name: t.gpu_slots for t in snap.tasks} == {"s1-0": (2,), "s2-0": (2,), "s3-0": (3,), "s4-0": (0, 1)}
    assert snap.nodes.used[0, GPU] == 4 * MILLI  # four groups: no whole GPU left
    # what queues are charged: the fraction on every device
    assert {t.name: t.qreq[0] for t in snap.tasks} == {"s1-0": 500, "s2-0": 250, "s3-0": 500, "s4-0": 600}


def test_a_group_whose_pods_all_leave_is_a_releasing_gpu() -> None:
    docs = [
        node("h", gpu=2),
        *QUEUES,
        *_shared("gone", "h", "0.5", ("h-gpu0",), releasing=True),
        *_shared("half-gone", "h", "0.5", ("h-gpu1",), releasing=True),
        *_shared("stays", "h", "0.25", ("h-gpu1",)),
    ]
    snap = snapshot_of(docs)
    g = snap.gpus
    assert g.pods[0].tolist() == [1, 2] and g.gone[0].tolist() == [1, 1]
    assert g.rel[0].tolist() == [CAP // 2, CAP // 2]
    assert snap.nodes.used[0, GPU] == 2 * MILLI
    assert snap.nodes.releasing[0, GPU] == 1 * MILLI  # only h-gpu0 comes back whole


def test_a_pod_naming_fewer_groups_than_devices_joins_where_it_fits() -> None:
    """Input written by hand: a 2-device pod with one group label joins, for its second device, the first other
    group with room (else a fresh GPU), so the state is exact and deterministic."""
    docs = [
        node("n", gpu=3),
        *QUEUES,
        *_shared("big", "n", "0.75", ("n-gpu0",)),
        *_shared("small", "n", "0.25", ("n-gpu1",)),
        *_shared("multi", "n", "0.5", ("n-gpu2",), devices=2),
    ]
    snap = snapshot_of(docs)
    assert task(snap, "multi-0").gpu_slots == (2, 1)  # n-gpu0 has 0.25 left: too little; n-gpu1 has 0.75
    assert snap.gpus.pods[0].tolist() == [1, 2, 1, 0]  # (a slot kept for an unnamed device stays empty)


def test_more_groups_than_gpus_get_extra_slots_and_a_negative_pool() -> None:
    """Over-committed input (two schedulers disagreed): nothing running is dropped; the node's whole-GPU pool goes
    below zero, so nothing more lands there."""
    docs = [
        node("o", gpu=1),
        *QUEUES,
        *_shared("a", "o", "0.5", ("o-gpu0",)),
        *_shared("b", "o", "0.5", ("elsewhere",)),
    ]
    snap = snapshot_of(docs)
    assert snap.gpus.pods[0, :2].tolist() == [1, 1]
    assert snap.nodes.used[0, GPU] == 2 * MILLI > snap.nodes.allocatable[0, GPU]


@pytest.mark.parametrize(
    ("whole", "want_releasing"),
    [
        (1, 1),  # consistent: 2 devices, one group, a releasing 1-GPU pod: untouched
        (2, 1),  # over-committed: the 2-GPU pod and the group claim 3 devices of 2: one releasing GPU is real
    ],
)
def test_whole_releasing_gpus_are_clamped_to_free_devices(whole: int, want_releasing: int) -> None:
    docs = [
        node("c", gpu=2),
        *QUEUES,
        *job_docs("leaving", "team", 1, on="c", gpu=whole, releasing=True),
        *_shared("shared", "c", "0.5", ("c-gpu1",)),
    ]
    snap = snapshot_of(docs)
    assert snap.nodes.releasing[0, GPU] == want_releasing * MILLI
    assert snap.nodes.used[0, GPU] == (whole + 1) * MILLI


def test_without_groups_whole_releasing_gpus_are_not_clamped() -> None:
    docs = [node("c", gpu=2), *QUEUES, *job_docs("leaving", "team", 1, on="c", gpu=2, releasing=True)]
    assert snapshot_of(docs).nodes.releasing[0, GPU] == 2 * MILLI


# --- GPU memory and GPU-sharing errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "mib"),
    [
        ("40000", 40000),
        (None, C.DEFAULT_GPU_MEMORY_MIB),
        ("0", C.DEFAULT_GPU_MEMORY_MIB),
        ("-5", C.DEFAULT_GPU_MEMORY_MIB),
        ("40GB", C.DEFAULT_GPU_MEMORY_MIB),
        (str(2**30 + 1), C.DEFAULT_GPU_MEMORY_MIB),  # beyond any GPU: as unusable as a malformed label
    ],
)
def test_gpu_memory_label(label: str | None, mib: int) -> None:
    labels = {C.LABEL_GPU_MEMORY: label} if label is not None else {}
    snap = snapshot_of([node("n", labels=labels), *QUEUES])
    assert snap.nodes.gpu_memory_mib[0] == mib
    assert snap.gpus.cap[0] == mib * 1000


def test_gpu_memory_request_is_charged_by_the_node_it_runs_on() -> None:
    """gpu-memory counts as its share of the node's GPU, rounded up to 0.01 GPU; a pending one as its share of the
    largest GPU that can be shared (MIG nodes cannot)."""
    docs = [
        node("small", gpu=1, labels={C.LABEL_GPU_MEMORY: "20000"}),
        node("large", gpu=1, labels={C.LABEL_GPU_MEMORY: "40000"}),
        node("mig", gpu=1, labels={C.LABEL_GPU_MEMORY: "80000", C.LABEL_MIG_STRATEGY: "single"}),
        *QUEUES,
        *job_docs("on-small", "team", 1, on="small", gpu_memory=10000, gpu_groups=("small-gpu0",)),
        *job_docs("waiting", "team", 1, gpu_memory=10000),
        *job_docs("too-big", "team", 1, gpu_memory=50000),
    ]
    snap = snapshot_of(docs)
    assert task(snap, "on-small-0").qreq[0] == 500
    assert task(snap, "waiting-0").qreq[0] == 250
    big = task(snap, "too-big-0")
    assert big.spec_error_reason == INVALID_GPU_REQUEST
    assert big.spec_error == (
        "metadata.annotations.gpu-memory: 50000 MiB is more than the memory of any node's GPUs "
        "(the largest has 40000 MiB, label nvidia.com/gpu.memory)"
    )


def test_bad_sharing_annotations_count_only_for_pods_still_to_place() -> None:
    """A pending pod with both gpu-fraction and gpu-memory is refused (named field); the same annotations on a bound
    pod are history: it holds what it holds."""
    pending = pod("bad", "j", fraction="0.5")
    pending["metadata"]["annotations"][C.ANNOTATION_GPU_MEMORY] = "100"
    bound = pod("bound-bad", "j", node_name="n0", fraction="0.5")
    bound["metadata"]["annotations"][C.ANNOTATION_GPU_MEMORY] = "100"
    snap = snapshot_of([node("n0"), *QUEUES, podgroup("j", "team"), pending, bound])
    assert task(snap, "bad").spec_error_reason == INVALID_GPU_REQUEST
    assert task(snap, "bad").spec_error.startswith("metadata.annotations.gpu-memory: cannot request both")
    assert (task(snap, "bound-bad").spec_error, task(snap, "bound-bad").spec_error_reason) == ("", "")


def test_mig_mixed_nodes_have_no_whole_gpus_and_mig_nodes_share_none() -> None:
    docs = [
        node("mixed", gpu=4, labels={C.LABEL_MIG_STRATEGY: "mixed"}),
        node("single", gpu=4, labels={C.LABEL_MIG_STRATEGY: "single"}),
        node("plain", gpu=4),
        *QUEUES,
    ]
    snap = snapshot_of(docs)
    names = snap.nodes.names
    assert dict(zip(names, snap.nodes.allocatable[:, GPU].tolist(), strict=True)) == {
        "mixed": 0,
        "plain": 4000,
        "single": 4000,
    }
    assert dict(zip(names, snap.gpus.sharing_nodes.tolist(), strict=True)) == {
        "mixed": False,
        "plain": True,
        "single": False,
    }


# --- oversize amounts saturate ------------------------------------------------------------------------------------


def test_an_oversize_request_saturates_and_a_pending_one_is_refused() -> None:
    docs = [
        node("n0", gpu=8),
        *QUEUES,
        *job_docs("huge", "team", 1, cpu="1e30"),
        *job_docs("bound-huge", "team", 1, on="n0", gpu="1e20"),
    ]
    snap = snapshot_of(docs)
    huge = task(snap, "huge-0")
    assert huge.request[CPU] == MAX_AMOUNT
    assert huge.spec_error_reason == INVALID_REQUEST and "spec.containers[0].resources.requests" in huge.spec_error
    bound = task(snap, "bound-huge-0")
    assert bound.spec_error == "" and bound.request[GPU] == MAX_AMOUNT  # a bound pod that asks for everything
    assert snap.nodes.used[row(snap, "n0"), GPU] == MAX_AMOUNT  # fills its node


def test_sums_of_saturated_amounts_saturate_instead_of_wrapping() -> None:
    """Thousands of saturated pods on one node: the int64 columns stop at SATURATED, never wrap to negative; the
    capacity left for fair share is 0, not negative. (One parsed pod object stands for them all: another
    scheduler's pods only add to their node.)"""
    hog = parse_pod(pod("hog", "none", node_name="n0", cpu="1e30", memory="1e30", scheduler="default-scheduler"))
    count = 2100  # 2100 x 2^50 > 2^61
    snap = build_snapshot(
        nodes=[parse_node(node("n0"))],
        pods=[hog] * count,
        podgroups=[],
        queues=[],
        priority_classes=default_priority_classes(),
        now=NOW,
    )
    assert snap.nodes.used[0, CPU] == snap.nodes.used[0, MEMORY] == SATURATED
    assert (snap.nodes.used >= 0).all()
    assert snap.total.tolist()[1:] == [0.0, 0.0]


# --- capacity for fair share ------------------------------------------------------------------------------------


def test_total_counts_ready_nodes_minus_other_schedulers_pods() -> None:
    docs = [
        node("a", gpu=4, cpu="8"),
        node("b", gpu=4, cpu="8", ready=False),
        *QUEUES,
        pod("other", "none", node_name="a", gpu=1, cpu="2", scheduler="default-scheduler"),
        pod("other-on-b", "none", node_name="b", gpu=1, scheduler="default-scheduler"),
        *job_docs("mine", "team", 1, on="a", gpu=1),
    ]
    snap = snapshot_of(docs)
    assert snap.total.tolist()[:2] == [3000.0, 6000.0]  # GPU (milli), CPU (millicores): a's 4 and 8 minus other's
    assert [t.name for t in snap.tasks] == ["mine-0"]  # other schedulers' pods are no tasks
    assert snap.nodes.used[row(snap, "a"), GPU] == 2000  # but they take their node's room
    assert snap.nodes.names == ("a", "b") and not snap.nodes.schedulable[row(snap, "b")]


# --- task order inside a job -------------------------------------------------------------------------------------


def _ordered_job() -> list[dict[str, Any]]:
    def at(minute: int) -> str:
        return f"2025-12-31T21:{minute:02d}:00Z"

    return [
        node("n0"),
        *QUEUES,
        podgroup("j", "team", min_member=1),
        pod("worker-b", "j", created=at(0)),
        pod("worker-a", "j", created=at(0)),  # same creation time: by name
        pod("low", "j", labels={C.LABEL_TASK_PRIORITY: "5"}, created=at(1)),
        pod("high", "j", labels={C.LABEL_TASK_PRIORITY: "10"}, created=at(2)),
        pod("head", "j", labels={C.LABEL_RAY_NODE_TYPE: "head"}, created=at(3)),
        pod("master", "j", labels={C.LABEL_KUBEFLOW_JOB_ROLE: "master"}, created=at(4)),
    ]


def test_task_order_follows_kai_tiers_then_creation_then_name() -> None:
    snap = snapshot_of(_ordered_job())
    assert [snap.tasks[t].name for t in job(snap, "j").tasks] == [
        "master",
        "head",
        "high",
        "low",
        "worker-a",
        "worker-b",
    ]


def test_task_order_follows_the_configured_plugins() -> None:
    conf = SchedulerConf().with_plugin("kubeflow", enabled=False).with_plugin("taskorder", enabled=False)
    snap = snapshot_of(_ordered_job(), conf=conf)
    assert [snap.tasks[t].name for t in job(snap, "j").tasks] == [
        "head",
        "worker-a",
        "worker-b",
        "low",
        "high",
        "master",
    ]


# --- PodDisruptionBudgets -----------------------------------------------------------------------------------------


def _pdb(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


@pytest.mark.parametrize(
    ("spec", "allowed"),
    [
        ({"minAvailable": 2}, 1),  # 3 healthy, 2 must stay
        ({"minAvailable": "50%"}, 1),  # of 4 expected, rounded up: 2
        ({"maxUnavailable": 1}, 0),  # 4 expected - 1 = 3 must stay, 3 healthy
        ({"maxUnavailable": "50%"}, 1),
        ({"minAvailable": 4}, 0),  # never negative
    ],
)
def test_pdb_allowance(spec: dict[str, Any], allowed: int) -> None:
    """Four pods of app=web: three running, one releasing (not healthy); one pod of another app."""
    web = {"app": "web"}
    docs = [
        node("n0"),
        *QUEUES,
        podgroup("j", "team", min_member=1),
        *[pod(f"web-{k}", "j", node_name="n0", labels=web) for k in range(3)],
        pod("web-leaving", "j", node_name="n0", labels=web, releasing=True),
        pod("db", "j", node_name="n0", labels={"app": "db"}),
        _pdb("web-pdb", **spec),
    ]
    snap = snapshot_of(docs)
    (info,) = snap.pdbs
    assert info.ref == "default/web-pdb"
    assert info.allowed == allowed
    assert sorted(snap.tasks[t].name for t in info.tasks) == ["web-0", "web-1", "web-2", "web-leaving"]


# --- the queue tree ------------------------------------------------------------------------------------------------


def test_orphans_and_loops_are_dropped_with_their_subtree() -> None:
    docs = [
        node("n0"),
        queue("dept"),
        queue("team", "dept"),
        queue("orphan", "missing"),
        queue("orphan-child", "orphan"),
        queue("loop-a", "loop-b"),
        queue("loop-b", "loop-a"),
        *job_docs("ok", "team", 1),
        *job_docs("lost", "orphan-child", 1),
        *job_docs("looping", "loop-a", 1),
        *job_docs("on-dept", "dept", 1),
    ]
    snap = snapshot_of(docs)
    assert [q.name for q in snap.queues] == ["dept", "team"]
    assert snap.queues[qi(snap, "dept")].children == [qi(snap, "team")]
    assert snap.queues[qi(snap, "team")].parent == qi(snap, "dept")
    assert (job(snap, "ok").queue, job(snap, "ok").unschedulable_reason) == (qi(snap, "team"), "")
    assert (job(snap, "lost").queue, job(snap, "lost").unschedulable_reason) == (
        -1,
        "Queue 'orphan-child' does not exist",
    )
    assert job(snap, "looping").unschedulable_reason == "Queue 'loop-a' does not exist"
    assert (job(snap, "on-dept").queue, job(snap, "on-dept").unschedulable_reason) == (
        -1,
        "Queue 'dept' is not a leaf queue; only leaf queues hold jobs",
    )


def test_queue_vectors_in_base_units() -> None:
    """GPUs x 1000 (milli-GPU), CPU as millicores, memory MB x 10^6 (bytes); -1 stays -1; an unset field is 0 and an
    absent resource is all zero."""
    docs = [
        node("n0"),
        queue("q", gpu=(2.5, 4, 3), cpu=(1500, -1, 1), memory=(1000, None, 2), priority=150),
        queue("no-cpu", gpu=(-1, -1, 1), cpu=None),
    ]
    snap = snapshot_of(docs)
    q = snap.queues[qi(snap, "q")]
    assert q.deserved.tolist() == [2500.0, 1500.0, 1e9]
    assert q.limit.tolist() == [4000.0, -1.0, 0.0]
    assert q.over_quota_weight.tolist() == [3.0, 1.0, 2.0]
    assert q.priority == 150
    other = snap.queues[qi(snap, "no-cpu")]
    assert other.deserved.tolist()[1] == other.limit.tolist()[1] == other.over_quota_weight.tolist()[1] == 0.0
    assert other.deserved.tolist()[0] == -1.0 and other.priority == C.DEFAULT_QUEUE_PRIORITY


# --- priorities ----------------------------------------------------------------------------------------------------


def _class(name: str, value: int, *, default: bool = False, preemptibility: str | None = None) -> Any:
    doc: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name}}
    doc["value"] = value
    if default:
        doc["globalDefault"] = True
    if preemptibility:
        doc["metadata"]["labels"] = {C.LABEL_PREEMPTIBILITY: preemptibility}
    return parse_priority_class(doc)


CLASSES = {
    c.meta.name: c
    for c in (
        _class("high", 200),
        _class("low", 10),
        _class("boundary", 100),
        _class("pinned", 10, preemptibility="non-preemptible"),
    )
}


@pytest.mark.parametrize(
    ("class_name", "pg_preemptibility", "classes", "want"),
    [
        ("high", None, CLASSES, (200, False)),
        ("low", None, CLASSES, (10, True)),
        ("boundary", None, CLASSES, (100, False)),  # >= 100 is non-preemptible
        ("pinned", None, CLASSES, (10, False)),  # the class's label decides
        ("pinned", "preemptible", CLASSES, (10, True)),  # the PodGroup's own field wins
        ("high", "preemptible", CLASSES, (200, True)),
        ("missing", None, CLASSES, (C.DEFAULT_PODGROUP_PRIORITY, True)),  # no class, no default: 50
        ("missing", None, {**CLASSES, "gd": _class("gd", 120, default=True)}, (120, False)),  # the global default
    ],
)
def test_resolve_priority(
    class_name: str, pg_preemptibility: str | None, classes: dict, want: tuple[int, bool]
) -> None:
    doc = podgroup("j", "team", priority_class=class_name, preemptibility=pg_preemptibility)
    assert resolve_priority(parse_podgroup(doc), classes) == want


# --- jobs and pods --------------------------------------------------------------------------------------------------


def test_jobs_in_the_podgroups_order_pods_of_missing_podgroups_left_out() -> None:
    """Jobs are numbered in the order the PodGroups are listed (the Store's slot order), not sorted: a job's
    place in the job order is its priority, creation and uid (kai.scheduler.ordering), never its index."""
    docs = [
        node("n0"),
        *QUEUES,
        podgroup("second", "team", created="2025-12-31T21:00:02Z"),
        podgroup("first", "team", created="2025-12-31T21:00:01Z"),
        pod("s-0", "second"),
        pod("f-0", "first", node_name="n0", started="2025-12-31T23:10:00Z"),
        pod("f-1", "first", node_name="n0", started="2025-12-31T23:20:00Z"),
        pod("stray", "no-such-podgroup"),
    ]
    snap = snapshot_of(docs)
    assert [j.name for j in snap.jobs] == ["second", "first"]
    assert sorted(t.name for t in snap.tasks) == ["f-0", "f-1", "s-0"]
    assert job(snap, "first").last_start == pytest.approx(NOW - 40 * 60)  # the latest start
    assert job(snap, "second").last_start is None


def test_snapshot_arrays_are_read_only() -> None:
    snap = snapshot_of([node("n0"), *QUEUES, *job_docs("j", "team", 1)])
    for a in (snap.nodes.allocatable, snap.nodes.used, snap.nodes.releasing, snap.total, snap.gpus.idle):
        with pytest.raises(ValueError):
            a[...] = 0
    assert isinstance(snap.tasks[0].request, np.ndarray) and not snap.tasks[0].request.flags.writeable
