"""The embedded cluster: an in-memory Kubernetes that applies the engine's decisions.

Rules (the sim contract): objects are applied to a Store exactly as manifests say. The cluster then
plays the parts of a real cluster the scheduler relies on: the workload controllers
(``kai.sim.controllers``) turn owners (Job, RayCluster, PyTorchJob, ...) into pods, and KAI's pod-grouper
(``kai.podgrouper``) gives every pod without a PodGroup the one KAI would make. Cross-object references
(queues, parents, PodGroups, priority classes, owners) are checked when applied and reported as
ManifestErrors naming the file, object and field the user wrote, so nothing is dropped silently.

Claims are bound as a PV controller and a provisioner would (``kai.sim.volumes``): an Immediate claim when
it exists, a WaitForFirstConsumer one with the volume kai chose when its pod is bound.

Between two cycles the cluster moves on as a real one would: a pod bound last cycle is Running; an
evicted pod is gone and its controller creates it again (a pod without one comes back as the same pod);
a pipelined pod is Pending again; a pod whose ``kai.sim/duration`` has passed since it was bound has
Succeeded, and its controller reacts (a Job starts its next pod, a ReplicaSet replaces it).

``run_cycle`` is ``advance`` (one schedule period later) then ``schedule``; the time simulator
(``kai.sim.timesim``) calls the two itself to move the clock by any amount, and also changes nodes
(cordon, drain, fail) and collects finished jobs between cycles.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from kai.api import constants as C
from kai.api.duration import parse_duration
from kai.api.errors import ManifestError
from kai.api.gpugroups import gpu_group_labels, group_labels, is_gpu_group_label
from kai.api.objects import (
    Node,
    ObjectMeta,
    Pod,
    PodGroup,
    PriorityClass,
    SchedulingShard,
    Topology,
    format_time,
)
from kai.api.workloads import Workload
from kai.scheduler.conf import ConfigError, SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult, Event
from kai.scheduler.dra import dra_of
from kai.scheduler.gpusharing import default_group_name, parse_share
from kai.scheduler.memo import CycleMemo
from kai.scheduler.model import TaskStatus
from kai.scheduler.partition import Partition, partition_input
from kai.scheduler.plugins import check_conf, task_order_of
from kai.scheduler.snapshot import Snapshot, SnapshotBuilder
from kai.scheduler.storage import storage_of
from kai.scheduler.taskorder import default_task_order
from kai.scheduler.usage import UsageLedger, UsageParams
from kai.sim import checks
from kai.sim._changes import updated, updated_meta
from kai.sim._controllermanager import ControllerManager
from kai.sim._members import GroupMembers
from kai.sim._origins import MAX_OWNER_CHAIN, Origins, SimObject
from kai.sim._podgrouper import EmbeddedPodGrouper
from kai.sim.controllers import controller_for
from kai.sim.dra import allocate_chosen, make_template_claims, release_pod, sync_claims
from kai.sim.lifetimes import Interruption, Lifetimes
from kai.sim.volumes import bind_chosen, bind_immediate
from kai.store import Key, Store, key_of

SCHEDULE_PERIOD_S = 1.0  # simulated time between two cycles
ARRIVAL_SPACING_S = 0.001  # creation-time gap between objects applied together between two cycles


def default_priority_classes() -> list[PriorityClass]:
    return [
        PriorityClass(ObjectMeta(name, None, f"PriorityClass/{name}"), value)
        for name, value in C.DEFAULT_PRIORITY_CLASSES.items()
    ]


@dataclasses.dataclass(frozen=True, slots=True)
class FinishedJob:
    """A PodGroup whose pods all succeeded, removed from the cluster by ``collect_finished``."""

    key: Key  # (namespace, PodGroup name)
    queue: str
    finished: float  # when its last pod finished (its kai.sim/duration ran out), not when it was noticed
    pods: int


@dataclasses.dataclass(slots=True)
class PodView:
    """What ``kai sim`` reports for one pod after the last cycle."""

    pod: Pod
    status: str  # Pending | Binding | Pipelined | Running | Releasing | StuckInReleasing | Succeeded | Failed
    node: str
    gpu_groups: tuple[str, ...] = ()  # the shared GPUs it holds (or, pipelined, is promised)


class EmbeddedCluster:
    """A Store plus the behaviour of the kubelet, controllers and pod-grouper that kai sim needs."""

    def __init__(self, now: float, *, strict_input: bool = False) -> None:
        # kai sim's input (not a test's cluster): what a real cluster may hold and kai handles per object
        # (over-committed nodes, invalid GPU-sharing annotations, saturated amounts) is refused (kai.sim.checks)
        self.strict_input = strict_input
        self.store = Store()
        self.now = now
        self.cycle = 0
        self._bound_last: set[tuple[str, str]] = set()
        self._pipelined_last: dict[tuple[str, str], str] = {}
        self._pipelined_gpus: dict[tuple[str, str], tuple[str, ...]] = {}
        self._evicted_last: set[tuple[str, str]] = set()
        self.origins = Origins()
        self._generation = 0
        self._usage: UsageLedger | None = None  # time-based fair share, when the SchedulingShard asks for it
        self.shard_name: str | None = None  # kai sim --shard: that shard's scheduler alone (its node pool)
        self.lifetimes = Lifetimes()  # bound pods: when they started, when kai.sim/duration ends them
        self.default_checkpoint: float | None = None  # checkpoint interval of pods without the annotation
        self.interruptions: list[Interruption] = []  # pods gone before they finished, until taken
        self.last_snapshot: Snapshot | None = None  # what the last cycle scheduled from
        self.last_conf: SchedulerConf | None = None  # the configuration it scheduled with
        self._held: dict[str, tuple[float, float, float]] = {}  # per queue, what the last cycle left allocated
        # each cycle's Snapshot patches the last one where the Store changed (kai.scheduler.snapshot)
        self._snapshots = SnapshotBuilder()
        self._checked = SnapshotBuilder()  # the over-commit check's (kai.sim.checks.overcommitted)
        # the last cycle's input and result, handed to the next cycle (kai.scheduler.memo): a recheck of an
        # unchanged cluster is not worked out again; keep_memo=False runs every cycle in full
        self._memo: CycleMemo | None = None
        self.keep_memo = True
        self._task_order: tuple[SchedulerConf | None, Any] = (None, default_task_order)
        self._capacity: tuple[float, float, float] = (0.0, 0.0, 0.0)
        self._started_up = False
        self._finished_at: dict[tuple[str, str, str], float] = {}  # succeeded pod → when it finished
        self._events: list[Event] = []  # raised by the cluster itself, until taken
        self.controllers = ControllerManager(self.store, self.origins, self._events, self._put_new)
        self.podgrouper = EmbeddedPodGrouper(self.store, self.origins, self._events)
        self._members = GroupMembers(self.store)  # kai's pods per PodGroup, for collect_finished
        self._validated_rv: int | None = None  # the Store's version at the last ``_validate`` that passed
        # the pods that name a nominated node, kept by the Store as they change (few; a walk of every pod per
        # cycle to find them was a measurable part of a time simulation's cycle)
        self._nominated = self.store.index("Pod", lambda pod: bool(pod.nominated_node_name))
        for pc in default_priority_classes():
            pc.meta.creation_timestamp = 0.0
            self.store.put(pc)

    # --- loading --------------------------------------------------------------------------

    def apply(self, objects: Sequence[tuple[str, SimObject]], *, spacing: float = 1.0) -> None:
        """Apply manifests (source, object) in order, let the controllers create their pods, group the pods,
        then check every reference; ManifestError on the first problem. Objects without a
        creationTimestamp are aged by their position (the first is the oldest), *spacing* seconds apart:
        objects arriving between cycles use a small spacing so that they are younger than everything
        applied before them."""
        n = len(objects)
        if (err := checks.duplicate(objects)) is not None:
            raise err
        for i, (source, obj) in enumerate(objects):
            if obj.meta.creation_timestamp is None:
                obj.meta.creation_timestamp = self.now - (n - i) * spacing
            self._put_new(obj, source)
        self._check_sim_annotations([obj for _, obj in objects])
        for _, obj in objects:
            if isinstance(obj, Workload) and (err := checks.workload_counts(obj)) is not None:
                raise self.origins.relocate(err)
        self._run_controllers(strict=True)
        self._group_pods(strict=True)
        self._validate()
        bind_immediate(self.store, self.now)  # the PV controller: claims that do not wait for a pod
        make_template_claims(self.store, self.now)  # the resourceclaim controller: claims from templates
        if self.strict_input and any(isinstance(obj, (Pod, Node)) for _, obj in objects):
            # a snapshot of the whole cluster per arrival: kept and patched, as the cycles' one is
            err = checks.overcommitted(self.store.list("Node"), self.store.list("Pod"), self.now, self._checked)
            if err is not None:
                raise self.origins.relocate(err)
        for pod in self.store.list("Pod"):  # running pods given in the manifests: their duration counts from start
            if pod.node_name and pod.phase == "Running" and self._pod_id(pod) not in self.lifetimes:
                self._start(pod, pod.start_time if pod.start_time is not None else self.now)

    def _put_new(self, obj: SimObject, source: str) -> None:
        self.origins.record(obj, source)
        self.controllers.added(obj)
        self.store.put(obj)

    def _run_controllers(self, *, strict: bool) -> None:
        self.controllers.run(self.now, dated_now=self.cycle > 0, strict=strict)

    def _group_pods(self, *, strict: bool) -> None:
        self.podgrouper.run(strict=strict)

    @staticmethod
    def _pod_id(pod: Pod) -> tuple[str, str, str]:
        return (pod.meta.namespace or "", pod.meta.name, pod.meta.uid)

    def take_events(self) -> list[Event]:
        """Events the cluster itself raised (pod-grouper, controllers) since the last call, oldest first."""
        events = list(self._events)
        self._events.clear()  # the same list: the controllers and the pod-grouper append to it
        return events

    # --- checks ---------------------------------------------------------------------------------

    def _validate(self) -> None:
        """Check every reference (queues, priority classes, PodGroups, nodes) and, on kai sim's input, what
        the engine would refuse; ManifestError on the first problem. Only the PodGroups and pods changed since
        the last check that passed are checked, unless a Queue, PriorityClass or Node changed or a PodGroup
        went (what the others refer to): at each arrival of a time simulation, a check of every object was a
        few per cent of its time. A problem found is reported as the check of every object finds it first."""
        rv = self.store.resource_version
        changed = self._changed_since_validated()
        if changed is not None:
            try:
                self._check_references(*changed)
            except ManifestError:
                changed = None
        if changed is None:
            self._check_references(self.store.list("PodGroup"), self.store.list("Node"), self.store.list("Pod"))
        self._validated_rv = rv

    def _changed_since_validated(self) -> tuple[list[PodGroup], list[Node], list[Pod]] | None:
        """The PodGroups and pods changed since the last check that passed (as they are now), or None when
        everything must be checked again."""
        if self._validated_rv is None:
            return None
        try:
            changes = self.store.changes_since(self._validated_rv)
        except LookupError:
            return None
        pgs: dict[Key, PodGroup] = {}
        pods: dict[Key, Pod] = {}
        for c in changes:
            if c.kind == "Pod":
                pods[c.key] = c.obj
            elif c.kind == "PodGroup" and c.op != "DELETED":
                pgs[c.key] = c.obj
            elif c.kind in ("Queue", "PriorityClass", "Node", "PodGroup"):
                return None
        get = self.store.get
        return (
            [pg for key in pgs if (pg := get("PodGroup", key)) is not None],
            [],
            [pod for key in pods if (pod := get("Pod", key)) is not None],
        )

    def _check_references(self, podgroups: list[PodGroup], nodes: list[Node], pods: list[Pod]) -> None:
        """``_validate``'s checks: every Queue, and the *podgroups*, *nodes* and *pods* given."""
        queues = {q.meta.name: q for q in self.store.list("Queue")}
        for q in queues.values():
            if q.parent and q.parent not in queues:
                raise self.origins.error(q, "spec.parentQueue", f"parent queue {q.parent!r} does not exist")
            seen, cur = [], q.meta.name
            while cur:
                if cur in seen:
                    raise self.origins.error(q, "spec.parentQueue", f"parent queue cycle: {' -> '.join([*seen, cur])}")
                seen.append(cur)
                cur = queues[cur].parent if cur in queues else ""
        classes = {pc.meta.name for pc in self.store.list("PriorityClass")}
        parents = {q.parent for q in queues.values() if q.parent}
        for pg in podgroups:
            grouping = self.podgrouper.groupings.get(key_of(pg)) if pg.generated else None
            if not pg.queue:
                raise self.origins.error(pg, "spec.queue", "is required")
            if pg.queue not in queues or pg.queue in parents:
                message = (
                    f"queue {pg.queue!r} does not exist"
                    if pg.queue not in queues
                    else f"queue {pg.queue!r} is a parent queue; only leaf queues hold jobs"
                )
                if grouping is not None:
                    raise self.origins.error_at(grouping.queue_from, message)
                raise self.origins.error(pg, "spec.queue", message)
            if pg.priority_class_name and pg.priority_class_name not in classes:
                message = f"priority class {pg.priority_class_name!r} does not exist"
                if grouping is not None:
                    raise self.origins.error_at(grouping.priority_from, message)
                raise self.origins.error(pg, "spec.priorityClassName", message)
        if self.strict_input:
            for obj in (*nodes, *pods):
                if (err := checks.oversize(obj)) is not None:
                    raise self.origins.relocate(err)
            if (err := checks.gpu_sharing(pods, self.store.list("Node"))) is not None:
                raise self.origins.relocate(err)
        for pod in pods:
            if pod.scheduler_name != C.SCHEDULER_NAME:
                continue
            field = f"metadata.annotations.{C.ANNOTATION_POD_GROUP_NAME}"
            pg_name = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
            if pg_name is None:
                raise self.origins.error(
                    pod,
                    field,
                    f"is missing, and {C.SKIP_PODGROUPER} tells the pod-grouper to leave the pod alone: "
                    "apply its PodGroup and name it here",
                )
            if self.store.get("PodGroup", (pod.meta.namespace or "", pg_name)) is None:
                raise self.origins.error(pod, field, f"PodGroup {pod.meta.namespace}/{pg_name} does not exist")
            prio = pod.meta.labels.get(C.LABEL_TASK_PRIORITY)
            if prio is not None:
                try:
                    int(prio)
                except ValueError:
                    raise self.origins.error(
                        pod, f"metadata.labels.{C.LABEL_TASK_PRIORITY}", f"{prio!r} is not an integer"
                    ) from None
            if pod.node_name and self.store.get("Node", ("", pod.node_name)) is None:
                raise self.origins.error(pod, "spec.nodeName", f"node {pod.node_name!r} does not exist")

    def _check_sim_annotations(self, objs: Sequence[SimObject]) -> None:
        """Every kai.sim/ duration annotation (duration, arrival, checkpoint-interval) of the objects being
        applied must be valid, on any kind (a Node may arrive later too); pods that controllers make copy
        templates, which are checked here as well."""
        for obj in objs:
            annotations = obj.meta.annotations
            for name in SIM_DURATION_ANNOTATIONS:
                text = annotations.get(name)
                if text is not None:
                    field = f"metadata.annotations.{name}"
                    parse_sim_annotation(name, text, lambda m, o=obj, f=field: self.origins.error(o, f, m))
            if isinstance(obj, Workload):
                self._check_template_annotations(obj, obj.doc, "")

    def _check_template_annotations(self, owner: Workload, node: Any, path: str) -> None:
        """Templates are checked too, so that a bad value is reported when applied, not cycles later."""
        if isinstance(node, Mapping):
            for k, v in node.items():
                sub = f"{path}.{k}" if path else str(k)
                if k == "annotations" and isinstance(v, Mapping) and path.endswith("metadata") and path != "metadata":
                    for name in SIM_DURATION_ANNOTATIONS:
                        text = v.get(name)
                        if text is not None:
                            where = f"{sub}.{name}"
                            parse_sim_annotation(name, text, lambda m, w=where: self.origins.error(owner, w, m))
                else:
                    self._check_template_annotations(owner, v, sub)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._check_template_annotations(owner, v, f"{path}[{i}]")

    def _sim_duration(self, pod: Pod, name: str = C.ANNOTATION_SIM_DURATION) -> float | None:
        """The pod's kai.sim/ duration annotation *name*, else its nearest owner's."""
        text = pod.meta.annotations.get(name)
        obj: SimObject = pod
        for _ in range(MAX_OWNER_CHAIN):  # bounded: owner references may form a cycle
            if text is not None or not obj.meta.owner_references:
                break
            ref = obj.meta.owner_references[0]
            nxt = self.store.get(ref.kind, (obj.meta.namespace or "", ref.name))
            if nxt is None:
                return None
            obj = nxt
            text = obj.meta.annotations.get(name)
        if text is None:
            return None
        try:
            return parse_duration(text)
        except ValueError:
            return None  # reported when applied

    # --- cycles ---------------------------------------------------------------------------------

    def shard(self) -> SchedulingShard | None:
        if self.shard_name is not None:
            return self.store.get("SchedulingShard", ("", self.shard_name))
        shards = sorted(self.store.list("SchedulingShard"), key=lambda s: (s.meta.name != "default", s.meta.name))
        return shards[0] if shards else None

    def partition(self) -> Partition | None:
        """The node pool of ``--shard`` (``kai.scheduler.partition``); None without it: the whole cluster."""
        if self.shard_name is None:
            return None
        shard = self.shard()
        if shard is None:
            raise ManifestError(f'--shard: no SchedulingShard "{self.shard_name}" among the input')
        return Partition(shard.partition_label_value)

    def topologies(self) -> list[Topology]:
        return self.store.list("Topology")

    def snapshot(self, conf: SchedulerConf | None = None) -> Snapshot:
        """The Store as the engine sees it; *conf* orders each job's pods by its task-order plugins."""
        mine = partition_input(
            self.partition(),
            nodes=self.store.list("Node"),
            pods=self.store.list("Pod"),
            podgroups=self.store.list("PodGroup"),
            queues=self.store.list("Queue"),
        )
        if conf is not None and conf != self._task_order[0]:  # one order function per configuration: the
            self._task_order = (conf, task_order_of(conf))  # builder derives every pod again when it changes
        return self._snapshots.build(
            nodes=mine.nodes,
            pods=mine.pods,
            podgroups=mine.podgroups,
            queues=mine.queues,
            priority_classes=self.store.list("PriorityClass"),
            now=self.now,
            pdbs=self.store.list("PodDisruptionBudget"),
            queue_usage=None if self._usage is None else self._usage.queue_usage(self.now),
            topologies=self.topologies(),
            task_order=self._task_order[1] if conf is not None else default_task_order,
            stuck_in_releasing_s=(conf or SchedulerConf()).stuck_in_releasing_threshold,
            namespaces=self.store.list("Namespace"),
            storage=storage_of(self.store),
            dra=dra_of(self.store),
        )

    def run_cycle(self, conf: SchedulerConf, arrivals: Sequence[tuple[str, SimObject]] = ()) -> CycleResult:
        """Move the cluster on one schedule period from the previous cycle (if any), apply *arrivals*
        (manifests that arrive just before this cycle, as ``kai sim --at`` gives them), then schedule once."""
        if self.cycle > 0:
            self.advance(self.now + SCHEDULE_PERIOD_S)
        if arrivals:
            self.apply(arrivals, spacing=ARRIVAL_SPACING_S)
        return self.schedule(conf)

    def schedule(self, conf: SchedulerConf) -> CycleResult:
        """One scheduling cycle at the current clock; its decisions are applied to the cluster."""
        if not self._started_up:
            self._started_up = True
            shard = self.shard()
            if shard is not None and shard.usage_window is not None:
                self._usage = UsageLedger(UsageParams(shard.usage_window, shard.usage_half_life))
        snap = self.snapshot(conf)
        self.last_conf = conf
        result = run_cycle(snap, conf, self._memo, keep_memo=self.keep_memo)
        self._memo = result.memo
        self._record_gpu_groups(snap)
        self._apply(result)
        self.last_snapshot = snap
        if self._usage is not None:  # what each queue holds until the next cycle, for time-based fair share
            self._held = {
                q.name: (q.allocated["gpu"], q.allocated["cpu"], q.allocated["memory"]) for q in result.queues
            }
            total = snap.total.tolist()
            self._capacity = (total[0] / 1000, total[1], total[2])
        self.cycle += 1
        return result

    def _record_gpu_groups(self, snap: Snapshot) -> None:
        """Label every running shared pod with the GPU groups it holds, as KAI's binder does: a pod given
        without (or with too few) group labels gets the ones the snapshot assigned it, so the next cycle
        rebuilds exactly the same per-GPU state."""
        if not snap.gpus.pods.any():  # no pod holds a GPU group: no task has slots (skips a walk of every task)
            return
        for t in snap.tasks:
            if not t.gpu_slots or t.node < 0:
                continue
            names = snap.gpus.names[t.node]
            groups = tuple(names[s] or default_group_name(snap.nodes.names[t.node], s) for s in t.gpu_slots)
            if set(group_labels(t.pod)) != set(groups):
                self._set_gpu_groups(t.pod, groups)

    def _set_gpu_groups(self, pod: Pod, groups: tuple[str, ...]) -> Pod:
        labels = {k: v for k, v in pod.meta.labels.items() if not is_gpu_group_label(k)}
        labels.update(gpu_group_labels(groups) if groups else {})
        return updated_meta(self.store, pod, labels=labels)

    def _apply(self, result: CycleResult) -> None:
        self._bound_last = set()
        self._pipelined_last = {}
        self._pipelined_gpus = {}
        self._evicted_last = set()
        for b in result.binds:
            if b.volumes:  # kai binds a pod's volumes first (a provisioner makes the new ones)
                bind_chosen(self.store, b.volumes, self.now)
            pod = self.store.get("Pod", (b.pod.namespace, b.pod.name))
            if b.claims:  # and its ResourceClaims' allocations and reservations (DynamicResources PreBind)
                allocate_chosen(self.store, pod, b.claims)
            pod = updated(self.store, pod, node_name=b.node)
            self._start(pod, self.now)  # kai.sim/duration counts from the bind
            if b.gpu_groups:
                self._set_gpu_groups(pod, b.gpu_groups)  # the binder's runai-gpu-group label(s)
            self._bound_last.add((b.pod.namespace, b.pod.name))
        for p in result.pipelines:
            self._pipelined_last[(p.pod.namespace, p.pod.name)] = p.node
            self._pipelined_gpus[(p.pod.namespace, p.pod.name)] = p.gpu_groups
        # status.nominatedNodeName: where a pipelined pod waits for room (an eviction made it); cleared
        # once the pod is placed or no longer pipelined, as kube-scheduler does
        held = {(p.pod.namespace, p.pod.name): p.node for p in result.pipelines if p.nominated}
        for key in [*self._nominated, *(key for key in held if key not in self._nominated)]:
            pod = self.store.get("Pod", key)
            if pod is not None and pod.nominated_node_name != held.get(key, ""):
                updated(self.store, pod, nominated_node_name=held.get(key, ""))
        for e in result.evictions:
            updated_meta(self.store, self.store.get("Pod", (e.pod.namespace, e.pod.name)), deletion_timestamp=self.now)
            self._evicted_last.add((e.pod.namespace, e.pod.name))
        for st in result.podgroups:
            if not st.stale_changed:
                continue
            pg = self.store.get("PodGroup", (st.namespace, st.name))
            if pg is None:
                continue
            annotations = {k: v for k, v in pg.meta.annotations.items() if k != C.ANNOTATION_STALE_TIMESTAMP}
            if st.stale_since is not None:
                annotations[C.ANNOTATION_STALE_TIMESTAMP] = format_time(st.stale_since)
            meta = dataclasses.replace(pg.meta, annotations=annotations)
            updated(self.store, pg, stale_since=st.stale_since, meta=meta)

    def _start(self, pod: Pod, when: float) -> None:
        """Start the pod's run in the lifetimes book: its kai.sim/duration and checkpoint interval."""
        checkpoint = self._sim_duration(pod, C.ANNOTATION_SIM_CHECKPOINT)
        self.lifetimes.start(
            self._pod_id(pod),
            (pod.meta.namespace or "", pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, "")),
            when,
            self._sim_duration(pod),
            checkpoint if checkpoint is not None else self.default_checkpoint,
            self._pod_gpus(pod),
        )

    def _pod_gpus(self, pod: Pod) -> float:
        """What the pod holds in GPUs: whole GPUs, or its share (a fraction, or gpu-memory as the share of
        its node's GPUs) summed over devices, as queues are charged."""
        share, _ = parse_share(pod)
        if share is None:
            dra = dra_of(self.store).pod_gpus(pod) if pod.resource_claims else 0  # GPUs claimed through DRA
            return float(pod.requests.get(C.RESOURCE_GPU, 0) + dra)
        node = self.store.get("Node", ("", pod.node_name)) if pod.node_name else None
        label = node.meta.labels.get(C.LABEL_GPU_MEMORY, "") if node is not None else ""
        memory = int(label) if label.isdigit() and int(label) > 0 else C.DEFAULT_GPU_MEMORY_MIB
        return share.accounted_milli(memory) / 1000

    def _has_controller(self, pod: Pod) -> bool:
        """Whether a simulated controller owns *pod* and will create it again once it is gone."""
        if not pod.meta.owner_references:
            return False
        ref = pod.meta.owner_references[0]
        owner = self.store.get(ref.kind, (pod.meta.namespace or "", ref.name))
        return isinstance(owner, Workload) and controller_for(owner) is not None

    def _gone(self, pod: Pod) -> None:
        """Delete *pod*: its run is interrupted (if it ran) and, without a controller to make it again, it
        comes back as a new Pending pod with the same name in the same PodGroup."""
        self.store.delete("Pod", key_of(pod))
        if pod.resource_claims:
            release_pod(self.store, pod)
        if (lost := self.lifetimes.interrupt(self._pod_id(pod), self.now)) is not None:
            self.interruptions.append(lost)
        if self._has_controller(pod):
            return  # its controller makes a new one
        fresh = dataclasses.replace(
            pod,
            meta=dataclasses.replace(
                pod.meta,
                uid=f"{pod.meta.uid}~{self._generation}",
                deletion_timestamp=None,
                creation_timestamp=self.now,
                labels={k: v for k, v in pod.meta.labels.items() if not is_gpu_group_label(k)},
                annotations=dict(pod.meta.annotations),
            ),
            node_name="",
            nominated_node_name="",  # a new pod has no status: a nomination was its predecessor's
            phase="Pending",
            start_time=None,
        )
        self.store.put(fresh)

    def advance(self, to: float) -> None:
        """Move the clock to *to* (after the last cycle): binds are running, pods past their kai.sim/duration
        have succeeded, terminating pods are gone and their controllers create them again (except pods the
        last cycle saw StuckInReleasing: whatever holds them, a finalizer or an unreachable kubelet, still
        does), new pods are grouped. The time between is recorded for time-based fair share."""
        if to <= self.now:
            raise ValueError(f"the clock only moves forward: {to} <= {self.now}")
        if self._usage is not None and self._held:
            self._usage.record(self.now, to, self._held, self._capacity)
        self.now = to
        self._generation += 1
        stuck = self._stuck_in_releasing()
        for pod in self.store.list("Pod"):
            if pod.meta.deletion_timestamp is not None:
                if (pod.meta.namespace or "", pod.meta.name) not in stuck:
                    self._gone(pod)
            elif pod.node_name and pod.phase == "Pending":
                updated(self.store, pod, phase="Running", start_time=self.now)
        for pod_id in self.lifetimes.due(self.now):
            pod = self.store.get("Pod", pod_id[:2])
            if pod is None or pod.meta.uid != pod_id[2] or pod.phase != "Running":
                continue
            self._finished_at[pod_id] = self.lifetimes.complete(pod_id) or self.now
            updated(self.store, pod, phase="Succeeded")
        self._run_controllers(strict=False)
        self._group_pods(strict=False)
        bind_immediate(self.store, self.now)
        sync_claims(self.store)
        make_template_claims(self.store, self.now)

    def next_completion(self) -> float | None:
        """When the next running pod reaches its kai.sim/duration (None: none will)."""
        return self.lifetimes.next_finish()

    def take_interruptions(self) -> list[Interruption]:
        """Pods that stopped before they finished (evicted, or lost with a node) since the last call."""
        out, self.interruptions = self.interruptions, []
        return out

    # --- nodes changing (the time simulator's cluster events) -----------------------------------------

    def cordon(self, name: str, unschedulable: bool = True) -> Node:
        """Mark the node (un)schedulable, as ``kubectl cordon``/``uncordon`` does. KeyError if absent."""
        return updated(self.store, self._node(name), unschedulable=unschedulable)

    def drain(self, name: str) -> int:
        """Cordon the node and evict every pod on it (they terminate, as ``kubectl drain`` evicts them);
        returns how many pods were evicted."""
        self.cordon(name)
        n = 0
        for pod in self.store.list("Pod"):
            active = pod.phase not in ("Succeeded", "Failed") and pod.meta.deletion_timestamp is None
            if pod.node_name == name and active:
                updated_meta(self.store, pod, deletion_timestamp=self.now)
                n += 1
        return n

    def fail_node(self, name: str) -> tuple[Node, int]:
        """The node is gone at once with every pod on it (their runs are interrupted; controllers and
        bare pods come back Pending); returns the node as it was and how many pods it took along."""
        node = self._node(name)
        self.store.delete("Node", key_of(node))
        self._generation += 1
        lost = [p for p in self.store.list("Pod") if p.node_name == name]
        for pod in lost:
            if pod.phase in ("Succeeded", "Failed"):
                self.store.delete("Pod", key_of(pod))
            else:
                self._gone(pod)
        self._run_controllers(strict=False)
        self._group_pods(strict=False)
        return node, sum(1 for p in lost if p.phase not in ("Succeeded", "Failed"))

    def _node(self, name: str) -> Node:
        node = self.store.get("Node", ("", name))
        if node is None:
            raise KeyError(f"node {name!r} does not exist")
        return node

    # --- finished jobs --------------------------------------------------------------------------------

    def collect_finished(self) -> list[FinishedJob]:
        """PodGroups whose every pod has Succeeded, and whose top owner has nothing left to run: they are
        deleted with their pods and owners (as a TTL controller would), so a long simulation keeps only
        live objects. Returns what finished, with when its last pod finished."""
        done = {key: self._members.pods(key) for key in self._members.finished()}  # before any is deleted
        if not done:
            return []
        finished: list[FinishedJob] = []
        index = self.controllers.children_index() if self.controllers.workloads else {}
        for key, pods in done.items():
            owners = {self.controllers.top_owner(p) for p in pods}
            if any(o is not None and not self.controllers.subtree_done(o, index) for o in owners):
                continue  # e.g. a Job's other pods still run: its controller counts these ones
            for o in owners:
                if o is not None:
                    self.controllers.delete_subtree(o, index)
            for pod in pods:
                self.store.delete("Pod", key_of(pod))
            pg = self.store.get("PodGroup", key)
            if pg is not None:
                self.store.delete("PodGroup", key)
            self.lifetimes.forget_job(key)
            ends = [self._finished_at.pop(self._pod_id(p), self.now) for p in pods]
            finished.append(FinishedJob(key, pg.queue if pg is not None else "", max(ends), len(pods)))
        return finished

    # --- reading -------------------------------------------------------------------------------------

    def _stuck_in_releasing(self) -> set[tuple[str, str]]:
        """The pods the last cycle saw as StuckInReleasing (namespace, name)."""
        snap = self.last_snapshot
        if snap is None:
            return set()
        return {(t.namespace, t.name) for t in snap.tasks if t.status == TaskStatus.STUCK_IN_RELEASING}

    def pod_views(self) -> list[PodView]:
        views = []
        stuck = self._stuck_in_releasing()
        for pod in self.store.list("Pod"):
            key = (pod.meta.namespace or "", pod.meta.name)
            node = pod.node_name
            groups = tuple(group_labels(pod)) if node else ()
            if pod.phase in ("Succeeded", "Failed"):
                status = pod.phase
            elif key in self._pipelined_last:  # includes a pod moved by consolidation: evicted, waiting on its new node
                status, node = "Pipelined", self._pipelined_last[key]
                groups = self._pipelined_gpus.get(key, ())
            elif key in stuck:
                status = "StuckInReleasing"
            elif key in self._evicted_last or pod.meta.deletion_timestamp is not None:
                status = "Releasing"
            elif key in self._bound_last:
                status = "Binding"
            elif pod.node_name:
                status = "Running"
            else:
                status = "Pending"
            views.append(PodView(pod, status, node, groups))
        return views

    def nodes(self) -> list[Node]:
        return self.store.list("Node")


