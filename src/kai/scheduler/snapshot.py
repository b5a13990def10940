"""Store → Snapshot: the read-only arrays and tables one cycle works on.

Rules: no I/O and no clock; ``now`` is passed in. Nodes are sorted by name so
that "ties go to the lower row" means "ties go to the node name ascending"
(KAI). Every array handed out is read-only; the session copies what it changes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

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
    GPU,
    MILLI,
    QRES,
    QRES_COLUMNS,
    UNITS_PER_MIB,
    GpuShare,
    JobInfo,
    NodeTable,
    QueueInfo,
    TaskInfo,
    TaskStatus,
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
    g, c, m = (int(x) for x in req[QRES_COLUMNS])
    for col, milli in mig_cols:
        g += int(req[col]) * milli
    return g, c, m


def _signature_key(pod: Pod, share: GpuShare | None, legacy: bool) -> tuple:
    return (
        tuple(sorted(pod.node_selector.items())),
        pod.affinity_terms,
        pod.tolerations,
        share,  # a fractional request adds its own predicate (no MIG nodes) and its own fit
        legacy,  # a legacy MIG pod is never placed
        requests_mig(pod.requests),  # a MIG pod avoids nodes running legacy MIG pods
    )


_SHARE_KEYS = (
    C.ANNOTATION_GPU_FRACTION,
    C.ANNOTATION_GPU_MEMORY,
    C.ANNOTATION_GPU_FRACTION_NUM_DEVICES,
    C.ANNOTATION_MPS,
)


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
    if not ann or not any(k in ann for k in _SHARE_KEYS):
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
) -> Snapshot:
    """The snapshot of one cycle. Pods of other schedulers only take node capacity; pods of kai's
    scheduler belong to the PodGroup named by their ``pod-group-name`` annotation. *task_order*: the pod
    order inside a job (``kai.scheduler.plugins.task_order_of(conf)``; KAI's default tiers otherwise).
    *stuck_in_releasing_s*: a terminating Running pod older than this is StuckInReleasing (``task_status``):
    its resources stay used but are not releasing (``SchedulerConf.stuck_in_releasing_threshold``)."""
    nodes = sorted(nodes, key=lambda n: n.meta.name)
    legacy = _legacy_mig(pods)
    resources = _resource_columns(nodes, pods, legacy.values())
    col = {r: i for i, r in enumerate(resources)}
    n_res = len(resources)
    # MIG instances count as GPUs in queue accounting and fair share (KAI's TotalGPUs): (column, milli-GPUs each)
    mig_cols = [(c, g * MILLI) for c, r in enumerate(resources) if (g := mig_gpus(r)) is not None]
    legacy_mig = np.zeros(len(nodes), dtype=bool)  # nodes running a legacy MIG pod
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
    schedulable = np.array([n.ready for n in nodes], dtype=bool)
    ready = np.array([n.ready for n in nodes], dtype=bool)
    used = np.zeros_like(allocatable)
    releasing = np.zeros_like(allocatable)

    classes = {c.meta.name: c for c in priority_classes}
    queue_infos, queue_index = _build_queues(queues)
    queue_by_name = {q.meta.name: q for q in queues}
    any_rule = any(q.allowed_namespaces is not None for q in queues)  # access rules are rare: skip the walk
    pg_index: dict[tuple[str, str], int] = {}
    jobs: list[JobInfo] = []
    for pg in sorted(podgroups, key=lambda g: (g.meta.creation_timestamp or 0.0, g.meta.uid)):
        priority, preemptible = resolve_priority(pg, classes)
        qi = queue_index.get(pg.queue, -1)
        reason = ""
        if qi < 0:
            reason = f"Queue '{pg.queue}' does not exist"
        elif not queue_infos[qi].is_leaf:
            reason = f"Queue '{pg.queue}' is not a leaf queue; only leaf queues hold jobs"
            qi = -1
        elif any_rule and (denied := access_denied(queue_by_name, pg.queue, pg.meta.namespace or "")):
            reason = denied  # kai's queue access rule (the admission webhook refuses the same at create)
            qi = -1
        pg_index[(pg.meta.namespace or "", pg.meta.name)] = len(jobs)
        jobs.append(
            JobInfo(
                index=len(jobs),
                podgroup=pg,
                queue=qi,
                queue_name=pg.queue,
                priority=priority,
                preemptible=preemptible,
                min_available=pg.min_member,
                creation=pg.meta.creation_timestamp or 0.0,
                unschedulable_reason=reason,
            )
        )

    other_used = np.zeros(n_res, dtype=np.int64)
    sig_ids: dict[tuple, int] = {}
    sig_pods: list[Pod] = []
    tasks: list[TaskInfo] = []
    placed: list[Placed] = []
    placed_task: list[int] = []  # per Placed, its task index (-1: another scheduler's pod)
    others: list[OtherPod] = []
    pod_rules = False
    for count, pod in enumerate(pods):
        if count % SATURATE_EVERY == SATURATE_EVERY - 1:
            _saturate(used, releasing, other_used)
        status = task_status(pod, now, stuck_in_releasing_s)
        node = node_row.get(pod.node_name, -1)
        named = legacy.get(count) if legacy else None
        req = _vector(pod.requests if named is None else {**pod.requests, **named}, col, n_res)
        if named is not None and status in ACTIVE_USED and node >= 0:
            legacy_mig[node] = True
        if pod.resource_claims and dra:  # GPUs claimed through DRA count as GPUs (KAI's DRA GPU accounting)
            req[GPU] = min(int(req[GPU]) + dra.pod_gpus(pod) * MILLI, MAX_AMOUNT)
        reservation = pod.meta.labels.get(C.LABEL_APP) == C.RESERVATION_APP
        if reservation:
            # A GPU reservation pod holds, towards the device plugin, the GPU its GPU group already takes
            # from the node here: its other resources count on the node, its GPU does not (KAI's
            # addTaskResources), and as a KAI utility pod it is not taken off the fair-share total.
            req[GPU] = 0
        share, spec_error = share_of(pod, max_gpu_mem)
        reason = INVALID_GPU_REQUEST if spec_error else ""
        if status not in _TO_PLACE:  # bound (or done): it holds what it holds, whatever its annotations say now
            spec_error = reason = ""
        elif pod.oversize and not spec_error:
            spec_error, reason = pod.oversize[0], INVALID_REQUEST
        if status in ACTIVE_USED and node >= 0:
            used[node] += req  # a shared pod's GPU column is 0 here: it holds slots of GPU groups instead
            if status == TaskStatus.RELEASING:
                releasing[node] += req
            if share is not None:
                placed.append(Placed(node, group_labels(pod), share, status == TaskStatus.RELEASING, []))
                placed_task.append(-1)  # set below once the pod is known to be one of kai's tasks
        if share is not None:
            node_mem = int(gpu_mem[node]) if node >= 0 else max_gpu_mem
            req[GPU] = share.accounted_milli(node_mem)  # what queues are charged (fractions count)
        if pod.placement_rules:
            pod_rules = True
        if pod.scheduler_name != scheduler_name:
            if status in ACTIVE_USED and node >= 0:
                if ready[node] and not reservation:
                    other_used += req
                others.append(OtherPod(pod, node, status == TaskStatus.RELEASING))
            continue
        ji = pg_index.get((pod.meta.namespace or "", pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, "")))
        if ji is None:  # not grouped yet: the pod-grouper has not seen it
            if status in ACTIVE_USED and node >= 0:
                others.append(OtherPod(pod, node, status == TaskStatus.RELEASING))
            continue
        key = _signature_key(pod, share, named is not None)
        sig = sig_ids.setdefault(key, len(sig_ids))
        if sig == len(sig_pods):
            sig_pods.append(pod)
        tasks.append(
            TaskInfo(
                index=len(tasks),
                job=ji,
                pod=pod,
                status=status,
                node=node,
                request=_ro(req),
                signature=sig,
                order_key=task_order(pod),
                qreq=_queue_request(req, mig_cols),
                nominated=node_row.get(pod.nominated_node_name, -1) if status == TaskStatus.PENDING else -1,
                share=share,
                spec_error=spec_error,
                spec_error_reason=reason,
            )
        )
        jobs[ji].tasks.append(len(tasks) - 1)
        if share is not None and status in ACTIVE_USED and node >= 0:
            placed_task[-1] = len(tasks) - 1
        if status in ACTIVE_USED and pod.start_time is not None:
            job = jobs[ji]
            if job.last_start is None or pod.start_time > job.last_start:
                job.last_start = pod.start_time
    for job in jobs:
        job.tasks.sort(key=lambda t: tasks[t].order_key)
        attach_gang(job, tasks)
    gpus = build_gpu_table(
        tuple(n.meta.name for n in nodes), allocatable[:, GPU], _ro(gpu_mem * UNITS_PER_MIB), _ro(sharing_nodes), placed
    )
    for p, ti in zip(placed, placed_task):
        if ti >= 0:
            tasks[ti].gpu_slots = tuple(p.slots)
    # every GPU group takes one whole GPU from its node; one whose pods are all releasing is a releasing GPU
    _saturate(used, releasing, other_used)
    groups = (gpus.pods > 0).sum(axis=1) if gpus.pods.size else np.zeros(len(nodes), dtype=np.int64)
    _clamp_whole_releasing(allocatable, used, releasing, groups)
    used[:, GPU] += groups * MILLI
    releasing[:, GPU] += ((gpus.pods > 0) & (gpus.pods == gpus.gone)).sum(axis=1) * MILLI

    # in float64: 5,000 nodes of saturated allocatable would overflow an int64 sum (fair share is float anyway)
    total = allocatable[ready].sum(axis=0, dtype=np.float64) - other_used if len(nodes) else np.zeros(n_res)
    total_q = np.maximum(total[QRES_COLUMNS], 0).astype(np.float64)
    for c, milli in mig_cols:
        total_q[0] += max(float(total[c]), 0.0) * milli
    table = NodeTable(
        names=tuple(n.meta.name for n in nodes),
        labels=labels,
        taints=tuple(_node_taints(n) for n in nodes),
        allocatable=_ro(allocatable),
        used=_ro(used),
        releasing=_ro(releasing),
        schedulable=_ro(schedulable),
        gpu_memory_mib=_ro(gpu_mem),
        mig_mixed=_ro(mig_mixed),
        legacy_mig=_ro(legacy_mig) if legacy_mig.any() else None,
    )
    return Snapshot(
        now=now,
        resources=resources,
        nodes=table,
        tasks=tuple(tasks),
        jobs=tuple(jobs),
        queues=queue_infos,
        queue_index=queue_index,
        signature_pods=tuple(sig_pods),
        total=_ro(total_q),
        gpus=gpus,
        pdbs=_pdb_infos(pdbs, pods, tasks),
        queue_usage=queue_usage,
        topologies=tuple(sorted(topologies, key=lambda t: t.meta.name)),
        others=tuple(others),
        namespaces={ns.meta.name: ns.labels for ns in namespaces},
        storage=storage,
        dra=dra,
        pod_rules=pod_rules,
    )
