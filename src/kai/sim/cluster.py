"""The embedded cluster: an in-memory Kubernetes that applies the engine's decisions.

Rules (the sim contract): objects are applied to a Store exactly as manifests
say; a pod with no PodGroup gets one the way KAI's pod-grouper would make it
for a bare pod; cross-object references (queues, parents, PodGroups, priority
classes) are checked when applied and reported as ManifestErrors, so nothing is
dropped silently. Between two cycles the cluster moves on as a real one would:
a pod bound last cycle is Running; an evicted pod is gone and comes back as a
new Pending pod of its group; a pipelined pod is Pending again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import (
    ApiObject,
    Node,
    ObjectMeta,
    Pod,
    PodGroup,
    PriorityClass,
    Queue,
    QueueResource,
    SchedulingShard,
    Topology,
    format_time,
)
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.snapshot import Snapshot, build_snapshot
from kai.store import Store, key_of

SCHEDULE_PERIOD_S = 1.0  # simulated time between two cycles


def default_priority_classes() -> list[PriorityClass]:
    return [
        PriorityClass(ObjectMeta(name, None, f"PriorityClass/{name}"), value)
        for name, value in C.DEFAULT_PRIORITY_CLASSES.items()
    ]


def default_queues() -> list[Queue]:
    """Helm's default-parent-queue and its child default-queue: quota 0, limit -1, weight 1."""
    res = {r: QueueResource(quota=0.0, limit=-1.0, over_quota_weight=1.0) for r in ("gpu", "cpu", "memory")}
    return [
        Queue(ObjectMeta(C.DEFAULT_PARENT_QUEUE, None, f"Queue/{C.DEFAULT_PARENT_QUEUE}"), resources=dict(res)),
        Queue(
            ObjectMeta(C.DEFAULT_QUEUE, None, f"Queue/{C.DEFAULT_QUEUE}"),
            parent=C.DEFAULT_PARENT_QUEUE,
            resources=dict(res),
        ),
    ]


def _ref(obj: ApiObject) -> str:
    ns = obj.meta.namespace
    return f"{obj.kind}/{ns}/{obj.meta.name}" if ns else f"{obj.kind}/{obj.meta.name}"


@dataclasses.dataclass(slots=True)
class PodView:
    """What ``kai sim`` reports for one pod after the last cycle."""

    pod: Pod
    status: str  # Pending | Binding | Pipelined | Running | Releasing | Succeeded | Failed
    node: str


