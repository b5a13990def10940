"""Time-based fair share on a real cluster: kai exports what each queue holds, a real Prometheus (Debian's
package) scrapes it every second, and kai asks it for each queue's usage over the shard's window.

Real parts: kube-apiserver + etcd, ``kai scheduler`` as a process (as kai's ServiceAccount), Prometheus.
Played by the test: only the kubelet (bound pods stay Pending; a finished pod is deleted by the test).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.generic_resource import create_global_resource
from lightkube.resources.core_v1 import Pod

from kai.k8s.envtest import ControlPlane, free_port
from tests.k8s.kaiproc import KaiCommand
from tests.k8s.prometheus import Prometheus
from tests.k8s.sched import PodGroup, Queue, wait_for
from tests.k8s.test_scheduler import gpu_pod

SchedulingShard = create_global_resource("kai.scheduler", "v1", "SchedulingShard", "schedulingshards")
WINDOW = "60s"  # all of the test's history stays in the window


def _queue(name: str) -> Queue:
    over = {"quota": 0, "limit": -1, "overQuotaWeight": 1}
    free = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return Queue.from_dict(
        {"metadata": {"name": name}, "spec": {"resources": {"gpu": over, "cpu": free, "memory": free}}}
    )


def _job(admin: Client, ns: str, name: str, queue: str) -> None:
    """A PodGroup and its one 1-GPU pod, made before any scheduler sees them (no pod-grouper race)."""
    admin.create(
        PodGroup.from_dict({"metadata": {"name": name, "namespace": ns}, "spec": {"minMember": 1, "queue": queue}})
    )
    admin.create(gpu_pod(name, ns, queue=queue, annotations={"pod-group-name": name}))


def _node_of(admin: Client, ns: str, name: str) -> str:
    return admin.get(Pod, name, namespace=ns).spec.nodeName or ""


def _finish(admin: Client, ns: str, name: str) -> None:
    """The pod's run ends (a kubelet would report it; here it is removed at once)."""
    admin.delete(Pod, name, namespace=ns, grace_period=0)


@pytest.fixture
def prometheus(tmp_path: Path) -> Iterator[tuple[Prometheus, int]]:
    """A Prometheus scraping the port the test's kai scheduler will serve /metrics on."""
    port = free_port()
    prom = Prometheus([f"127.0.0.1:{port}"], tmp_path / "prometheus")
    prom.start()
    try:
        yield prom, port
    finally:
        prom.stop()


@pytest.fixture
def usage_shard(admin: Client, prometheus: tuple[Prometheus, int]) -> Iterator[None]:
    prom, _ = prometheus
    shard = {
        "metadata": {"name": "default"},
        "spec": {
            "usageDBConfig": {
                "clientType": "prometheus",
                "connectionString": prom.url,
                "usageParams": {
                    "windowSize": WINDOW,
                    "fetchInterval": "1s",
                    "waitTimeout": "20s",
                    "extraParams": {"queryResolution": "1s"},
                },
            }
        },
    }
    admin.apply(SchedulingShard.from_dict(shard), field_manager="test")
    yield
    admin.delete(SchedulingShard, "default")


def test_two_queues_alternate_and_less_history_wins_the_tie(
    scheduler_cluster: ControlPlane,
    admin: Client,
    ns: str,
    nodes: Any,
    prometheus: tuple[Prometheus, int],
    usage_shard: None,
    tmp_path: Path,
) -> None:
    """One GPU, queues qa (older) and qb with equal weights, allocate only (no reclaim):

    1. qa's job holds the GPU for a few seconds while qb asks for nothing: qa has history, qb none.
    2. kai is stopped; a job of each queue waits; qa's first job finishes; kai starts again. Its first
       cycle gives the GPU to qb, whose usage is lower. Without usage the tie would go to the older
       queue, qa: the history came from Prometheus across the restart.
    3. qb's job holds the GPU twice as long; a new qb job waits beside qa's; qb's job finishes: now qa
       has less history, and wins.
    4. Prometheus stops: kai warns, counts the failed queries and goes on scheduling.
    """
    prom, port = prometheus
    nodes("fs-0", gpus=1)
    admin.apply(_queue("qa"), field_manager="test")
    time.sleep(1.1)  # creation timestamps have 1 s resolution: qa is strictly older
    admin.apply(_queue("qb"), field_manager="test")
    args = ("--actions=allocate", "--leader-elect-name=usage-test")

    kai = KaiCommand(scheduler_cluster, "usage-1", tmp_path, *args, port=port)
    try:
        _job(admin, ns, "qa-1", "qa")
        wait_for(lambda: _node_of(admin, ns, "qa-1"), "qa-1 to be bound")
        wait_for(lambda: prom.query('kai_queue_allocated_gpus{queue_name="qa"} == 1'), "Prometheus to see qa's GPU")
        time.sleep(5)  # qa holds the whole pool for 5 s
        assert kai.stop() == 0
    finally:
        kai.kill()

    _job(admin, ns, "qa-2", "qa")
    _job(admin, ns, "qb-1", "qb")
    _finish(admin, ns, "qa-1")
    kai = KaiCommand(scheduler_cluster, "usage-2", tmp_path, *args, port=port)
    try:
        wait_for(lambda: _node_of(admin, ns, "qb-1") or _node_of(admin, ns, "qa-2"), "the freed GPU to be given")
        assert _node_of(admin, ns, "qb-1") == "fs-0", kai.tail()
        assert _node_of(admin, ns, "qa-2") == ""
        qa_usage = kai.metric('kai_queue_historical_usage{queue_name="qa",resource="gpu"}')
        assert qa_usage is not None and 0.05 < qa_usage < 0.3, qa_usage  # about 5-7 s of 60 s, whole pool
        assert not kai.metric('kai_queue_historical_usage{queue_name="qb",resource="gpu"}')

        time.sleep(12)  # qb holds the GPU twice as long as qa did
        _job(admin, ns, "qb-2", "qb")
        time.sleep(1.0)  # kai has seen qb-2 waiting beside qa-2
        _finish(admin, ns, "qb-1")
        wait_for(lambda: _node_of(admin, ns, "qa-2") or _node_of(admin, ns, "qb-2"), "the freed GPU to be given")
        assert _node_of(admin, ns, "qa-2") == "fs-0", kai.tail()
        assert _node_of(admin, ns, "qb-2") == ""
        qa = kai.metric('kai_queue_historical_usage{queue_name="qa",resource="gpu"}')
        qb = kai.metric('kai_queue_historical_usage{queue_name="qb",resource="gpu"}')
        assert qa is not None and qb is not None and qb > qa, (qa, qb)

        prom.stop()
        _finish(admin, ns, "qa-2")
        wait_for(lambda: _node_of(admin, ns, "qb-2"), "qb-2 to be bound with Prometheus down")
        wait_for(lambda: (kai.metric("kai_usage_fetch_errors_total") or 0) > 0, "failed usage queries counted")
        assert kai.proc.poll() is None
        assert "no historical usage" in kai.log.read_text()
    finally:
        kai.kill()
