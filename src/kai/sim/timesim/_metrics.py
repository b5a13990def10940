"""What a time-based simulation measured: the recorder the simulator feeds, and the metrics document.

Rules: the recorder only reads what the simulator hands it (cycle results, the snapshot a cycle used,
finished jobs, interruptions, node events) and the embedded cluster's objects at sample instants; it
never changes the cluster. Times are seconds since the simulation's start. The state between two cycles
is constant (decisions only happen in cycles), so time-weighted figures integrate exactly.

Definitions (docs/simulation.md repeats them for users):

* *allocated GPUs*: what the scheduler counts as allocated to queues (bound, binding and pipelined pods),
  summed over top-level queues; *capacity*: GPUs of Ready nodes (the fair-share total).
* *allocation*: time-weighted allocated / capacity. *utilization*: the same, less the work that was
  lost when pods were evicted or lost with their node (run time since the last checkpoint).
* *wait* (queueing delay): first bind minus arrival. *completion time*: last pod's finish minus arrival.
* *failed placement*: a cycle in which a pending job got no room (by its condition's reason).
* *fragmentation*: the share of free GPUs that the typical pod shapes (the five most common GPU pod
  requests, weighted by how often they were submitted) cannot use on the node they sit on.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.gpugroups import group_labels
from kai.api.objects import Node, Pod, PodGroup
from kai.scheduler.decisions import CycleResult
from kai.scheduler.model import MILLI
from kai.scheduler.snapshot import Snapshot
from kai.sim.cluster import EmbeddedCluster, FinishedJob
from kai.sim.lifetimes import Interruption
from kai.sim.output import pod_gpus

GIB = 1024**3
MAX_EVICTION_RECORDS = 2000  # the document keeps the first ones; counts are always complete
TYPICAL_SHAPES = 5

JobKey = tuple[str, str]
Shape = tuple[float, float, float]  # GPUs, millicores, bytes per pod
NodeState = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]  # names, allocatable, used, schedulable


@dataclass(slots=True)
class JobRecord:
    key: JobKey
    queue: str
    submitted: float
    pods: int = 0
    gpus: float = 0.0
    started: float | None = None
    finished: float | None = None
    evictions: int = 0
    lost_gpu_s: float = 0.0
    reason: str = ""  # why it waited, last time it did (the condition's message)
    never_fits: str = ""  # why it can never run on this cluster, if so


@dataclass(slots=True)
class _QueueSeries:
    parent: str
    quota: float
    limit: float
    allocated: list[float] = field(default_factory=list)
    fair_share: list[float] = field(default_factory=list)
    alloc_s: float = 0.0
    fair_s: float = 0.0


def _pod_shape(pod: Pod) -> Shape:
    """GPUs (a shared pod's fraction; gpu-memory as a share of a default GPU), millicores, bytes."""
    r = pod.requests
    return (pod_gpus(pod, ""), float(r.get("cpu", 0)), float(r.get("memory", 0)))


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """count, mean, p50, p90, p99 and max of *values* (None when there are none)."""
    if not values:
        return {"count": 0, "mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    a = np.asarray(values, dtype=np.float64)
    p50, p90, p99 = np.percentile(a, [50, 90, 99])
    return {
        "count": len(values),
        "mean": round(float(a.mean()), 3),
        "p50": round(float(p50), 3),
        "p90": round(float(p90), 3),
        "p99": round(float(p99), 3),
        "max": round(float(a.max()), 3),
    }


def fragmentation(free: np.ndarray, shapes: Sequence[Shape], weights: Sequence[float]) -> float:
    """Share of free GPUs the pod *shapes* cannot use. *free*: (n_nodes, 3) GPUs, millicores, bytes free on
    each schedulable node. Per shape, a node hosts min over resources of floor(free / request) pods; the
    GPUs those pods would take are usable, the rest of the node's free GPUs are not."""
    free_gpu = free[:, 0]
    total = float(free_gpu.sum())
    if total <= 0 or not shapes:
        return 0.0
    out = 0.0
    for (g, c, m), w in zip(shapes, weights, strict=True):
        if g <= 0:
            continue
        k = np.floor(free_gpu / g)
        if c > 0:
            k = np.minimum(k, np.floor(free[:, 1] / c))
        if m > 0:
            k = np.minimum(k, np.floor(free[:, 2] / m))
        usable = np.minimum(np.maximum(k, 0) * g, free_gpu).sum()
        out += w * (1.0 - float(usable) / total)
    return out


def node_allocatable(nodes: Sequence[Node]) -> np.ndarray:
    """(n_nodes, 3) float64: each node's allocatable GPUs, millicores and bytes, in the given order."""
    return np.array(
        [[n.allocatable.get(k, 0) for k in (C.RESOURCE_GPU, "cpu", "memory")] for n in nodes],
        dtype=np.float64,
    ).reshape(len(nodes), 3)


def node_state(nodes: Iterable[Node], pods: Iterable[Pod]) -> NodeState:
    """(names sorted, allocatable (n,3), used (n,3), schedulable (n,)) in GPUs, millicores, bytes, from the
    nodes and the pods holding room on them (bound, running or terminating)."""
    ns = sorted(nodes, key=lambda n: n.meta.name)
    names = [n.meta.name for n in ns]
    row = {name: i for i, name in enumerate(names)}
    alloc = node_allocatable(ns)
    used = np.zeros_like(alloc)
    for p in pods:
        i = row.get(p.node_name, -1) if p.node_name else -1
        if i >= 0 and p.phase not in ("Succeeded", "Failed"):
            used[i] += _pod_shape(p)
    ok = np.array([n.ready and not n.unschedulable for n in ns], dtype=bool)
    return names, alloc, used, ok


class Recorder:
    """Collects a simulation's measurements; ``document()`` turns them into the metrics document."""

    def __init__(self, t0: float, *, occupancy_at: Sequence[float] = (), sample_every: float = 300.0) -> None:
        self.t0 = t0
        self.jobs: dict[JobKey, JobRecord] = {}
        self.done: list[JobRecord] = []  # finished jobs, in finishing order (their keys may be reused)
        self.times: list[float] = []  # one row per cycle
        self.capacity: list[float] = []
        self.allocated: list[float] = []
        self.pending_jobs: list[int] = []
        self.queues: dict[str, _QueueSeries] = {}
        self.evictions: list[dict[str, Any]] = []
        self.eviction_counts: Counter[tuple[str, str]] = Counter()  # (action, victim queue)
        self.node_events: list[dict[str, Any]] = []
        self.failed: Counter[str] = Counter()  # reason → job-cycles
        self.failed_jobs: dict[str, set[JobKey]] = {}
        self.pending_s: Counter[str] = Counter()  # reason → job-seconds pending
        self.shapes: Counter[Shape] = Counter()
        self.sample_times: list[float] = []
        self.fragmentation: list[float] = []
        self.occupancy: list[dict[str, Any]] = []
        self.lost_gpu_s = 0.0
        self.cycles = 0
        self.end = 0.0
        self._alloc_s = 0.0
        self._cap_s = 0.0
        self._pending_now: Counter[str] = Counter()
        self._occupancy_at = sorted(occupancy_at)
        self._sample_every = sample_every
        self._next_sample = 0.0
        self._peak_occupancy: tuple[float, dict[str, Any]] | None = None

    # --- fed by the simulator ----------------------------------------------------------------------

    def arrived(self, podgroups: Sequence[tuple[float, PodGroup]], pods: Sequence[Pod], alloc: np.ndarray) -> None:
        """New (arrival time, PodGroup)s and pods were applied: their jobs' records start, and a job no node
        or no cluster of this size could ever run is marked as such. *alloc*: (n_nodes, 3) node allocatable,
        as ``node_allocatable`` gives it."""
        by_group: dict[JobKey, list[Pod]] = {}
        for p in pods:
            if p.scheduler_name != C.SCHEDULER_NAME:
                continue
            pg = p.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, "")
            by_group.setdefault((p.meta.namespace or "", pg), []).append(p)
            shape = _pod_shape(p)
            if shape[0] > 0:
                self.shapes[shape] += 1
        for at, pg in podgroups:
            key = (pg.meta.namespace or "", pg.meta.name)
            rec = JobRecord(key, pg.queue, at)
            members = by_group.get(key, [])
            rec.pods = len(members)
            rec.gpus = float(sum(_pod_shape(p)[0] for p in members))
            rec.never_fits = _never_fits(members, pg.min_member, alloc)
            if any(p.node_name for p in members):  # given running in the manifests
                rec.started = at
            self.jobs[key] = rec

    def node_event(self, at: float, node: str, action: str, pods: int, note: str = "") -> None:
        self.node_events.append({"time": at, "node": node, "action": action, "pods": pods, "note": note})

    def interrupted(self, lost: Iterable[Interruption]) -> None:
        for x in lost:
            gpu_s = x.lost * x.gpus
            self.lost_gpu_s += gpu_s
            rec = self.jobs.get(x.job)
            if rec is not None:
                rec.lost_gpu_s += gpu_s

    def finished(self, jobs: Iterable[FinishedJob]) -> None:
        for f in jobs:
            rec = self.jobs.pop(f.key, None)
            if rec is None:
                continue
            rec.finished = f.finished - self.t0
            self.done.append(rec)

    def cycle(self, t: float, snap: Snapshot, result: CycleResult) -> None:
        """One cycle at *t* scheduled *snap* into *result*."""
        self.cycles += 1
        for job in snap.jobs:  # PodGroups that appeared between arrivals (a controller's later pods)
            key = (job.namespace, job.name)
            if key not in self.jobs:
                rec = self.jobs[key] = JobRecord(key, job.queue_name, max(job.creation - self.t0, 0.0))
                rec.pods = len(job.tasks)
                rec.gpus = sum(snap.tasks[i].qreq[0] for i in job.tasks) / MILLI
                if any(snap.tasks[i].node >= 0 for i in job.tasks):
                    rec.started = t
        bound_groups = {(b.pod.namespace, b.podgroup) for b in result.binds}
        for key in sorted(bound_groups):
            rec = self.jobs.get(key)
            if rec is not None and rec.started is None:
                rec.started = t
        evicted_groups: set[JobKey] = set()
        for e in result.evictions:
            key = (e.pod.namespace, e.podgroup)
            rec = self.jobs.get(key)
            queue = rec.queue if rec is not None else ""
            self.eviction_counts[(e.action, queue)] += 1
            if key not in evicted_groups:
                evicted_groups.add(key)
                if rec is not None:
                    rec.evictions += 1
            if len(self.evictions) < MAX_EVICTION_RECORDS:
                self.evictions.append(
                    {
                        "time": t,
                        "pod": str(e.pod),
                        "podGroup": f"{key[0]}/{key[1]}",
                        "queue": queue,
                        "action": e.action,
                        "reason": e.reason,
                    }
                )
        self._pending_now = Counter()
        for st in result.podgroups:
            if not st.conditions:
                continue
            cond = st.conditions[0]
            key = (st.namespace, st.name)
            self.failed[cond.reason] += 1
            self.failed_jobs.setdefault(cond.reason, set()).add(key)
            self._pending_now[cond.reason] += 1
            rec = self.jobs.get(key)
            if rec is not None:
                rec.reason = f"{cond.reason}: {cond.message}"
        total = 0.0
        for q in result.queues:
            series = self.queues.get(q.name)
            if series is None:
                series = self.queues[q.name] = _QueueSeries(q.parent, q.deserved["gpu"], q.limit["gpu"])
                pad = len(self.times)
                series.allocated.extend([0.0] * pad)
                series.fair_share.extend([0.0] * pad)
            series.allocated.append(q.allocated["gpu"])
            series.fair_share.append(q.fair_share["gpu"])
            if not q.parent:
                total += q.allocated["gpu"]
        for series in self.queues.values():  # a queue that disappeared holds nothing
            if len(series.allocated) < len(self.times) + 1:
                series.allocated.append(0.0)
                series.fair_share.append(0.0)
        self.times.append(t)
        self.capacity.append(float(snap.total[0]) / MILLI)
        self.allocated.append(total)
        self.pending_jobs.append(sum(self._pending_now.values()))

    def hold(self, start: float, end: float, cluster: EmbeddedCluster) -> None:
        """The state after the last cycle held from *start* until *end* (the next cycle, or the end):
        integrate it, and take the samples and occupancy maps whose instants fall in [start, end)."""
        dt = end - start
        if dt <= 0:
            return
        self.end = max(self.end, end)
        if self.times:
            self._alloc_s += self.allocated[-1] * dt
            self._cap_s += self.capacity[-1] * dt
            for series in self.queues.values():
                series.alloc_s += series.allocated[-1] * dt
                series.fair_s += series.fair_share[-1] * dt
        for reason, n in self._pending_now.items():
            self.pending_s[reason] += n * dt
        want_sample = self._next_sample < end
        want_map = bool(self._occupancy_at) and self._occupancy_at[0] < end
        if not (want_sample or want_map):
            return
        nodes, pods = cluster.nodes(), cluster.store.list("Pod")
        state = node_state(nodes, pods)
        if want_sample:
            frag = self._fragmentation(state)
            while self._next_sample < end:
                self.sample_times.append(max(self._next_sample, start))
                self.fragmentation.append(frag)
                self._next_sample += self._sample_every
        while self._occupancy_at and self._occupancy_at[0] < end:
            at = max(self._occupancy_at.pop(0), start)
            self.occupancy.append(self._occupancy(at, state, pods))

    # --- derived -----------------------------------------------------------------------------------

    def _fragmentation(self, state: NodeState) -> float:
        _, alloc, used, ok = state
        free = np.maximum(alloc - used, 0)[ok]
        top = self.shapes.most_common(TYPICAL_SHAPES)
        n = sum(c for _, c in top)
        return round(fragmentation(free, [s for s, _ in top], [c / n for _, c in top]) if n else 0.0, 4)

    def _occupancy(self, at: float, state: NodeState, pods: list[Pod]) -> dict:
        """The node x GPU map: each node's GPUs filled, in bind order, by the pods holding them (a shared GPU
        by the first pod on it)."""
        names, alloc, _, ok = state
        row = {n: i for i, n in enumerate(names)}
        cells: list[list[str | None]] = [[None] * int(alloc[i, 0]) for i in range(len(names))]
        fill = [0] * len(names)
        shared: set[tuple[int, str]] = set()
        queue_of = {k: r.queue for k, r in self.jobs.items()}
        for p in pods:
            i = row.get(p.node_name, -1) if p.node_name else -1
            if i < 0 or p.phase in ("Succeeded", "Failed"):
                continue
            key = (p.meta.namespace or "", p.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, ""))
            q = queue_of.get(key) or p.meta.labels.get(C.LABEL_QUEUE, "?")
            whole = int(p.requests.get(C.RESOURCE_GPU, 0))
            # a shared pod takes one cell per GPU group it sits on, the first pod on a group colours it
            slots = [None] * whole if whole else [g for g in group_labels(p) if (i, g) not in shared]
            for group in slots:
                if fill[i] < len(cells[i]):
                    cells[i][fill[i]] = q
                    if group is not None:
                        shared.add((i, group))
                    fill[i] += 1
        return {
            "time": at,
            "nodes": [
                {"name": n, "gpus": int(alloc[i, 0]), "schedulable": bool(ok[i]), "cells": cells[i]}
                for i, n in enumerate(names)
            ],
        }

    def records(self) -> list[JobRecord]:
        """Every job, finished first (in finishing order), then the rest by arrival."""
        return [*self.done, *sorted(self.jobs.values(), key=lambda r: (r.submitted, r.key))]

    def document(self, *, simulation: dict[str, Any], stuck: Sequence[str] = ()) -> dict[str, Any]:
        """The metrics document (``--metrics``): summary, per queue, series, samples, jobs."""
        recs = self.records()
        waits = [r.started - r.submitted for r in recs if r.started is not None]
        jcts = [r.finished - r.submitted for r in recs if r.finished is not None]
        cap_s = self._cap_s
        queues_doc = []
        leaf = {name for name, s in self.queues.items()} - {s.parent for s in self.queues.values() if s.parent}
        span = self.end if self.end > 0 else 1.0
        for name in sorted(self.queues):
            s = self.queues[name]
            mine = [r for r in recs if r.queue == name]
            queues_doc.append(
                {
                    "name": name,
                    "parent": s.parent or None,
                    "leaf": name in leaf,
                    "quotaGpu": s.quota,
                    "limitGpu": s.limit,
                    "meanAllocatedGpu": round(s.alloc_s / span, 4),
                    "meanFairShareGpu": round(s.fair_s / span, 4),
                    "gpuHours": round(s.alloc_s / 3600, 3),
                    "jobs": _job_counts(mine),
                    "waitSeconds": percentiles([r.started - r.submitted for r in mine if r.started is not None]),
                    "completionSeconds": percentiles(
                        [r.finished - r.submitted for r in mine if r.finished is not None]
                    ),
                    "evictions": sum(c for (_, q), c in self.eviction_counts.items() if q == name),
                }
            )
        by_action: Counter[str] = Counter()
        for (action, _), c in self.eviction_counts.items():
            by_action[action] += c
        never = [r for r in recs if r.never_fits]
        summary = {
            "gpuCapacity": self.capacity[-1] if self.capacity else 0.0,
            "meanCapacityGpu": round(cap_s / span, 4),
            "meanAllocatedGpu": round(self._alloc_s / span, 4),
            "allocation": round(self._alloc_s / cap_s, 4) if cap_s else 0.0,
            "utilization": round(max(self._alloc_s - self.lost_gpu_s, 0.0) / cap_s, 4) if cap_s else 0.0,
            "lostGpuHours": round(self.lost_gpu_s / 3600, 3),
            "jobs": _job_counts(recs),
            "waitSeconds": percentiles(waits),
            "completionSeconds": percentiles(jcts),
            "evictions": {
                "pods": sum(self.eviction_counts.values()),
                "byAction": dict(sorted(by_action.items())),
                "byActionAndQueue": [
                    {"action": a, "queue": q, "pods": c} for (a, q), c in sorted(self.eviction_counts.items())
                ],
            },
            "nodeEvents": len(self.node_events),
            "failedPlacements": {
                reason: {
                    "jobCycles": self.failed[reason],
                    "jobs": len(self.failed_jobs.get(reason, ())),
                    "pendingJobHours": round(self.pending_s[reason] / 3600, 3),
                }
                for reason in sorted(self.failed)
            },
            "fragmentation": {
                "mean": round(float(np.mean(self.fragmentation)), 4) if self.fragmentation else 0.0,
                "max": round(float(np.max(self.fragmentation)), 4) if self.fragmentation else 0.0,
                "shapes": [
                    {"gpus": s[0], "cpu": s[1], "memory": s[2], "pods": c}
                    for s, c in self.shapes.most_common(TYPICAL_SHAPES)
                ],
            },
            "cannotRun": [
                {"podGroup": f"{r.key[0]}/{r.key[1]}", "queue": r.queue, "reason": r.never_fits} for r in never
            ],
            "stuck": list(stuck),
        }
        return {
            "simulation": {**simulation, "cycles": self.cycles, "end": self.end},
            "summary": summary,
            "queues": queues_doc,
            "timeseries": {
                "time": self.times,
                "capacityGpu": self.capacity,
                "allocatedGpu": self.allocated,
                "pendingJobs": self.pending_jobs,
                "queues": {
                    name: {"allocatedGpu": s.allocated, "fairShareGpu": s.fair_share}
                    for name, s in sorted(self.queues.items())
                },
            },
            "samples": {"time": self.sample_times, "fragmentation": self.fragmentation},
            "occupancy": self.occupancy,
            "evictions": self.evictions,
            "nodeEvents": self.node_events,
            "jobs": [_job_doc(r) for r in recs],
        }


