"""Time-based fair share: each queue's historical usage, normalized to the cluster's capacity.

KAI reads usage from Prometheus over a window (default one week), optionally
decayed by a half-life, ``U = 0.5^(age / halfLife) * A``, and divides it by
what the cluster could have given over the same window: 24 GPU-hours in a
10-GPU, 10-hour window is 0.24. The value enters the over-quota split through
kValue (``fairshare.py``): a queue that used more recently gets less of what is
left over; deserved quotas are never affected (kai-behaviour §4.4.2).

The engine only sees the result, a number per queue and resource, through the
``UsageSource`` interface: the embedded cluster feeds it from its own record of
what each queue held over simulated time (``UsageLedger``), and ``kai scheduler``
feeds it from Prometheus with the same arithmetic (``kai.k8s._usage``). The arithmetic here is pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from kai.scheduler.model import QRES_INDEXES

Vector = tuple[float, float, float]  # gpu (GPUs), cpu (millicores), memory (bytes)


class UsageSource(Protocol):
    def queue_usage(self, now: float) -> dict[str, Vector]:
        """Normalized usage per queue name (0 = none, 1 = the whole cluster for the whole window)."""
        ...


@dataclass(frozen=True, slots=True)
class UsageParams:
    window: float  # seconds
    half_life: float | None = None  # seconds; None = no decay


@dataclass(slots=True)
class _Interval:
    start: float
    end: float
    allocated: dict[str, Vector]
    capacity: Vector


@dataclass(slots=True)
class UsageLedger:
    """What each queue held over time, one interval per scheduling period (the embedded cluster's clock)."""

    params: UsageParams
    intervals: list[_Interval] = field(default_factory=list)

    def record(self, start: float, end: float, allocated: dict[str, Vector], capacity: Vector) -> None:
        if end > start:
            self.intervals.append(_Interval(start, end, dict(allocated), capacity))
        horizon = end - self.params.window
        while self.intervals and self.intervals[0].end <= horizon:
            self.intervals.pop(0)

    def queue_usage(self, now: float) -> dict[str, Vector]:
        window, half_life = self.params.window, self.params.half_life
        lo = now - window
        used: dict[str, list[float]] = {}
        capacity = [0.0, 0.0, 0.0]
        covered = 0.0
        for iv in self.intervals:
            start, end = max(iv.start, lo), min(iv.end, now)
            if end <= start:
                continue
            span = end - start
            covered += span
            decay = 1.0 if half_life is None else 0.5 ** ((now - (start + end) / 2) / half_life)
            for r in QRES_INDEXES:
                capacity[r] += iv.capacity[r] * span
            for name, alloc in iv.allocated.items():
                acc = used.setdefault(name, [0.0, 0.0, 0.0])
                for r in QRES_INDEXES:
                    acc[r] += alloc[r] * span * decay
        # normalize by what the cluster could have given over the whole window (its mean capacity x window)
        scale = [c / covered * window if covered > 0 else 0.0 for c in capacity]
        return {
            name: tuple(acc[r] / scale[r] if scale[r] > 0 else 0.0 for r in QRES_INDEXES)  # type: ignore[misc]
            for name, acc in used.items()
        }
