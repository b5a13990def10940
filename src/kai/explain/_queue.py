"""A queue's numbers and its subtree: fair share against allocated and requested, starved or over quota,
and its pending jobs with one-line reasons.

Rules: pure functions of a dry run. The numbers are the cycle's QueueStatus (what ``kai scheduler``
writes to the Queue's status and exports as metrics), in the API's units.
"""

from __future__ import annotations

from typing import Any

from kai.explain import _engine as E
from kai.scheduler.decisions import QueueStatus

RESOURCES = ("gpu", "cpu", "memory")


def _status(dry: E.DryRun, name: str) -> QueueStatus | None:
    return next((q for q in dry.result.queues if q.name == name), None)


def standing(q: QueueStatus) -> list[str]:
    """Words for where a queue stands: below its fair share while it asks for more, over quota, at its
    limit, above its fair share."""
    words = []
    for r in RESOURCES:
        a, f, d, lim, req = q.allocated[r], q.fair_share[r], q.deserved[r], q.limit[r], q.requested[r]
        if req > a + 1e-9 and a + 1e-9 < f:
            words.append(f"below fair share ({r})")
        if d >= 0 and a > d + 1e-9:
            words.append(f"over quota ({r})")
        if lim >= 0 and a >= lim - 1e-9 and req > a + 1e-9:
            words.append(f"at its limit ({r})")
        elif a > f + 1e-9:
            words.append(f"above fair share ({r})")
    return words


def queue_numbers(dry: E.DryRun, qi: int) -> dict[str, Any]:
    q = dry.snap.queues[qi]
    st = _status(dry, q.name)
    assert st is not None
    return {
        "queue": q.name,
        "parent": st.parent or None,
        "quota": st.deserved,
        "limit": st.limit,
        "fairShare": st.fair_share,
        "allocated": st.allocated,
        "requested": st.requested,
        "standing": standing(st),
    }


def one_line(message: str, limit: int = 240) -> str:
    """A reason without the eviction actions' notes that follow it, cut at *limit* characters (0: not cut)."""
    head = message.split(". consolidation:")[0].split(". reclaim:")[0].split(". preempt:")[0]
    return head if not limit or len(head) <= limit else head[: limit - 3] + "..."


def explain_queue(dry: E.DryRun, name: str) -> dict[str, Any]:
    """The queue's subtree (itself first, depth-first) and the pending jobs of its leaves."""

    snap = dry.snap
    qi = snap.queue_index[name]
    tree = []

    def walk(i: int, depth: int) -> None:
        row = queue_numbers(dry, i)
        row["depth"] = depth
        tree.append(row)
        for c in sorted(snap.queues[i].children, key=lambda c: snap.queues[c].name):
            walk(c, depth + 1)

    walk(qi, 0)
    under = {snap.queue_index[r["queue"]] for r in tree}
    pending = []
    for job in snap.jobs:
        if job.queue not in under or E.placed_count(dry.ssn, job) >= job.min_available:
            continue
        if not any(snap.tasks[t].status.name in ("PENDING", "GATED") for t in job.tasks):
            continue
        cond = E.condition_message(dry, job)
        reason = cond[1] if cond is not None else (E.failure(dry.ssn, job) or ("", "not tried this cycle"))[1]
        pending.append({"podGroup": job.ref, "queue": job.queue_name, "reason": one_line(reason)})
    return {"kind": "Queue", "name": name, "tree": tree, "pending": pending}