class EmbeddedCluster:
    """A Store plus the behaviour of the kubelet, controllers and pod-grouper that kai sim needs."""

    def __init__(self, now: float) -> None:
        self.store = Store()
        self.now = now
        self.cycle = 0
        self._bound_last: set[tuple[str, str]] = set()
        self._pipelined_last: dict[tuple[str, str], str] = {}
        self._evicted_last: set[tuple[str, str]] = set()
        self._sources: dict[tuple[str, tuple[str, str]], str] = {}
        self._generation = 0
        for pc in default_priority_classes():
            pc.meta.creation_timestamp = 0.0
            self.store.put(pc)

    # --- loading --------------------------------------------------------------------------

    def apply(self, objects: Sequence[tuple[str, ApiObject]]) -> None:
        """Apply manifests (source, object) in order, then check every reference; ManifestError on the first
        problem. Objects without a creationTimestamp are aged by their position (the first is the oldest)."""
        n = len(objects)
        for i, (source, obj) in enumerate(objects):
            if obj.meta.creation_timestamp is None:
                obj.meta.creation_timestamp = self.now - (n - i)
            self._sources[(obj.kind, key_of(obj))] = source
            self.store.put(obj)
        self._group_bare_pods()
        self._validate()

    def _source(self, obj: ApiObject) -> str:
        return self._sources.get((obj.kind, key_of(obj)), "")

    def _error(self, obj: ApiObject, field: str, message: str) -> ManifestError:
        return ManifestError(message, source=self._source(obj), obj=_ref(obj), field=field)

    def _queue_for_pod(self, pod: Pod) -> tuple[str, str]:
        """(queue, field it came from): the queue label, then the project label, then default-queue."""
        if C.LABEL_QUEUE in pod.meta.labels:
            return pod.meta.labels[C.LABEL_QUEUE], f"metadata.labels.{C.LABEL_QUEUE}"
        if C.LABEL_PROJECT in pod.meta.labels:
            return pod.meta.labels[C.LABEL_PROJECT], f"metadata.labels.{C.LABEL_PROJECT}"
        return C.DEFAULT_QUEUE, ""

    def _group_bare_pods(self) -> None:
        """KAI's default grouper for a pod with no owner: PodGroup pg-<pod>, minMember 1, priority train."""
        for pod in self.store.list("Pod"):
            if pod.scheduler_name not in (C.SCHEDULER_NAME, "default-scheduler"):
                continue  # another scheduler's pod: it only takes node capacity
            pod.scheduler_name = C.SCHEDULER_NAME  # kai sim schedules every pod with no other scheduler named
            if C.ANNOTATION_POD_GROUP_NAME in pod.meta.annotations:
                continue
            queue, _ = self._queue_for_pod(pod)
            if queue == C.DEFAULT_QUEUE and self.store.get("Queue", ("", C.DEFAULT_QUEUE)) is None:
                for q in default_queues():
                    q.meta.creation_timestamp = 0.0
                    self.store.put(q)
            name = f"pg-{pod.meta.name}" + (f"-{pod.meta.uid}" if not pod.meta.uid.startswith("Pod/") else "")
            pc_name = pod.meta.labels.get(C.LABEL_PRIORITY_CLASS) or pod.priority_class_name or C.PRIORITY_TRAIN
            pg = PodGroup(
                meta=ObjectMeta(
                    name=name,
                    namespace=pod.meta.namespace,
                    uid=f"PodGroup/{pod.meta.namespace}/{name}",
                    creation_timestamp=pod.meta.creation_timestamp,
                ),
                min_member=1,
                queue=queue,
                priority_class_name=pc_name,
                preemptibility=pod.meta.labels.get(C.LABEL_PREEMPTIBILITY, ""),
                generated=True,
            )
            self._sources[("PodGroup", key_of(pg))] = self._source(pod)
            self.store.put(pg)
            pod.meta.annotations[C.ANNOTATION_POD_GROUP_NAME] = name

    def _validate(self) -> None:
        queues = {q.meta.name: q for q in self.store.list("Queue")}
        for q in queues.values():
            if q.parent and q.parent not in queues:
                raise self._error(q, "spec.parentQueue", f"parent queue {q.parent!r} does not exist")
            seen, cur = [], q.meta.name
            while cur:
                if cur in seen:
                    raise self._error(q, "spec.parentQueue", f"parent queue cycle: {' -> '.join([*seen, cur])}")
                seen.append(cur)
                cur = queues[cur].parent if cur in queues else ""
        classes = {pc.meta.name for pc in self.store.list("PriorityClass")}
        parents = {q.parent for q in queues.values() if q.parent}
        for pg in self.store.list("PodGroup"):
            if not pg.queue:
                raise self._error(pg, "spec.queue", "is required")
            if pg.queue not in queues:
                if pg.generated:
                    pod = self._pod_of_generated(pg)
                    _, field = self._queue_for_pod(pod)
                    raise self._error(pod, field, f"queue {pg.queue!r} does not exist")
                raise self._error(pg, "spec.queue", f"queue {pg.queue!r} does not exist")
            if pg.queue in parents:
                message = f"queue {pg.queue!r} is a parent queue; only leaf queues hold jobs"
                if pg.generated:
                    pod = self._pod_of_generated(pg)
                    raise self._error(pod, self._queue_for_pod(pod)[1], message)
                raise self._error(pg, "spec.queue", message)
            if pg.priority_class_name and pg.priority_class_name not in classes:
                if pg.generated:
                    pod = self._pod_of_generated(pg)
                    field = (
                        f"metadata.labels.{C.LABEL_PRIORITY_CLASS}"
                        if C.LABEL_PRIORITY_CLASS in pod.meta.labels
                        else "spec.priorityClassName"
                    )
                    raise self._error(pod, field, f"priority class {pg.priority_class_name!r} does not exist")
                raise self._error(
                    pg, "spec.priorityClassName", f"priority class {pg.priority_class_name!r} does not exist"
                )
        for pod in self.store.list("Pod"):
            if pod.scheduler_name != C.SCHEDULER_NAME:
                continue
            pg_name = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, "")
            if self.store.get("PodGroup", (pod.meta.namespace or "", pg_name)) is None:
                raise self._error(
                    pod,
                    f"metadata.annotations.{C.ANNOTATION_POD_GROUP_NAME}",
                    f"PodGroup {pod.meta.namespace}/{pg_name} does not exist",
                )
            prio = pod.meta.labels.get(C.LABEL_TASK_PRIORITY)
            if prio is not None:
                try:
                    int(prio)
                except ValueError:
                    raise self._error(
                        pod, f"metadata.labels.{C.LABEL_TASK_PRIORITY}", f"{prio!r} is not an integer"
                    ) from None
            if pod.node_name and self.store.get("Node", ("", pod.node_name)) is None:
                raise self._error(pod, "spec.nodeName", f"node {pod.node_name!r} does not exist")

    def _pod_of_generated(self, pg: PodGroup) -> Pod:
        for pod in self.store.list("Pod"):
            if (
                pod.meta.namespace == pg.meta.namespace
                and pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME) == pg.meta.name
            ):
                return pod
        raise LookupError(pg.meta.name)

    # --- cycles ---------------------------------------------------------------------------------

    def shard(self) -> SchedulingShard | None:
        shards = sorted(self.store.list("SchedulingShard"), key=lambda s: (s.meta.name != "default", s.meta.name))
        return shards[0] if shards else None

    def topologies(self) -> list[Topology]:
        return self.store.list("Topology")

    def snapshot(self) -> Snapshot:
        return build_snapshot(
            nodes=self.store.list("Node"),
            pods=self.store.list("Pod"),
            podgroups=self.store.list("PodGroup"),
            queues=self.store.list("Queue"),
            priority_classes=self.store.list("PriorityClass"),
            now=self.now,
        )

    def run_cycle(self, conf: SchedulerConf) -> CycleResult:
        """Move the cluster on from the previous cycle (if any), then schedule once and apply the result."""
        if self.cycle > 0:
            self._advance()
        result = run_cycle(self.snapshot(), conf)
        self._apply(result)
        self.cycle += 1
        return result

    def _apply(self, result: CycleResult) -> None:
        self._bound_last = set()
        self._pipelined_last = {}
        self._evicted_last = set()
        for b in result.binds:
            pod = self.store.get("Pod", (b.pod.namespace, b.pod.name))
            pod.node_name = b.node
            self.store.put(pod)
            self._bound_last.add((b.pod.namespace, b.pod.name))
        for p in result.pipelines:
            self._pipelined_last[(p.pod.namespace, p.pod.name)] = p.node
        # status.nominatedNodeName: where a pipelined pod waits for room (an eviction made it); cleared
        # once the pod is placed or no longer pipelined, as kube-scheduler does
        held = {(p.pod.namespace, p.pod.name): p.node for p in result.pipelines if p.nominated}
        for pod in self.store.list("Pod"):
            nominated = held.get((pod.meta.namespace or "", pod.meta.name), "")
            if pod.nominated_node_name != nominated:
                pod.nominated_node_name = nominated
                self.store.put(pod)
        for e in result.evictions:
            pod = self.store.get("Pod", (e.pod.namespace, e.pod.name))
            pod.meta.deletion_timestamp = self.now
            self.store.put(pod)
            self._evicted_last.add((e.pod.namespace, e.pod.name))
        for st in result.podgroups:
            if not st.stale_changed:
                continue
            pg = self.store.get("PodGroup", (st.namespace, st.name))
            if pg is None:
                continue
            pg.stale_since = st.stale_since
            if st.stale_since is None:
                pg.meta.annotations.pop(C.ANNOTATION_STALE_TIMESTAMP, None)
            else:
                pg.meta.annotations[C.ANNOTATION_STALE_TIMESTAMP] = format_time(st.stale_since)
            self.store.put(pg)

    def _advance(self) -> None:
        """One schedule period later: binds are running, terminating pods are gone and their controllers
        create them again as new Pending pods of the same group."""
        self.now += SCHEDULE_PERIOD_S
        self._generation += 1
        for pod in self.store.list("Pod"):
            if pod.meta.deletion_timestamp is not None:
                self.store.delete("Pod", key_of(pod))
                fresh = dataclasses.replace(
                    pod,
                    meta=dataclasses.replace(
                        pod.meta,
                        uid=f"{pod.meta.uid}~{self._generation}",
                        deletion_timestamp=None,
                        creation_timestamp=self.now,
                        labels=dict(pod.meta.labels),
                        annotations=dict(pod.meta.annotations),
                    ),
                    node_name="",
                    phase="Pending",
                )
                self.store.put(fresh)
            elif pod.node_name and pod.phase == "Pending":
                pod.phase = "Running"
                pod.start_time = self.now
                self.store.put(pod)

    # --- reading -------------------------------------------------------------------------------------

    def pod_views(self) -> list[PodView]:
        views = []
        for pod in self.store.list("Pod"):
            key = (pod.meta.namespace or "", pod.meta.name)
            node = pod.node_name
            if pod.phase in ("Succeeded", "Failed"):
                status = pod.phase
            elif key in self._pipelined_last:  # includes a pod moved by consolidation: evicted, waiting on its new node
                status, node = "Pipelined", self._pipelined_last[key]
            elif key in self._evicted_last or pod.meta.deletion_timestamp is not None:
                status = "Releasing"
            elif key in self._bound_last:
                status = "Binding"
            elif pod.node_name:
                status = "Running"
            else:
                status = "Pending"
            views.append(PodView(pod, status, node))
        return views

    def nodes(self) -> list[Node]:
        return self.store.list("Node")