def _job_counts(recs: Sequence[JobRecord]) -> dict[str, int]:
    return {
        "submitted": len(recs),
        "started": sum(1 for r in recs if r.started is not None),
        "completed": sum(1 for r in recs if r.finished is not None),
        "waiting": sum(1 for r in recs if r.started is None),
        "evicted": sum(1 for r in recs if r.evictions),
        "cannotRun": sum(1 for r in recs if r.never_fits),
    }


def _job_doc(r: JobRecord) -> dict[str, Any]:
    return {
        "podGroup": f"{r.key[0]}/{r.key[1]}",
        "queue": r.queue,
        "pods": r.pods,
        "gpus": r.gpus,
        "submitted": r.submitted,
        "started": r.started,
        "finished": r.finished,
        "waitSeconds": None if r.started is None else round(r.started - r.submitted, 3),
        "completionSeconds": None if r.finished is None else round(r.finished - r.submitted, 3),
        "evictions": r.evictions,
        "lostGpuHours": round(r.lost_gpu_s / 3600, 4),
        "reason": r.reason if r.started is None else "",
        "cannotRun": r.never_fits,
    }


def _never_fits(pods: Sequence[Pod], min_member: int, alloc: np.ndarray) -> str:
    """Why a job can never run on nodes *alloc* (n, 3), or "" (a pod larger than every node, or a gang
    asking more GPUs than the whole cluster has)."""
    if not pods:
        return ""
    for p in pods:
        need = np.array(_pod_shape(p))
        if alloc.shape[0] == 0 or not (alloc >= need).all(axis=1).any():
            biggest = float(alloc[:, 0].max()) if alloc.shape[0] else 0.0
            what = f"{need[0]:g} GPUs" if need[0] > biggest else "more CPU or memory than any node has"
            return f"pod {p.meta.name} needs {what}; the largest node has {biggest:g} GPUs"
    gang = sorted((_pod_shape(p)[0] for p in pods), reverse=True)[: max(min_member, 1)]
    total = float(alloc[:, 0].sum())
    if sum(gang) > total:
        return f"the gang needs {sum(gang):g} GPUs at once; the cluster has {total:g}"
    return ""


def bucket_means(times: Sequence[float], values: Sequence[float], end: float, n: int) -> tuple[list, list]:
    """A step function (value[i] holds from times[i] to times[i+1], the last until *end*) as *n* equal
    buckets' time-weighted means: (bucket start times, means). Used to keep plots small."""
    if not times or end <= times[0]:
        return [], []
    t = np.asarray(times, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    edges = np.linspace(t[0], end, n + 1)
    bounds = np.append(t[1:], end)
    cum = np.concatenate([[0.0], np.cumsum(v * (bounds - t))])  # integral up to each step's start

    def integral(x: np.ndarray) -> np.ndarray:
        i = np.clip(np.searchsorted(t, x, side="right") - 1, 0, len(t) - 1)
        return cum[i] + v[i] * (x - t[i])

    area = np.diff(integral(edges))
    width = np.diff(edges)
    means = np.where(width > 0, area / np.where(width > 0, width, 1), 0.0)
    return edges[:-1].tolist(), [0.0 if math.isnan(x) else float(x) for x in means]
