"""SchedulingShards on a real API server: two ``kai scheduler --shard`` processes, one per node pool.

Each process runs the installed ``kai`` command as kai's ServiceAccount (so RBAC is exercised too). Nothing
here is played by the test but the pods' kubelet, which no test runs (bound pods stay Pending).
Every assertion reads the API server: where each pod was bound, the PodGroups' labels, the Leases.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import Client
from lightkube.generic_resource import create_global_resource
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Node, Pod

from kai.k8s._api import Api, load_config
from kai.k8s._scheduler import KaiScheduler
from kai.k8s._shard import ShardMissing, resolve_partition
from kai.k8s.envtest import ControlPlane
from tests.k8s.kaiproc import KaiCommand
from tests.k8s.sched import PodGroup, Queue, options, wait_for
from tests.k8s.test_scheduler import gpu_pod

KEY = "kai.scheduler/node-pool"
POOLS = ("a", "b")
SchedulingShard = create_global_resource("kai.scheduler", "v1", "SchedulingShard", "schedulingshards")


def shard_process(cp: ControlPlane, shard: str, log_dir: Path) -> KaiCommand:
    """``kai scheduler --shard NAME``; the Lease name is left to kai (derived from the shard)."""
    return KaiCommand(cp, shard, log_dir, f"--shard={shard}")


@pytest.fixture
def shards(scheduler_cluster: ControlPlane, admin: Client) -> Iterator[list[KaiCommand]]:
    for pool in POOLS:
        admin.apply(
            SchedulingShard.from_dict({"metadata": {"name": f"shard-{pool}"}, "spec": {"partitionLabelValue": pool}}),
            field_manager="test",
        )
        admin.apply(
            Queue.from_dict(
                {
                    "metadata": {"name": f"q-{pool}", "labels": {KEY: pool}},
                    "spec": {"resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in _RES}},
                }
            ),
            field_manager="test",
        )
    procs: list[KaiCommand] = []
    yield procs
    for p in procs:
        p.kill()


_RES = ("gpu", "cpu", "memory")


def _pool_pod(name: str, ns: str, pool: str) -> Pod:
    pod = gpu_pod(name, ns, queue=f"q-{pool}")
    pod.metadata.labels[KEY] = pool  # the pod-grouper copies it to the PodGroup
    return pod


def _placement(admin: Client, ns: str) -> dict[str, tuple[str, str]]:
    """pod → (its pool label, the pool label of the node it is bound to; "" unbound)."""
    pools = {n.metadata.name: (n.metadata.labels or {}).get(KEY, "-") for n in admin.list(Node)}
    return {
        p.metadata.name: ((p.metadata.labels or {}).get(KEY, ""), pools.get(p.spec.nodeName or "", ""))
        for p in admin.list(Pod, namespace=ns)
    }


def test_two_shards_never_touch_each_others_nodes(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, shards: list[KaiCommand], tmp_path: Path
) -> None:
    """Pools a and b (two 4-GPU nodes each) and an unlabelled node no shard serves; 8 one-GPU pods per pool.
    shard-a alone binds pool a's pods to pool-a nodes and leaves pool b's pods alone (not even grouped);
    then shard-b binds pool b's. Every bound pod sits on a node of its own pool; the Leases are per pool."""
    for pool in POOLS:
        for i in range(2):
            nodes(f"{pool}-{i}", gpus=4, labels={KEY: pool})
    nodes("plain-0", gpus=8)  # the unlabelled pool: served by neither shard (both have a value)
    for pool in POOLS:
        for i in range(8):
            admin.create(_pool_pod(f"{pool}-{i}", ns, pool))

    a = shard_process(scheduler_cluster, "shard-a", tmp_path)
    shards.append(a)
    wait_for(
        lambda: sum(1 for pod_pool, node_pool in _placement(admin, ns).values() if node_pool and pod_pool == "a") == 8,
        "shard-a to bind pool a's 8 pods",
    )
    time.sleep(1.5)  # three more cycles of shard-a: it must not touch pool b
    placed = _placement(admin, ns)
    assert {n: v for n, v in placed.items() if v[0] == "a"} == {f"a-{i}": ("a", "a") for i in range(8)}, a.tail()
    assert all(node_pool == "" for pod_pool, node_pool in placed.values() if pod_pool == "b"), placed

    def podgroups() -> dict[str, str | None]:
        return {g.metadata.name: (g.metadata.labels or {}).get(KEY) for g in admin.list(PodGroup, namespace=ns)}

    # a bare pod's PodGroup is written after its bind (docs/cluster.md, what precedes a bind): wait for all 8
    wait_for(lambda: len(podgroups()) >= 8, "shard-a's 8 PodGroups")
    groups = podgroups()
    assert set(groups.values()) == {"a"}, groups  # shard-a grouped only its own pool's pods

    b = shard_process(scheduler_cluster, "shard-b", tmp_path)
    shards.append(b)
    wait_for(
        lambda: all(node_pool for node_pool in (v[1] for v in _placement(admin, ns).values())),
        "shard-b to bind pool b's 8 pods",
    )
    placed = _placement(admin, ns)
    assert placed == {f"{p}-{i}": (p, p) for p in POOLS for i in range(8)}, (placed, b.tail())
    groups = {g.metadata.name: (g.metadata.labels or {}).get(KEY) for g in admin.list(PodGroup, namespace=ns)}
    assert sorted(groups.values()) == ["a"] * 8 + ["b"] * 8, groups
    for pool in POOLS:  # KAI's Lease names: kai-scheduler-<partitionLabelValue>
        lease = admin.get(Lease, f"kai-scheduler-{pool}", namespace="kai-scheduler")
        assert lease.spec.holderIdentity == f"shard-{pool}"
    assert a.proc.poll() is None and b.proc.poll() is None
    assert a.stop() == 0 and b.stop() == 0


