"""Victim search shared by reclaim, preempt and consolidation (KAI's JobSolver, kai-behaviour §4.3).

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
and pipelined to its new node: consolidation's whole point). A move counts on the
pod's controller making it again; on a cluster a unit with a pod nobody owns is put
back only on its own node, or stays evicted (``can_move``). The scenario is
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
from kai.scheduler.actions.gang import is_simple, job_constraints, place_fixed
from kai.scheduler.actions.victims_first import VictimsFirst
from kai.scheduler.model import GPU, JobInfo, TaskInfo, TaskStatus
from kai.scheduler.ordering import JobQueue
from kai.scheduler.session import Session, Statement
from kai.scheduler.snapshot import Snapshot
from kai.scheduler.topology import TopologyError
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


def can_move(snap: Snapshot, tasks: Iterable[int]) -> bool:
    """Whether moving these tasks' pods loses none of them: each comes back once evicted, made again by its
    controller (a ReplicaSet, a Job, a RayCluster...) or, where ``Snapshot.bare_pods_return``, by the cluster.
    A move is an eviction that the controller answers with a new pod; on a real cluster a pod nobody owns is
    simply gone, so reclaim and preempt put such a victim back only on its own node, and consolidation
    leaves its job alone."""
    if snap.bare_pods_return:
        return True
    pods = snap.tasks
    return all(any(o.controller for o in pods[t].pod.meta.owner_references) for t in tasks)


CapacityCheck = Callable[[], str | None]  # with the victims gone: why the job's queue still cannot take it


class Solver:
    def __init__(
        self,
        ssn: Session,
        *,
        validator: Validator,
        all_must_move: bool,
        budget: Budget,
        capacity: CapacityCheck | None = None,
        move_cap: int = -1,
    ) -> None:
        """*capacity*: checked once a set's victims are evicted, before the job's pods are placed (KAI's
        AllocateJob checks the queue's capacity there, so victims under a queue at its limit make room).
        *move_cap*: with *all_must_move*, the most pods a scenario may move (consolidation's
        max-consolidation-preemptees; -1: no cap). A simulation whose placed pods already force more moves
        stops there (``_must_move``), and so does a put-back pass that moves more. Not with a node_choice
        plugin (kai's GPU policies): the random one draws from its generator at every placement, and the
        placements skipped would change the draws after them; the validator still counts the moves."""
        self.ssn = ssn
        self.validator = validator
        self.all_must_move = all_must_move
        self.budget = budget
        self.capacity = capacity
        self.move_cap = move_cap if all_must_move and not ssn.hooks.has_node_choice else -1
        self._free0: np.ndarray | None = None  # idle + releasing per node when the search began
        self._over: str | None = None  # why the last simulation's job was still over capacity
        # (moved shared pod, its new node) -> the GPU groups it moves to there; keyed by the node too, as the two
        # put-back passes may move a pod to different nodes and either pass's plan may be the one replayed
        self._moved_gpus: dict[tuple[int, int], tuple[int, ...]] = {}
        self._can_move: dict[int, bool] = {}  # a victim unit's first task -> whether its pods may move
        self._known: VictimsFirst | None = None  # proves a victims-first simulation fails (victims_first)

    # --- search ---------------------------------------------------------------------------------------

    def solve(self, job: JobInfo, tasks: list[TaskInfo], victims: Iterable[VictimUnit]) -> SolveResult:
        ssn = self.ssn
        self.budget.used_by_job = 0
        result = SolveResult(None)
        request = np.sum([t.request for t in tasks], axis=0)
        # the nodes some pod of the job may use (pods of one job may differ: preemptGang_test.go 'flaky scenario'
        # has one pod per node affinity); the room counts below are then a bound, the simulation decides
        static = np.zeros(ssn.snap.nodes.n, dtype=bool)
        for sig in {t.signature for t in tasks}:
            static |= ssn.static_fit(next(t for t in tasks if t.signature == sig)).mask
        if not static.any():
            return result
        free = ssn.idle + ssn.releasing  # per node, before any victim
        if ssn.any_groups:  # what GPU groups have left counts too: a bound, the simulation decides
            free[:, GPU] = ssn.free_gpu_milli()
        cols = np.flatnonzero(request)
        self._free0 = free
        self._known = VictimsFirst.of(ssn, job, tasks, free) if self.capacity is None else None
        seen: list[VictimUnit] = []
        # a unit a PodDisruptionBudget fully protects can never be part of an accepted set: skip it early,
        # so the search moves on to the next victims instead of retrying sets that contain it
        it = (u for u in victims if not ssn.disruption_blocked(u.tasks))
        tasks_req = [snap_task.request for snap_task in ssn.snap.tasks]

        if len(tasks) == 1:  # node-local greedy
            per_node: dict[int, list[VictimUnit]] = {}
            freed: dict[int, list[int]] = {}
            col_list = cols.tolist()
            need = tasks[0].request[cols].tolist()
            node_of = ssn.node
            static_list = static.tolist()
            for unit in it:
                seen.append(unit)
                n = node_of[unit.tasks[0]]
                if any(node_of[t] != n for t in unit.tasks[1:]) or not static_list[n]:
                    continue
                per_node.setdefault(n, []).append(unit)
                got = freed.get(n)
                if got is None:
                    got = freed[n] = free[n, cols].tolist()
                for t in unit.tasks:
                    r = tasks_req[t]
                    for i, c in enumerate(col_list):
                        got[i] += int(r[c])
                if all(g >= q for g, q in zip(got, need)):
                    if self._try(job, tasks, per_node[n], result):
                        return result
                    if result.out_of_budget:
                        return result

        # multi-node: everything seen so far, then more, in victim order. A set is simulated only when the
        # freed room could hold every pod (_Room, a necessary condition), and after a failure only once it
        # has grown by _GROWTH, so a 2,000-pod gang costs a handful of simulations, not thousands.
        room = _Room(free, static, tasks, cols, _required_domains(ssn, job))
        if ssn.any_groups or (ssn.hooks.has_node_filter and any(ssn.hooks.node_rules(ssn, t) for t in tasks)):
            # GPU groups make the per-node count a bound only (free share may be split over several GPUs, and
            # a victim that does not raise the count can still empty a GPU); a stateful rule (anti-affinity, a
            # host port) can be what a victim frees: never drop victims as useless
            room.exact = False
        chosen: list[VictimUnit] = []
        next_try = tried_len = 0
        for unit in itertools.chain(seen, it):
            chosen.append(unit)
            room.free_unit(ssn.node, unit.tasks, tasks_req)
            if len(chosen) < next_try or not room.enough():
                continue
            if self._try(job, tasks, room.useful(chosen, ssn.node), result) or result.out_of_budget:
                return result
            tried_len = len(chosen)
            next_try = max(len(chosen) + 1, int(len(chosen) * _GROWTH))
        if len(chosen) > tried_len and room.enough():
            # every candidate victim: the largest set there is
            self._try(job, tasks, room.useful(chosen, ssn.node), result)
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
        self._over = None
        plan = self._simulate(stmt, job, tasks, units)
        stmt.rollback()
        if plan is None:
            why = self._over or "the job does not fit even with these victims gone"
            result.rejections[why] = result.rejections.get(why, 0) + 1
            return False
        placements, back_home, moved, early = plan
        if self.all_must_move and any(t not in back_home and t not in moved for u in units for t in u.tasks):
            result.rejections["a victim could not be moved elsewhere"] = (
                result.rejections.get("a victim could not be moved elsewhere", 0) + 1
            )
            return False
        stmt = ssn.statement()
        evicted_tasks = [t for u in units for t in u.tasks if t not in back_home]
        if not self._replay(stmt, job, tasks, placements, evicted_tasks, moved, early):
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
        self, stmt: Statement, job: JobInfo, tasks: list[TaskInfo], units: list[VictimUnit]
    ) -> tuple[list[int], set[int], dict[int, int], int] | None:
        """Evict *units*, place *tasks*, put victims back; None if the job does not fit. The plan: the job's
        nodes, the victims back home, the moved ones (task -> node) in the order they were placed, and how
        many of those were placed before the job (the victim jobs re-allocated first)."""
        ssn = self.ssn
        snap = ssn.snap
        placer = ssn.placer
        evicted = units
        home = {t: (ssn.node[t], ssn.gpus[t]) for u in units for t in u.tasks}  # node, and GPU groups if shared
        known = self._known
        if known is not None:
            known.note(units)
        for u in units:
            for t in u.tasks:
                stmt.evict(snap.tasks[t])
        if self.capacity is not None and (over := self.capacity()) is not None:
            self._over = over
            return None
        # KAI's simulation allocates the victims' jobs and the preemptor in queue order: a victim job that comes
        # first takes its room back before the preemptor is tried (reclaim_test.go 'queue0 is over quota, queue1
        # is under quota, yet we don't reclaim because allocate will case a loop')
        first = self._victims_before(job, tasks, units)
        early_home: set[int] = set()
        early_moved: dict[int, int] = {}
        if first:
            by_job: dict[int, list[VictimUnit]] = {}
            for u in units:
                by_job.setdefault(u.job, []).append(u)
            if known is not None and len(first) == len(by_job) and known.restores(units, home):
                return None  # every victim goes back where it was, and the job fit nowhere there
            early = [u for j in first for u in by_job[j]]
            early_home, early_moved = self._put_back(stmt, early, home, home_first=False)
            firsts = set(first)
            units = [u for u in units if u.job not in firsts]
        placements = []
        if is_simple(job):
            for task in tasks:
                choice = placer.best_node(task)
                if choice is None:
                    return None
                (stmt.allocate if choice.now else stmt.pipeline)(task, choice.node, choice.gpus)
                placements.append(choice.node)
        else:  # subgroups or a topology constraint: the preemptor's pods go where allocate would put them
            fixed = place_fixed(ssn, stmt, job, tasks)
            if fixed is None:
                return None
            placements = fixed
        cap = self.move_cap
        if cap >= 0 and (least := self._must_move(tasks, placements, evicted, home)) > cap:
            self._over = f"it would move at least {least} pods, more than max-consolidation-preemptees {cap}"
            return None
        # Victims come back whole units at a time, in job order (the most deserving job first), each on the
        # best node (KAI's way). That can pack a victim onto another victim's home and cascade into many
        # moves, so when it moves anything, a second pass that first keeps every unit fitting at home is
        # also tried; the plan with fewer evictions, then fewer moves, wins.
        # a job's core comes back before its surplus pods, which only follow a core that did (KAI re-allocates a
        # victim job gang first: reclaim_elastic_test.go 'Don't reclaim elastic job which is in quota')
        ordered = sorted(units, key=lambda u: (*_job_order(snap.jobs[u.job]), not u.core))
        # With a cap on moves, a pass that passes it can never give an accepted scenario (the validator refuses
        # the moves, or the plan that beats it leaves a victim evicted, which all_must_move refuses): such a
        # pass stops there, and the other pass decides. A scenario is accepted exactly when the full passes'
        # choice would be.
        moves_left = cap - len(early_moved) if cap >= 0 else -1
        if cap >= 0 and moves_left < 0:
            self._over = _too_many_moves(cap)
            return None
        mark = stmt.checkpoint()
        back_home, moved = self._put_back(stmt, ordered, home, home_first=False, moves_left=moves_left)
        if moved:
            over = 0 <= moves_left < len(moved)
            stmt.rollback(mark)
            alt_home, alt_moved = self._put_back(stmt, ordered, home, home_first=True, moves_left=moves_left)
            alt_over = 0 <= moves_left < len(alt_moved)
            if over and alt_over:
                self._over = _too_many_moves(cap)
                return None
            n = sum(len(u.tasks) for u in units)
            if over or (
                not alt_over
                and (n - len(alt_home) - len(alt_moved), len(alt_moved)) < (n - len(back_home) - len(moved), len(moved))
            ):
                back_home, moved = alt_home, alt_moved
        return placements, back_home | early_home, {**early_moved, **moved}, len(early_moved)

    def _must_move(
        self,
        tasks: list[TaskInfo],
        placements: list[int],
        units: list[VictimUnit],
        home: dict[int, tuple[int, tuple[int, ...]]],
    ) -> int:
        """How many victims must leave their nodes at least, whatever the put-back does: on a node where the
        job's pods take more GPUs than it had free when the search began, victims holding the difference
        cannot all come back (the last pod placed there found room, so the node ends with none to spare).
        The fewest such victims are the largest ones. 0 (no bound) with GPU groups, whose GPU column is not
        the whole story.

        Consolidation simulated sets of a hundred victims and more, putting each back twice, to reject the
        scenario for moving more pods than max-consolidation-preemptees allows; the bound rejects such a set
        once its job's pods are placed."""
        ssn = self.ssn
        free0 = self._free0
        if ssn.any_groups or free0 is None:
            return 0
        taken: dict[int, int] = {}
        for task, node in zip(tasks, placements):
            gpus = int(task.request[GPU])
            if gpus > 0:  # a node where some pod of the job took GPUs: its last GPU placement found room
                taken[node] = taken.get(node, 0) + gpus
        short = {n: g - int(free0[n, GPU]) for n, g in taken.items() if g > free0[n, GPU]}
        if not short:
            return 0
        held: dict[int, list[int]] = {}
        snap_tasks = ssn.snap.tasks
        for u in units:
            for t in u.tasks:
                node = home[t][0]
                gpus = int(snap_tasks[t].request[GPU])
                if node in short and gpus > 0:  # a victim holding no GPU never needs to leave for them
                    held.setdefault(node, []).append(gpus)
        least = 0
        for node, missing in short.items():
            for gpus in sorted(held.get(node, ()), reverse=True):
                if missing <= 0:
                    break
                missing -= gpus
                least += 1
        return least

    def _victims_before(self, job: JobInfo, tasks: list[TaskInfo], units: list[VictimUnit]) -> list[int]:
        """The victim jobs KAI's simulation re-allocates before the preemptor, in that order (its
        TryToVirtuallyAllocatePreemptorAndGetVictims pops them with the preemptor from a JobsOrderByQueues that
        also holds the pending jobs, so a queue is ranked by its best job). kai ranks with the pending jobs of the
        preemptor's and the victims' leaf queues only."""
        ssn = self.ssn
        snap = ssn.snap
        by_job: dict[int, list[TaskInfo]] = {}
        for u in units:
            by_job.setdefault(u.job, []).extend(snap.tasks[t] for t in u.tasks)
        leaves = {snap.jobs[j].queue for j in by_job} | {job.queue}
        job_order = ssn.hooks.job_order
        if len(leaves) == 1:  # one leaf queue: its pops follow job order, whatever else is pending in it
            mine = (*job_order(ssn, job), job.index)  # the JobQueue's entries: the order key, then the index
            return [j for key, j in sorted(((*job_order(ssn, snap.jobs[j]), j), j) for j in by_job) if key < mine]
        prepared = {}
        for q, (entries, requests) in self._pending_entries(leaves, by_job).items():
            prepared[q] = ([e for e in entries if e[-1] != job.index and e[-1] not in by_job], requests)
        queue = JobQueue(ssn, (), prepared=prepared)
        for j, victim_tasks in by_job.items():
            queue.push(snap.jobs[j], victim_tasks)
        queue.push(job, tasks)
        first: list[int] = []
        while (popped := queue.pop()) is not None and popped.index != job.index:
            if popped.index in by_job:
                first.append(popped.index)
                if len(first) == len(by_job):  # every victim job is out: later pops cannot add to the answer
                    break
        return first

    def _pending_entries(
        self, leaves: set[int], by_job: dict[int, list[TaskInfo]]
    ) -> dict[int, tuple[list[tuple], dict[int, tuple[int, int, int]]]]:
        """Per leaf queue of *leaves*, the JobQueue entries and requests of its pending, ready jobs (they rank the
        queues in ``_victims_before``).

        Every simulation asks for them, and they change only with the settled state (``Session.settled``): a
        simulation's tentative evictions touch the victim jobs only, and a leaf is kept only when none of its
        pending jobs is a victim of the asking simulation (*by_job*), so what is kept is the settled state's."""
        ssn = self.ssn
        kept = ssn.cache.get("pending_entries")
        if kept is None or kept[0] != ssn.settled:
            kept = ssn.cache["pending_entries"] = (ssn.settled, {})
        per_leaf = kept[1]
        by_queue = ssn.cache.get("pending_jobs_by_queue")
        if by_queue is None:  # from the snapshot alone, once per Session: no pod becomes pending during a cycle
            by_queue = ssn.cache["pending_jobs_by_queue"] = {}
            tasks, pending = ssn.snap.tasks, TaskStatus.PENDING
            for p in ssn.snap.jobs:
                if any(tasks[t].status == pending for t in p.tasks):
                    by_queue.setdefault(p.queue, []).append(p)
        out = {}
        for q in leaves:
            got = per_leaf.get(q)
            if got is None:
                entries, requests = [], {}
                for p in by_queue.get(q, ()):
                    if p.index not in ssn.job_errors and ssn.job_ready(p) and ssn.pending_tasks(p):
                        entry, requests[p.index] = JobQueue.entry(ssn, p)
                        entries.append(entry)
                entries.sort(reverse=True)  # JobQueue's order for the jobs queued at the start: best last
                got = (entries, requests)
                if not any(ji in by_job for ji in requests):
                    per_leaf[q] = got
            out[q] = got
        return out

    def _put_back(
        self,
        stmt: Statement,
        units: list[VictimUnit],
        home: dict[int, tuple[int, tuple[int, ...]]],
        *,
        home_first: bool,
        moves_left: int = -1,
    ) -> tuple[set[int], dict[int, int]]:
        """Re-place victim units (pipeline only); returns (tasks back on their own node, moved task -> node).
        *moves_left* (-1: no cap): stop as soon as more pods than that have moved."""
        ssn = self.ssn
        snap = ssn.snap
        placer = ssn.placer
        back_home: set[int] = set()
        moved: dict[int, int] = {}
        # a victim comes back only if its queue can take it back (KAI re-allocates victim jobs with the queue
        # capacity check: the preemptor may have used room under a limit the victim's queue shares)
        over = ssn.hooks.job_over_capacity
        kept: list[VictimUnit] = []
        broken: set[int] = set()  # jobs whose core stays evicted
        for u in units:
            if over(ssn, snap.jobs[u.job], [snap.tasks[t] for t in u.tasks]) is None:
                kept.append(u)
            elif u.core:
                broken.add(u.job)
        units = kept
        homeless = units
        if home_first:
            homeless = []
            away: set[int] = set()  # jobs whose core could not stay home: their surplus pods follow it
            for u in units:
                if not u.core and u.job in away:
                    homeless.append(u)
                elif self._at_home(stmt, u, home):
                    back_home.update(u.tasks)
                else:
                    homeless.append(u)
                    if u.core:
                        away.add(u.job)
        for u in homeless:
            if not u.core and u.job in broken:
                continue  # a surplus pod never comes back without its job's core
            if not self._movable(u):  # nobody makes its pods again elsewhere: home, or evicted
                if not home_first and self._at_home(stmt, u, home):
                    back_home.update(u.tasks)
                elif u.core:
                    broken.add(u.job)
                continue
            mark = stmt.checkpoint()
            spots = []
            for t in u.tasks:
                choice = placer.best_node(snap.tasks[t])
                if choice is None:
                    break
                stmt.pipeline(snap.tasks[t], choice.node, choice.gpus)
                spots.append((t, choice.node))
            else:
                for t, node in spots:
                    if (node, ssn.gpus[t]) == home[t]:  # a shared pod on other GPUs of its node has moved
                        back_home.add(t)
                    else:
                        moved[t] = node
                        self._moved_gpus[t, node] = ssn.gpus[t]
                if 0 <= moves_left < len(moved):
                    break  # over the cap: this pass cannot give an accepted scenario
                continue
            stmt.rollback(mark)
            if u.core:
                broken.add(u.job)
        return back_home, moved

    def _at_home(self, stmt: Statement, u: VictimUnit, home: dict[int, tuple[int, tuple[int, ...]]]) -> bool:
        """Pipeline every pod of *u* back where it was (node, and GPUs if shared); False, rolled back, if one
        does not fit there any more."""
        ssn = self.ssn
        mark = stmt.checkpoint()
        for t in u.tasks:
            task = ssn.snap.tasks[t]
            node, gpus = home[t]
            shared_gpus = gpus if task.share is not None else None
            if not ssn.fit_on(task, node, shared_gpus):
                stmt.rollback(mark)
                return False
            stmt.pipeline(task, node, shared_gpus)
        return True

    def _movable(self, u: VictimUnit) -> bool:
        """Whether *u*'s pods may move to other nodes (``can_move``), remembered per unit's first task: the
        answer is the snapshot's, and victim searches put the same units back many times."""
        got = self._can_move.get(u.tasks[0])
        if got is None:
            got = self._can_move[u.tasks[0]] = can_move(self.ssn.snap, u.tasks)
        return got

    def _replay(
        self,
        stmt: Statement,
        job: JobInfo,
        tasks: list[TaskInfo],
        placements: list[int],
        evicted: list[int],
        moved: dict[int, int],
        early: int,
    ) -> bool:
        """Apply the minimal scenario: only the needed evictions, then the pods in the simulation's order: the
        first *early* moves (victim jobs re-allocated before the job), the job's pods, the other moves.

        The order is the simulation's, not the tasks' indexes (the Store's slot order): on a node with GPU
        groups, a whole-GPU pod takes the first free GPUs, and placed before a shared pod it can take the GPU
        the simulation gave that pod: the replay would fail in one listing order and not in another."""
        ssn = self.ssn
        snap = ssn.snap
        for t in evicted:
            stmt.evict(snap.tasks[t])
        order = list(moved.items())

        def move(t: int, node: int) -> bool:
            task = snap.tasks[t]
            gpus = self._moved_gpus.get((t, node)) if task.share is not None else None  # the simulation's GPUs
            if not ssn.fit_on(task, node, gpus):
                return False
            stmt.pipeline(task, node, gpus)
            return True

        if not all(move(t, node) for t, node in order[:early]):
            return False
        for task, node in zip(tasks, placements):
            # the preemptor's pods are pipelined even where they fit now, as KAI's solver allocates it
            # (AllocateJob with isPipelineOnly): they are bound by the next cycle's allocate, nominated here
            if not ssn.fit_on(task, node):
                return False
            stmt.pipeline(task, node)
        if not all(move(t, node) for t, node in order[early:]):
            return False
        pipeline_whole_gang_if_needed(ssn, stmt, job)
        return True


class _Room:
    """How many of the job's pods the freed room could hold at most, kept per node as victims accumulate.

    Every pod needs at least ``smallest`` (the element-wise minimum request over the job's pods), so a node
    with ``free`` room holds at most ``min over columns of free // smallest`` of them. When the sum over the
    nodes the job may use is below the number of pods, placing them must fail, and the simulation is
    skipped. That is a necessary condition only: a set that passes is still simulated.

    When all the job's pods ask for the same amounts, the count is exact per node, so a victim on a node
    whose count did not grow cannot help the job in: ``useful`` leaves such victims out of the simulated
    set. Evicting them would only churn (they would be put back, perhaps elsewhere: a needless move).

    With *domain* (per node, the job's domain at its required topology level; -1 outside the topology) the
    pods must fit in one domain, so the condition is per domain: some domain's sum must reach the pods.
    """

    def __init__(
        self,
        free: np.ndarray,
        static: np.ndarray,
        tasks: list[TaskInfo],
        cols: np.ndarray,
        domain: np.ndarray | None = None,
    ) -> None:
        smallest = np.min([t.request for t in tasks], axis=0)
        self._cols = [int(c) for c in cols if smallest[c] > 0]
        self._smallest = [int(smallest[c]) for c in self._cols]
        self._pods = len(tasks)
        self._uniform = all((t.request == tasks[0].request).all() for t in tasks[1:])
        self.exact = True  # the per-node count is exact for uniform pods (False when GPUs are shared)
        self._static = static.tolist()
        self._free: dict[int, list[int]] = {}
        self._base = free
        if self._cols:
            sub = np.maximum(free[:, self._cols], 0) // np.array(self._smallest)
            self._cap = sub.min(axis=1) * static
            self._base_cap = self._cap.copy()
            self._total = int(self._cap.sum())
        else:
            self._total = self._pods  # pods that request nothing fit anywhere: never skip
        self._domain: list[int] | None = None
        if domain is not None and self._cols:
            inside = domain >= 0
            self._cap[~inside] = 0
            self._domain = domain.tolist()
            self._domain_total = (
                np.bincount(domain[inside], weights=self._cap[inside], minlength=int(domain.max()) + 1)
                .astype(np.int64)
                .tolist()
            )

    def free_unit(self, node_of: list[int], unit_tasks: tuple[int, ...], request: list[np.ndarray]) -> None:
        if not self._cols:
            return
        for t in unit_tasks:
            n = node_of[t]
            if not self._static[n]:
                continue
            got = self._free.get(n)
            if got is None:
                got = self._free[n] = [int(self._base[n, c]) for c in self._cols]
            r = request[t]
            for i, c in enumerate(self._cols):
                got[i] += int(r[c])
            cap = min(max(g, 0) // q for g, q in zip(got, self._smallest))
            if self._domain is not None:
                d = self._domain[n]
                if d < 0:
                    continue
                self._domain_total[d] += cap - int(self._cap[n])
            self._total += cap - int(self._cap[n])
            self._cap[n] = cap

    def enough(self) -> bool:
        if self._domain is not None:
            return max(self._domain_total, default=0) >= self._pods
        return self._total >= self._pods

    def useful(self, units: list[VictimUnit], node_of: list[int]) -> list[VictimUnit]:
        if not self._uniform or not self.exact or not self._cols:
            return list(units)
        grown = {n for n in self._free if self._cap[n] > self._base_cap[n]}
        return [u for u in units if any(node_of[t] in grown for t in u.tasks)]


def _required_domains(ssn: Session, job: JobInfo) -> np.ndarray | None:
    """Per node, the job's domain at the required level of its PodGroup-level constraint (-1 outside the
    topology), or None without one: victims only help the job inside one such domain."""
    if is_simple(job):
        return None
    try:
        con = job_constraints(ssn, job)[0]
    except TopologyError:
        return None
    if con is None or con.required is None:
        return None
    return con.tree.domain[con.required]


def _too_many_moves(cap: int) -> str:
    return f"it would move more than {cap} pods (max-consolidation-preemptees)"


def _job_order(job: JobInfo) -> tuple:
    return (-job.priority, job.creation, job.uid)
