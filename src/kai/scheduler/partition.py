"""Node-pool partitions: the objects one SchedulingShard's scheduler sees.

A SchedulingShard with ``partitionLabelValue: V`` schedules only the nodes, queues and PodGroups that
carry ``<nodePoolLabelKey>=V``; an empty value selects the objects *without* the key (KAI's
``SchedulingNodePoolParams.GetLabelSelector``: ``Equals`` or ``DoesNotExist``, applied to its node,
queue and PodGroup listers). The default key is ``kai.scheduler/node-pool`` (KAI's
``--nodepool-label-key``).

Rules: pure functions over the Store's objects, called before ``build_snapshot`` by both backends; no
I/O. Pods are not labelled by KAI's selector: a shard keeps the pods bound to its nodes (they use the
nodes' room, whoever scheduled them) and the unbound pods of its PodGroups (what it may schedule).
Everything else (PriorityClasses, Topologies, PDBs, storage) is cluster-wide and passes through.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kai.api import constants as C
from kai.api.objects import Node, Pod, PodGroup, Queue

DEFAULT_NODE_POOL_LABEL_KEY = C.LABEL_NODE_POOL
T = TypeVar("T", Node, Queue, PodGroup)


@dataclass(frozen=True, slots=True)
class Partition:
    """The label selector of one shard: ``key=value``, or ``key`` absent when *value* is empty."""

    value: str
    key: str = DEFAULT_NODE_POOL_LABEL_KEY

    def matches(self, labels: Mapping[str, str]) -> bool:
        if not self.value:
            return self.key not in labels
        return labels.get(self.key) == self.value

    @property
    def pool(self) -> str:
        """The node pool's name as KAI writes it in events and metrics ("default" for the unlabelled pool)."""
        return self.value or "default"

    def select(self, objects: Sequence[T]) -> list[T]:
        return [o for o in objects if self.matches(o.meta.labels)]


@dataclass(frozen=True, slots=True)
class PartitionedInput:
    nodes: list[Node]
    pods: list[Pod]
    podgroups: list[PodGroup]
    queues: list[Queue]


def partition_input(
    partition: Partition | None,
    *,
    nodes: Sequence[Node],
    pods: Sequence[Pod],
    podgroups: Sequence[PodGroup],
    queues: Sequence[Queue],
) -> PartitionedInput:
    """What the shard's scheduler sees; *partition* None is the whole cluster (no SchedulingShard)."""
    if partition is None:
        return PartitionedInput(list(nodes), list(pods), list(podgroups), list(queues))
    mine_nodes = partition.select(nodes)
    mine_groups = partition.select(podgroups)
    node_names = {n.meta.name for n in mine_nodes}
    group_keys = {(pg.meta.namespace or "", pg.meta.name) for pg in mine_groups}
    mine_pods = [p for p in pods if (p.node_name in node_names if p.node_name else _group_of(p) in group_keys)]
    return PartitionedInput(mine_nodes, mine_pods, mine_groups, partition.select(queues))


def _group_of(pod: Pod) -> tuple[str, str]:
    return (pod.meta.namespace or "", pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, ""))