def test_a_shard_that_does_not_exist_stops_the_process_saying_so(
    scheduler_cluster: ControlPlane, tmp_path: Path
) -> None:
    p = shard_process(scheduler_cluster, "no-such-shard", tmp_path)
    assert p.proc.wait(timeout=30) != 0
    assert 'SchedulingShard "no-such-shard" does not exist' in p.log.read_text()


def test_a_missing_shard_stops_the_scheduler_with_its_lists_under_way(scheduler_cluster: ControlPlane) -> None:
    """The informers' lists go out before the shard is read (docs/cluster.md, start-up): a shard that does
    not exist still ends ``run`` with ShardMissing, and nothing the scheduler started is left running."""

    async def main() -> list[asyncio.Task[object]]:
        s = KaiScheduler(options(scheduler_cluster, shard="no-such-shard"))
        with pytest.raises(ShardMissing, match='"no-such-shard" does not exist'):
            await s.run()
        assert s.informers, "the lists had started"
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(main()) == []


def test_a_shard_is_found_on_any_page_of_the_list(
    scheduler_cluster: ControlPlane, shards: list[KaiCommand], admin: Client
) -> None:
    """The shard is read from an unfiltered, paginated list (a selector would be refused while the API
    server's cache of the kind initializes, ``kai.k8s._shard``): as kai's ServiceAccount, one shard a page,
    each name is found wherever its page is, and a name on no page is missing."""
    admin.apply(
        SchedulingShard.from_dict({"metadata": {"name": "shard-c"}, "spec": {"partitionLabelValue": "c"}}),
        field_manager="test",
    )

    async def read() -> list[str | None]:
        api = Api(load_config(str(scheduler_cluster.scheduler_kubeconfig)))
        try:
            found = [await resolve_partition(api, f"shard-{x}", KEY, page_size=1) for x in ("a", "b", "c")]
            with pytest.raises(ShardMissing, match='"shard-d" does not exist'):
                await resolve_partition(api, "shard-d", KEY, page_size=1)
            return [p.value if p is not None else None for p in found]
        finally:
            await api.close()

    assert asyncio.run(read()) == ["a", "b", "c"]
