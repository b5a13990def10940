"""What would make a waiting job run: the engine run again on changed snapshots.

Theory of operation. The question "would it run without X?" is asked of the cluster *as this cycle
leaves it*: every pod the cycle binds or pipelines holds its node, every pod it evicts is releasing, and
the other jobs still waiting are left out (they got nothing this cycle). On that state, with one thing
changed, the pure engine runs its allocate action (``run_cycle``, dry); the job "would run now" if it is
placed. The changes tried, each only where it applies:

* without the PodGroup's topology constraint (and its subgroups');
* without the pods' nodeSelector and required node affinity;
* with the limits of its queue and the queue's ancestors lifted;
* when running jobs end: jobs whose pods carry ``kai.sim/duration`` (docs/simulation.md) end at start +
  duration; the earliest-ending are taken away in turn (a bisection over at most ``MAX_ENDING`` jobs),
  and the first prefix after which the job runs names the job it waits for and when.

Bounded: the after-cycle state is folded so that a counterfactual snapshot is about the size of the node
list. What running pods hold is taken off their node's allocatable; their queues keep their allocation
through one stand-in pod per queue (and preemptibility) bound to a node that does not exist (``ELSEWHERE``:
the snapshot charges its queue, no node); releasing pods are folded into one pod per node; only the jobs
that may end keep pods of their own (one per node). Folding keeps every node's free room and every
queue's allocation exact, which is all allocate reads of them (its checks are limits and quotas, not fair
share). At most ``MAX_RUNS`` runs are made.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.duration import parse_duration
from kai.api.gpugroups import gpu_group_labels
from kai.api.objects import Node, ObjectMeta, Pod, PodGroup, QueueResource
from kai.explain import _engine as E
from kai.explain._state import ClusterState
from kai.scheduler.capacity import job_request
from kai.scheduler.cycle import run_cycle
from kai.scheduler.model import ACTIVE_ALLOCATED, GPU, HOLDING, MILLI, JobInfo, TaskInfo, TaskStatus

MAX_ENDING = 8  # running jobs with a known end considered, earliest first
MAX_RUNS = 8  # engine runs per explanation: 1 baseline + up to 3 constraints + the ending search
_NS = "kai-explain"  # namespace of the folded pods' stand-in PodGroups (no user object is there)


def _sum(into: dict[str, int], res: dict[str, int]) -> None:
    for k, v in res.items():
        into[k] = into.get(k, 0) + v


def _duration(pod: Pod, pg: PodGroup | None) -> float | None:
    text = pod.meta.annotations.get(C.ANNOTATION_SIM_DURATION)
    if text is None and pg is not None:
        text = pg.meta.annotations.get(C.ANNOTATION_SIM_DURATION)
    if text is None:
        return None
    try:
        return parse_duration(text)
    except ValueError:
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class Ending:
    """A running job that ends on its own: when, by its duration annotation."""

    job: str  # namespace/name
    ends: float | None  # None: no kai.sim/duration, the end is unknown


ROOM_SCHEDULER = "kai-explain-room"  # folded releasing pods: they hold room, kai does not schedule them
ELSEWHERE = "kai-explain-elsewhere"  # no such node: pods "bound" here count for their queue and take no room


def _fold(name: str, ns: str, group: list[Pod], node: str, scheduler: str, podgroup: str, deleted: float | None) -> Pod:
    """One pod standing for *group*: the sum of their requests, on *node*."""
    req: dict[str, int] = {}
    for p in group:
        _sum(req, p.requests)
    meta = ObjectMeta(
        name.replace("/", "-"),
        ns,
        f"kai-explain/{ns}/{name}",
        annotations={C.ANNOTATION_POD_GROUP_NAME: podgroup} if podgroup else {},
        creation_timestamp=min((p.meta.creation_timestamp or 0.0) for p in group),
        deletion_timestamp=deleted,
    )
    starts = [p.start_time for p in group if p.start_time is not None]
    return Pod(
        meta=meta,
        requests=req,
        node_name=node,
        scheduler_name=scheduler,
        phase="Running",
        start_time=max(starts) if starts else None,
    )


def _shrunk(node: Node, taken: dict[str, int] | None) -> Node:
    """*node* with what its running pods hold taken off its allocatable (at least 0)."""
    if not taken:
        return node
    alloc = dict(node.allocatable)
    for k, v in taken.items():
        alloc[k] = max(0, alloc.get(k, 0) - v)
    return dataclasses.replace(node, allocatable=alloc)


def _ending_jobs(dry: E.DryRun, target: JobInfo) -> list[Ending]:
    """Running jobs that may end, earliest first: those with a known end (kai.sim/duration), then those
    without, oldest first (kai can say which end would make room, not when); at most MAX_ENDING."""
    snap = dry.snap
    status_of, _ = E.task_states(dry.ssn)
    held = frozenset(ACTIVE_ALLOCATED)
    known: list[Ending] = []
    unknown: list[tuple[float, str]] = []
    running = {t.job for t in snap.tasks if status_of[t.index] in held}  # one pass over the tasks
    running.discard(target.index)
    for job in (snap.jobs[j] for j in sorted(running)):
        ends: list[float] = []
        for ti in job.tasks:
            if status_of[ti] not in held:
                continue  # its waiting pods do not hold anything that could free up
            t = snap.tasks[ti]
            d = _duration(t.pod, job.podgroup)
            if d is None:
                ends = []
                break
            ends.append((t.pod.start_time if t.pod.start_time is not None else snap.now) + d)
        if ends:
            known.append(Ending(job.ref, max(ends)))
        else:
            unknown.append((job.last_start if job.last_start is not None else snap.now, job.ref))
    known.sort(key=lambda e: (e.ends, e.job))
    return (known + [Ending(ref, None) for _, ref in sorted(unknown)])[:MAX_ENDING]


class AfterCycle:
    """The cluster as the dry run leaves it, folded (see the module docstring), for one waiting job."""

    def __init__(self, state: ClusterState, dry: E.DryRun, target: JobInfo) -> None:
        self.state, self.dry, self.target = state, dry, target
        snap, ssn = dry.snap, dry.ssn
        self.ending = _ending_jobs(dry, target)
        apart = {e.job for e in self.ending}
        placed = (  # only shared pods need what the cycle decided for them (their GPU groups)
            {(d.pod.namespace, d.pod.name): d for d in (*dry.result.binds, *dry.result.pipelines) if d.gpu_groups}
            if any(t.share is not None for t in snap.tasks)
            else {}
        )
        status_of, node_of = E.task_states(ssn)
        held = HOLDING  # a pod StuckInReleasing keeps its room: it is not being released
        folded: list[int] = []  # tasks whose room is taken off their node (one pass; summed with NumPy below)
        accounts: dict[tuple[str, bool], list[int]] = {}  # (queue, preemptible) -> those tasks, for accounting
        releasing_room: dict[str, list[Pod]] = {}  # node -> releasing pods (their room frees later)
        apart_pods: dict[tuple[str, str, str], list[Pod]] = {}  # (node, ns, job) -> pods of jobs that may end
        pods: list[Pod] = []
        names = snap.nodes.names
        jobs = snap.jobs
        apart_jobs = {j.index for j in jobs if j.ref in apart}
        for t in snap.tasks:
            ti, ji = t.index, t.job
            if ji == target.index:
                pods.append(t.pod)
                continue
            status, node = status_of[ti], node_of[ti]
            if node < 0:
                continue
            if status in held:
                if t.share is not None or ji in apart_jobs:
                    self._keep(t, names[node], placed, apart_pods, pods, releasing=False)
                else:
                    folded.append(ti)
            elif status == TaskStatus.RELEASING:
                if t.share is not None:
                    self._keep(t, names[node], placed, apart_pods, pods, releasing=True)
                else:
                    releasing_room.setdefault(names[node], []).append(t.pod)
            # anything else waits (or is done): it got nothing this cycle
        for ti in folded:
            job = jobs[snap.tasks[ti].job]
            accounts.setdefault((job.queue_name, job.preemptible), []).append(ti)
        rows = self._rows(folded)  # (len(folded), n_res): each folded task's request, stacked once
        taken = self._taken(folded, rows)
        task_pods = {id(t.pod) for t in snap.tasks}
        for p in state.pods:  # other schedulers' pods: they only take room
            if id(p) not in task_pods and p.node_name and p.phase not in ("Succeeded", "Failed"):
                if p.meta.deletion_timestamp is not None:
                    releasing_room.setdefault(p.node_name, []).append(p)
                else:
                    _sum(taken.setdefault(p.node_name, {}), p.requests)
        self.nodes = tuple(_shrunk(n, taken.get(n.meta.name)) for n in state.nodes)
        keep_groups = {(target.namespace, target.name)}
        for (node, ns, name), group in apart_pods.items():
            pods.append(_fold(f"{name}-on-{node}", ns, group, node, C.SCHEDULER_NAME, name, None))
            keep_groups.add((ns, name))
        for node, group in releasing_room.items():
            pods.append(_fold(f"releasing-on-{node}", _NS, group, node, ROOM_SCHEDULER, "", snap.now))
        stand_ins = []
        position = {ti: k for k, ti in enumerate(folded)}
        for (queue, preemptible), tis in accounts.items():
            pg = PodGroup(
                ObjectMeta(f"held-{queue}-{'p' if preemptible else 'np'}", _NS, "", creation_timestamp=0.0),
                queue=queue,
                preemptibility=C.PREEMPTIBLE if preemptible else C.NON_PREEMPTIBLE,
            )
            stand_ins.append(pg)
            pods.append(self._held(pg.meta.name, rows[[position[ti] for ti in tis]].sum(axis=0)))
        self.pods = tuple(pods)
        kept = [j.podgroup for j in jobs if (j.namespace, j.name) in keep_groups]
        self.podgroups = (*kept, *stand_ins)

    def _keep(
        self,
        t: TaskInfo,
        node: str,
        placed: dict[tuple[str, str], Any],
        apart_pods: dict[tuple[str, str, str], list[Pod]],
        pods: list[Pod],
        *,
        releasing: bool,
    ) -> None:
        """A pod that keeps a pod of its own: shared GPUs (with the GPU groups the cycle gave it), or a pod of
        a job that may end (folded per node and job)."""
        pod = t.pod
        if t.share is None:
            job = self.dry.snap.jobs[t.job]
            apart_pods.setdefault((node, job.namespace, job.name), []).append(pod)
            return
        d = placed.get((t.namespace, t.name))
        meta = dataclasses.replace(pod.meta, deletion_timestamp=self.dry.snap.now if releasing else None)
        if d is not None and d.gpu_groups:
            meta.labels = {**pod.meta.labels, **gpu_group_labels(d.gpu_groups)}
        pods.append(dataclasses.replace(pod, meta=meta, node_name=node))

    def _rows(self, tis: list[int]) -> np.ndarray:
        tasks = self.dry.snap.tasks
        width = len(self.dry.snap.resources)
        if not tis:
            return np.zeros((0, width), dtype=np.int64)
        return np.stack([tasks[i].request for i in tis])

    def _requests(self, total: np.ndarray) -> dict[str, int]:
        """A resource-column vector (base units) as a pod's or node's resources (GPUs whole)."""
        out = {}
        for col, name in enumerate(self.dry.snap.resources):
            v = int(total[col])
            if v:
                out[name] = v // MILLI if col == GPU else v
        return out

    def _taken(self, tis: list[int], rows: np.ndarray) -> dict[str, dict[str, int]]:
        """Per node name, what the tasks *tis* (their requests: *rows*) hold there."""
        snap = self.dry.snap
        _, node_of = E.task_states(self.dry.ssn)
        per_node = np.zeros((snap.nodes.n, len(snap.resources)), dtype=np.int64)
        if tis:
            np.add.at(per_node, np.array([node_of[i] for i in tis]), rows)
        return {snap.nodes.names[r]: self._requests(per_node[r]) for r in np.flatnonzero(per_node.any(axis=1))}

    def _held(self, name: str, total: np.ndarray) -> Pod:
        """The stand-in of a queue's folded pods (*total*: their summed requests), bound to no node."""
        req = self._requests(total)
        meta = ObjectMeta(
            name,
            _NS,
            f"kai-explain/{_NS}/{name}",
            annotations={C.ANNOTATION_POD_GROUP_NAME: name},
            creation_timestamp=0.0,
        )
        return Pod(meta=meta, requests=req, node_name=ELSEWHERE, scheduler_name=C.SCHEDULER_NAME, phase="Running")

    def state_with(
        self, *, without: set[str] = frozenset(), change: Callable[[ClusterState], ClusterState] | None = None
    ) -> ClusterState:
        pods = self.pods
        if without:
            drop = {tuple(j.split("/", 1)) for j in without}
            pods = tuple(
                p
                for p in pods
                if (p.meta.namespace or "", p.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, "")) not in drop
            )
        s = self.state.replace(nodes=self.nodes, pods=pods, podgroups=self.podgroups)
        return change(s) if change is not None else s

    def runs(self, state: ClusterState) -> list[str] | None:
        """The nodes the job would be placed on in *state* (None: it would not run)."""
        conf = dataclasses.replace(self.dry.conf, actions=("allocate",))  # the shard's plugins, allocate only
        result = run_cycle(state.snapshot(conf), conf)
        t = self.target
        nodes = [
            d.node
            for d in (*result.binds, *result.pipelines)
            if d.pod.namespace == t.namespace and d.podgroup == t.name
        ]
        return sorted(set(nodes)) if nodes else None


