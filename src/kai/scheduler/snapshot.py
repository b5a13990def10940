"""Store → Snapshot: the read-only arrays and tables one cycle works on.

Rules: no I/O and no clock; ``now`` is passed in. Nodes are sorted by name so
that "ties go to the lower row" means "ties go to the node name ascending"
(KAI). Every array handed out is read-only; the session copies what it changes.
"""

from __future__ import annotations

import dataclasses
import operator
from bisect import bisect_left, insort
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from itertools import repeat

import numpy as np

from kai.api import constants as C
from kai.api.gpugroups import group_labels
from kai.api.mig import MIG_PREFIX, legacy_mig_request, mig_gpus, requests_mig
from kai.api.objects import Namespace, Node, Pod, PodGroup, PriorityClass, Queue, Topology, parse_go_int
from kai.api.pdb import PodDisruptionBudget
from kai.api.quantity import MAX_AMOUNT
from kai.api.queueaccess import access_denied
from kai.scheduler.dra import NO_DRA, Dra
from kai.scheduler.gpusharing import (
    GpuTable,
    Placed,
    build_gpu_table,
    parse_share,
)
from kai.scheduler.model import (
    ACTIVE_USED,
    BASE_RESOURCES,
    CPU,
    GPU,
    MEMORY,
    MILLI,
    QRES,
    QRES_COLUMNS,
    UNITS_PER_MIB,
    Gang,
    GangNode,
    GpuShare,
    JobInfo,
    NodeTable,
    QueueInfo,
    TaskInfo,
    TaskStatus,
    job_sums,
)
from kai.scheduler.storage import NO_STORAGE, Storage
from kai.scheduler.subgroups import attach_gang
from kai.scheduler.taskorder import default_task_order

MB = 1_000_000  # the Queue CRD's memory unit (KAI: "mebibytes" holding 10^6)
INVALID_GPU_REQUEST = "InvalidGpuRequest"  # a pod's GPU-sharing annotations are bad
INVALID_REQUEST = "InvalidRequest"  # a pod asks for more than kai can account for (Pod.oversize)
_TO_PLACE = frozenset({TaskStatus.PENDING, TaskStatus.GATED})


@dataclass(frozen=True, slots=True)
class Snapshot:
    now: float
    resources: tuple[str, ...]  # node resource columns
    nodes: NodeTable
    tasks: tuple[TaskInfo, ...]
    jobs: tuple[JobInfo, ...]
    queues: tuple[QueueInfo, ...]
    queue_index: dict[str, int]
    signature_pods: tuple[Pod, ...]  # a representative pod per task signature
    total: np.ndarray  # (3,) float64 QRES: capacity for fair share (Ready nodes minus other schedulers' pods)
    gpus: GpuTable  # per-GPU state of shared GPUs (gpusharing)
    pdbs: tuple[PdbInfo, ...] = ()
    queue_usage: dict[str, tuple[float, float, float]] | None = None  # time-based fair share; None = off
    topologies: tuple[Topology, ...] = ()  # Topology CRs; domains are built per session (kai.scheduler.topology)
    # pods on nodes that are not kai's tasks (other schedulers', ungrouped ones): what inter-pod affinity, spread
    # and host ports count besides the tasks
    others: tuple[OtherPod, ...] = ()
    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)  # namespace -> labels (namespaceSelector)
    storage: Storage = NO_STORAGE
    dra: Dra = NO_DRA  # DeviceClasses, devices, ResourceClaims (kai.scheduler.dra)
    # some pod (task or other) has inter-pod affinity, spread constraints, host ports or claims: without any, the
    # stateful node rules have nothing to do
    pod_rules: bool = False
    # an evicted pod that no controller owns comes back as the same pod (the embedded cluster does that); on a
    # real cluster it is gone for good, so consolidation must not "move" it (kai.scheduler.actions.consolidation)
    bare_pods_return: bool = True


@dataclass(frozen=True, slots=True)
class OtherPod:
    """A pod on a node that is not one of kai's tasks: it stays where it is for the whole cycle."""

    pod: Pod
    node: int  # row in the node table
    releasing: bool  # terminating


@dataclass(frozen=True, slots=True)
class PdbInfo:
    """A PodDisruptionBudget as the eviction actions need it: how many of which tasks may still go."""

    ref: str  # namespace/name
    allowed: int  # disruptions allowed now (healthy - desired healthy, at least 0)
    tasks: frozenset[int]  # kai's tasks it covers


def _pdb_infos(pdbs: Iterable[PodDisruptionBudget], pods: list[Pod], tasks: list[TaskInfo]) -> tuple[PdbInfo, ...]:
    pdbs = list(pdbs)
    if not pdbs:
        return ()
    task_of = {id(t.pod): t.index for t in tasks}
    out = []
    for pdb in sorted(pdbs, key=lambda b: (b.meta.namespace or "", b.meta.name)):
        ns = pdb.meta.namespace or ""
        selected = [p for p in pods if (p.meta.namespace or "") == ns and pdb.selects(p.meta.labels)]
        expected = sum(1 for p in selected if p.phase not in ("Succeeded", "Failed"))
        healthy = sum(1 for p in selected if p.healthy)
        covered = frozenset(task_of[id(p)] for p in selected if id(p) in task_of)
        out.append(PdbInfo(f"{ns}/{pdb.meta.name}", pdb.allowed_disruptions(expected, healthy), covered))
    return tuple(out)


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def _resource_columns(nodes: Iterable[Node], pods: Iterable[Pod], legacy: Iterable[dict[str, int]]) -> tuple[str, ...]:
    extra: set[str] = set()
    for obj in (*nodes, *pods):
        res = obj.allocatable if isinstance(obj, Node) else obj.requests
        extra.update(k for k in res if k not in BASE_RESOURCES)
    for named in legacy:
        extra.update(named)
    return BASE_RESOURCES + tuple(sorted(extra))


def _legacy_mig(pods: list[Pod]) -> dict[int, dict[str, int]]:
    """Per pod position, the MIG instances a legacy MIG pod names in its annotations (``kai.api.mig``)."""
    out = {}
    for i, pod in enumerate(pods):
        ann = pod.meta.annotations
        if ann and any(k.startswith(MIG_PREFIX) for k in ann):
            named = legacy_mig_request(ann)
            if named:
                out[i] = named
    return out


def _vector(res: dict[str, int], col: dict[str, int], n_res: int) -> np.ndarray:
    v = np.zeros(n_res, dtype=np.int64)
    for k, amount in res.items():
        v[col[k]] = min(amount * MILLI, MAX_AMOUNT) if k == C.RESOURCE_GPU else amount
    return v


# Sums of amounts (each at most MAX_AMOUNT = 2^50, kai.api.quantity) are saturated at SATURATED = 2^61 every
# SATURATE_EVERY additions: between two saturations they grow by at most 2^11 * 2^50 = 2^61, so an int64 column
# never wraps (NumPy's += would wrap silently). Only absurd input (thousands of saturated pods on one node)
# ever reaches the bound; for it, "full" is the honest answer.
SATURATED = 2**61
SATURATE_EVERY = 2**11


def _saturate(*arrays: np.ndarray) -> None:
    for a in arrays:
        np.minimum(a, SATURATED, out=a)


def _clamp_whole_releasing(
    allocatable: np.ndarray, used: np.ndarray, releasing: np.ndarray, groups: np.ndarray
) -> None:
    """One GPU model on over-committed input: a whole GPU that a releasing whole-GPU pod frees needs a device no
    GPU group holds. Where the node's GPU groups and whole-GPU pods claim more devices than it has (a cluster
    where two schedulers disagreed, say), only as many whole GPUs count as releasing as there are devices left
    for them, so the node-level fit (``gpusharing.fit_rows_single``) and the per-device choice
    (``gpusharing.choose``) agree. Called before the groups are added to *used*; consistent input is untouched."""
    devices = allocatable[:, GPU] // MILLI
    whole_used = used[:, GPU] // MILLI  # whole-GPU pods (groups not added yet), releasing ones included
    whole_rel = np.maximum(releasing[:, GPU], 0) // MILLI
    free_devices = np.maximum(devices - groups - (whole_used - whole_rel), 0)  # devices neither held nor grouped
    excess = whole_rel - free_devices
    over = excess > 0
    if over.any():
        releasing[over, GPU] -= np.minimum(excess[over], whole_rel[over]) * MILLI


