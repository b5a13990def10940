"""The snapshot's view of GPU reservation pods and of kai's queue access rule (engine edge)."""

from __future__ import annotations

from kai.api.objects import parse_node, parse_pod, parse_podgroup, parse_queue
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import PodRef
from kai.scheduler.model import MILLI
from kai.scheduler.snapshot import GPU, SnapshotBuilder, build_snapshot
from tests.property.snapshots import snapshot_diff


def _node(gpus: int = 2) -> dict:
    return {
        "metadata": {"name": "n0", "labels": {"nvidia.com/gpu.memory": "1000"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}},
    }


def _queue(name: str, parent: str = "", allowed: str | None = None) -> dict:
    meta: dict = {"name": name}
    if allowed is not None:
        meta["annotations"] = {"kai.scheduler/allowed-namespaces": allowed}
    res = {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
    return {"metadata": meta, "spec": {"parentQueue": parent, "resources": res}}


def _fraction_pod(name: str, group: str) -> dict:
    return {
        "metadata": {
            "name": name,
            "namespace": "ns",
            "annotations": {"gpu-fraction": "0.5", "pod-group-name": "pg"},
            "labels": {"runai-gpu-group": group},
        },
        "spec": {"schedulerName": "kai-scheduler", "nodeName": "n0", "containers": [{"name": "c"}]},
        "status": {"phase": "Running"},
    }


def _reservation_pod(group: str) -> dict:
    return {
        "metadata": {
            "name": "gpu-reservation-x",
            "namespace": "kai-resource-reservation",
            "labels": {"app": "kai-resource-reservation", "runai-gpu-group": group},
        },
        "spec": {
            "nodeName": "n0",
            "containers": [
                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1", "cpu": "10m"}}},
            ],
        },
        "status": {"phase": "Running"},
    }


def _whole_pod(name: str) -> dict:
    """A pending pod of PodGroup pg asking for one whole GPU."""
    return {
        "metadata": {"name": name, "namespace": "ns", "annotations": {"pod-group-name": "pg"}},
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": "1"}}}],
        },
        "status": {"phase": "Pending"},
    }


def _args(pods: list, queues: list[dict], pg_ns: str = "ns", gpus: int = 2) -> dict:
    pg = {"metadata": {"name": "pg", "namespace": pg_ns}, "spec": {"minMember": 1, "queue": "team-a"}}
    return {
        "nodes": [parse_node(_node(gpus))],
        "pods": [parse_pod(p) if isinstance(p, dict) else p for p in pods],
        "podgroups": [parse_podgroup(pg)],
        "queues": [parse_queue(q) for q in queues],
        "priority_classes": [],
        "now": 0.0,
    }


def _snap(pods: list[dict], queues: list[dict], pg_ns: str = "ns", gpus: int = 2):
    return build_snapshot(**_args(pods, queues, pg_ns, gpus))


ALLOCATE = SchedulerConf(actions=("allocate",))


def test_a_reservation_pod_does_not_take_a_second_gpu() -> None:
    """One shared GPU group and its reservation pod hold one GPU of the node, not two."""
    snap = _snap([_fraction_pod("f", "n0-gpu0"), _reservation_pod("n0-gpu0")], [_queue("team-a")])
    assert snap.nodes.used[0, GPU] == 1 * MILLI
    # its CPU still counts on the node; it is not another scheduler's use of the fair-share total
    assert snap.nodes.used[0, 0] == 10
    assert snap.total[0] == 2 * MILLI  # GPUs in milli-GPU


def test_a_pod_from_a_namespace_the_queue_does_not_admit_is_left_out() -> None:
    queues = [_queue("dept", allowed="ml-*"), _queue("team-a", parent="dept")]
    snap = _snap([], queues, pg_ns="finance")
    job = snap.jobs[0]
    assert job.queue == -1
    assert "namespace 'finance' may not use queue 'team-a'" in job.unschedulable_reason
    assert "ancestor 'dept'" in job.unschedulable_reason
    assert _snap([], queues, pg_ns="ml-research").jobs[0].queue >= 0


