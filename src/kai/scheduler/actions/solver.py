"""Victim search shared by reclaim, preempt and consolidation (KAI's JobSolver, reference 4.3).

For one pending job, candidate victim sets are tried in two ways, cheapest first:

* **node-local**: for a one-pod attempt, victims are taken in victim order but
  counted per node; as soon as one node would have room (idle + releasing +
  what its victims free), that node's victims are simulated.
* **multi-node**: victims accumulate over the whole cluster in victim order;
  once idle + releasing + freed covers the request, the set is simulated, and
  again after each further growth by half (so a 2,000-pod gang costs a handful
  of simulations, not thousands).

A simulation runs inside a Statement: evict the set, place the job's pods
(pipelined onto what is being released), then try to put each victim unit back
(pipeline only, all pods of a unit or none). A victim put back on its own node
was never needed and is left alone; one put back elsewhere is *moved* (evicted
and pipelined to its new node: consolidation's whole point). The scenario is
then replayed with exactly those evictions and moves, checked by the action's
validator and by the cluster-wide guards (PodDisruptionBudgets, the eviction
cap), and committed, or rolled back. Budgets count simulations, not seconds,
so a cycle's decisions never depend on machine speed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from kai.scheduler.actions.common import pipeline_whole_gang_if_needed
from kai.scheduler.gpusharing import LATER, NOW
from kai.scheduler.model import GPU, JobInfo, TaskInfo
from kai.scheduler.session import Session, Statement
from kai.scheduler.victims import VictimUnit

_GROWTH = 1.5  # simulate the multi-node set again once it has grown by this factor


@dataclass(slots=True)
class Scenario:
    """The outcome of one simulated victim set, as the validator sees it."""

    job: JobInfo
    tasks: list[TaskInfo]  # the preemptor pods placed
    evicted: list[VictimUnit]  # units with at least one pod really evicted
    evicted_tasks: list[int]
    moved: list[tuple[int, int]]  # (task, new node row)
    before_alloc: list[list[int]]  # queue allocations before the scenario (QRES base units)


Validator = Callable[[Session, Scenario], str | None]  # a reason to reject, or None


@dataclass(slots=True)
class Budget:
    """Simulations left for the action; each job also gets at most ``per_job``."""

    action_left: int
    per_job: int
    used_by_job: int = 0

    def take(self) -> bool:
        if self.action_left <= 0 or self.used_by_job >= self.per_job:
            return False
        self.action_left -= 1
        self.used_by_job += 1
        return True


@dataclass(slots=True)
class SolveResult:
    scenario: Scenario | None
    tried: int = 0
    rejections: dict[str, int] = field(default_factory=dict)  # validator reason -> count
    out_of_budget: bool = False


class Solver:
    def __init__(self, ssn: Session, *, validator: Validator, all_must_move: bool, budget: Budget) -> None:
        self.ssn = ssn
        self.validator = validator
        self.all_must_move = all_must_move
        self.budget = budget
        self._moved_gpus: dict[int, tuple[int, ...]] = {}  # moved shared pod -> the GPU groups it moves to

    # --- search ---------------------------------------------------------------------------------------

    def solve(self, job: JobInfo, tasks: list[TaskInfo], victims: Iterable[VictimUnit]) -> SolveResult:
        ssn = self.ssn
        self.budget.used_by_job = 0
        result = SolveResult(None)
        request = np.sum([t.request for t in tasks], axis=0)
        static = np.ones(ssn.snap.nodes.n, dtype=bool)
        for sig in {t.signature for t in tasks}:
            static &= ssn.static_fit(next(t for t in tasks if t.signature == sig)).mask
        if not static.any():
            return result
        free = ssn.idle + ssn.releasing  # per node, before any victim
        if ssn.g_pods.any():  # what GPU groups have left counts too: a bound, the simulation decides
            free[:, GPU] = ssn.free_gpu_milli()
        cols = np.flatnonzero(request)
        seen: list[VictimUnit] = []
        # a unit a PodDisruptionBudget fully protects can never be part of an accepted set: skip it early,
        # so the search moves on to the next victims instead of retrying sets that contain it
        it = (u for u in victims if not ssn.disruption_blocked(u.tasks))

        if len(tasks) == 1:  # node-local greedy
            per_node: dict[int, list[VictimUnit]] = {}
            freed: dict[int, np.ndarray] = {}
            need = tasks[0].request
            for unit in it:
                seen.append(unit)
                nodes = {ssn.node[t] for t in unit.tasks}
                if len(nodes) != 1:
                    continue
                n = nodes.pop()
                if not static[n]:
                    continue
                per_node.setdefault(n, []).append(unit)
                freed[n] = freed.get(n, 0) + np.sum([ssn.snap.tasks[t].request for t in unit.tasks], axis=0)
                if (free[n, cols] + freed[n][cols] >= need[cols]).all():
                    if self._try(job, tasks, per_node[n], result):
                        return result
                    if result.out_of_budget:
                        return result

        # multi-node: everything seen so far, then more, in victim order
        total_free = free[static].sum(axis=0)
        freed_total = np.zeros_like(total_free)
        chosen: list[VictimUnit] = []
        next_try = tried_len = 0
        for unit in itertools.chain(seen, it):
            chosen.append(unit)
            for t in unit.tasks:
                if static[ssn.node[t]]:
                    freed_total += ssn.snap.tasks[t].request
            if len(chosen) < next_try or not (total_free[cols] + freed_total[cols] >= request[cols]).all():
                continue
            if self._try(job, tasks, list(chosen), result) or result.out_of_budget:
                return result
            tried_len = len(chosen)
            next_try = max(len(chosen) + 1, int(len(chosen) * _GROWTH))
        if len(chosen) > tried_len and (total_free[cols] + freed_total[cols] >= request[cols]).all():
            self._try(job, tasks, chosen, result)  # every candidate victim: the largest set there is
        return result

    # --- one scenario ---------------------------------------------------------------------------------

    def _try(self, job: JobInfo, tasks: list[TaskInfo], units: list[VictimUnit], result: SolveResult) -> bool:
        if not self.budget.take():
            result.out_of_budget = True
            return False
        result.tried += 1
        ssn = self.ssn
        before = [row[:] for row in ssn.queues.alloc]
        stmt = ssn.statement()
        plan = self._simulate(stmt, tasks, units)
        stmt.rollback()
        if plan is None:
            result.rejections["the job does not fit even with these victims gone"] = (
                result.rejections.get("the job does not fit even with these victims gone", 0) + 1
            )
            return False
        placements, back_home, moved = plan
        if self.all_must_move and any(
            t not in back_home and t not in moved for u in units for t in u.tasks
        ):
            result.rejections["a victim could not be moved elsewhere"] = (
                result.rejections.get("a victim could not be moved elsewhere", 0) + 1
            )
            return False
        stmt = ssn.statement()
        evicted_tasks = [t for u in units for t in u.tasks if t not in back_home]
        if not self._replay(stmt, job, tasks, placements, evicted_tasks, moved):
            stmt.rollback()
            return False
        evicted_units = [u for u in units if any(t not in back_home and t not in moved for t in u.tasks)]
        scenario = Scenario(
            job=job,
            tasks=tasks,
            evicted=evicted_units,
            evicted_tasks=[t for t in evicted_tasks if t not in moved],
            moved=sorted(moved.items()),
            before_alloc=before,
        )
        reason = ssn.disruption_guard([*evicted_tasks]) or self.validator(ssn, scenario)
        if reason is not None:
            stmt.rollback()
            result.rejections[reason] = result.rejections.get(reason, 0) + 1
            return False
        stmt.commit()
        result.scenario = scenario
        return True

    def _simulate(
        self, stmt: Statement, tasks: list[TaskInfo], units: list[VictimUnit]
    ) -> tuple[list[int], set[int], dict[int, int]] | None:
        """Evict *units*, place *tasks*, put victims back; None if the job does not fit."""
        ssn = self.ssn
        snap = ssn.snap
        placer = ssn.placer
        home = {t: (ssn.node[t], ssn.gpus[t]) for u in units for t in u.tasks}  # node, and GPU groups if shared
        for u in units:
            for t in u.tasks:
                stmt.evict(snap.tasks[t])
        placements = []
        for task in tasks:
            node, now = placer.best_node(task)
            if node < 0:
                return None
            (stmt.allocate if now else stmt.pipeline)(task, node)
            placements.append(node)
        # Victims come back whole units at a time, in job order (the most deserving job first), each on the
        # best node (KAI's way). That can pack a victim onto another victim's home and cascade into many
        # moves, so when it moves anything, a second pass that first keeps every unit fitting at home is
        # also tried; the plan with fewer evictions, then fewer moves, wins.
        ordered = sorted(units, key=lambda u: _job_order(snap.jobs[u.job]))
        mark = stmt.checkpoint()
        back_home, moved = self._put_back(stmt, ordered, home, home_first=False)
        if moved:
            stmt.rollback(mark)
            alt_home, alt_moved = self._put_back(stmt, ordered, home, home_first=True)
            n = sum(len(u.tasks) for u in units)
            if (n - len(alt_home) - len(alt_moved), len(alt_moved)) < (n - len(back_home) - len(moved), len(moved)):
                back_home, moved = alt_home, alt_moved
        return placements, back_home, moved

    def _put_back(
        self,
        stmt: Statement,
        units: list[VictimUnit],
        home: dict[int, tuple[int, tuple[int, ...]]],
        *,
        home_first: bool,
    ) -> tuple[set[int], dict[int, int]]:
        """Re-place victim units (pipeline only); returns (tasks back on their own node, moved task -> node)."""
        ssn = self.ssn
        snap = ssn.snap
        placer = ssn.placer
        back_home: set[int] = set()
        moved: dict[int, int] = {}
        homeless = units
        if home_first:
            homeless = []
            for u in units:
                mark = stmt.checkpoint()
                for t in u.tasks:
                    task = snap.tasks[t]
                    node, gpus = home[t]
                    shared_gpus = gpus if task.share is not None else None
                    if not ssn.fit_on(task, node, shared_gpus):
                        stmt.rollback(mark)
                        homeless.append(u)
                        break
                    stmt.pipeline(task, node, shared_gpus)
                else:
                    back_home.update(u.tasks)
        for u in homeless:
            mark = stmt.checkpoint()
            spots = []
            for t in u.tasks:
                node, _ = placer.best_node(snap.tasks[t])
                if node < 0:
                    break
                stmt.pipeline(snap.tasks[t], node)
                spots.append((t, node))
            else:
                for t, node in spots:
                    if (node, ssn.gpus[t]) == home[t]:  # a shared pod on other GPUs of its node has moved
                        back_home.add(t)
                    else:
                        moved[t] = node
                        self._moved_gpus[t] = ssn.gpus[t]
                continue
            stmt.rollback(mark)
        return back_home, moved

    def _replay(
        self,
        stmt: Statement,
        job: JobInfo,
        tasks: list[TaskInfo],
        placements: list[int],
        evicted: list[int],
        moved: dict[int, int],
    ) -> bool:
        """Apply the minimal scenario: only the needed evictions, the job's pods, the moves."""
        ssn = self.ssn
        snap = ssn.snap
        for t in evicted:
            stmt.evict(snap.tasks[t])
        for task, node in zip(tasks, placements):
            fit = ssn.fit_on(task, node)
            if fit == NOW:
                stmt.allocate(task, node)
            elif fit == LATER:
                stmt.pipeline(task, node)
            else:
                return False
        for t, node in sorted(moved.items()):
            task = snap.tasks[t]
            gpus = self._moved_gpus.get(t) if task.share is not None else None  # the GPUs the simulation chose
            if not ssn.fit_on(task, node, gpus):
                return False
            stmt.pipeline(task, node, gpus)
        pipeline_whole_gang_if_needed(ssn, stmt, job)
        return True


def _job_order(job: JobInfo) -> tuple:
    return (-job.priority, job.creation, job.uid)
