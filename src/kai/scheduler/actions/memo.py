"""The eviction actions' memo of failed victim searches, carried from one cycle to the next as data.

Why: a saturated cluster keeps jobs pending for hours, and a cycle whose input did not change (a recheck at a
period boundary, nothing arrived, nothing finished) ran the same victim searches again, for the same jobs,
with the same answer: "N victim sets tried, none accepted". A search can cost 64 simulations.

What it is: ``AttemptMemo`` is an output of one cycle (``CycleResult.memo``) and an input of the next
(``run_cycle(snap, conf, memo)``); the engine keeps nothing between cycles itself. It holds the Snapshot and
SchedulerConf of the cycle that made it, and, per eviction attempt whose search ran and committed nothing,
what that search left behind: the job's note, the simulations it took from the action's budget, and whether a
tentative shared-GPU placement set the Session's ``any_groups`` flag (which rollback does not clear).

When it applies (``AttemptLog.begin``): the engine is deterministic, so a cycle whose input equals the memo's
repeats the memo's cycle step by step, and an attempt there is identified by (action, job index, the settled
changes so far (``Session.settled``), the action's budget left). The input is equal when:

* the SchedulerConf is equal, and no plugin draws random numbers (the gpupolicy plugin's generator: a skipped
  search would leave the draws of later placements shifted);
* the Snapshot is equal field by field, ``now`` aside (``same_input``: unchanged parts of an incremental
  snapshot are the same objects, so this is mostly pointer compares);
* every answer that reads ``now`` in the actions before stale-gang eviction is the same at both times: each
  job's preemption delay (the eviction actions' gate) and each min-runtime protection (``victim_core_allowed``;
  every window a queue or the plugin sets, against every job's last start).

Otherwise the memo is dropped and the cycle starts a new one. Correctness never depends on it: a property test
runs random change sequences with and without the memo and compares every decision (tests/property/
test_attempt_memo.py). A search that committed is never kept: it changed the cluster, so the next input differs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.plugins.minruntime import protection_windows
from kai.scheduler.session import Session
from kai.scheduler.snapshot import Snapshot

AttemptKey = tuple[str, int, int, int]  # (action, job index, Session.settled, budget left for the action)


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """What a victim search that committed nothing leaves behind, all an attempt after it can see."""

    why: str  # the note the action adds to the job's pending message
    tried: int  # simulations taken from the action's budget
    any_groups: bool  # the search set Session.any_groups (a tentative shared-GPU placement)


@dataclass(frozen=True, slots=True)
class AttemptMemo:
    """One cycle's failed searches, with the input they were made on (see the module docstring)."""

    snap: Snapshot
    conf: SchedulerConf
    outcomes: dict[AttemptKey, SearchOutcome]


@dataclass(slots=True)
class AttemptLog:
    """A Session's view of the memo: the outcomes it may reuse, and the ones this cycle found (the next memo)."""

    reusable: dict[AttemptKey, SearchOutcome] = field(default_factory=dict)
    found: dict[AttemptKey, SearchOutcome] = field(default_factory=dict)
    reused: int = 0  # searches skipped this cycle (for the cycle's stats)

    @staticmethod
    def begin(ssn: Session, memo: AttemptMemo | None) -> AttemptLog:
        if memo is not None and reusable(memo, ssn):
            return AttemptLog(memo.outcomes)
        return AttemptLog()

    def get(self, key: AttemptKey) -> SearchOutcome | None:
        got = self.reusable.get(key)
        if got is not None:
            self.found[key] = got
            self.reused += 1
        return got

    def put(self, key: AttemptKey, outcome: SearchOutcome) -> None:
        self.found[key] = outcome

    def memo(self, ssn: Session) -> AttemptMemo:
        return AttemptMemo(ssn.snap, ssn.conf, self.found)


def reusable(memo: AttemptMemo, ssn: Session) -> bool:
    """Whether *ssn*'s cycle repeats *memo*'s up to stale-gang eviction (see the module docstring)."""
    if "gpupolicy" in ssn.hooks.plugins:
        return False
    if memo.conf is not ssn.conf and memo.conf != ssn.conf:
        return False
    return same_input(memo.snap, ssn.snap) and clock_neutral(ssn, memo.snap.now)


def same_input(a: Snapshot, b: Snapshot) -> bool:
    """Every field of the two Snapshots but ``now`` is equal."""
    if a is b:
        return True
    return all(f.name == "now" or _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(Snapshot))


def _same(a: Any, b: Any) -> bool:
    """Equal values, deep; NumPy arrays by dtype, shape and elements. Identity first: an incremental snapshot
    hands out its unchanged tasks, jobs and arrays again, so most of a snapshot compares by pointer."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(x is y or _same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    return bool(a == b)


def clock_neutral(ssn: Session, then: float) -> bool:
    """Every answer before stale-gang eviction that reads the clock is the same at *then* as at the Session's
    ``now``: each job's preemption delay (EvictingAction._outside_delay) and min-runtime protection
    (minruntime.protected, for every window the Session's queues and plugin may apply)."""
    snap = ssn.snap
    now = snap.now
    if now == then:
        return True
    windows = [m for m in protection_windows(ssn) if m > 0]
    for job in snap.jobs:
        delay = job.podgroup.preemption_delay
        if delay is not None and (then - job.creation >= delay) != (now - job.creation >= delay):
            return False
        start = job.last_start
        if start is not None:
            for m in windows:
                if (start + m > then) != (start + m > now):
                    return False
    return True