SIM_DURATION_ANNOTATIONS = (C.ANNOTATION_SIM_DURATION, C.ANNOTATION_SIM_ARRIVAL, C.ANNOTATION_SIM_CHECKPOINT)


def parse_sim_annotation(name: str, text: Any, error: Any) -> float:
    """Seconds of a kai.sim/ duration annotation; *error(message)* makes the exception to raise. A
    checkpoint interval must be positive; a duration or an arrival must not be negative."""
    try:
        seconds = parse_duration(text)
    except ValueError as e:
        raise error(str(e)) from None
    if name == C.ANNOTATION_SIM_CHECKPOINT and seconds <= 0:
        raise error(f"{text!r} must be positive")
    if seconds < 0:
        raise error(f"{text!r} must not be negative")
    return seconds


def shard_conf(cluster: EmbeddedCluster, actions: tuple[str, ...] | None) -> SchedulerConf:
    """The scheduler configuration the cluster's SchedulingShard asks for; a bad value is a ManifestError in the
    shard's file (``SchedulerConf.from_shard`` names the object and the field)."""
    shard = cluster.shard()
    try:
        return check_conf(SchedulerConf.from_shard(shard, actions=actions))
    except ConfigError as e:
        raise ManifestError(str(e), source=cluster.origins.source(shard) if shard is not None else "") from None
