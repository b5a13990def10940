"""How long simulated pods run: ``kai.sim/duration`` counted from the bind, progress kept across evictions.

Rules: a pod's run starts when it is bound and it finishes ``duration`` later (minus progress an earlier
attempt checkpointed). A pod that is evicted or lost with its node before then is *interrupted*: without a
checkpoint interval its work is lost (the replacement starts from scratch, as a restarted container
does); with one, the progress up to the last whole checkpoint is kept and handed to the next pod of the
same job that is bound (the replacement resumes). Checkpoints are taken every ``checkpoint`` seconds of
the job's progress, so the kept progress is always a multiple of the interval.

Finish times sit on a heap, so the embedded cluster finds due pods and the time simulator the next
completion without scanning every pod. Pure bookkeeping: no Store, no clock of its own.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

PodId = tuple[str, str, str]  # (namespace, name, uid)
JobKey = tuple[str, str]  # (namespace, PodGroup name)


@dataclass(slots=True)
class _Run:
    job: JobKey
    start: float
    duration: float | None  # None: runs until something stops it
    checkpoint: float | None  # seconds of progress between checkpoints; None: restart from scratch
    credit: float  # progress carried over from an interrupted earlier pod of the job
    gpus: float  # what the pod holds, so lost work can be told in GPU-seconds

    @property
    def finish(self) -> float | None:
        return None if self.duration is None else self.start + max(self.duration - self.credit, 0.0)


@dataclass(frozen=True, slots=True)
class Interruption:
    """A pod stopped before it finished: ``ran`` seconds of this attempt, of which ``kept`` were saved."""

    pod: PodId
    job: JobKey
    ran: float
    kept: float
    gpus: float = 0.0

    @property
    def lost(self) -> float:
        return self.ran - self.kept


class Lifetimes:
    """Running pods' start and finish times, and the checkpointed progress waiting for a replacement."""

    def __init__(self) -> None:
        self._runs: dict[PodId, _Run] = {}
        self._heap: list[tuple[float, PodId]] = []  # (finish, pod); stale entries are skipped when popped
        self._credits: dict[JobKey, deque[float]] = {}

    def __contains__(self, pod: PodId) -> bool:
        return pod in self._runs

    def start(
        self,
        pod: PodId,
        job: JobKey,
        now: float,
        duration: float | None,
        checkpoint: float | None = None,
        gpus: float = 0.0,
    ) -> None:
        """*pod* of *job* was bound at *now*; it resumes the oldest progress an interrupted pod of the job kept."""
        credits = self._credits.get(job)
        credit = credits.popleft() if credits else 0.0
        if credits is not None and not credits:
            del self._credits[job]
        run = _Run(job, now, duration, checkpoint, credit, gpus)
        self._runs[pod] = run
        if (finish := run.finish) is not None:
            heapq.heappush(self._heap, (finish, pod))

    def started(self, pod: PodId) -> float | None:
        run = self._runs.get(pod)
        return None if run is None else run.start

    def finish(self, pod: PodId) -> float | None:
        run = self._runs.get(pod)
        return None if run is None else run.finish

    def complete(self, pod: PodId) -> float | None:
        """*pod* has succeeded; returns when it finished (None if it was not running)."""
        run = self._runs.pop(pod, None)
        return None if run is None else run.finish

    def interrupt(self, pod: PodId, now: float) -> Interruption | None:
        """*pod* is gone before finishing (evicted, node lost). Checkpointed progress waits for a replacement."""
        run = self._runs.pop(pod, None)
        if run is None:
            return None
        ran = max(now - run.start, 0.0)
        kept = 0.0
        if run.checkpoint:
            progress = run.credit + ran
            if run.duration is not None:
                progress = min(progress, run.duration)
            saved = math.floor(progress / run.checkpoint + 1e-9) * run.checkpoint
            kept = max(saved - run.credit, 0.0)
            if saved > 0:
                self._credits.setdefault(run.job, deque()).append(saved)
        return Interruption(pod, run.job, ran, min(kept, ran), run.gpus)

    def forget_job(self, job: JobKey) -> None:
        """The job is gone for good: drop progress no pod will resume."""
        self._credits.pop(job, None)

    def due(self, now: float) -> list[PodId]:
        """Pods whose finish time is at or before *now*, earliest first (each once)."""
        out: list[PodId] = []
        while self._heap and self._heap[0][0] <= now:
            finish, pod = heapq.heappop(self._heap)
            run = self._runs.get(pod)
            if run is not None and run.finish == finish:
                out.append(pod)
        return out

    def next_finish(self) -> float | None:
        """The earliest finish time of a running pod, or None."""
        while self._heap:
            finish, pod = self._heap[0]
            run = self._runs.get(pod)
            if run is not None and run.finish == finish:
                return finish
            heapq.heappop(self._heap)
        return None
