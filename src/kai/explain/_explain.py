"""``kai explain pod|podgroup|queue``: find the object, run the cycle dry, and tell its story as data.

Rules: pure (the caller reads the cluster and prints); never writes anything anywhere. A missing object
raises NotFound naming it; an object the scheduler does not consider (another scheduler's pod, a pod not
grouped yet, an orphan queue) is explained as such, not raised.
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

from kai.api import constants as C
from kai.explain import _engine as E
from kai.explain._job import explain_job
from kai.explain._queue import explain_queue
from kai.explain._state import ClusterState
from kai.explain._whatif import what_if
from kai.scheduler.cycle import collector_paused
from kai.scheduler.model import JobInfo

KINDS = ("pod", "podgroup", "queue")


class NotFound(LookupError):
    """The object asked about does not exist (``kai explain`` exits 2)."""


def split_ref(ref: str) -> tuple[str, str]:
    """'ns/name' -> (ns, name); a bare name is in namespace default (as kubectl without -n)."""
    ns, sep, name = ref.partition("/")
    return (ns, name) if sep else ("default", ref)


def run(state: ClusterState, actions: tuple[str, ...] | None = None) -> E.DryRun:
    """The dry run of the cycle the scheduler would run on *state* now."""
    with collector_paused():
        conf = state.conf(actions)
        t0 = perf_counter()
        snap = state.snapshot(conf)
        return E.dry_run(snap, conf, build_s=perf_counter() - t0)


def explain(
    state: ClusterState, kind: str, ref: str, *, actions: tuple[str, ...] | None = None, whatif: bool = True
) -> dict[str, Any]:
    """The explanation of one object (see docs/explain.md for the fields)."""
    if kind not in KINDS:
        raise ValueError(f"kind {kind!r}: expected one of {', '.join(KINDS)}")
    with collector_paused():
        return _explain(state, kind, ref, actions, whatif)


def _explain(state: ClusterState, kind: str, ref: str, actions: tuple[str, ...] | None, whatif: bool) -> dict[str, Any]:
    t0 = perf_counter()
    if kind == "queue":
        _check_queue(state, ref)
    elif kind == "pod":
        _check_pod(state, ref)
    else:
        _check_podgroup(state, ref)
    dry = run(state, actions)
    t1 = perf_counter()
    job: JobInfo | None = None
    if kind == "queue":
        doc = _queue(state, dry, ref)
    else:
        doc, job = _pod(state, dry, ref) if kind == "pod" else _podgroup(dry, ref)
    t2 = perf_counter()
    story = doc.get("job", doc)  # a pod's story is its PodGroup's
    if whatif and job is not None and story.get("state") == "pending" and story.get("placed", 0) == 0:
        story["whatIf"] = what_if(state, dry, job)
    doc["timing"] = {
        "dryRunS": round(t1 - t0, 3),
        "explainS": round(t2 - t1, 3),
        "whatIfS": round(perf_counter() - t2, 3),
    }
    return doc


def _check_queue(state: ClusterState, name: str) -> None:
    if not any(q.meta.name == name for q in state.queues):
        raise NotFound(f"queue {name!r} not found")


def _check_podgroup(state: ClusterState, ref: str) -> None:
    ns, name = split_ref(ref)
    if not any((pg.meta.namespace or "", pg.meta.name) == (ns, name) for pg in state.podgroups):
        raise NotFound(f"podgroup {ns}/{name} not found")


def _check_pod(state: ClusterState, ref: str) -> None:
    ns, name = split_ref(ref)
    if not any((p.meta.namespace or "", p.meta.name) == (ns, name) for p in state.pods):
        raise NotFound(f"pod {ns}/{name} not found")


def _queue(state: ClusterState, dry: E.DryRun, name: str) -> dict[str, Any]:
    if name not in dry.snap.queue_index:
        q = next(q for q in state.queues if q.meta.name == name)
        return {
            "kind": "Queue",
            "name": name,
            "notScheduled": f"queue {name} is not in the queue tree: its parent {q.parent!r} (or an ancestor's) "
            "does not exist, so the scheduler drops it with its subtree",
        }
    return explain_queue(dry, name)


def _podgroup(dry: E.DryRun, ref: str) -> tuple[dict[str, Any], JobInfo]:
    ns, name = split_ref(ref)
    job = next(j for j in dry.snap.jobs if (j.namespace, j.name) == (ns, name))
    return explain_job(dry, job), job


def _pod(state: ClusterState, dry: E.DryRun, ref: str) -> tuple[dict[str, Any], JobInfo | None]:
    ns, name = split_ref(ref)
    pod = next(p for p in state.pods if (p.meta.namespace or "", p.meta.name) == (ns, name))
    doc: dict[str, Any] = {"kind": "Pod", "namespace": ns, "name": name}
    task = next((t for t in dry.snap.tasks if t.pod is pod), None)
    if task is None:
        doc["notScheduled"] = _why_not_a_task(state, pod)
        return doc, None
    job = dry.snap.jobs[task.job]
    _, node = E.task_state(dry.ssn, task)
    doc["podGroup"] = job.ref
    doc["node"] = dry.snap.nodes.names[node] if node >= 0 else None
    doc["job"] = explain_job(dry, job)
    mine = next(p for p in doc["job"]["pods"] if p["name"] == name)
    doc["status"] = mine["status"]
    return doc, job


def _why_not_a_task(state: ClusterState, pod: Any) -> str:
    if pod.scheduler_name != C.SCHEDULER_NAME:
        return f"schedulerName is {pod.scheduler_name!r}: kai schedules only pods of {C.SCHEDULER_NAME!r}"
    pg = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
    if pg is None:
        return "the pod has no PodGroup yet (annotation pod-group-name): kai's pod-grouper has not grouped it"
    if not any((g.meta.namespace or "", g.meta.name) == (pod.meta.namespace or "", pg) for g in state.podgroups):
        return f"its PodGroup {pod.meta.namespace}/{pg} does not exist"
    return "the scheduler does not consider it"
