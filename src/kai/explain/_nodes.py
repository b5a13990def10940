"""Nodes, as a person reads them: classes of alike nodes, what the best of each has free for a pod, and
the node x GPU map (whole and shared GPUs, by queue).

Rules: pure functions over a Snapshot and a dry run's end state (``_engine``). A node class is the nodes
with the same GPU model label (``nvidia.com/gpu.product``) and the same GPU count.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.objects import Pod
from kai.api.sharedgpu import is_reservation_pod
from kai.explain import _engine as E
from kai.scheduler.explain import fmt_amount
from kai.scheduler.model import ACTIVE_USED, CPU, GPU, MEMORY, MILLI, TaskInfo, TaskStatus
from kai.scheduler.snapshot import Snapshot

MAP_NODES = 400  # the GPU map lists at most this many nodes (the rest are counted)
NO_QUEUE = "no queue"  # the GPU map's queue for a pod that is not kai's task and has no queue label


def node_classes(snap: Snapshot) -> list[tuple[str, np.ndarray]]:
    """[(class name, node rows)], largest class first, then by name."""
    nodes = snap.nodes
    groups: dict[tuple[str, int], list[int]] = {}
    gpus = nodes.allocatable[:, GPU] // MILLI if nodes.n else np.zeros(0, dtype=np.int64)
    for i in range(nodes.n):
        product = nodes.labels[i].get(C.LABEL_GPU_PRODUCT, "")
        groups.setdefault((product, int(gpus[i])), []).append(i)
    out = []
    for (product, n), rows in groups.items():
        name = f"{n} x {product or 'GPU'}" if n else "CPU-only"
        out.append((name, np.array(rows, dtype=np.int64)))
    out.sort(key=lambda c: (-len(c[1]), c[0]))
    return out


def _need(task: TaskInfo) -> dict[str, Any]:
    """One pod's need in API units (a shared pod's GPUs as its queue is charged, and its share in words)."""
    need: dict[str, Any] = {
        "gpu": float(task.request[GPU]) / MILLI,
        "cpu": float(task.request[CPU]),
        "memory": float(task.request[MEMORY]),
    }
    if task.share is not None:
        need["gpuShare"] = task.share.describe()
    return need


def missing_per_class(dry: E.DryRun, tasks: list[TaskInfo]) -> list[dict[str, Any]]:
    """For each distinct pod shape the job still needs, per node class: how many nodes its predicates
    allow, and what the best of those has free after the cycle against what one pod needs."""
    ssn, snap = dry.ssn, dry.snap
    shapes: dict[tuple, TaskInfo] = {}
    for t in tasks:
        shapes.setdefault((t.signature, t.request.tobytes(), t.share), t)
    _, later = E.free_now_and_later(ssn)
    free_gpu = E.free_gpu_milli(ssn)
    classes = node_classes(snap)
    out = []
    for task in shapes.values():
        mask, failures = E.static_fit(ssn, task)
        count = sum(1 for t in tasks if t.signature == task.signature and t.request.tobytes() == task.request.tobytes())
        per_class = []
        for name, rows in classes:
            ok = rows[mask[rows]]
            entry: dict[str, Any] = {"class": name, "nodes": len(rows), "matching": len(ok)}
            if len(ok) == 0:
                blockers = [(r, int(m[rows].sum())) for r, m in failures if m[rows].any()]
                entry["text"] = f"{name}: none of {len(rows)} node{'s' if len(rows) != 1 else ''} match" + (
                    f" ({blockers[0][1]} {blockers[0][0]})" if blockers else ""
                )
                per_class.append(entry)
                continue
            gpu_need = task.request[GPU]
            order = np.lexsort((-later[ok, CPU], -free_gpu[ok])) if gpu_need > 0 else np.argsort(-later[ok, CPU])
            best = int(ok[order[0]])
            free = {
                "gpu": float(free_gpu[best]) / MILLI,
                "cpu": float(later[best, CPU]),
                "memory": float(later[best, MEMORY]),
            }
            short = []
            if gpu_need > 0 and free_gpu[best] < gpu_need:
                short.append("GPUs")
            if later[best, CPU] < task.request[CPU]:
                short.append("CPU")
            if later[best, MEMORY] < task.request[MEMORY]:
                short.append("memory")
            entry.update(
                bestNode=snap.nodes.names[best],
                free=free,
                short=short,
                text=(
                    f"{name}: the best of {len(ok)} matching node{'s' if len(ok) != 1 else ''}, "
                    f"{snap.nodes.names[best]}, has {fmt_amount(0, free_gpu[best])}, "
                    f"{fmt_amount(1, later[best, CPU])}, {fmt_amount(2, later[best, MEMORY])} free"
                ),
            )
            per_class.append(entry)
        need = _need(task)
        gpu_text = task.share.describe() if task.share is not None else fmt_amount(0, float(task.request[GPU]))
        out.append(
            {
                "pod": f"{task.namespace}/{task.name}",
                "pods": count,
                "needPerPod": need,
                "text": f"{count} pod{'s' if count != 1 else ''} like {task.name}, each needing {gpu_text}, "
                f"{fmt_amount(1, float(task.request[CPU]))}, {fmt_amount(2, float(task.request[MEMORY]))}",
                "classes": per_class,
            }
        )
    return out


def gpu_map(snap: Snapshot, limit: int = MAP_NODES) -> dict[str, Any]:
    """Per node, its GPUs and who holds each: whole-GPU pods fill the GPUs their node has left after the
    shared ones (the API does not say which device a whole-GPU pod got), shared pods their GPU groups.
    Pods that are not kai's tasks hold their whole GPUs too (another scheduler's pod, or one of kai's whose
    PodGroup is not there): shown by their queue label, or as having none, never as free GPUs."""
    nodes = snap.nodes
    cells: dict[int, list[list[dict[str, Any]]]] = {}
    gpus = (nodes.allocatable[:, GPU] // MILLI).tolist() if nodes.n else []
    for i, n in enumerate(gpus):
        cells[i] = [[] for _ in range(int(n))]
    whole: dict[int, list[tuple[str, str, dict[str, Any], int]]] = {}  # node -> (namespace, name, holder, GPUs)
    for t in snap.tasks:
        if t.status not in ACTIVE_USED or t.node < 0:
            continue
        job = snap.jobs[t.job]
        if t.share is not None:
            share = float(t.request[GPU]) / MILLI / max(len(t.gpu_slots), 1)
            for s in t.gpu_slots:
                row = cells.get(t.node, [])
                if s < len(row):
                    row[s].append(_holder(t.pod, job.queue_name, share, t.status == TaskStatus.RELEASING))
        elif t.request[GPU] > 0:
            whole.setdefault(t.node, []).append(
                (
                    t.namespace,
                    t.name,
                    _holder(t.pod, job.queue_name, 1.0, t.status == TaskStatus.RELEASING),
                    int(t.request[GPU] // MILLI),
                )
            )
    for o in snap.others:  # a GPU reservation pod's GPU is drawn as its shared pods' (above)
        n = o.pod.requests.get(C.RESOURCE_GPU, 0)
        if n > 0 and o.node >= 0 and not is_reservation_pod(o.pod.meta.labels):
            holder = _holder(o.pod, o.pod.meta.labels.get(C.LABEL_QUEUE) or NO_QUEUE, 1.0, o.releasing)
            whole.setdefault(o.node, []).append((o.pod.meta.namespace or "", o.pod.meta.name, holder, n))
    for node, held in whole.items():
        row = cells.get(node, [])
        free = [s for s, c in enumerate(row) if not c]
        for _, _, holder, n in sorted(held, key=lambda h: (h[0], h[1])):
            for _ in range(n):
                if not free:
                    break
                row[free.pop(0)].append(holder)
    shown = [i for i in range(nodes.n) if gpus[i] > 0][:limit]
    return {
        "nodes": [{"name": nodes.names[i], "gpus": cells[i]} for i in shown],
        "more": max(0, sum(1 for g in gpus if g > 0) - len(shown)),
    }


def _holder(pod: Pod, queue: str, share: float, releasing: bool) -> dict[str, Any]:
    return {
        "pod": f"{pod.meta.namespace or ''}/{pod.meta.name}",
        "queue": queue,
        "share": round(share, 3),
        "releasing": releasing,
    }