# --- the changes ------------------------------------------------------------------------------------


def _without_topology(job: JobInfo) -> Callable[[ClusterState], ClusterState]:
    def change(s: ClusterState) -> ClusterState:
        pgs = []
        for pg in s.podgroups:
            if (pg.meta.namespace or "", pg.meta.name) == (job.namespace, job.name):
                subs = tuple(dataclasses.replace(g, topology_constraint=None) for g in pg.sub_groups)
                pg = dataclasses.replace(pg, topology_constraint=None, sub_groups=subs)
            pgs.append(pg)
        return s.replace(podgroups=tuple(pgs))

    return change


def _without_selector(job: JobInfo) -> Callable[[ClusterState], ClusterState]:
    def change(s: ClusterState) -> ClusterState:
        pods = []
        for p in s.pods:
            if (p.meta.namespace or "", p.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)) == (
                job.namespace,
                job.name,
            ):
                p = dataclasses.replace(p, node_selector={}, affinity_terms=())
            pods.append(p)
        return s.replace(pods=tuple(pods))

    return change


def _lifted(queues: set[str]) -> Callable[[ClusterState], ClusterState]:
    def change(s: ClusterState) -> ClusterState:
        out = []
        for q in s.queues:
            if q.meta.name in queues:
                res = {r: dataclasses.replace(v, limit=-1.0) for r, v in q.resources.items()}
                for r in ("gpu", "cpu", "memory"):
                    res.setdefault(r, QueueResource(limit=-1.0))
                q = dataclasses.replace(q, resources=res)
            out.append(q)
        return s.replace(queues=tuple(out))

    return change


