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

Bounded: running pods are folded into one pod per node and queue (per node and job for the jobs that may
end), so a counterfactual snapshot has about one pod per busy node; and at most ``MAX_RUNS`` runs are made.
Folding keeps every node's usage and every queue's allocation exact, which is all allocate reads of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from kai.api import constants as C
from kai.api.duration import parse_duration
from kai.api.gpugroups import gpu_group_labels
from kai.api.objects import ObjectMeta, Pod, PodGroup, QueueResource
from kai.explain import _engine as E
from kai.explain._state import ClusterState
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.model import ACTIVE_ALLOCATED, JobInfo, TaskStatus

MAX_ENDING = 16  # running jobs with a known end considered, earliest first
MAX_RUNS = 9  # engine runs per explanation: 1 baseline + 3 constraints + 5 bisection steps
ALLOCATE = SchedulerConf(actions=("allocate",))
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


class AfterCycle:
    """The cluster as the dry run leaves it, folded (see the module docstring), for one waiting job."""

    def __init__(self, state: ClusterState, dry: E.DryRun, target: JobInfo) -> None:
        self.state, self.dry, self.target = state, dry, target
        snap, ssn = dry.snap, dry.ssn
        pgs = {(pg.meta.namespace or "", pg.meta.name): pg for pg in state.podgroups}
        placed = {(d.pod.namespace, d.pod.name): d for d in (*dry.result.binds, *dry.result.pipelines)}
        self.ending: list[Ending] = []
        unknown: list[tuple[float, str]] = []  # (start, job) of running jobs without a duration
        for job in snap.jobs:
            if job.index == target.index or not any(
                E.task_state(ssn, snap.tasks[t])[0] in ACTIVE_ALLOCATED for t in job.tasks
            ):
                continue
            ends: list[float] = []
            for ti in job.tasks:
                t = snap.tasks[ti]
                d = _duration(t.pod, pgs.get((job.namespace, job.name)))
                start = t.pod.start_time if t.pod.start_time is not None else snap.now
                if d is None:
                    ends = []
                    break
                ends.append(start + d)
            if ends:
                self.ending.append(Ending(job.ref, max(ends)))
            else:
                unknown.append((job.last_start if job.last_start is not None else snap.now, job.ref))
        self.ending.sort(key=lambda e: (e.ends, e.job))
        # then the jobs with no known end, oldest first: kai can say *which* end would make room, not when
        self.ending += [Ending(ref, None) for _, ref in sorted(unknown)]
        self.ending = self.ending[:MAX_ENDING]
        keep_apart = {e.job for e in self.ending}
        jobs_ending = {j.index for j in snap.jobs if j.ref in keep_apart}

        folded: dict[tuple, tuple[list[Pod], str, bool]] = {}
        pods: list[Pod] = []
        stand_ins: dict[tuple[str, bool], PodGroup] = {}
        seen: set[int] = set()
        for t in snap.tasks:
            seen.add(id(t.pod))
            job = snap.jobs[t.job]
            if t.job == target.index:
                pods.append(t.pod)
                continue
            status, node = E.task_state(ssn, t)
            if node < 0 or status not in (*ACTIVE_ALLOCATED, TaskStatus.RELEASING):
                continue  # waiting (or done): it got nothing this cycle
            releasing = status == TaskStatus.RELEASING
            node_name = snap.nodes.names[node]
            pod = t.pod
            if t.share is not None:  # shared GPUs: kept whole, with the GPU groups the cycle gave it
                d = placed.get((t.namespace, t.name))
                meta = dataclasses.replace(pod.meta, deletion_timestamp=snap.now if releasing else None)
                if d is not None and d.gpu_groups:
                    meta.labels = {**pod.meta.labels, **gpu_group_labels(d.gpu_groups)}
                pods.append(dataclasses.replace(pod, meta=meta, node_name=node_name))
                continue
            if t.job in jobs_ending:
                key: tuple = ("job", node_name, job.namespace, job.name, releasing)
            else:
                key = ("queue", node_name, job.queue_name, job.preemptible, releasing)
                if (job.queue_name, job.preemptible) not in stand_ins:
                    stand_ins[(job.queue_name, job.preemptible)] = PodGroup(
                        ObjectMeta(f"rest-{job.queue_name}-{'p' if job.preemptible else 'np'}", _NS, ""),
                        queue=job.queue_name,
                        preemptibility=C.PREEMPTIBLE if job.preemptible else C.NON_PREEMPTIBLE,
                    )
            folded.setdefault(key, ([], node_name, releasing))[0].append(pod)
        for p in state.pods:  # other schedulers' pods: they only take room
            if id(p) not in seen and p.node_name and p.phase not in ("Succeeded", "Failed"):
                folded.setdefault(("other", p.node_name, p.scheduler_name), ([], p.node_name, False))[0].append(p)
        for key, (group, node_name, releasing) in folded.items():
            pods.append(self._fold(key, group, node_name, releasing, stand_ins))
        self.pods = tuple(pods)
        self.podgroups = (*state.podgroups, *stand_ins.values())

    def _fold(
        self, key: tuple, group: list[Pod], node: str, releasing: bool, stand_ins: dict[tuple[str, bool], PodGroup]
    ) -> Pod:
        first = group[0]
        req: dict[str, int] = {}
        for p in group:
            _sum(req, p.requests)
        name = "-".join(str(k) for k in key).replace("/", "-")
        annotations = {}
        ns = first.meta.namespace
        if key[0] == "queue":
            pg = stand_ins[(key[2], key[3])]
            annotations[C.ANNOTATION_POD_GROUP_NAME] = pg.meta.name
            ns = _NS
        elif key[0] == "job":
            annotations[C.ANNOTATION_POD_GROUP_NAME] = key[3]
        meta = ObjectMeta(
            name,
            ns,
            f"kai-explain/{name}",
            annotations=annotations,
            creation_timestamp=first.meta.creation_timestamp,
            deletion_timestamp=self.dry.snap.now if releasing else None,
        )
        return Pod(
            meta=meta,
            requests=req,
            node_name=node,
            scheduler_name=first.scheduler_name,
            phase="Running",
            start_time=max((p.start_time for p in group if p.start_time is not None), default=None),
        )

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
        s = self.state.replace(pods=pods, podgroups=self.podgroups)
        return change(s) if change is not None else s

    def runs(self, state: ClusterState) -> list[str] | None:
        """The nodes the job would be placed on in *state* (None: it would not run)."""
        result = run_cycle(state.snapshot(), ALLOCATE)
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
    after = AfterCycle(state, dry, job)
    base = after.runs(after.state_with())
    out: dict[str, Any] = {"tried": []}
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
    qi = job.queue
    while qi >= 0:
        q = dry.snap.queues[qi]
        if any(x >= 0 for x in q.limit.tolist()):
            limited.append(q.name)
        qi = q.parent
    if limited:
        changes.append(("limit", f"with the limit of {', '.join(limited)} lifted", _lifted(set(limited))))
    runs = 1
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
    budget -= 1
    if after.runs(after.state_with(without=gone(len(ending)))) is None:
        n = len(ending)
        return {
            "text": f"even when the {n} running job{'s' if n != 1 else ''} considered have ended it would still wait"
        }
    lo, hi = 0, len(ending)  # runs after hi jobs end, not after lo
    while hi - lo > 1 and budget > 0:
        mid = (lo + hi) // 2
        budget -= 1
        if after.runs(after.state_with(without=gone(mid))) is not None:
            hi = mid
        else:
            lo = mid
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
