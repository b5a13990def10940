"""The cluster state ``kai explain`` works on: the objects the scheduler reads, and the clock.

Rules: a ClusterState is the same input the scheduler's cycle gets (``kai scheduler`` builds it from its
informers' Store, ``kai sim`` from its embedded cluster's Store); ``snapshot`` builds the engine's
Snapshot exactly as both do (``kai.scheduler.snapshot.build_snapshot``). Nothing here does I/O: readers
of files and of a live cluster fill a Store at the edge and hand it over.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kai.api.objects import Node, Pod, PodGroup, PriorityClass, Queue, SchedulingShard, Topology
from kai.api.pdb import PodDisruptionBudget
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.partition import PartitionedInput
from kai.scheduler.plugins import check_conf, task_order_of
from kai.scheduler.snapshot import Snapshot, build_snapshot
from kai.scheduler.taskorder import default_task_order
from kai.store import Store


@dataclass(frozen=True, slots=True)
class ClusterState:
    """Every object kind the scheduler watches, as lists, with the scheduling clock ``now``."""

    nodes: tuple[Node, ...]
    pods: tuple[Pod, ...]
    podgroups: tuple[PodGroup, ...]
    queues: tuple[Queue, ...]
    priority_classes: tuple[PriorityClass, ...]
    now: float
    pdbs: tuple[PodDisruptionBudget, ...] = ()
    topologies: tuple[Topology, ...] = ()
    shard: SchedulingShard | None = None
    bare_pods_return: bool = True  # False for a real cluster (``Snapshot.bare_pods_return``)

    @classmethod
    def from_store(
        cls,
        store: Store,
        now: float,
        shard: str = "default",
        *,
        bare_pods_return: bool = True,
        seen: PartitionedInput | None = None,
    ) -> ClusterState:
        """The Store's objects; *shard* names the SchedulingShard whose settings apply (as ``kai scheduler
        --shard``); when it is absent, the first by name (as ``kai sim``) or none. *bare_pods_return*: False
        for a real cluster's Store, where an evicted pod no controller owns is gone. *seen*: the nodes, pods,
        PodGroups and queues a scheduler decides on instead of the Store's (``KaiScheduler.view``: its shard,
        with what it did and the watch does not show yet)."""
        shards = sorted(store.list("SchedulingShard"), key=lambda s: (s.meta.name != shard, s.meta.name))
        if seen is None:
            seen = PartitionedInput(store.list("Node"), store.list("Pod"), store.list("PodGroup"), store.list("Queue"))
        return cls(
            nodes=tuple(seen.nodes),
            pods=tuple(seen.pods),
            podgroups=tuple(seen.podgroups),
            queues=tuple(seen.queues),
            priority_classes=tuple(store.list("PriorityClass")),
            now=now,
            pdbs=tuple(store.list("PodDisruptionBudget")),
            topologies=tuple(store.list("Topology")),
            shard=shards[0] if shards else None,
            bare_pods_return=bare_pods_return,
        )

    def snapshot(self, conf: SchedulerConf | None = None) -> Snapshot:
        """The cluster as the engine sees it; *conf* orders each job's pods by its task-order plugins and says
        when a terminating pod is StuckInReleasing."""
        return build_snapshot(
            nodes=list(self.nodes),
            pods=list(self.pods),
            podgroups=list(self.podgroups),
            queues=list(self.queues),
            priority_classes=list(self.priority_classes),
            now=self.now,
            pdbs=self.pdbs,
            topologies=self.topologies,
            task_order=task_order_of(conf) if conf is not None else default_task_order,
            stuck_in_releasing_s=(conf or SchedulerConf()).stuck_in_releasing_threshold,
            bare_pods_return=self.bare_pods_return,
        )

    def conf(self, actions: tuple[str, ...] | None = None) -> SchedulerConf:
        """The scheduler's configuration from the SchedulingShard (ConfigError if it is bad)."""
        return check_conf(SchedulerConf.from_shard(self.shard, actions=actions))

    def replace(self, **changes: object) -> ClusterState:
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]
