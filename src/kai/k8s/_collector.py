"""Python's cyclic collector, paced for a process that holds a whole cluster in memory.

Why: the collector's oldest generation is collected in full each time the objects promoted into it since the
last full collection reach a quarter of it. A scheduler's heap grows with the cluster and is renewed by churn
(every watch event is a new object), so that happens every few seconds, and each full collection walks every
object of the cluster. In the 200 pods/s arrival stream (benchmarks/e2e_arrival.py, 12,000 pods) they came every
~5 s, took up to 0.43 s each (5 s of the scheduler's 24 CPU-s) and found nothing to free: those pauses, on the
thread that reads the watches and sends the binds, were the stream's slowest pods.

Rule: after each cycle, what survived it is frozen (``gc.freeze``: O(1), the objects move to the permanent
generation, which the collector does not walk). Frozen objects are still freed by reference counting as soon
as nothing points to them (a deleted pod goes at once); only a reference cycle that became garbage while frozen
waits. So every ``full_every_s`` the frozen objects are unfrozen and collected once in full: such garbage lives
at most that long, and the full walk of the heap happens once per period instead of every few seconds.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

FULL_EVERY_S = 600.0


class CollectorPacing:
    """Freeze after each cycle; one full collection every ``full_every_s`` (module docstring)."""

    def __init__(self, full_every_s: float = FULL_EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.full_every_s = full_every_s
        self.clock = clock
        self._last_full = clock()
        self.full_collections = 0

    def after_cycle(self) -> None:
        now = self.clock()
        if now - self._last_full >= self.full_every_s:
            gc.unfreeze()
            gc.collect()
            self._last_full = now
            self.full_collections += 1
        gc.freeze()
