"""The dashboard's one JSON document, made by the same functions as ``kai explain``.

Rules: pure. ``overview`` reads a dry run (``kai.explain``) for the queue tree, the waiting jobs with their
reasons and the node x GPU map; ``History`` keeps what the page shows over time (queue GPU numbers, the
evictions and timings of the cycles seen) and is fed by the process serving the page: ``kai scheduler``
with its real cycles, ``kai dashboard`` with its dry runs. Times come in as arguments; nothing here reads
a clock.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from kai.api.objects import format_time
from kai.explain import DryRun
from kai.explain import _engine as E
from kai.explain._nodes import gpu_map
from kai.explain._queue import one_line, queue_numbers
from kai.scheduler.decisions import CycleResult

SAMPLES = 360  # points of queue history kept (half an hour at one per 5 s)
SAMPLE_EVERY_S = 5.0  # at most one point of queue history per this many seconds (kai scheduler cycles every second)
EVICTIONS = 200
CYCLES = 120


@dataclass
class History:
    """What the page shows over time; ``record`` is called once per cycle seen."""

    samples: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=SAMPLES))
    evictions: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=EVICTIONS))
    cycles: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=CYCLES))
    sample_every_s: float = SAMPLE_EVERY_S
    _lock: threading.Lock = field(default_factory=threading.Lock)  # fed on one thread, read on another
    _last_sample: float = float("-inf")

    def document(self) -> dict[str, list[dict[str, Any]]]:
        with self._lock:
            return {"history": list(self.samples), "evictions": list(self.evictions), "cycles": list(self.cycles)}

    def record(self, now: float, result: CycleResult, timings: dict[str, float], *, real: bool) -> None:
        """One cycle: *real* for a cycle that was applied (``kai scheduler``), else a dry run's plan."""
        with self._lock:
            self._record(now, result, timings, real)

    def _sample(self, when: str, result: CycleResult) -> None:
        self.samples.append(
            {
                "time": when,
                "queues": {
                    q.name: [q.allocated["gpu"], max(q.fair_share["gpu"], 0.0), q.requested["gpu"]]
                    for q in result.queues
                },
            }
        )

    def _record(self, now: float, result: CycleResult, timings: dict[str, float], real: bool) -> None:
        when = format_time(now)
        if now - self._last_sample >= self.sample_every_s:
            self._last_sample = now
            self._sample(when, result)
        for e in result.evictions:
            self.evictions.appendleft(
                {
                    "time": when,
                    "pod": str(e.pod),
                    "podGroup": e.podgroup,
                    "action": e.action,
                    "reason": e.reason,
                    "real": real,
                }
            )
        actions = {
            k[len("action_") : -2]: round(v * 1000, 1) for k, v in result.stats.items() if k.startswith("action_")
        }
        self.cycles.appendleft(
            {
                "time": when,
                "binds": len(result.binds),
                "pipelined": len(result.pipelines),
                "evictions": len(result.evictions),
                "actionsMs": actions,
                **{k: round(v * 1000, 1) for k, v in timings.items()},
                "real": real,
            }
        )


def overview(dry: DryRun, history: History, *, now: float, source: str) -> dict[str, Any]:
    snap = dry.snap
    queues = []

    def walk(qi: int, depth: int) -> None:
        row = queue_numbers(dry, qi)
        row["depth"] = depth
        row["leaf"] = snap.queues[qi].is_leaf
        queues.append(row)
        for c in sorted(snap.queues[qi].children, key=lambda c: snap.queues[c].name):
            walk(c, depth + 1)

    for q in sorted((q for q in snap.queues if q.parent < 0), key=lambda q: q.name):
        walk(q.index, 0)
    pending = []
    for job in snap.jobs:
        placed = E.placed_count(dry.ssn, job)
        waiting = [t for t in job.tasks if snap.tasks[t].status.name in ("PENDING", "GATED")]
        if not waiting or placed >= job.min_available:
            continue
        cond = E.condition_message(dry, job)
        pending.append(
            {
                "podGroup": job.ref,
                "namespace": job.namespace,
                "queue": job.queue_name,
                "code": cond[0] if cond else "",
                "reason": one_line(cond[1]) if cond else "not tried this cycle",
                "pods": len(waiting),
                "minMember": job.min_available,
                "priority": job.priority,
            }
        )
    return {
        "time": format_time(now),
        "source": source,
        "nodes": snap.nodes.n,
        "pods": len(snap.tasks),
        "queues": queues,
        "pending": pending,
        "gpuMap": gpu_map(snap),
        **history.document(),
    }
