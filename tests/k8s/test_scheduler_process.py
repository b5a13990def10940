"""``kai scheduler`` as a real process: leader election between two replicas, and kill -9 mid-run.

Both run the installed ``kai`` command as kai's ServiceAccount, with short Lease timings.
"""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Pod

from kai.k8s.envtest import ControlPlane, free_port
from tests.k8s.sched import PodGroup, wait_for
from tests.k8s.test_scheduler import bound, gpu_pod, gpus_per_node

KAI = Path(sys.executable).parent / "kai"


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no scheduler outlives a killed test run


class KaiProcess:
    """One ``kai scheduler`` replica; its JSON log goes to a file."""

    def __init__(self, cp: ControlPlane, identity: str, lease: str, log_dir: Path, *extra: str) -> None:
        self.port = free_port()
        self.identity = identity
        self.log = log_dir / f"kai-{identity}.log"
        args = [
            str(KAI),
            "scheduler",
            f"--kubeconfig={cp.scheduler_kubeconfig}",
            "--schedule-period=0.5",
            f"--leader-elect-name={lease}",
            "--lease-duration=2",
            "--renew-deadline=1.5",
            "--retry-period=0.25",
            f"--identity={identity}",
            f"--metrics-bind-address=127.0.0.1:{self.port}",
            *extra,
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


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
    code, text = b.get("/readyz")
    assert code == 503 and "standby" in text, (code, text)
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
    first = KaiProcess(scheduler_cluster, "first", lease, tmp_path, "--bind-concurrency=1")
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
    wait_for(lambda: len(bound(admin, ns)) == 80, f"80 pods bound after the restart ({at_kill} at the kill)")
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
