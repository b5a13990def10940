"""GPU sharing: annotation parsing, the Snapshot's per-GPU state, and Statement undo of shared-GPU changes.

Sessions come from the real embedded cluster (manifests -> EmbeddedCluster -> Snapshot -> Session).
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

from kai.api.manifests import load_manifests
from kai.api.objects import ObjectMeta, Pod
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session
from kai.scheduler.gpusharing import choose, parse_share
from kai.scheduler.model import GPU, MILLI, GpuShare, TaskStatus
from kai.sim.cluster import EmbeddedCluster
from tests.unit import builders as B

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def _pod(annotations: dict[str, str], gpus: int = 0, containers: tuple[str, ...] = ("main",)) -> Pod:
    requests = {"nvidia.com/gpu": gpus} if gpus else {}
    return Pod(ObjectMeta("p", "ns", "uid", annotations=annotations), requests, container_names=containers)


@pytest.mark.parametrize(
    ("annotations", "share"),
    [
        ({"gpu-fraction": "0.5"}, GpuShare(500, 0, 1)),
        ({"gpu-fraction": "0.25", "gpu-fraction-num-devices": "3"}, GpuShare(250, 0, 3)),
        ({"gpu-memory": "2000"}, GpuShare(0, 2000, 1)),
        ({"gpu-fraction": "0.5", "gpu-fraction-container-name": "main"}, GpuShare(500, 0, 1, "main")),
        ({}, None),
    ],
)
def test_valid_requests(annotations: dict[str, str], share: GpuShare | None) -> None:
    assert parse_share(_pod(annotations)) == (share, "")


@pytest.mark.parametrize(
    ("annotations", "gpus", "needle"),
    [
        ({"gpu-fraction": "1"}, 0, "gpu-fraction: '1' must be a number between 0 and 1"),
        ({"gpu-fraction": "1.0"}, 0, "gpu-fraction: '1.0' must be a number between 0 and 1"),
        ({"gpu-fraction": "-0.5"}, 0, "gpu-fraction: '-0.5' must be a number"),
        ({"gpu-fraction": "abc"}, 0, "gpu-fraction: 'abc' must be a number"),
        ({"gpu-fraction": "0.0001"}, 0, "finer than kai's resolution of 0.001 GPU"),
        ({"gpu-fraction": "0.5", "gpu-memory": "100"}, 0, "cannot request both GPU and GPU memory"),
        ({"gpu-fraction": "0.5"}, 1, "cannot have both GPU fraction request and whole GPU resource"),
        ({"gpu-memory": "0"}, 0, "gpu-memory: '0' must be a positive integer"),
        ({"gpu-memory": "1.5Gi"}, 0, "gpu-memory: '1.5Gi' must be a positive integer"),
        ({"gpu-fraction-num-devices": "2"}, 0, "needs a gpu-fraction or gpu-memory annotation"),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, 0, "must be an integer >= 1"),
        ({"gpu-fraction": "0.5", "gpu-fraction-container-name": "other"}, 0, "'other' is not a container"),
        ({"gpu-memory": "100", "mps": "true"}, 0, "MPS is only supported with GPU fraction request"),
    ],
)
def test_invalid_requests_name_the_annotation(annotations: dict[str, str], gpus: int, needle: str) -> None:
    share, error = parse_share(_pod(annotations, gpus))
    assert share is None
    assert needle in error
    assert error.startswith("metadata.annotations.")


def test_queue_charge_of_gpu_memory_rounds_up_to_hundredths() -> None:
    assert GpuShare(0, 30, 1).accounted_milli(100) == 300
    assert GpuShare(0, 8000, 1).accounted_milli(24000) == 340  # 0.3333 -> 0.34, as KAI
    assert GpuShare(0, 8000, 2).accounted_milli(24000) == 680
    assert GpuShare(250, 0, 3).accounted_milli(100) == 750


CLUSTER = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Node
    metadata: {name: node0, labels: {nvidia.com/gpu.memory: "1000"}}
    status: {allocatable: {cpu: "16", memory: 64Gi, nvidia.com/gpu: "3"}}
    ---
    apiVersion: scheduling.run.ai/v2
    kind: Queue
    metadata: {name: q}
    spec: {resources: {gpu: {quota: -1, limit: -1, overQuotaWeight: 1}}}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: named, labels: {kai.scheduler/queue: q, runai-gpu-group: X}, annotations: {gpu-fraction: "0.5"}}
    spec: {nodeName: node0, containers: [{name: c}]}
    status: {phase: Running}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: unnamed, labels: {kai.scheduler/queue: q}, annotations: {gpu-memory: "300"}}
    spec: {nodeName: node0, containers: [{name: c}]}
    status: {phase: Running}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: going, labels: {kai.scheduler/queue: q, runai-gpu-group: Y}, annotations: {gpu-fraction: "0.4"},
               deletionTimestamp: "2025-12-31T23:59:00Z"}
    spec: {nodeName: node0, containers: [{name: c}]}
    status: {phase: Running}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: pending, labels: {kai.scheduler/queue: q}, annotations: {gpu-fraction: "0.6"}}
    spec: {containers: [{name: c}]}
    """
)


