"""The cycle memo: a cycle on the same input as the last one decides what the last one decided, without the work.

Why: a saturated cluster keeps jobs pending for hours, and the time simulator rechecks them at period
boundaries while nothing happens. Each recheck ran the eviction actions' victim searches again (up to
``maxScenariosPerJob`` simulations each) for the same jobs on the same cluster, with the same answer, and
allocate's attempts and the rest of the cycle with them.

What it is: ``CycleMemo`` is an output of one cycle (``CycleResult.memo``, with ``run_cycle(...,
keep_memo=True)``) and an input of the next (``run_cycle(snap, conf, memo)``); the engine keeps nothing between
cycles itself. It holds the Snapshot and SchedulerConf of the cycle that made it and a copy of that cycle's
result. A repeated cycle's result carries a memo again, so a run of unchanged rechecks repeats them all.

When it applies (``repeat``): the engine is deterministic (the gpupolicy plugin's generator is seeded anew each
Session), so a cycle whose input equals the memo's decides exactly what the memo's cycle decided. The input is
equal when:

* the SchedulerConf is equal;
* the Snapshot is equal field by field, ``now`` aside (``same_input``: unchanged parts of an incremental
  snapshot are the same objects, so this is mostly pointer compares);
* every answer that reads ``now`` is the same at both times (``clock_neutral``): each job's preemption delay
  (the eviction actions' gate), each min-runtime protection (``victim_core_allowed``; every window a queue or
  the plugin sets, against every job's last start), and each stale gang's grace period (stale-gang eviction);
* the memo's cycle stamped no PodGroup stale: a stamp carries that cycle's ``now``, the one decision that is
  a value of the clock rather than a comparison with it (and, applied, it changes the next input anyway).

Otherwise the cycle runs. Correctness never depends on the memo: a property test runs random change sequences
with and without it and compares every decision (tests/property/test_cycle_memo.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import CycleResult
from kai.scheduler.plugins import build_hooks
from kai.scheduler.plugins.minruntime import protection_windows
from kai.scheduler.snapshot import Snapshot

_NOT_LISTS = ("stats", "memo")  # CycleResult's fields that are not lists of decisions


@dataclass(frozen=True, slots=True)
class CycleMemo:
    """One cycle's input and result (see the module docstring); ``result`` is None when it may not be repeated."""

    snap: Snapshot
    conf: SchedulerConf
    result: CycleResult | None


def remember(snap: Snapshot, conf: SchedulerConf, result: CycleResult, stamped: bool) -> CycleMemo:
    """The memo of a cycle that ran on *snap* with *conf* and decided *result* (kept as a copy: the caller owns
    *result*); *stamped*: the cycle stamped a PodGroup stale, with its ``now`` (then it is not repeated)."""
    return CycleMemo(snap, conf, None if stamped else _copy(result))


def repeat(memo: CycleMemo | None, snap: Snapshot, conf: SchedulerConf) -> CycleResult | None:
    """The memo's result again for a cycle on *snap* with *conf*, if its input is the same (None otherwise): a
    copy with lists and stats of its own, carrying a memo made on *snap*."""
    if memo is None or memo.result is None:
        return None
    if memo.conf is not conf and memo.conf != conf:
        return None
    if not same_input(memo.snap, snap) or not clock_neutral(snap, conf, memo.snap.now):
        return None
    again = _copy(memo.result)
    again.stats = {"cycle_s": 0.0, "cycle_repeated": 1.0}
    again.memo = CycleMemo(snap, conf, memo.result)
    return again


def _copy(result: CycleResult) -> CycleResult:
    """*result* with lists of its own (the records in them are immutable), its own stats and no memo."""
    lists = {f.name: list(getattr(result, f.name)) for f in dataclasses.fields(CycleResult) if f.name not in _NOT_LISTS}
    return dataclasses.replace(result, **lists, stats=dict(result.stats), memo=None)


def same_input(a: Snapshot, b: Snapshot) -> bool:
    """Every field of the two Snapshots but ``now`` is equal."""
    if a is b:
        return True
    return all(f.name == "now" or _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(Snapshot))


def _same(a: Any, b: Any) -> bool:
    """Equal values, deep; NumPy arrays by dtype, shape and elements; dicts and sets also in iteration order
    (the engine iterates them, and its output must not depend on an order equality ignores). Identity first:
    an incremental snapshot hands out its unchanged tasks, jobs and arrays again, so most of a snapshot
    compares by pointer."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(x is y or _same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return list(a) == list(b)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


def clock_neutral(snap: Snapshot, conf: SchedulerConf, then: float) -> bool:
    """Every answer of the cycle that reads the clock is the same at *then* as at *snap*'s ``now``: each job's
    preemption delay (EvictingAction._outside_delay), min-runtime protection (minruntime.protected, for every
    window the queues and the enabled minruntime plugin may apply) and stale-gang grace period
    (StaleGangEviction._check)."""
    now = snap.now
    if now == then:
        return True
    windows = [m for m in protection_windows(build_hooks(conf).plugins, snap.queues) if m > 0]
    for job in snap.jobs:
        pg = job.podgroup
        delay = pg.preemption_delay
        if delay is not None and (then - job.creation >= delay) != (now - job.creation >= delay):
            return False
        start = job.last_start
        if start is not None:
            for m in windows:
                if (start + m > then) != (start + m > now):
                    return False
        since = pg.stale_since
        if since is not None:
            grace = pg.staleness_grace_period
            if grace is None:
                grace = conf.default_staleness_grace_period
            if grace >= 0 and (then - since < grace) != (now - since < grace):
                return False
    return True
