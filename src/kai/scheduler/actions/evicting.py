"""What reclaim, preempt and consolidation share: the preemptor loop around the victim solver.

Each action says who may be a preemptor (its gate), who may be a victim, how a
scenario is validated and how an eviction is worded; this module does the
rest, as KAI's actions do: pending, ready jobs in queue order, outside their
preemption delay, within their queue's limits; a victim search per job under
a budget; the reasons when no room could be made, added to the job's pending
message so "why is my job pending?" names every action that tried.
"""

from __future__ import annotations

from kai.api.duration import format_duration
from kai.api.objects import format_time
from kai.scheduler.actions.allocate import uniform_shape
from kai.scheduler.actions.gang import is_simple, job_constraints, tasks_to_allocate
from kai.scheduler.actions.solver import Budget, Scenario, Solver, SolveResult
from kai.scheduler.capacity import job_request
from kai.scheduler.model import JobFailure, JobInfo, TaskInfo
from kai.scheduler.ordering import JobQueue
from kai.scheduler.session import Session
from kai.scheduler.topology import TopologyError
from kai.scheduler.victims import VictimOrder


class EvictingAction:
    """Template for an action that makes room by evicting (or moving) running pods."""

    name = ""
    all_must_move = False  # consolidation: a scenario is valid only if every victim is re-placed
    # reclaim, preempt: evicting victims under a queue at its limit lowers what it holds, so a job over a limit
    # may still evict (KAI checks the capacity inside the simulation, once the victims are gone)
    evictions_free_capacity = True

    # --- what each action decides ---------------------------------------------------------------------

    def is_preemptor(self, ssn: Session, job: JobInfo) -> bool:
        return True

    def gate(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        """Why *job* may not evict anything at all (None: it may try)."""
        return None

    def victims(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> list[JobInfo]:
        raise NotImplementedError

    def validate(self, ssn: Session, scenario: Scenario) -> str | None:
        return None

    def message(self, ssn: Session, scenario: Scenario, task: TaskInfo) -> str:
        raise NotImplementedError

    def no_victims(self, ssn: Session, job: JobInfo) -> str:
        return "no running pods may be evicted for it"

    def move_cap(self, ssn: Session) -> int:
        """The most pods one scenario may move (-1: no cap); ``validate`` rejects more, and the solver stops
        a simulation that must move more before putting its victims back."""
        return -1

    def nothing_to_do(self, ssn: Session, candidates: list[JobInfo]) -> str | None:
        """A reason no job can gain from this action this cycle (checked once, before the job loop)."""
        if not any(job.preemptible and ssn.evictable_tasks(job) for job in ssn.snap.jobs):
            return "no preemptible pods are running"
        return None

    # --- the loop --------------------------------------------------------------------------------------

    def execute(self, ssn: Session) -> None:
        conf = ssn.conf
        budget = Budget(conf.max_scenarios_per_action, conf.max_scenarios_per_job)
        candidates = [job for job in ssn.ready_jobs() if self.is_preemptor(ssn, job)]
        if not candidates:
            return
        idle = self.nothing_to_do(ssn, candidates)
        if idle is not None:  # cheap: one pass instead of the queue-ordered loop over every pending job
            for job in candidates:
                ssn.note(job, self.name, idle)
            return
        eligible = [job for job in candidates if self._outside_delay(ssn, job)]
        queue = JobQueue(ssn, eligible, ssn.conf.queue_depth(self.name))
        failed: dict[tuple, tuple[int, str]] = {}  # KAI's scheduling signatures: skip jobs no easier than a failure
        while (job := queue.pop()) is not None:
            mark = ssn.begin_job()
            try:
                placed = self._attempt(ssn, job, budget, failed)
            except Exception as e:  # one job's failure costs only that job (Session.drop_job)
                ssn.drop_job(job, self.name, e, mark)
                continue
            if placed:
                if ssn.pending_tasks(job):
                    queue.push(job)
            elif placed is False and budget.action_left <= 0:
                break

    def _attempt(self, ssn: Session, job: JobInfo, budget: Budget, failed: dict[tuple, tuple[int, str]]) -> bool | None:
        """One victim search for *job*: True if a scenario was committed, False if the search ran and found
        none (the job's pending message says why), None if the job was ruled out before any search."""
        if not is_simple(job):
            try:
                job_constraints(ssn, job)
            except TopologyError as e:
                if job.index not in ssn.failures:  # allocate, when it ran, already said so
                    ssn.note(job, self.name, str(e))
                return None
        tasks = tasks_to_allocate(ssn, job)
        if not tasks:
            return None
        over = ssn.hooks.job_over_capacity(ssn, job, tasks)  # limits, non-preemptible quota bind evictions too
        if over is not None and (over.reason != "OverLimit" or not self.evictions_free_capacity):
            ssn.failures[job.index] = over
            return None
        req = job_request(tasks)
        shape = _shape(ssn, job, tasks)
        if shape is not None and shape in failed and len(tasks) >= failed[shape][0]:
            ssn.note(job, self.name, failed[shape][1])
            return None
        why = self.gate(ssn, job, req)
        if why is None:
            found = self._solve(ssn, job, tasks, req, over, budget)
            if found is None:
                return True
            why = found
        if over is not None:
            ssn.failures[job.index] = over
        ssn.note(job, self.name, why)
        if shape is not None and (shape not in failed or len(tasks) < failed[shape][0]):
            failed[shape] = (len(tasks), why)
        return False

    def _solve(
        self,
        ssn: Session,
        job: JobInfo,
        tasks: list[TaskInfo],
        req: tuple[int, int, int],
        over: JobFailure | None,
        budget: Budget,
    ) -> str | None:
        """The victim search for *job*: None if a scenario was committed, else why none was."""
        victims = self.victims(ssn, job, req)
        capacity = None
        if over is not None:  # only victims under the queue at its limit can make room
            ancestors = ssn.queues.ancestors
            victims = [v for v in victims if over.queue in ancestors[v.queue]]
            capacity = lambda: _over_capacity(ssn, job, tasks)  # noqa: E731
        if not victims:
            return self.no_victims(ssn, job) if over is None else over.message
        core_allowed = ssn.hooks.victim_core_allowed
        order = VictimOrder(ssn, victims, lambda v, job=job: core_allowed(ssn, self.name, job, v))
        solver = Solver(
            ssn,
            validator=self.validate,
            all_must_move=self.all_must_move,
            budget=budget,
            capacity=capacity,
            move_cap=self.move_cap(ssn),
        )
        result = solver.solve(job, tasks, order)
        if result.scenario is not None:
            self._record(ssn, result.scenario)
            return None
        return _summary(result)

    def _outside_delay(self, ssn: Session, job: JobInfo) -> bool:
        delay = job.podgroup.preemption_delay
        if delay is None or ssn.snap.now - job.creation >= delay:
            return True
        ssn.note(
            job,
            self.name,
            f"Workload is within its preemption delay window ({format_duration(delay)}) and may not trigger "
            f"evictions before {format_time(job.creation + delay)}",
        )
        return False

    def _record(self, ssn: Session, scenario: Scenario) -> None:
        snap = ssn.snap
        names = snap.nodes.names
        moved = dict(scenario.moved)
        ssn.record_evictions(scenario.evicted_tasks, self.name, lambda t: self.message(ssn, scenario, snap.tasks[t]))
        ssn.record_evictions(
            list(moved),
            self.name,
            lambda t: (
                f"Pod {_ref(snap.tasks[t])} was preempted and rescheduled due to bin packing (resource "
                f"consolidation) procedure. It moves to node {names[moved[t]]} to make room for workload "
                f"{scenario.job.ref}."
            ),
        )
        ssn.nominations.update(t.index for t in scenario.tasks)
        ssn.nominations.update(moved)
        ssn.failures.pop(scenario.job.index, None)
        ssn.notes.pop(scenario.job.index, None)


def preemptible_jobs(ssn: Session, queue: int | None = None) -> list[JobInfo]:
    """The snapshot's preemptible jobs in a queue (of leaf *queue* if given), in job index order: the only jobs
    that can be victims. From the snapshot alone, so made once per Session; every attempt of the three actions
    asks, and a walk of every job per attempt was a measurable part of a saturated cycle."""
    by_queue = ssn.cache.get("preemptible_jobs")
    if by_queue is None:
        by_queue = ssn.cache["preemptible_jobs"] = {None: []}
        for v in ssn.snap.jobs:
            if v.queue >= 0 and v.preemptible:
                by_queue[None].append(v)
                by_queue.setdefault(v.queue, []).append(v)
    return by_queue.get(queue, [])


def _over_capacity(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> str | None:
    over = ssn.hooks.job_over_capacity(ssn, job, tasks)
    return None if over is None else over.message


def _ref(task: TaskInfo) -> str:
    return f"{task.namespace}/{task.name}"


def _shape(ssn: Session, job: JobInfo, tasks: list[TaskInfo]) -> tuple | None:
    """KAI's scheduling signature for eviction actions: the pod shape (with its stateful rules), within one queue
    and priority."""
    if not is_simple(job):
        return None  # subgroups and topology constraints make jobs of one pod shape differ in difficulty
    shape = uniform_shape(tasks, ssn)
    return None if shape is None else (job.queue, job.priority, job.preemptible, *shape)


def _summary(result: SolveResult) -> str:
    if result.tried == 0:
        return "no set of victims could free enough resources on nodes that fit the job"
    top = sorted(result.rejections.items(), key=lambda kv: -kv[1])
    reasons = "; ".join(f"{why} ({n}x)" if n > 1 else why for why, n in top[:2])
    budget = " (search budget used up)" if result.out_of_budget else ""
    return f"{result.tried} victim sets tried, none accepted: {reasons}{budget}"