def _cluster() -> EmbeddedCluster:
    objects, _ = load_manifests([("c.yaml", CLUSTER)])
    cluster = EmbeddedCluster(now=NOW)
    cluster.apply(objects)
    return cluster


def test_snapshot_rebuilds_groups_from_labels() -> None:
    snap = _cluster().snapshot()
    g = snap.gpus
    by_name = {t.name: t for t in snap.tasks}
    assert g.cap.tolist() == [1000 * 1000]
    x, y = by_name["named"].gpu_slots[0], by_name["going"].gpu_slots[0]
    assert x != y
    # the unlabeled 300 MiB pod joins the first group it fits on (X: 500 + 300 <= 1000)
    assert by_name["unnamed"].gpu_slots == (x,)
    assert g.idle[0, x] == (1000 - 500 - 300) * 1000
    assert g.pods[0, x] == 2 and g.gone[0, x] == 0
    assert g.rel[0, y] == 400 * 1000 and g.pods[0, y] == 1 and g.gone[0, y] == 1
    # two groups take two whole GPUs; the one whose pods are all releasing is a releasing GPU
    assert snap.nodes.used[0, GPU] == 2 * MILLI
    assert snap.nodes.releasing[0, GPU] == MILLI
    # queues are charged the fractions: 0.5 + 0.3 + 0.4 (the releasing one still counts as used)
    assert by_name["unnamed"].request[GPU] == 300


def test_statement_rollback_restores_every_gpu_array() -> None:
    snap = _cluster().snapshot()
    ssn = open_session(snap, SchedulerConf())
    by_name = {t.name: t for t in snap.tasks}
    arrays = lambda: [ssn.idle.copy(), ssn.releasing.copy(), *ssn.gpu_arrays()]  # noqa: E731
    before = arrays()
    gpus_before = list(ssn.gpus)
    stmt = ssn.statement()
    stmt.evict(by_name["named"])
    stmt.pipeline(by_name["pending"], 0)
    assert ssn.status[by_name["pending"].index] == TaskStatus.PIPELINED
    assert ssn.gpus[by_name["pending"].index]
    stmt.rollback()
    for a, b in zip(arrays(), before):
        assert np.array_equal(a, b)
    assert ssn.gpus == gpus_before
    assert ssn.status[by_name["pending"].index] == TaskStatus.PENDING


def test_whole_gpu_takes_the_last_whole_gpu_only() -> None:
    snap = _cluster().snapshot()
    ssn = open_session(snap, SchedulerConf())
    pending = next(t for t in snap.tasks if t.name == "pending")
    # 3 GPUs: groups X and Y hold two; one whole GPU is idle, and the 0.6 fraction takes it as a new group
    assert ssn.placer.best_node(pending) == (0, True, None)
    stmt = ssn.statement()
    stmt.allocate(pending, 0)
    slot = ssn.gpus[pending.index][0]
    assert ssn.gpu_rows(0)[2][slot] == 1 and ssn.idle[0, GPU] == 0
    assert ssn.gpu_group_names(pending) == (f"node0-gpu{slot}",)