def _terminating(doc: dict) -> dict:
    return {**doc, "metadata": {**doc["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"}}


def test_an_orphan_reservation_pod_holds_one_gpu_as_releasing() -> None:
    """A reservation pod whose GPU group has no fraction pod left still holds its GPU on the node (the device
    plugin gave it one) until the reservation sync deletes it: one whole GPU, releasing. A whole-GPU pod does
    not bind onto the only GPU of the node; it may only be pipelined onto it."""
    snap = _snap([_reservation_pod("n0-gpu0"), _whole_pod("w")], [_queue("team-a")], gpus=1)
    assert snap.nodes.used[0, GPU] == 1 * MILLI
    assert snap.nodes.releasing[0, GPU] == 1 * MILLI
    result = run_cycle(snap, ALLOCATE)
    assert result.binds == []
    assert [(p.pod, p.node) for p in result.pipelines] == [(PodRef("ns", "w"), "n0")]
    # on a 2-GPU node the other GPU is free: the pod binds there
    two = run_cycle(_snap([_reservation_pod("n0-gpu0"), _whole_pod("w")], [_queue("team-a")], gpus=2), ALLOCATE)
    assert [(b.pod, b.node) for b in two.binds] == [(PodRef("ns", "w"), "n0")]


def test_a_reservation_pod_of_another_group_or_without_one_is_an_orphan() -> None:
    """The group must have a pod on the reservation pod's node: a fraction pod of another group does not hold
    it, and a reservation pod without its group label holds a GPU too."""
    other = _snap([_fraction_pod("f", "n0-gpu1"), _reservation_pod("n0-gpu0")], [_queue("team-a")])
    assert other.nodes.used[0, GPU] == 2 * MILLI  # the group n0-gpu1 and the orphan's GPU
    assert other.nodes.releasing[0, GPU] == 1 * MILLI
    bare = _reservation_pod("n0-gpu0")
    del bare["metadata"]["labels"]["runai-gpu-group"]
    unlabelled = _snap([bare], [_queue("team-a")])
    assert unlabelled.nodes.used[0, GPU] == unlabelled.nodes.releasing[0, GPU] == 1 * MILLI


def test_an_orphan_reservation_pod_stuck_in_releasing_holds_its_gpu_as_used() -> None:
    """As any StuckInReleasing pod's resources: used, not releasing (nothing may be pipelined onto it)."""
    args = _args([_terminating(_reservation_pod("n0-gpu0"))], [_queue("team-a")], gpus=1)
    deleted = args["pods"][0].meta.deletion_timestamp
    going = build_snapshot(**{**args, "now": deleted + 1})
    assert going.nodes.used[0, GPU] == going.nodes.releasing[0, GPU] == 1 * MILLI
    stuck = build_snapshot(**{**args, "now": deleted + 3600})
    assert stuck.nodes.used[0, GPU] == 1 * MILLI
    assert stuck.nodes.releasing[0, GPU] == 0


def test_a_reservation_pod_with_its_fraction_pod_keeps_the_groups_accounting() -> None:
    """With its group's fraction pod there, the reservation pod adds nothing: the GPU columns are those of the
    fraction pod alone, and the decisions too (the group's GPU is taken, not releasing)."""
    queues = [_queue("team-a")]
    alone = _snap([_fraction_pod("f", "n0-gpu0"), _whole_pod("w")], queues, gpus=1)
    held = _snap([_fraction_pod("f", "n0-gpu0"), _reservation_pod("n0-gpu0"), _whole_pod("w")], queues, gpus=1)
    assert held.nodes.used[0, GPU] == alone.nodes.used[0, GPU] == 1 * MILLI
    assert held.nodes.releasing[0, GPU] == alone.nodes.releasing[0, GPU] == 0
    got, want = run_cycle(held, ALLOCATE), run_cycle(alone, ALLOCATE)
    assert got.binds == want.binds == [] and got.pipelines == want.pipelines == []
    # the group's fraction pod terminating: the group's GPU is releasing, once, not twice
    going = _snap([_terminating(_fraction_pod("f", "n0-gpu0")), _reservation_pod("n0-gpu0")], queues, gpus=1)
    assert going.nodes.used[0, GPU] == going.nodes.releasing[0, GPU] == 1 * MILLI


def test_the_incremental_builder_follows_a_group_emptied_and_filled_again() -> None:
    """The builder keeps the reservation pods as it keeps the shared pods: the group's fraction pod leaving makes
    the reservation pod an orphan, one coming back (or the reservation pod going) undoes it, as a fresh build."""
    queues = [_queue("team-a")]
    res, frac = parse_pod(_reservation_pod("n0-gpu0")), parse_pod(_fraction_pod("f", "n0-gpu0"))
    builder = SnapshotBuilder()
    for pods, used, releasing in (
        ([frac, res], 1, 0),
        ([res], 1, 1),  # the fraction pod went: orphan
        ([res, frac], 1, 0),  # a fraction pod of the group again
        ([parse_pod(_succeeded(_fraction_pod("f", "n0-gpu0"))), res], 1, 1),  # it finished
        ([], 0, 0),  # the reservation pod deleted by the sync
    ):
        args = _args(pods, queues)
        got = builder.build(**args)
        assert not snapshot_diff(got, build_snapshot(**args))
        assert (got.nodes.used[0, GPU], got.nodes.releasing[0, GPU]) == (used * MILLI, releasing * MILLI)
    assert builder.updates >= 4


def _succeeded(doc: dict) -> dict:
    return {**doc, "status": {"phase": "Succeeded"}}
