"""kai sim's input checks beyond what one object's parser can see: the sim contract's "bad input is an error".

Rules: each check takes what was applied (or the Store) and returns the first problem as a ManifestError
naming the object and the field, or None; the embedded cluster locates it in the user's file. On a real
cluster the same inputs are not errors (the API server accepted them, and kai makes each cost only itself:
see docs/cluster.md, "Failure modes"); in a file given to ``kai sim`` they are mistakes to point out:

* the same object twice in one apply (which would silently keep the last);
* an amount kai saturates (``Pod.oversize``, ``Node.oversize``: ``cpu: 1e16``);
* invalid GPU-sharing annotations (the engine's own check, ``kai.scheduler.snapshot.share_of``);
* pods bound to a node they over-commit (more than its allocatable, whole GPUs and GPU-group fractions);
* a workload asking its simulated controller for more pods than kai sim plays (``MAX_WORKLOAD_COUNT`` per count
  field, ``MAX_SIM_PODS`` live pods in all): ``parallelism: 10000000`` would otherwise build ten million pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import ApiObject, Node, Pod
from kai.api.quantity import format_bytes
from kai.api.workloads import Workload
from kai.scheduler.model import MILLI
from kai.scheduler.snapshot import SnapshotBuilder, max_gpu_memory_mib, share_of

SimObject = ApiObject | Workload

# kai sim plays controllers for workloads of up to this many replicas per count field, and holds at most
# MAX_SIM_PODS live pods (the largest benchmark cluster has 50,000); a real cluster has no such bound.
MAX_WORKLOAD_COUNT = 100_000
MAX_SIM_PODS = 500_000
COUNT_FIELDS = frozenset(
    {"replicas", "parallelism", "completions", "size", "numOfHosts", "minReplicas", "minAvailable", "minMember"}
)


def _ref(obj: SimObject) -> str:
    ns = obj.meta.namespace
    return f"{obj.kind}/{ns}/{obj.meta.name}" if ns else f"{obj.kind}/{obj.meta.name}"


def duplicate(objects: Sequence[tuple[str, SimObject]]) -> ManifestError | None:
    """The second of two objects with the same kind, namespace and name in one apply."""
    seen: dict[tuple[str, str, str], str] = {}
    for source, obj in objects:
        key = (obj.kind, obj.meta.namespace or "", obj.meta.name)
        if key in seen:
            first = seen[key]
            where = "earlier in the same file" if first == source else f"also in {first}"
            return ManifestError(
                f"is defined twice ({where}); kai sim applies each object once per step", source=source, obj=_ref(obj)
            )
        seen[key] = source
    return None


def oversize(obj: SimObject) -> ManifestError | None:
    """An amount above what kai accounts for, saturated by the parser (``kai.api.quantity.MAX_AMOUNT``)."""
    fields = obj.oversize if isinstance(obj, (Pod, Node)) else ()
    if not fields:
        return None
    field, _, message = fields[0].partition(": ")
    return ManifestError(message, obj=_ref(obj), field=field)


def gpu_sharing(pods: Iterable[Pod], nodes: Iterable[Node]) -> ManifestError | None:
    """The first kai pod whose GPU-sharing annotations the engine would refuse (it would stay pending with an
    InvalidGpuRequest event on a cluster)."""
    max_mib = None
    for pod in pods:
        if pod.scheduler_name != C.SCHEDULER_NAME or not _has_share_annotation(pod):
            continue
        if max_mib is None:
            max_mib = max_gpu_memory_mib(nodes)
        _, error = share_of(pod, max_mib)
        if error:
            field, _, message = error.partition(": ")
            return ManifestError(message, obj=_ref(pod), field=field)
    return None


def _has_share_annotation(pod: Pod) -> bool:
    ann = pod.meta.annotations
    return any(
        k in ann
        for k in (
            C.ANNOTATION_GPU_FRACTION,
            C.ANNOTATION_GPU_MEMORY,
            C.ANNOTATION_GPU_FRACTION_NUM_DEVICES,
            C.ANNOTATION_MPS,
        )
    )


def overcommitted(
    nodes: list[Node], pods: list[Pod], now: float, builder: SnapshotBuilder | None = None
) -> ManifestError | None:
    """A node whose bound pods ask for more than it has: the first such pod (in node, then pod, order).

    Built from the engine's own snapshot, so whole GPUs and GPU groups (fractions summed per GPU) count as
    the scheduler will count them. *builder*: one kept between calls (a check per arrival then costs what
    arrived, not the whole cluster)."""
    if not any(p.node_name for p in pods):
        return None
    builder = builder or SnapshotBuilder()
    snap = builder.build(nodes=nodes, pods=pods, podgroups=[], queues=[], priority_classes=[], now=now)
    table = snap.nodes
    over = table.used > table.allocatable
    gpus = snap.gpus
    group_over = (gpus.idle < 0).any(axis=1) if gpus.idle.size else over[:, 0] & False
    for row in sorted(set(over.any(axis=1).nonzero()[0].tolist()) | set(group_over.nonzero()[0].tolist())):
        name = table.names[row]
        bound = sorted(
            (p for p in pods if p.node_name == name and p.phase not in ("Succeeded", "Failed")),
            key=lambda p: (p.meta.namespace or "", p.meta.name),
        )
        if group_over[row]:
            what = "its shared GPUs hold more than one whole GPU's worth of fractions"
        else:
            col = int(over[row].nonzero()[0][0])
            resource = snap.resources[col]
            have, want = int(table.allocatable[row, col]), int(table.used[row, col])
            what = f"{resource}: {_amount(resource, want)} asked, {_amount(resource, have)} allocatable"
        pod = bound[-1] if bound else None
        message = f"node {name} is over-committed by the pods bound to it ({what})"
        if pod is None:
            return ManifestError(message, obj=f"Node/{name}")
        return ManifestError(message, obj=_ref(pod), field="spec.nodeName")
    return None


def _amount(resource: str, value: int) -> str:
    if resource == C.RESOURCE_GPU:
        return f"{value / MILLI:g} GPUs"
    if resource == C.RESOURCE_CPU:
        return f"{value}m CPU"
    if resource in (C.RESOURCE_MEMORY, "ephemeral-storage"):
        return format_bytes(value)
    return str(value)


def workload_counts(owner: Workload) -> ManifestError | None:
    """A count field (replicas, parallelism, ...) anywhere in the owner's spec above MAX_WORKLOAD_COUNT."""
    stack: list[tuple[object, str]] = [(owner.doc.get("spec"), "spec")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                sub = f"{path}.{k}"
                if k in COUNT_FIELDS and isinstance(v, int) and not isinstance(v, bool) and v > MAX_WORKLOAD_COUNT:
                    return ManifestError(
                        f"{v} is more than kai sim plays ({MAX_WORKLOAD_COUNT:,} per workload; a cluster has no "
                        "such bound)",
                        obj=_ref(owner),
                        field=sub,
                    )
                stack.append((v, sub))
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return None
