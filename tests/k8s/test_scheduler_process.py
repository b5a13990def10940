"""``kai scheduler`` as a real process: leader election between two replicas, and kill -9 mid-run.

Both run the installed ``kai`` command as kai's ServiceAccount, with short Lease timings.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from kai.k8s.envtest import ControlPlane, Fault
from tests.k8s.sched import KaiProcess, PodGroup, through_proxy, wait_for, wait_for_progress
from tests.k8s.test_scheduler import bound, gpu_pod, gpus_per_node


@pytest.fixture
def replicas(scheduler_cluster: ControlPlane, tmp_path: Path) -> Iterator[list[KaiProcess]]:
    procs: list[KaiProcess] = []
    yield procs
    for p in procs:
        if p.proc.poll() is None:
            p.stop(signal.SIGKILL)


def holder(client: Client, lease: str) -> str:
    return client.get(Lease, lease, namespace="kai-scheduler").spec.holderIdentity or ""


def test_leader_election_two_replicas(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, replicas: list[KaiProcess], tmp_path: Path
) -> None:
    nodes("le-0", gpus=8)
    lease = f"kai-le-{uuid.uuid4().hex[:6]}"
    a = KaiProcess(scheduler_cluster, "replica-a", lease, tmp_path)
    replicas.append(a)
    wait_for(lambda: a.get("/readyz") == (200, "ok"), "replica a to lead and sync", timeout=60)
    b = KaiProcess(scheduler_cluster, "replica-b", lease, tmp_path)
    replicas.append(b)
    wait_for(lambda: b.get("/healthz") == (200, "ok"), "replica b to start")
    # Leadership is not readiness: a synced standby is ready (a rolling update may replace the leader
    # with it), and says it stands by.
    wait_for(lambda: b.get("/readyz") == (200, "ok (standby)"), "the standby to be ready")
    assert holder(admin, lease) == "replica-a"

    admin.create(gpu_pod("first", ns))
    wait_for(lambda: "first" in bound(admin, ns), "the leader to bind a pod")
    assert "kai_is_leader 1.0" in a.get("/metrics")[1]
    assert "kai_is_leader 0.0" in b.get("/metrics")[1]
    assert b.proc.poll() is None  # the standby waits, it neither exits nor schedules

    assert a.stop(signal.SIGTERM) == 0  # a clean stop gives the Lease up
    wait_for(lambda: b.get("/readyz") == (200, "ok"), "replica b to take over", timeout=30)
    assert holder(admin, lease) == "replica-b"
    admin.create(gpu_pod("second", ns))
    wait_for(lambda: "second" in bound(admin, ns), "the new leader to bind a pod")
    assert '"became leader"' in b.log.read_text()


def test_kill_9_mid_run_and_restart_loses_nothing(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, replicas: list[KaiProcess], tmp_path: Path
) -> None:
    """100 one-GPU pods for 80 GPUs; the scheduler is killed (-9) as soon as it has bound a pod, then
    started again: every pod is still there with its uid, 80 are bound, no node holds more than 8 GPUs,
    and the 20 others wait with PodScheduled=False."""
    for i in range(10):
        nodes(f"k9-{i}", gpus=8)
    for i in range(100):
        admin.create(gpu_pod(f"w{i:03d}", ns))
    uids = {p.metadata.name: p.metadata.uid for p in admin.list(Pod, namespace=ns)}
    assert len(uids) == 100
    lease = f"kai-k9-{uuid.uuid4().hex[:6]}"

    # one bind at a time: on a quiet machine 80 binds and their PodGroups otherwise all land within one poll,
    # and the kill would come after the run instead of in it
    first = KaiProcess(scheduler_cluster, "first", lease, tmp_path, extra=("--bind-concurrency=1",))
    replicas.append(first)
    wait_for(lambda: bound(admin, ns), "the first replica to bind something", interval=0.01)
    first.proc.send_signal(signal.SIGKILL)
    assert first.proc.wait(timeout=10) == -signal.SIGKILL
    at_kill = len(bound(admin, ns))
    podgroups_at_kill = len(list(admin.list(PodGroup, namespace=ns)))
    # killed mid-run: binds, or the PodGroups and annotations that follow them, were still to come
    assert at_kill < 80 or podgroups_at_kill < 100, (at_kill, podgroups_at_kill)

    second = KaiProcess(scheduler_cluster, "second", lease, tmp_path)
    replicas.append(second)
    # As long as it takes: the second replica waits out the first's Lease (10 s), starts, lists, groups
    # and binds; on a loaded machine that is slow, and only a stall is a failure.
    wait_for_progress(
        lambda: (len(bound(admin, ns)), second.proc.poll()),
        lambda m: m[0] == 80 or m[1] is not None,
        f"80 pods bound after the restart ({at_kill} at the kill)",
    )
    assert second.proc.poll() is None, second.tail()
    time.sleep(1.5)  # three more cycles: nothing else may be bound
    pods = {p.metadata.name: p for p in admin.list(Pod, namespace=ns)}
    assert {n: p.metadata.uid for n, p in pods.items()} == uids  # no pod lost or recreated
    assert len(bound(admin, ns)) == 80
    per_node = gpus_per_node(admin, ns)
    assert len(per_node) == 10 and all(v == 8 for v in per_node.values()), per_node

    def waiting_explained() -> bool:
        waiting = [p for p in admin.list(Pod, namespace=ns) if not p.spec.nodeName]
        return len(waiting) == 20 and all(
            any(c.type == "PodScheduled" and c.status == "False" for c in (p.status.conditions or [])) for p in waiting
        )

    wait_for(waiting_explained, "PodScheduled=False on the 20 waiting pods")
    assert second.proc.poll() is None, second.tail()


def test_a_deposed_leader_writes_nothing(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, replicas: list[KaiProcess], tmp_path: Path
) -> None:
    """Item 3, fencing. Replica a leads and is binding 300 pods (each bind held 0.5 s by its proxy) when
    it is frozen (SIGSTOP) past its Lease; replica b takes over and binds the rest; then a thaws. Before,
    a went on with the binds and status writes of the cycle it was in, after b had started writing. Now
    a writes nothing once its Lease lapsed (its Fence closed at the renew deadline, whatever it was
    doing), and exits 1. Each replica reaches the API server through a proxy of its own, whose log says
    who wrote what when."""
    for i in range(8):
        nodes(f"fence-{i}", gpus=40)
    for i in range(300):
        admin.create(gpu_pod(f"f{i:03d}", ns))
    lease = f"kai-fence-{uuid.uuid4().hex[:6]}"
    timings = (6.0, 4.0, 0.5)  # lease, renew deadline, retry: 2 s of margin for writes on the wire
    with (
        through_proxy(scheduler_cluster, tmp_path, "a") as (proxy_a, kc_a),
        through_proxy(scheduler_cluster, tmp_path, "b") as (proxy_b, kc_b),
    ):
        proxy_a.add(Fault("delay", method="POST", path="/binding", seconds=0.5))
        # 4 binds in flight, each held 0.5 s: 300 binds take a ~40 s, so the freeze comes mid-run (with
        # 64 in flight a binds every pod within 3 s, before the test can freeze it)
        a = KaiProcess(
            scheduler_cluster, "a", lease, tmp_path, kubeconfig=kc_a, timings=timings, extra=("--bind-concurrency=4",)
        )
        replicas.append(a)
        wait_for(lambda: a.get("/readyz") == (200, "ok"), "replica a to lead")
        b = KaiProcess(scheduler_cluster, "b", lease, tmp_path, kubeconfig=kc_b, timings=timings)
        replicas.append(b)
        wait_for(lambda: b.get("/healthz") == (200, "ok"), "replica b to start")
        time.sleep(2)  # b's informers sync
        wait_for(lambda: any("/binding" in w.target for w in proxy_a.writes()), "a to bind", interval=0.01)
        a.proc.send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            wait_for(lambda: holder(admin, lease) == "b", "b to take the Lease", timeout=30)
            wait_for(lambda: any("/binding" in w.target for w in proxy_b.writes()), "b to bind")
            time.sleep(1.0)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        assert a.proc.wait(timeout=30) == 1, a.tail()  # it lost the Lease: exits 1, as kube-scheduler does
        wait_for(lambda: len(bound(admin, ns)) == 300, "b to bind every pod")
        first_b = min(w.sent_mono for w in proxy_b.writes())
        late = [w for w in proxy_a.writes() if w.sent_mono >= first_b]
        assert not late, f"a wrote {len(late)} times after b started writing, e.g. {late[:3]}"
        last_a = max(w.sent_mono for w in proxy_a.writes())
        assert last_a < stopped_at + timings[1], "a wrote after its renew deadline"
        assert all(v <= 40 for v in gpus_per_node(admin, ns).values())


def test_the_first_lists_are_sent_before_the_imports_and_taken_by_the_informers(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, replicas: list[KaiProcess], tmp_path: Path
) -> None:
    """``kai scheduler`` asks for pods and nodes before it imports the rest of itself (kai.k8s._early); the
    Pod and Node informers take those answers as their first lists (the log says which), and what they held
    (a node and a pod made before the start) is scheduled as from any list."""
    nodes("early-0", gpus=8)
    admin.create(gpu_pod("listed", ns))
    a = KaiProcess(scheduler_cluster, "early-a", f"kai-early-{uuid.uuid4().hex[:6]}", tmp_path)
    replicas.append(a)
    wait_for(lambda: "listed" in bound(admin, ns), "the pod listed at the start to be bound", timeout=60)
    synced = [json.loads(line) for line in a.log.read_text().splitlines() if '"informers synced"' in line]
    assert [s["listed_early"] for s in synced] == [["Node", "Pod"]], a.tail()
    assert bound(admin, ns)["listed"] == "early-0"