def test_container_name_may_be_an_init_container() -> None:
    from kai.api.objects import parse_pod

    doc = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "annotations": {"gpu-fraction": "0.5", "gpu-fraction-container-name": "setup"}},
        "spec": {"initContainers": [{"name": "setup"}], "containers": [{"name": "main"}]},
    }
    assert parse_share(parse_pod(doc)) == (GpuShare(500, 0, 1, "setup"), "")


def test_example_two_inference_pods_share_one_gpu_across_cycles() -> None:
    """examples/gpu-sharing (shown in docs/gpu-sharing.md): both 0.5 pods on one GPU, and they stay there."""
    from pathlib import Path

    from tests.conftest import run_sim

    example = Path(__file__).parents[2] / "examples" / "gpu-sharing" / "cluster.yaml"
    for cycles, status in (("1", "Binding"), ("3", "Running")):
        code, doc, err = run_sim([str(example), "--cycles", cycles])
        assert code == 0, err
        assert doc is not None
        pods = {p["name"]: p for p in doc["pods"]}
        for name in ("chat-small", "embedder"):
            assert pods[name]["status"] == status
            assert pods[name]["node"] == "gpu-node"
            assert pods[name]["gpus"] == 0.5
            assert pods[name]["gpuGroups"] == ["gpu-node-gpu0"]


def test_embedded_cluster_labels_unlabeled_running_shared_pods() -> None:
    cluster = _cluster()
    cluster.run_cycle(SchedulerConf(actions=("allocate",)))
    pods = {p.meta.name: p for p in cluster.store.list("Pod")}
    assert pods["named"].meta.labels["runai-gpu-group"] == "X"
    # the unlabeled pod was placed on X by the snapshot and is now labelled so the next cycle agrees
    assert pods["unnamed"].meta.labels["runai-gpu-group"] == "X"
    assert pods["pending"].node_name == "node0"
    assert pods["pending"].meta.labels["runai-gpu-group"].startswith("node0-gpu")


def test_evicting_a_whole_gpu_pod_from_an_over_committed_node_frees_no_device() -> None:
    """n0 has one GPU, held by a group (a running half) and, over-committed, by a whole-GPU pod as well (input
    an API server can hold). Evicting the whole-GPU pod pays what the node owes; no device comes free, so a 0.7
    portion neither fits there later nor is offered the node (the Placer and pick_gpus agree: before, the
    Placer offered the node and pipelining there raised)."""
    docs = [
        B.node("n0", gpu=1),
        B.queue("team"),
        *B.job_docs("half", "team", on="n0", gpu=0, fraction="0.5", gpu_groups=("n0-gpu0",)),
        *B.job_docs("whole", "team", on="n0", gpu=1),
        *B.job_docs("big", "team", gpu=0, fraction="0.7"),
    ]
    ssn = B.session_of(docs)
    whole, big = B.task(ssn.snap, "whole-0"), B.task(ssn.snap, "big-0")
    assert ssn.idle[0, GPU] == -MILLI  # the group counts one GPU, the whole pod another
    ssn.statement().evict(whole)
    assert ssn.fit_on(big, 0) == 0
    assert ssn.pick_gpus(big, 0, allow_releasing=True) is None
    assert ssn.placer.best_node(big) is None


# --- the one GPU-fit rule: every way of asking it answers the same ----------------------------------------


def _random_node(rng: np.random.Generator) -> tuple[int, list[int], list[int], list[int], list[int], int, int]:
    """(cap, idle, rel, pods, gone, whole idle milli, whole releasing milli) of a node with 0-4 GPU groups."""
    cap = int(rng.choice([40_000_000, 80_000_000]))
    n = int(rng.integers(0, 5))
    pods = [int(x) for x in rng.integers(1, 4, n)]
    gone = [int(rng.integers(0, p + 1)) for p in pods]
    idle = [int(x) for x in rng.integers(0, cap + 1, n)]
    rel = [int(rng.integers(0, cap - i + 1)) for i in idle]
    whole_idle = int(rng.integers(-1, 4)) * MILLI
    whole_rel = int(rng.integers(0, 3)) * MILLI
    return cap, idle, rel, pods, gone, whole_idle, whole_rel


