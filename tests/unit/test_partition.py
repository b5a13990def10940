"""Node-pool partitions (kai.scheduler.partition) and ``kai sim --shard``: a shard sees only its own pool."""

from __future__ import annotations

from typing import Any

import yaml

from kai.api.objects import Node, ObjectMeta, Pod, PodGroup, Queue
from kai.scheduler.partition import Partition, partition_input
from tests.conftest import run_sim

KEY = "kai.scheduler/node-pool"


def _meta(name: str, pool: str | None, ns: str = "") -> ObjectMeta:
    return ObjectMeta(name, ns, f"uid-{name}", labels={KEY: pool} if pool else {})


def test_a_value_selects_the_labelled_objects_and_empty_selects_the_unlabelled() -> None:
    """KAI's selector: Equals for a value, DoesNotExist for the empty value."""
    a, unlabelled = Partition("a"), Partition("")
    assert a.matches({KEY: "a"}) and not a.matches({KEY: "b"}) and not a.matches({})
    assert unlabelled.matches({}) and not unlabelled.matches({KEY: "a"}) and not unlabelled.matches({KEY: ""})
    assert Partition("a", key="pool").matches({"pool": "a"}) and not Partition("a", key="pool").matches({KEY: "a"})
    assert unlabelled.pool == "default" and a.pool == "a"


def test_a_shard_keeps_its_nodes_queues_podgroups_and_the_pods_that_concern_them() -> None:
    nodes = [Node(_meta("a0", "a"), {}), Node(_meta("b0", "b"), {}), Node(_meta("plain", None), {})]
    queues = [Queue(_meta("qa", "a")), Queue(_meta("qb", "b"))]
    groups = [PodGroup(_meta("ga", "a", "ns"), queue="qa"), PodGroup(_meta("gb", "b", "ns"), queue="qb")]

    def pod(name: str, group: str, node_name: str = "") -> Pod:
        meta = ObjectMeta(name, "ns", f"uid-{name}", annotations={"pod-group-name": group})
        return Pod(meta, {}, node_name=node_name)

    pods = [
        pod("pending-a", "ga"),
        pod("pending-b", "gb"),
        pod("running-on-a0", "gb", "a0"),  # whoever placed it, it uses a0's room
        pod("running-on-b0", "ga", "b0"),
        pod("no-group", "", ""),
    ]
    mine = partition_input(Partition("a"), nodes=nodes, pods=pods, podgroups=groups, queues=queues)
    assert [n.meta.name for n in mine.nodes] == ["a0"]
    assert [q.meta.name for q in mine.queues] == ["qa"]
    assert [g.meta.name for g in mine.podgroups] == ["ga"]
    assert [p.meta.name for p in mine.pods] == ["pending-a", "running-on-a0"]
    whole = partition_input(None, nodes=nodes, pods=pods, podgroups=groups, queues=queues)
    assert len(whole.nodes) == 3 and len(whole.pods) == 5


def _pool_docs() -> list[dict[str, Any]]:
    """Two pools of one 2-GPU node each, a queue and a 2-pod gang per pool, two shards."""
    docs: list[dict[str, Any]] = []
    for pool in ("a", "b"):
        labels = {KEY: pool}
        docs += [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"node-{pool}", "labels": labels},
                "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}},
            },
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": f"q-{pool}", "labels": labels},
                "spec": {"resources": {"gpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1}}},
            },
            {
                "apiVersion": "kai.scheduler/v1",
                "kind": "SchedulingShard",
                "metadata": {"name": f"shard-{pool}"},
                "spec": {"partitionLabelValue": pool},
            },
        ]
        for i in range(2):  # bare pods; the pod-grouper copies their node-pool label to the PodGroup
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": f"{pool}-{i}", "labels": {**labels, "kai.scheduler/queue": f"q-{pool}"}},
                    "spec": {
                        "schedulerName": "kai-scheduler",
                        "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": 1}}}],
                    },
                }
            )
    return docs


def test_sim_shard_schedules_only_its_pool() -> None:
    text = yaml.safe_dump_all(_pool_docs(), sort_keys=False)
    code, doc, err = run_sim(["-", "--shard", "shard-a"], stdin=text)
    assert code == 0, err
    assert doc is not None
    placed = {p["name"]: p.get("node") for p in doc["pods"]}
    assert placed["a-0"] == "node-a" and placed["a-1"] == "node-a"
    assert not placed["b-0"] and not placed["b-1"]  # shard-b's pods wait for shard-b's scheduler
    assert [q["name"] for q in doc["queues"]] == ["q-a"]
    code, doc, err = run_sim(["-"], stdin=text)  # no --shard: one scheduler for the whole cluster
    assert code == 0, err
    assert doc is not None
    whole = {p["name"]: p.get("node") for p in doc["pods"]}
    assert all(whole.values()) and set(whole.values()) == {"node-a", "node-b"}  # every pod, pools mixed


def test_sim_shard_that_does_not_exist_is_an_error() -> None:
    code, _, err = run_sim(["-", "--shard", "nope"], stdin=yaml.safe_dump_all(_pool_docs()))
    assert code == 2  # bad input
    assert 'no SchedulingShard "nope"' in err