def _orphan_reservations(
    resv: list[tuple[int, _PodFacts]], gpus: GpuTable, n_nodes: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """Per node, how many bound GPU reservation pods are orphans, and how many of those are releasing: an
    orphan's GPU group (label runai-gpu-group) has no pod on its node in the GPU table (its fraction pods
    finished or went, or the label is missing). Such a pod still holds its GPU towards the device plugin until
    the reservation sync deletes it, so it takes one whole GPU, as releasing (unless it is StuckInReleasing:
    then, as any stuck pod's, its GPU stays used and is not releasing); a reservation pod whose group has pods
    is held through the group (KAI's addTaskResources). None when there is none. Walks the reservation pods
    only (a few per GPU node)."""
    out = None
    live: dict[int, set[str]] = {}
    for _, f in resv:
        node = f.node
        names = live.get(node)
        if names is None:
            row = gpus.pods[node].tolist() if gpus.pods.size else []
            names = live[node] = {name for name, n in zip(gpus.names[node], row) if n > 0}
        if f.pod.meta.labels.get(C.LABEL_GPU_GROUP, "") not in names:
            if out is None:
                out = (np.zeros(n_nodes, dtype=np.int64), np.zeros(n_nodes, dtype=np.int64))
            out[0][node] += 1
            if f.status != TaskStatus.STUCK_IN_RELEASING:
                out[1][node] += 1
    return out


def _node_taints(node: Node) -> tuple[tuple[str, str, str], ...]:
    """The node's taints; a cordoned node carries node.kubernetes.io/unschedulable:NoSchedule, as the API
    server adds it, so pods that tolerate it (DaemonSet-style) may still land there (kube's and KAI's rule)."""
    taints = [(t.key, t.value, t.effect) for t in node.taints]
    cordon = (C.TAINT_UNSCHEDULABLE, "", "NoSchedule")
    if node.unschedulable and not any(t[0] == C.TAINT_UNSCHEDULABLE for t in taints):
        taints.append(cordon)
    return tuple(taints)


def _gpu_memory_mib(labels: dict[str, str]) -> int:
    """nvidia.com/gpu.memory (MiB per GPU); KAI's default 100 when missing or not a positive integer."""
    text = labels.get(C.LABEL_GPU_MEMORY, "")
    value = parse_go_int(text) if len(text) < 20 else None
    return value if value is not None and 0 < value <= MAX_GPU_MEMORY_MIB else C.DEFAULT_GPU_MEMORY_MIB


MAX_GPU_MEMORY_MIB = 2**30  # per GPU (1 PiB): a larger label value is as unusable as a malformed one


def task_status(pod: Pod, now: float | None = None, stuck_after: float = C.DEFAULT_STUCK_IN_RELEASING_S) -> TaskStatus:
    """KAI's pod status model (kai-behaviour §1.4), from what the API shows. A Running pod whose
    deletionTimestamp is more than *stuck_after* seconds before *now* is StuckInReleasing (KAI's
    getTaskStatus); without *now* no pod is."""
    if pod.phase == "Succeeded":
        return TaskStatus.SUCCEEDED
    if pod.phase == "Failed":
        return TaskStatus.FAILED
    if pod.node_name:
        deleted = pod.meta.deletion_timestamp
        if deleted is not None:
            if pod.phase == "Running" and now is not None and now - deleted > stuck_after:
                return TaskStatus.STUCK_IN_RELEASING
            return TaskStatus.RELEASING
        return TaskStatus.RUNNING if pod.phase == "Running" else TaskStatus.BOUND
    if pod.meta.deletion_timestamp is not None:
        return TaskStatus.RELEASING
    return TaskStatus.GATED if pod.scheduling_gated else TaskStatus.PENDING


def _queue_request(req: np.ndarray, mig_cols: list[tuple[int, int]]) -> tuple[int, int, int]:
    """The request in QRES base units: a MIG instance counts as its profile's GPUs (KAI's TotalGPUs)."""
    g, c, m = req.item(GPU), req.item(CPU), req.item(MEMORY)  # QRES order
    for col, milli in mig_cols:
        g += int(req[col]) * milli
    return g, c, m


def _signature_key(pod: Pod, share: GpuShare | None, legacy: bool, extra: bool = True) -> tuple:
    """*extra*: the pod asks for a resource beyond the base columns (else it asks for no MIG instance)."""
    return (
        tuple(sorted(pod.node_selector.items())) if pod.node_selector else (),
        pod.affinity_terms,
        pod.tolerations,
        share,  # a fractional request adds its own predicate (no MIG nodes) and its own fit
        legacy,  # a legacy MIG pod is never placed
        extra and requests_mig(pod.requests),  # a MIG pod avoids nodes running legacy MIG pods
    )


_SHARE_KEYS = (
    C.ANNOTATION_GPU_FRACTION,
    C.ANNOTATION_GPU_MEMORY,
    C.ANNOTATION_GPU_FRACTION_NUM_DEVICES,
    C.ANNOTATION_MPS,
)
_SHARE_SET = frozenset(_SHARE_KEYS)


def max_gpu_memory_mib(nodes: Iterable[Node]) -> int:
    """The largest per-GPU memory (MiB) of the nodes that can share GPUs: a gpu-memory request above it fits
    nowhere (KAI's scheduler checks the same on use)."""
    best = 0
    for n in nodes:
        labels = n.meta.labels
        if n.allocatable.get(C.RESOURCE_GPU, 0) > 0 and labels.get(C.LABEL_MIG_STRATEGY, "none") in ("", "none"):
            best = max(best, _gpu_memory_mib(labels))
    return best or C.DEFAULT_GPU_MEMORY_MIB


def share_of(pod: Pod, max_gpu_memory_mib: int) -> tuple[GpuShare | None, str]:
    """The pod's GPU share and, if its GPU-sharing annotations are invalid, why ("" when they are fine)."""
    ann = pod.meta.annotations
    if not ann or _SHARE_SET.isdisjoint(ann):
        return None, ""
    share, error = parse_share(pod)
    if share is not None and share.memory_mib > max_gpu_memory_mib > 0:
        return None, (
            f"metadata.annotations.{C.ANNOTATION_GPU_MEMORY}: {share.memory_mib} MiB is more than the memory of "
            f"any node's GPUs (the largest has {max_gpu_memory_mib} MiB, label {C.LABEL_GPU_MEMORY})"
        )
    return share, error


def resolve_priority(pg: PodGroup, classes: dict[str, PriorityClass]) -> tuple[int, bool]:
    """(priority, preemptible) of a PodGroup: its class's value (else the globalDefault class, else 50);
    preemptible iff priority < 100 unless spec.preemptibility or the class's label says otherwise."""
    pc = classes.get(pg.priority_class_name)
    if pc is None:
        pc = next((c for c in classes.values() if c.global_default), None)
    priority = pc.value if pc is not None else C.DEFAULT_PODGROUP_PRIORITY
    explicit = pg.preemptibility or (pc.preemptibility if pc is not None else "")
    if explicit:
        return priority, explicit == C.PREEMPTIBLE
    return priority, priority < C.NON_PREEMPTIBLE_PRIORITY_THRESHOLD


def _queue_vectors(q: Queue) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Quota, limit and weight in QRES base units (milli-GPU, millicores, bytes); -1 kept as -1."""
    scale = {"gpu": MILLI, "cpu": 1, "memory": MB}
    deserved, limit, weight = (np.zeros(len(QRES)) for _ in range(3))
    for i, r in enumerate(QRES):
        qr = q.resources.get(r)
        if qr is None:
            continue
        deserved[i] = -1.0 if qr.quota == -1 else qr.quota * scale[r]
        limit[i] = -1.0 if qr.limit == -1 else qr.limit * scale[r]
        weight[i] = qr.over_quota_weight
    return deserved, limit, weight


def _build_queues(queues: list[Queue]) -> tuple[tuple[QueueInfo, ...], dict[str, int]]:
    """Queue rows, dropping orphans (a missing parent) with their subtree, as KAI's cache does."""
    by_name = {q.meta.name: q for q in queues}

    def rooted(name: str) -> bool:
        seen = set()
        while name:
            if name in seen or name not in by_name:
                return False
            seen.add(name)
            name = by_name[name].parent
        return True

    kept = sorted((q for q in queues if rooted(q.meta.name)), key=lambda q: q.meta.name)
    index = {q.meta.name: i for i, q in enumerate(kept)}
    infos = []
    for i, q in enumerate(kept):
        d, lim, w = _queue_vectors(q)
        infos.append(
            QueueInfo(
                index=i,
                name=q.meta.name,
                parent=index[q.parent] if q.parent else -1,
                children=[],
                priority=q.priority,
                creation=q.meta.creation_timestamp or 0.0,
                uid=q.meta.uid,
                deserved=_ro(d),
                limit=_ro(lim),
                over_quota_weight=_ro(w),
                preempt_min_runtime=q.preempt_min_runtime,
                reclaim_min_runtime=q.reclaim_min_runtime,
                display_name=q.display_name,
            )
        )
    for info in infos:
        if info.parent >= 0:
            infos[info.parent].children.append(info.index)
    return tuple(infos), index


def build_snapshot(
    *,
    nodes: list[Node],
    pods: list[Pod],
    podgroups: list[PodGroup],
    queues: list[Queue],
    priority_classes: list[PriorityClass],
    now: float,
    scheduler_name: str = C.SCHEDULER_NAME,
    pdbs: Iterable[PodDisruptionBudget] = (),
    queue_usage: dict[str, tuple[float, float, float]] | None = None,
    topologies: Iterable[Topology] = (),
    task_order: Callable[[Pod], tuple] = default_task_order,
    stuck_in_releasing_s: float = C.DEFAULT_STUCK_IN_RELEASING_S,
    namespaces: Iterable[Namespace] = (),
    storage: Storage = NO_STORAGE,
    dra: Dra = NO_DRA,
    bare_pods_return: bool = True,
) -> Snapshot:
    """The snapshot of one cycle, built from scratch. Pods of other schedulers only take node capacity; pods
    of kai's scheduler belong to the PodGroup named by their ``pod-group-name`` annotation. *task_order*: the
    pod order inside a job (``kai.scheduler.plugins.task_order_of(conf)``; KAI's default tiers otherwise).
    *stuck_in_releasing_s*: a terminating Running pod older than this is StuckInReleasing (``task_status``):
    its resources stay used but are not releasing (``SchedulerConf.stuck_in_releasing_threshold``).
    *bare_pods_return*: whether an evicted pod no controller owns comes back (the embedded cluster's rule);
    a Kubernetes backend says False, since there such a pod is gone and moving it would kill it.
    A backend that builds one per cycle keeps a ``SnapshotBuilder`` instead: same arguments, same Snapshot,
    at a cost that follows what changed."""
    return SnapshotBuilder().build(
        nodes=nodes,
        pods=pods,
        podgroups=podgroups,
        queues=queues,
        priority_classes=priority_classes,
        now=now,
        scheduler_name=scheduler_name,
        pdbs=pdbs,
        queue_usage=queue_usage,
        topologies=topologies,
        task_order=task_order,
        stuck_in_releasing_s=stuck_in_releasing_s,
        namespaces=namespaces,
        storage=storage,
        dra=dra,
        bare_pods_return=bare_pods_return,
    )


# --- the builder: per-pod facts kept between cycles, the Snapshot's parts patched where pods changed ---------


class _PodFacts:
    """What one pod object contributes to a snapshot, given the builder's context (resource columns, node rows,
    GPU memory, scheduler name, task order): derived once per pod object and kept while the object and the
    context are the same. Which job the pod joins is not here: that is the assembly's (PodGroups come and go)."""

    __slots__ = (
        "extra",
        "group",
        "legacy",
        "mine",
        "node",
        "nominated",
        "now_dep",
        "order_key",
        "placed",
        "pod",
        "qreq",
        "reason",
        "req",
        "reservation",
        "rules",
        "share",
        "sig",
        "spec_error",
        "status",
        "ti",
        "used",
    )

    pod: Pod
    status: TaskStatus
    node: int  # node row, -1 if none
    used: np.ndarray | None  # what it adds to its node's used (and releasing) columns; None: nothing
    req: np.ndarray  # the request a task carries (a share's GPU column is what queues are charged)
    share: GpuShare | None
    spec_error: str
    reason: str
    reservation: bool  # a GPU reservation pod: not taken off the fair-share total
    legacy: bool  # a running legacy MIG pod: its node takes no new MIG pod
    rules: bool  # it has inter-pod affinity, spread, host ports or claims
    mine: bool  # kai's scheduler name
    group: tuple[str, str]  # (namespace, pod-group-name annotation)
    sig: tuple | None  # signature key (kai's pods only)
    order_key: tuple | None
    qreq: tuple[int, int, int]
    nominated: int
    placed: tuple[str, ...] | None  # a placed shared pod: the GPU groups its labels name
    now_dep: bool  # its status depends on the clock (terminating and Running: StuckInReleasing later)
    extra: tuple[str, ...]  # resource names beyond the base columns (requests and legacy MIG annotations)
    ti: int  # the task index it was last laid out at (-1: not a task): where its task moved to (``_remap``)


def _extra_names(pod: Pod) -> tuple[tuple[str, ...], dict[str, int] | None]:
    """The pod's resource names beyond the base columns, and the legacy MIG instances its annotations name."""
    ann = pod.meta.annotations
    named = None
    if ann and any(k.startswith(MIG_PREFIX) for k in ann):
        named = legacy_mig_request(ann) or None
    extra = [k for k in pod.requests if k not in BASE_RESOURCES]
    if named:
        extra.extend(named)
    return tuple(extra), named


@dataclass(slots=True)
class _NodePart:
    """The node columns of a snapshot: rebuilt when a Node object or the resource columns change."""

    names: tuple[str, ...]
    row: dict[str, int]
    labels: tuple[dict[str, str], ...]
    taints: tuple
    allocatable: np.ndarray  # read-only
    gpu_mem: np.ndarray  # read-only (n_nodes,) MiB
    gpu_mem_list: list[int]
    mig_mixed: np.ndarray
    sharing: np.ndarray
    schedulable: np.ndarray
    ready: np.ndarray
    max_gpu_mem: int


def _node_part(nodes: list[Node], col: dict[str, int], n_res: int, dra: Dra) -> _NodePart:
    nodes = sorted(nodes, key=lambda n: n.meta.name)
    node_row = {n.meta.name: i for i, n in enumerate(nodes)}
    allocatable = np.zeros((len(nodes), n_res), dtype=np.int64)
    for i, n in enumerate(nodes):
        allocatable[i] = _vector(n.allocatable, col, n_res)
    labels = tuple(n.meta.labels for n in nodes)
    mig_mixed = np.array([lb.get(C.LABEL_MIG_STRATEGY) == "mixed" for lb in labels], dtype=bool)
    allocatable[mig_mixed, GPU] = 0  # a MIG-mixed node has no whole GPUs to give
    gpu_mem = np.array([_gpu_memory_mib(lb) for lb in labels], dtype=np.int64)
    mig = np.array([lb.get(C.LABEL_MIG_STRATEGY, "none") not in ("", "none") for lb in labels], dtype=bool)
    sharing_nodes = (allocatable[:, GPU] > 0) & ~mig  # fractions are never placed on MIG nodes
    if dra:  # DRA GPUs count as the node's GPUs (KAI's AddDRAGPUs); fractions never go on them
        for name, count in dra.node_gpus().items():
            if (row := node_row.get(name)) is not None:
                allocatable[row, GPU] = min(int(allocatable[row, GPU]) + count * MILLI, MAX_AMOUNT)
    max_gpu_mem = int(gpu_mem[sharing_nodes].max()) if sharing_nodes.any() else C.DEFAULT_GPU_MEMORY_MIB
    ready = np.array([n.ready for n in nodes], dtype=bool)
    return _NodePart(
        names=tuple(n.meta.name for n in nodes),
        row=node_row,
        labels=labels,
        taints=tuple(_node_taints(n) for n in nodes),
        allocatable=_ro(allocatable),
        gpu_mem=_ro(gpu_mem),
        gpu_mem_list=gpu_mem.tolist(),
        mig_mixed=_ro(mig_mixed),
        sharing=_ro(sharing_nodes),
        schedulable=_ro(ready.copy()),
        ready=_ro(ready),
        max_gpu_mem=max_gpu_mem,
    )


def _same(a: list, b: list) -> bool:
    """The same objects in the same order (identity, not equality: Store objects are replaced, never edited)."""
    return len(a) == len(b) and all(map(operator.is_, a, b))


def _ids(objs: list) -> np.ndarray:
    return np.fromiter(map(id, objs), dtype=np.int64, count=len(objs))


def _pod_key(pod: Pod) -> tuple[str, str]:
    return (pod.meta.namespace or "", pod.meta.name)


def _job_key(job: JobInfo) -> tuple[str, str]:
    """A job's PodGroup's key (``_pg_index``'s)."""
    meta = job.podgroup.meta
    return (meta.namespace or "", meta.name)


MAX_KEPT_VECTORS = 65_536  # request shapes kept by a SnapshotBuilder (a cache, cleared when full)


class _Rebuild(Exception):
    """An update the builder does not patch (columns, node rows, job order changed): build from the facts."""


class SnapshotBuilder:
    """Builds each cycle's Snapshot from the same arguments as ``build_snapshot``, keeping the last build.

    Rules:
    * A pod object is derived into ``_PodFacts`` once; the Store replaces objects and never edits them, so an
      object seen before (by identity) needs nothing new. The lists handed in are diffed by object identity
      (NumPy over ``id``s: pointer compares, no Python per unchanged pod), so the builder follows whatever the
      backend hands it, overlays of assumed binds and a shard's partition included.
    * Pods that changed in place (a bind, a status, an eviction's deletionTimestamp) patch their task, their
      job and the node columns by difference. A pod added or removed in the middle of the list moves every
      later task's index, so the tasks from there on are laid out again from their kept facts (no facts are
      derived again). New pods at the end (the Store's order) are appended.
    * What the facts depend on (resource columns, node names, GPU memory, the scheduler name, the task order,
      DRA) changing makes every pod derived again: a full build.
    * Handing out: every Snapshot is new, made of new or unchanged parts. A TaskInfo, JobInfo or array is
      never changed once handed out; a changed task or job is a new object. So the Snapshot a cycle still
      uses (the previous one, in a worker thread) is never touched by the next update: copy-on-write at the
      granularity of one task, one job, one array, which costs what changed and not a copy of 50,000 tasks.
    * Equal to a fresh ``build_snapshot`` of the same arguments, field by field (a property test checks it
      after random change sequences). Sums the fresh build saturates (absurd input) make a full build.
    """

    def __init__(self) -> None:
        self._built = False
        self._orphans: tuple[np.ndarray, np.ndarray] | None = None  # per node: orphan reservation pods, releasing
        self.full_builds = 0  # builds that derived every pod again (for the benchmarks and tests)
        self.updates = 0  # builds that patched the last one

    # ---- public ------------------------------------------------------------------------------------------

    def build(
        self,
        *,
        nodes: list[Node],
        pods: list[Pod],
        podgroups: list[PodGroup],
        queues: list[Queue],
        priority_classes: list[PriorityClass],
        now: float,
        scheduler_name: str = C.SCHEDULER_NAME,
        pdbs: Iterable[PodDisruptionBudget] = (),
        queue_usage: dict[str, tuple[float, float, float]] | None = None,
        topologies: Iterable[Topology] = (),
        task_order: Callable[[Pod], tuple] = default_task_order,
        stuck_in_releasing_s: float = C.DEFAULT_STUCK_IN_RELEASING_S,
        namespaces: Iterable[Namespace] = (),
        storage: Storage = NO_STORAGE,
        dra: Dra = NO_DRA,
        bare_pods_return: bool = True,
    ) -> Snapshot:
        """The Snapshot ``build_snapshot`` would give for these arguments."""
        pods = list(pods)
        self._now = now
        self._stuck_s = stuck_in_releasing_s
        self._dra = dra
        settings = (scheduler_name, task_order, stuck_in_releasing_s)
        patched = False
        if self._built and not dra and not self._had_dra and settings == self._settings:
            try:
                self._update(nodes, pods, podgroups, queues, priority_classes)
                patched = True
            except _Rebuild:
                pass
        if not patched:
            self._settings = settings
            self._scheduler_name = scheduler_name
            self._task_order = task_order
            self._full(nodes, pods, podgroups, queues, priority_classes)
        self._had_dra = bool(dra)
        self._built = True
        return self._snapshot(pods, pdbs, queue_usage, topologies, namespaces, storage, dra, bare_pods_return)

    # ---- deriving one pod --------------------------------------------------------------------------------

    def _derive(self, pod: Pod, extra: tuple[str, ...], named: dict[str, int] | None) -> _PodFacts:
        f = _PodFacts()
        f.pod = pod
        f.ti = -1
        f.extra = extra
        status = task_status(pod, self._now, self._stuck_s)
        nodes = self._nodes
        node = nodes.row.get(pod.node_name, -1) if pod.node_name else -1
        res = pod.requests if named is None else {**pod.requests, **named}
        key = tuple(res.items())
        base = self._vectors.get(key)
        if base is None:  # pods made from one template share one read-only request vector
            if len(self._vectors) >= MAX_KEPT_VECTORS:  # a scheduler that runs for months sees many shapes
                self._vectors.clear()
            base = self._vectors[key] = _ro(_vector(res, self._col, self._n_res))
        req = base
        active = status in ACTIVE_USED and node >= 0
        f.legacy = named is not None and active
        dra = self._dra
        if pod.resource_claims and dra:  # GPUs claimed through DRA count as GPUs (KAI's DRA GPU accounting)
            req = base.copy()
            req[GPU] = min(int(req[GPU]) + dra.pod_gpus(pod) * MILLI, MAX_AMOUNT)
        labels = pod.meta.labels
        reservation = labels.get(C.LABEL_APP) == C.RESERVATION_APP if labels else False
        if reservation:
            # A GPU reservation pod holds, towards the device plugin, the GPU its GPU group already takes
            # from the node here: its other resources count on the node, its GPU does not (KAI's
            # addTaskResources), and as a KAI utility pod it is not taken off the fair-share total.
            if req is base:
                req = base.copy()
            req[GPU] = 0
        max_gpu_mem = nodes.max_gpu_mem
        share, spec_error = share_of(pod, max_gpu_mem)
        reason = INVALID_GPU_REQUEST if spec_error else ""
        if status not in _TO_PLACE:  # bound (or done): it holds what it holds, whatever its annotations say now
            spec_error = reason = ""
        elif pod.oversize and not spec_error:
            spec_error, reason = pod.oversize[0], INVALID_REQUEST
        f.used = req if active else None  # a shared pod's GPU column is 0 here: it holds slots of GPU groups
        f.placed = None
        if share is not None:
            if active:
                f.placed = tuple(group_labels(pod))
            req = req.copy()  # used keeps the GPU column at 0; the task carries what queues are charged
            req[GPU] = share.accounted_milli(nodes.gpu_mem_list[node] if node >= 0 else max_gpu_mem)
        f.req = req if req is base else _ro(req)
        f.status = status
        f.node = node
        f.share = share
        f.spec_error = spec_error
        f.reason = reason
        f.reservation = reservation
        f.rules = bool(pod.placement_rules)
        f.now_dep = bool(pod.node_name) and pod.meta.deletion_timestamp is not None and pod.phase == "Running"
        mine = f.mine = pod.scheduler_name == self._scheduler_name
        ann = pod.meta.annotations
        f.group = (pod.meta.namespace or "", ann.get(C.ANNOTATION_POD_GROUP_NAME, "") if ann else "")
        if mine:
            f.sig = _signature_key(pod, share, named is not None, bool(extra))
            f.order_key = self._task_order(pod)
            f.qreq = _queue_request(req, self._mig_cols)
            f.nominated = (
                nodes.row.get(pod.nominated_node_name, -1)
                if status == TaskStatus.PENDING and pod.nominated_node_name
                else -1
            )
        else:
            f.sig = f.order_key = None
            f.qreq = (0, 0, 0)
            f.nominated = -1
        return f

    def _derive_new(self, pod: Pod) -> _PodFacts:
        """Facts of a pod object not seen before; _Rebuild when it brings a resource column not yet there."""
        extra, named = _extra_names(pod)
        if extra and any(k not in self._col for k in extra):
            raise _Rebuild
        return self._derive(pod, extra, named)

    # ---- full build --------------------------------------------------------------------------------------

    def _full(self, nodes, pods, podgroups, queues, priority_classes) -> None:
        self.full_builds += 1
        names: set[str] = set()
        for n in nodes:
            names.update(k for k in n.allocatable if k not in BASE_RESOURCES)
        self._node_extra = frozenset(names)
        extras = [_extra_names(pod) for pod in pods]
        for extra, _ in extras:
            names.update(extra)
        self._extra_count: dict[str, int] = {}
        self._columns_may_shrink = False
        self._set_columns(BASE_RESOURCES + tuple(sorted(names)))
        self._nodes_in = list(nodes)
        self._nodes = _node_part(self._nodes_in, self._col, self._n_res, self._dra)
        self._set_queues(queues, priority_classes)
        self._dirty_jobs: set[int] = set()
        self._set_jobs(podgroups)
        self._fresh_jobs = set(range(len(self._jobs)))  # made in this build: finished in place
        self._remap = None
        self._changed_jobs: set[int] = set()
        self._dirty_jobs.update(self._fresh_jobs)  # every job gets its gang, tasks or none
        n_nodes, n_res = len(self._nodes.names), self._n_res
        self._used = np.zeros((n_nodes, n_res), dtype=np.int64)
        self._releasing = np.zeros_like(self._used)
        self._other = np.zeros_like(self._used)  # per node, other schedulers' pods on it (ready or not)
        self._other_used = np.zeros(n_res, dtype=np.int64)  # as the fresh build sums it (saturating)
        self._legacy = np.zeros(n_nodes, dtype=np.int64)
        self._rules = 0
        self._refs: dict[tuple[str, str], int] = {}  # per PodGroup key, how many of kai's pods name it
        self._reset_layout()
        derive = self._derive
        ready = self._nodes.ready
        facts = []
        for count, (pod, (extra, named)) in enumerate(zip(pods, extras)):
            if count % SATURATE_EVERY == SATURATE_EVERY - 1:
                _saturate(self._used, self._releasing, self._other_used)
            f = derive(pod, extra, named)
            facts.append(f)
            self._account(f, 1)
            if f.used is not None and not f.mine and ready[f.node] and not f.reservation:
                self._other_used += f.req
        _saturate(self._used, self._releasing, self._other_used)
        self._lay_many(0, facts)
        self._pods = pods
        self._ids = _ids(pods)
        self._facts = facts
        self._placed_changed = True

    def _set_columns(self, resources: tuple[str, ...]) -> None:
        self._vectors: dict[tuple, np.ndarray] = {}  # request items -> its vector in these columns (read-only)
        self._resources = resources
        self._col = {r: i for i, r in enumerate(resources)}
        self._n_res = len(resources)
        # MIG instances count as GPUs in queue accounting and fair share (KAI's TotalGPUs): (column, milli each)
        self._mig_cols = [(c, g * MILLI) for c, r in enumerate(resources) if (g := mig_gpus(r)) is not None]

    def _set_queues(self, queues: list[Queue], priority_classes: list[PriorityClass]) -> None:
        self._queues_in = list(queues)
        self._classes_in = list(priority_classes)
        self._classes = {c.meta.name: c for c in priority_classes}
        self._queue_infos, self._queue_index = _build_queues(self._queues_in)
        self._queue_by_name = {q.meta.name: q for q in queues}
        self._any_rule = any(q.allowed_namespaces is not None for q in queues)  # access rules are rare

    def _set_jobs(self, podgroups: list[PodGroup]) -> None:
        """One job per PodGroup, in the list's order (the Store's slot order: see ``_update_jobs``)."""
        self._pgs_in = list(podgroups)
        self._pg_ids = _ids(podgroups)
        self._pg_index = {_pod_key(pg): i for i, pg in enumerate(podgroups)}  # type: ignore[arg-type]
        self._jobs = [self._job(i, pg) for i, pg in enumerate(podgroups)]
        self._raw: list[list[int]] = [[] for _ in podgroups]  # per job, its task indices in index order

    def _job(self, index: int, pg: PodGroup) -> JobInfo:
        """A job without tasks yet (``_finish_job`` adds them)."""
        priority, preemptible = resolve_priority(pg, self._classes)
        qi = self._queue_index.get(pg.queue, -1)
        reason = ""
        if qi < 0:
            reason = f"Queue '{pg.queue}' does not exist"
        elif not self._queue_infos[qi].is_leaf:
            reason = f"Queue '{pg.queue}' is not a leaf queue; only leaf queues hold jobs"
            qi = -1
        elif self._any_rule and (denied := access_denied(self._queue_by_name, pg.queue, pg.meta.namespace or "")):
            reason = denied  # kai's queue access rule (the admission webhook refuses the same at create)
            qi = -1
        return JobInfo(
            index=index,
            podgroup=pg,
            queue=qi,
            queue_name=pg.queue,
            priority=priority,
            preemptible=preemptible,
            min_available=pg.min_member,
            creation=pg.meta.creation_timestamp or 0.0,
            unschedulable_reason=reason,
        )

    # ---- the layout: tasks, others and shared pods in pod order -----------------------------------------

    def _reset_layout(self) -> None:
        self._tasks: list[TaskInfo] = []
        self._task_pos: list[int] = []  # per task, its pod's position in the pod list
        self._sig_ids: dict[tuple, int] = {}
        self._sig_keys: list[tuple] = []
        self._sig_first: list[int] = []  # per signature, the task it first appears at (increasing)
        self._sig_pods: list[Pod] = []
        self._others: list[OtherPod] = []
        self._other_pos: list[int] = []
        self._placed: list[tuple[int, int, _PodFacts]] = []  # (pod position, task index or -1, facts)
        self._now_dep: list[int] = []  # positions of pods whose status the clock may change
        self._resv: list[tuple[int, _PodFacts]] = []  # (pod position, facts) of bound GPU reservation pods
        self._resv_changed = True

    def _lay_many(self, start: int, facts: list[_PodFacts]) -> None:
        """Put the pods at *start*, *start* + 1, ... (after every pod laid so far) in their places: a task, another
        pod, or nothing. One loop with its lookups held in locals: a PodGroup or pod removed near the front lays
        out tens of thousands of pods again, so the cost per pod is the update's cost."""
        tasks, task_pos, raw, sig_ids = self._tasks, self._task_pos, self._raw, self._sig_ids
        job_of = self._pg_index.get
        remap = self._remap
        dirty: list[int] = []
        ti = len(tasks)
        for pos, f in enumerate(facts, start):
            if f.now_dep:
                self._now_dep.append(pos)
            if f.reservation and f.used is not None:
                self._resv.append((pos, f))
                self._resv_changed = True
            ji = job_of(f.group) if f.mine else None
            if ji is None:
                if f.used is not None:
                    self._others.append(OtherPod(f.pod, f.node, f.status == TaskStatus.RELEASING))
                    self._other_pos.append(pos)
                if f.placed is not None:
                    self._placed.append((pos, -1, f))
                    self._placed_changed = True
                continue
            sig = sig_ids.get(f.sig)  # type: ignore[arg-type]
            if sig is None:
                sig = sig_ids[f.sig] = len(self._sig_keys)  # type: ignore[index]
                self._sig_keys.append(f.sig)  # type: ignore[arg-type]
                self._sig_first.append(ti)
                self._sig_pods.append(f.pod)
            # ``_task`` written out (a call per task costs as much as the rest of the loop); positional, in
            # TaskInfo's field order (50,000 of these in a full build: keywords cost more)
            tasks.append(
                TaskInfo(
                    ti, ji, f.pod, f.status, f.node, f.req, sig, f.order_key, f.qreq, f.nominated, f.share, (),
                    f.spec_error, f.reason,
                )  # type: ignore[arg-type]
            )  # fmt: skip
            task_pos.append(pos)
            raw[ji].append(ti)
            dirty.append(ji)
            if remap is not None and f.ti >= 0:
                remap[f.ti] = ti
            f.ti = ti
            if f.placed is not None:
                self._placed.append((pos, ti, f))
                self._placed_changed = True
            ti += 1
        self._dirty_jobs.update(dirty)

    @staticmethod
    def _task(ti: int, ji: int, sig: int, f: _PodFacts) -> TaskInfo:
        # positional, in TaskInfo's field order (50,000 of these in a full build: keywords cost more)
        return TaskInfo(
            ti,
            ji,
            f.pod,
            f.status,
            f.node,
            f.req,
            sig,
            f.order_key,
            f.qreq,
            f.nominated,
            f.share,
            (),
            f.spec_error,
            f.reason,
        )  # type: ignore[arg-type]

    def _account(self, f: _PodFacts, sign: int) -> None:
        """Add (sign 1) or take away (-1) what the pod adds to the node columns and the counts."""
        if f.used is not None:
            node = f.node
            if sign > 0:
                self._used[node] += f.used
                if f.status == TaskStatus.RELEASING:
                    self._releasing[node] += f.used
                if not f.mine and not f.reservation:
                    self._other[node] += f.req
            else:
                self._used[node] -= f.used
                if f.status == TaskStatus.RELEASING:
                    self._releasing[node] -= f.used
                if not f.mine and not f.reservation:
                    self._other[node] -= f.req
            if f.legacy:
                self._legacy[node] += sign
        if f.rules:
            self._rules += sign
        if f.extra:
            counts = self._extra_count
            for k in f.extra:
                counts[k] = counts.get(k, 0) + sign
            if sign < 0:
                self._columns_may_shrink = True
        if f.mine:
            refs = self._refs.get(f.group, 0) + sign
            if refs:
                self._refs[f.group] = refs
            else:  # PodGroups come and go for months: keep only the names some pod still gives
                del self._refs[f.group]

    def _remapping(self) -> list[int]:
        """Per task of the last snapshot, its index in this one, -1 while it has none (laid out again and not yet
        placed, gone, or changed). Made as "nothing moved" at the update's first change to the layout; a job whose
        every task maps is the last snapshot's job with its indices moved (``_renumbered``), which is how the
        thousands of jobs after a removed pod or PodGroup are carried over without being made again."""
        if self._remap is None:
            self._remap = list(range(len(self._handed)))
        return self._remap

    def _truncate(self, pos: int, jobs_from: int | None = None) -> None:
        """Forget the layout of pods at *pos* and after (they are laid out again). *jobs_from*: the jobs from this
        index on are dropped by the caller, so their task lists are not trimmed."""
        p = bisect_left(self._task_pos, pos)
        remap = self._remapping()
        remap[p:] = [-1] * max(len(remap) - p, 0)
        limit = len(self._jobs) if jobs_from is None else jobs_from
        jobs = {ji for t in self._tasks[p:] if (ji := t.job) < limit}
        for ji in jobs:
            raw = self._raw[ji]
            del raw[bisect_left(raw, p) :]
        self._dirty_jobs.update(jobs)
        del self._tasks[p:]
        del self._task_pos[p:]
        k = bisect_left(self._sig_first, p)
        for key in self._sig_keys[k:]:
            del self._sig_ids[key]
        del self._sig_keys[k:], self._sig_first[k:], self._sig_pods[k:]
        o = bisect_left(self._other_pos, pos)
        del self._others[o:], self._other_pos[o:]
        q = bisect_left(self._placed, pos, key=lambda e: e[0])
        if q < len(self._placed):
            self._placed_changed = True
        del self._placed[q:]
        del self._now_dep[bisect_left(self._now_dep, pos) :]
        r = bisect_left(self._resv, pos, key=lambda e: e[0])
        if r < len(self._resv):
            self._resv_changed = True
            del self._resv[r:]

    # ---- update ------------------------------------------------------------------------------------------

    def _update(self, nodes, pods, podgroups, queues, priority_classes) -> None:
        """Patch the last build to these arguments; _Rebuild when the change is not one the builder patches.
        A _Rebuild may come half-way: ``_full`` sets every part again, so nothing half-patched survives."""
        self.updates += 1
        self._remap: list[int] | None = None  # made by the first change to the layout (``_remapping``)
        self._changed_jobs = set()  # jobs with a task changed in place (``_replace``): made again
        self._dirty_jobs = set()
        self._fresh_jobs = set()
        self._placed_changed = False
        self._resv_changed = False
        self._other_used = None  # summed per build from the per-node columns
        self._columns_may_shrink = False
        if not _same(nodes, self._nodes_in):
            names: set[str] = set()
            for n in nodes:
                names.update(k for k in n.allocatable if k not in BASE_RESOURCES)
            part = _node_part(list(nodes), self._col, self._n_res, self._dra)
            old = self._nodes
            if (
                frozenset(names) != self._node_extra
                or part.names != old.names
                or part.max_gpu_mem != old.max_gpu_mem
                or part.gpu_mem_list != old.gpu_mem_list
            ):
                raise _Rebuild  # node rows or what shared pods are charged moved: every pod again
            self._nodes_in = list(nodes)
            self._nodes = part
            self._placed_changed = True  # the GPU table follows the nodes' GPUs
        if not (_same(queues, self._queues_in) and _same(priority_classes, self._classes_in)):
            if queues == self._queues_in and priority_classes == self._classes_in:
                # new objects, the same values: a Queue's status write (kai's own, in every cycle that moves a
                # queue's allocation) comes back on the watch as a new object, and the parsed Queue holds no status.
                # Nothing the snapshot reads changed, so no job is made again (12,000 of them in a busy stream).
                self._queues_in, self._classes_in = list(queues), list(priority_classes)
            else:
                self._set_queues(queues, priority_classes)
                for i, job in enumerate(self._jobs):
                    self._jobs[i] = self._job(i, job.podgroup)
                self._dirty_jobs.update(range(len(self._jobs)))
                self._fresh_jobs.update(range(len(self._jobs)))
        self._relay_from = len(pods)  # set lower when the layout must be redone from a place
        self._relay_check: list[int] = []  # places of tasks whose PodGroup went (``_update_jobs``)
        self._orphans_of_gone: set[int] = set()  # those tasks
        if not _same(podgroups, self._pgs_in):
            self._update_jobs(podgroups)
        self._apply_pods(pods)
        if self._columns_may_shrink:
            extra = self._node_extra.union(k for k, c in self._extra_count.items() if c > 0)
            if BASE_RESOURCES + tuple(sorted(extra)) != self._resources:
                raise _Rebuild
        if self._used.max(initial=0) >= SATURATED // 2 or (
            self._other.sum(axis=0, dtype=np.float64).max(initial=0) >= SATURATED // 2
        ):
            raise _Rebuild  # near the sums the fresh build saturates: let it

    def _update_jobs(self, podgroups: list[PodGroup]) -> None:
        """Follow the PodGroups: jobs are in the order of the list handed in, as a fresh build takes them (the
        Store's slot order: a PodGroup that goes leaves its slot to the last one). Only the places whose object
        changed (by identity) are looked at:

        * the same PodGroup, changed: its job is made again where it is;
        * another PodGroup, which was elsewhere (the last one, moved into a removed one's place): its job moves
          here, and its tasks are made again with the new job index;
        * a new PodGroup: a new job (_Rebuild if pods named it before: they become tasks where they are);
        * a PodGroup gone whose pods stay: they are tasks no more, so the layout is redone from the first of
          them (``_relay_from``); pods gone with it leave in ``_apply_pods``.

        A PodGroup twice in the list makes a full build, as anything this does not follow."""
        jobs, raw, pg_index, tasks = self._jobs, self._raw, self._pg_index, self._tasks
        ids, old_ids = _ids(podgroups), self._pg_ids
        n_new, n_old = len(podgroups), len(old_ids)
        m = min(n_new, n_old)
        at = np.flatnonzero(ids[:m] != old_ids[:m]).tolist()
        gone: dict[tuple[str, str], int] = {_job_key(jobs[i]): i for i in at}
        gone.update((_job_key(jobs[i]), i) for i in range(m, n_old))
        came: dict[tuple[str, str], int] = {}
        for i in [*at, *range(m, n_new)]:
            key = _pod_key(podgroups[i])
            if key in came or (key in pg_index and key not in gone):
                raise _Rebuild  # a key twice among the PodGroups
            came[key] = i
        old_raw = {i: raw[i] for i in gone.values()}  # the tasks of the jobs leaving their places
        orphans: list[int] = []  # tasks of jobs gone: their pods go, or are laid out again
        for key, i in gone.items():
            if key not in came:
                del pg_index[key]
                orphans += old_raw[i]
        for key in came:
            if key not in gone and self._refs.get(key, 0):
                raise _Rebuild  # pods named it before it came: they become tasks in the middle of the layout
        del jobs[n_new:], raw[n_new:]
        while len(jobs) < n_new:
            jobs.append(None)  # type: ignore[arg-type]
            raw.append([])
        for key, i in came.items():
            pg = podgroups[i]
            was = gone.get(key)
            if was == i:  # changed in place
                raw[i] = old_raw[i]
                jobs[i] = self._job(i, pg)
            elif was is not None:  # moved here: its tasks carry the new job index
                moved = raw[i] = old_raw[was]
                for ti in moved:
                    tasks[ti] = dataclasses.replace(tasks[ti], job=i)
                jobs[i] = self._job(i, pg)
            else:
                raw[i] = []
                jobs[i] = self._job(i, pg)
            pg_index[key] = i
            self._dirty_jobs.add(i)
            self._fresh_jobs.add(i)
        self._dirty_jobs.difference_update(range(n_new, n_old))
        self._orphans_of_gone = set(orphans)
        if orphans:  # the first of them whose pod stays is where the layout is redone from (``_apply_pods``)
            self._relay_check = sorted(self._task_pos[t] for t in orphans)
        self._pgs_in = list(podgroups)
        self._pg_ids = ids

    def _apply_pods(self, pods: list[Pod]) -> None:
        """Patch the layout to the new pod list. Where the object at a place changed (by identity):

        * the same pod, changed in place: its task (or other-pod entry) is swapped where it is;
        * another pod (the Store's last pod, moved into a removed one's slot, or a new one): it takes the
          place's task index if the place held a task and it is one too, with a signature seen before then
          (``_swap``); the list's tail (the pods after the shorter list's end) is laid out again.

        Anything else (a task where there was none, a pod whose PodGroup went and that stays) lays out every
        pod from there again: correct for any list, and what a list in another order costs."""
        ids = _ids(pods)
        old_ids, old_pods, facts = self._ids, self._pods, self._facts
        m = min(len(ids), len(old_ids), self._relay_from)
        start = m if len(ids) != len(old_ids) or m < len(ids) else len(ids)
        for p in self._relay_check:  # tasks of PodGroups that went: a pod of them that stays is a task no more
            if p >= start:
                break
            if _pod_key(pods[p]) == _pod_key(old_pods[p]):
                start = p
        changed = np.flatnonzero(ids[:start] != old_ids[:start]).tolist()
        # pods the clock may have moved to StuckInReleasing: changed in place if their status did
        now_moved = [
            i
            for i in self._now_dep
            if i < start and ids[i] == old_ids[i] and task_status(pods[i], self._now, self._stuck_s) != facts[i].status
        ]
        if now_moved:
            changed = sorted(set(changed).union(now_moved))
        pg_index = self._pg_index
        seen: dict[int, _PodFacts] | None = None  # old facts by pod id, for pods moved to another place
        for i in changed:
            fo = facts[i]
            pod = pods[i]
            if _pod_key(pod) != _pod_key(old_pods[i]):
                if seen is None:
                    places = [j for j in changed if j >= i] + list(range(start, len(old_ids)))
                    seen = dict(zip(old_ids[places].tolist(), [facts[j] for j in places]))
                fn = seen.get(id(pod))
                if fn is None or (fn.now_dep and task_status(pod, self._now, self._stuck_s) != fn.status):
                    fn = self._derive_new(pod)
                if not self._swap(i, fo, fn):
                    start = i
                    break
                continue
            fn = self._derive_new(pod)
            was = self._task_at(i) >= 0
            now = fn.mine and fn.group in pg_index
            if was != now or (now and (fo.group != fn.group or fo.sig != fn.sig)):
                start = i  # its task comes or goes, or moves to another job or signature: lay out from here
                break
            self._account(fo, -1)
            self._account(fn, 1)
            facts[i] = fn
            self._replace(i, fo, fn)
        if start < len(ids) or start < len(old_ids):
            # The kept pods' facts stand; only pods not there before (or whose status the clock moved) are derived.
            # Maps over ids, in C: tens of thousands of pods are laid out again when one near the front goes.
            old = dict(zip(old_ids[start:].tolist(), facts[start:]))
            clocked = [facts[p] for p in self._now_dep[bisect_left(self._now_dep, start) :]]
            self._truncate(start)
            del facts[start:]
            tail = list(map(old.pop, ids[start:].tolist(), repeat(None)))  # what stays in old: the pods that went
            for fo in old.values():
                self._account(fo, -1)
            k = -1
            for _ in range(tail.count(None)):  # the pods that came
                k = tail.index(None, k + 1)
                fn = tail[k] = self._derive_new(pods[start + k])
                self._account(fn, 1)
            if clocked:
                at = dict(zip(map(id, tail), range(len(tail))))
                for k in sorted(at[i] for f in clocked if (i := id(f)) in at):
                    fo = tail[k]
                    if task_status(pods[start + k], self._now, self._stuck_s) != fo.status:
                        fn = tail[k] = self._derive_new(pods[start + k])
                        self._account(fo, -1)
                        self._account(fn, 1)
            facts.extend(tail)
            self._lay_many(start, tail)
        self._pods = pods
        self._ids = ids

    def _task_at(self, pos: int) -> int:
        """The task index of the pod at *pos* in the layout, or -1 if it is not a task."""
        ti = bisect_left(self._task_pos, pos)
        return ti if ti < len(self._task_pos) and self._task_pos[ti] == pos else -1

    def _swap(self, pos: int, fo: _PodFacts, fn: _PodFacts) -> bool:
        """Another pod took place *pos* (see ``_apply_pods``): put it there if every later task keeps its index
        and every signature its number, else False (nothing changed: the layout is redone from *pos*).

        A task's signature numbers follow the first task of each signature, so the new pod must have a
        signature some earlier task has, and the old one must not have been the first of a signature it does not
        share. The old task leaves its job (unless its PodGroup went: ``_update_jobs``), the new one joins its."""
        ti = self._task_at(pos)
        now = fn.mine and fn.group in self._pg_index
        if (ti >= 0) != now:
            return False
        if ti >= 0:
            old = self._tasks[ti]
            sig = self._sig_ids.get(fn.sig)  # type: ignore[arg-type]
            first = self._sig_first
            if sig is None or first[sig] > ti or (first[old.signature] == ti and old.signature != sig):
                return False
            if ti not in self._orphans_of_gone:
                raw = self._raw[old.job]
                del raw[bisect_left(raw, ti)]
                self._changed_jobs.add(old.job)
                self._dirty_jobs.add(old.job)
            ji = self._pg_index[fn.group]  # type: ignore[index]
            insort(self._raw[ji], ti)
            self._account(fo, -1)
            self._account(fn, 1)
            self._facts[pos] = fn
            self._replace(pos, fo, fn, ji, sig)
            return True
        self._account(fo, -1)
        self._account(fn, 1)
        self._facts[pos] = fn
        self._replace(pos, fo, fn)
        return True

    def _replace(self, pos: int, fo: _PodFacts, fn: _PodFacts, job: int = -1, sig: int = -1) -> None:
        """Pod *pos* changed in place and stays what it was (a task of the same job and signature, or not
        a task): swap its task, other-pod entry and shared-pod entry. *job*, *sig*: the task's job and
        signature when another pod took the place (``_swap``), else the old task's."""
        if fo.now_dep != fn.now_dep:
            if fn.now_dep:
                insort(self._now_dep, pos)
            else:
                self._now_dep.remove(pos)
        ti = -1
        if fn.mine and fn.group in self._pg_index:
            ti = bisect_left(self._task_pos, pos)
            old = self._tasks[ti]
            job = old.job if job < 0 else job
            sig = old.signature if sig < 0 else sig
            self._tasks[ti] = self._task(ti, job, sig, fn)
            self._changed_jobs.add(job)  # made again, not carried over (``_renumbered``)
            fn.ti = ti
            if self._sig_first[sig] == ti:
                self._sig_pods[sig] = fn.pod
            self._dirty_jobs.add(job)
        else:
            o = bisect_left(self._other_pos, pos)
            had = o < len(self._other_pos) and self._other_pos[o] == pos
            if fn.used is not None:
                entry = OtherPod(fn.pod, fn.node, fn.status == TaskStatus.RELEASING)
                if had:
                    self._others[o] = entry
                else:
                    self._others.insert(o, entry)
                    self._other_pos.insert(o, pos)
            elif had:
                del self._others[o], self._other_pos[o]
        if fo.placed is not None or fn.placed is not None:
            self._placed_changed = True
            q = bisect_left(self._placed, pos, key=lambda e: e[0])
            had = q < len(self._placed) and self._placed[q][0] == pos
            if fn.placed is not None:
                if had:
                    self._placed[q] = (pos, ti, fn)
                else:
                    self._placed.insert(q, (pos, ti, fn))
            elif had:
                del self._placed[q]
        was, now = fo.reservation and fo.used is not None, fn.reservation and fn.used is not None
        if was or now:
            self._resv_changed = True
            r = bisect_left(self._resv, pos, key=lambda e: e[0])
            if now and was:
                self._resv[r] = (pos, fn)
            elif now:
                self._resv.insert(r, (pos, fn))
            else:
                del self._resv[r]

    # ---- the Snapshot ------------------------------------------------------------------------------------

    def _finish_job(self, ji: int) -> None:
        """Job *ji*'s tasks changed (or it is new): a new JobInfo with its ordered tasks, gang, last start."""
        tasks = self._tasks
        raw = self._raw[ji]
        # the last snapshot's job, its tasks laid out again: maybe only moved
        fresh = ji in self._fresh_jobs or ji in self._changed_jobs
        if not fresh and (moved := self._renumbered(ji, self._jobs[ji], raw)) is not None:
            self._jobs[ji] = moved
            return
        job = self._jobs[ji] if ji in self._fresh_jobs else self._job(ji, self._jobs[ji].podgroup)
        last = None
        for ti in raw:
            t = tasks[ti]
            start = t.pod.start_time
            if start is not None and t.status in ACTIVE_USED and (last is None or start > last):
                last = start
        job.last_start = last
        job.tasks = sorted(raw, key=lambda t: tasks[t].order_key)
        attach_gang(job, tasks)
        job.sums = job_sums(raw, tasks)
        self._jobs[ji] = job

    def _renumbered(self, ji: int, old: JobInfo, raw: list[int]) -> JobInfo | None:
        """*old* (the last snapshot's job) at index *ji* with its task indices moved, or None when its tasks are
        not the same facts as then (one changed, came or went): its task order, gang, sums and last start stand,
        since they follow from the tasks' facts alone (the task order ends in the pod's name: no two tasks of a
        job tie, so where the pods are in the list does not matter)."""
        remap = self._remap
        if remap is None or len(raw) != len(old.tasks):
            return None
        tasks = [remap[t] for t in old.tasks]
        if -1 in tasks:
            return None
        o = old
        job = JobInfo(  # positional, in JobInfo's field order (thousands move when a PodGroup goes)
            ji, o.podgroup, o.queue, o.queue_name, o.priority, o.preemptible, o.min_available, o.creation,
            tasks, o.unschedulable_reason, o.last_start, None, o.sums,
        )  # fmt: skip
        g = o.gang
        if g is not None and not o.podgroup.sub_groups:  # flat: the same leaf (``_flat``) with the moved tasks
            r = g.nodes[0]
            root = GangNode(r.name, r.parent, [], r.min_member, r.min_subgroup, r.constraint, tasks, r.counted, r.leaf)
            job.gang = Gang([root], {}, g.min_pods, g.constrained)
        else:
            attach_gang(job, self._tasks)
        return job

    def _snapshot(self, pods, pdbs, queue_usage, topologies, namespaces, storage, dra, bare_pods_return) -> Snapshot:
        for ji in sorted(self._dirty_jobs):
            if ji < len(self._jobs):
                self._finish_job(ji)
        self._dirty_jobs = set()
        self._fresh_jobs = set()
        nodes = self._nodes
        allocatable = nodes.allocatable
        orphans_stale = self._placed_changed or self._resv_changed  # the GPU table or the reservation pods
        if self._placed_changed:
            placed = [
                Placed(f.node, list(f.placed), f.share, f.status == TaskStatus.RELEASING, [])
                for _, _, f in self._placed
            ]  # type: ignore[arg-type]
            self._gpus = build_gpu_table(
                nodes.names, allocatable[:, GPU], _ro(nodes.gpu_mem * UNITS_PER_MIB), nodes.sharing, placed
            )
            for (_, ti, _), p in zip(self._placed, placed):
                if ti >= 0 and self._tasks[ti].gpu_slots != tuple(p.slots):
                    self._tasks[ti] = dataclasses.replace(self._tasks[ti], gpu_slots=tuple(p.slots))
            self._placed_changed = False
        gpus = self._gpus
        used = self._used.copy()
        releasing = self._releasing.copy()
        # every GPU group takes one whole GPU from its node; one whose pods are all releasing is a releasing GPU
        groups = (gpus.pods > 0).sum(axis=1) if gpus.pods.size else np.zeros(len(nodes.names), dtype=np.int64)
        if orphans_stale:
            self._orphans = _orphan_reservations(self._resv, gpus, len(nodes.names))
            self._resv_changed = False
        orphans = self._orphans
        if orphans is not None:  # an orphan reservation pod holds one whole GPU, about to be released
            groups = groups + orphans[0]
        _clamp_whole_releasing(allocatable, used, releasing, groups)
        used[:, GPU] += groups * MILLI
        releasing[:, GPU] += ((gpus.pods > 0) & (gpus.pods == gpus.gone)).sum(axis=1) * MILLI
        if orphans is not None:
            releasing[:, GPU] += orphans[1] * MILLI
        ready = nodes.ready
        other_used = self._other_used if self._other_used is not None else self._other[ready].sum(axis=0)
        # in float64: 5,000 nodes of saturated allocatable would overflow an int64 sum (fair share is float anyway)
        n_res = self._n_res
        total = allocatable[ready].sum(axis=0, dtype=np.float64) - other_used if len(nodes.names) else np.zeros(n_res)
        total_q = np.maximum(total[QRES_COLUMNS], 0).astype(np.float64)
        for c, milli in self._mig_cols:
            total_q[0] += max(float(total[c]), 0.0) * milli
        legacy = self._legacy > 0
        table = NodeTable(
            names=nodes.names,
            labels=nodes.labels,
            taints=nodes.taints,
            allocatable=allocatable,
            used=_ro(used),
            releasing=_ro(releasing),
            schedulable=nodes.schedulable,
            gpu_memory_mib=nodes.gpu_mem,
            mig_mixed=nodes.mig_mixed,
            legacy_mig=_ro(legacy) if legacy.any() else None,
        )
        tasks = self._tasks
        self._handed = tuple(tasks)
        return Snapshot(
            now=self._now,
            resources=self._resources,
            nodes=table,
            tasks=self._handed,
            jobs=tuple(self._jobs),
            queues=self._queue_infos,
            queue_index=self._queue_index,
            signature_pods=tuple(self._sig_pods),
            total=_ro(total_q),
            gpus=gpus,
            pdbs=_pdb_infos(pdbs, pods, tasks),
            queue_usage=queue_usage,
            topologies=tuple(sorted(topologies, key=lambda t: t.meta.name)),
            others=tuple(self._others),
            namespaces={ns.meta.name: ns.labels for ns in namespaces},
            storage=storage,
            dra=dra,
            pod_rules=self._rules > 0,
            bare_pods_return=bare_pods_return,
        )