def what_if(state: ClusterState, dry: E.DryRun, job: JobInfo) -> dict[str, Any]:
    """{"baseline": ..., "tried": [{"change", "runs", "nodes", "text"}], "ending": {...}} for a job that
    got nothing this cycle."""
    out: dict[str, Any] = {"tried": []}
    if job.unschedulable_reason or not E.ready(dry.ssn, job):  # no room or rule change helps these
        why = job.unschedulable_reason or f"fewer than minMember {job.min_available} of its pods exist"
        out["blocked"] = f"nothing to try: {why}; kai considers the job once that is mended"
        return out
    after = AfterCycle(state, dry, job)
    runs = 0
    # The baseline ("does it fit on what the cycle leaves?") needs no run when allocate tried the job and the
    # cycle evicted nobody: every later change only took room, so what did not fit then does not fit now.
    base = None
    if dry.result.evictions or E.failure(dry.ssn, job) is None:
        base = after.runs(after.state_with())
        runs += 1
    if base is not None:
        out["baseline"] = (
            f"on the room this cycle leaves it fits ({', '.join(base[:3])}): it is placed once the jobs "
            "ahead of it in this cycle are done choosing (usually the next cycle)"
        )
        return out
    pg = job.podgroup
    changes: list[tuple[str, str, Callable[[ClusterState], ClusterState]]] = []
    if pg.topology_constraint is not None or any(g.topology_constraint is not None for g in pg.sub_groups):
        changes.append(("topology", "without the topology constraint", _without_topology(job)))
    if any(dry.snap.tasks[t].pod.node_selector or dry.snap.tasks[t].pod.affinity_terms for t in job.tasks):
        changes.append(("nodeSelector", "without the nodeSelector and node affinity", _without_selector(job)))
    limited = []
    asked = job_request([dry.snap.tasks[t] for t in job.tasks])
    qi = job.queue
    while qi >= 0:
        q = dry.snap.queues[qi]
        if any(lim >= 0 and want > 0 for lim, want in zip(q.limit.tolist(), asked)):  # a limit on what it asks
            limited.append(q.name)
        qi = q.parent
    if limited:
        changes.append(("limit", f"with the limit of {', '.join(limited)} lifted", _lifted(set(limited))))
    for key, words, change in changes:
        nodes = after.runs(after.state_with(change=change))
        runs += 1
        out["tried"].append(
            {
                "change": key,
                "runs": nodes is not None,
                "nodes": (nodes or [])[:8],
                "text": f"{words} it would run now on {_nodes(nodes)}" if nodes else f"{words} it would still wait",
            }
        )
    out["ending"] = _ending(after, dry.snap.now, MAX_RUNS - runs)
    return out