def test_every_fit_function_answers_as_the_one_rule() -> None:
    """fit_rows (NumPy, many nodes), fit_one (one node), fit_rows_single and one_device_room (one device, from
    the largest groups) count the inputs of ``portion_fits`` differently; on 3,000 random nodes and portions
    they all give what portion_fits gives on counts taken straight from the GPU slots."""
    from kai.scheduler.gpusharing import fit_one, fit_rows, fit_rows_single, one_device_room, portion_fits, whole_gpus

    rng = np.random.default_rng(7)
    for _ in range(3000):
        cap, idle, rel, pods, gone, w_idle, w_rel = _random_node(rng)
        share = GpuShare(int(rng.choice([100, 250, 500, 900])), 0, int(rng.integers(1, 4)), "")
        need = share.units(cap)
        live = [s for s in range(len(pods)) if pods[s] > gone[s]]  # groups with a running pod
        now_n = sum(1 for s in live if idle[s] >= need)
        later_n = sum(1 for s in live if idle[s] + rel[s] >= need)
        whole_now, whole_later = whole_gpus(w_idle, w_rel)
        want = (
            bool(portion_fits(need, cap, now_n, whole_now, share.devices)),
            bool(portion_fits(need, cap, later_n, whole_later, share.devices)),
            bool(portion_fits(need, cap, later_n, 0, 1)),
        )
        free_now = [idle[s] for s in live]
        free_later = [idle[s] + rel[s] for s in live]
        assert tuple(map(bool, fit_one(share, cap, free_now, free_later, w_idle, w_rel))) == want
        width = max(len(pods), 1)
        arrays = [np.array([(v + [0] * width)[:width]], dtype=np.int64) for v in (idle, rel, pods, gone)]
        got = fit_rows(share, np.array([cap]), *arrays, np.array([w_idle]), np.array([w_rel]))
        assert tuple(bool(a[0]) for a in got) == want
        if share.devices == 1:
            max_now, max_later = max(free_now, default=-1), max(free_later, default=-1)
            room_now, room_later, room_shared = one_device_room(cap, max_now, max_later, w_idle, w_rel)
            assert (need <= room_now, need <= room_later, need <= room_shared) == want
            one = [np.array([v]) for v in (cap, max_now, max_later, w_idle, w_rel)]
            single = fit_rows_single(share, *one)
            assert tuple(bool(a[0]) for a in single) == want


def test_a_pipelined_pod_ranks_gpus_as_they_will_be_once_the_releasing_pods_are_gone() -> None:
    """Four GPUs of 1,000 units: slot 0 holds 700 units and 300 releasing, slot 1 holds 700, slots 2 and 3 are
    free. A portion of 250 on 3 GPUs, gpupack. Bound now, it takes what is free now (1, 2, 3). Pipelined, it
    is bound only once the releasing pod is gone; then slots 0 and 1 are equally full and pack takes them
    first, so that is what it picks now: a victim solver's plan made around the releasing pod picks the GPUs
    the next cycle will (else the next cycle fails the plan, and the solver makes it again, for ever)."""
    share = GpuShare(250, 0, devices=3)
    idle, rel, pods, gone = [0, 300, 1000, 1000], [300, 0, 0, 0], [2, 1, 0, 0], [1, 0, 0, 0]
    assert choose(share, 1000, [300, 300, 1000, 1000], [0] * 4, [1, 1, 0, 0], [0] * 4, 2, 0, True, False) == [
        (0, "group"),
        (1, "group"),
        (2, "fresh"),
    ]  # the next cycle's choice, with the releasing pod gone
    assert choose(share, 1000, idle, rel, pods, gone, 2, 0, True, False) == [(1, "group"), (2, "fresh"), (3, "fresh")]
    assert choose(share, 1000, idle, rel, pods, gone, 2, 0, True, True) == [(0, "group"), (1, "group"), (2, "fresh")]
