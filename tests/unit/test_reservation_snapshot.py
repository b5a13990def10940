"""The snapshot's view of GPU reservation pods and of kai's queue access rule (engine edge)."""

from __future__ import annotations

from kai.api.objects import parse_node, parse_pod, parse_podgroup, parse_queue
from kai.scheduler.model import MILLI
from kai.scheduler.snapshot import GPU, build_snapshot


def _node() -> dict:
    return {
        "metadata": {"name": "n0", "labels": {"nvidia.com/gpu.memory": "1000"}},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2", "pods": "110"}},
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


def _snap(pods: list[dict], queues: list[dict], pg_ns: str = "ns"):
    pg = {"metadata": {"name": "pg", "namespace": pg_ns}, "spec": {"minMember": 1, "queue": "team-a"}}
    return build_snapshot(
        nodes=[parse_node(_node())],
        pods=[parse_pod(p) for p in pods],
        podgroups=[parse_podgroup(pg)],
        queues=[parse_queue(q) for q in queues],
        priority_classes=[],
        now=0.0,
    )


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