def _nodes(nodes: list[str] | None) -> str:
    if not nodes:
        return ""
    return ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more nodes" if len(nodes) > 3 else "")


def _ending(after: AfterCycle, now: float, budget: int) -> dict[str, Any]:
    ending = after.ending
    if not ending:
        return {"text": "no other job is running: no job's end would make room"}
    if budget < 1:
        return {"text": "not tried (run budget spent)"}
    gone = lambda k: {e.job for e in ending[:k]}  # noqa: E731
    lo, hi = 0, len(ending)  # it runs once the first hi have ended (checked below if never seen), not lo
    seen_hi = False
    while hi - lo > 1 and budget > 1:  # keep one run to check hi if the bisection never did
        mid = (lo + hi) // 2
        budget -= 1
        if after.runs(after.state_with(without=gone(mid))) is not None:
            hi, seen_hi = mid, True
        else:
            lo = mid
    if not seen_hi and after.runs(after.state_with(without=gone(hi))) is None:  # hi is still all of them
        n = len(ending)
        return {
            "text": f"even when the {n} running job{'s' if n != 1 else ''} considered have ended it would still wait"
        }
    e = ending[hi - 1]
    out: dict[str, Any] = {"job": e.job, "jobsBefore": hi - 1}
    if e.ends is None:
        text = f"when job {e.job} ends (it has no kai.sim/duration annotation, so kai cannot say when)"
    else:
        wait = max(0.0, e.ends - now)
        out["inSeconds"] = round(wait, 1)
        text = f"when job {e.job} ends, ~{_human(wait)} if its duration annotation holds"
    if hi > 1:
        text += f", after {hi - 1} other job{'s' if hi > 2 else ''} end{'s' if hi == 2 else ''}"
    if hi - lo > 1:
        text += " (at the latest: the run budget stopped the search)"
    out["text"] = text
    return out


def _human(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
