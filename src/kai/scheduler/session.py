"""One scheduling cycle's mutable state, and the Statement that changes it with undo.

Theory of operation: the Session copies the snapshot's node arrays (``idle``,
``releasing``) and keeps per-task status/node and per-queue accounting. Every
change goes through a Statement, an undo log: each operation records exactly
what it takes so ``rollback`` puts it back (integer arithmetic, so restoring is
exact). ``commit`` keeps the changes and the reasons attached to them. At
``close`` the Session turns the difference between the snapshot and the final
state into Decisions. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import chain
from typing import Any, NamedTuple, Protocol

import numpy as np

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.framework import Choice, Hooks, NodeVerdict
from kai.scheduler.gpusharing import LATER, NOW, Pick, check_gpus, choose, default_group_name, shared_free_milli
from kai.scheduler.model import (
    ACTIVE_ALLOCATED,
    GPU,
    MILLI,
    JobFailure,
    JobInfo,
    TaskInfo,
    TaskStatus,
    job_sums,
)
from kai.scheduler.predicates import NodeLabels
from kai.scheduler.snapshot import Snapshot


class NodeChooser(Protocol):
    """What the Session's ``placer`` answers (kai.scheduler.placement.Placer, which the cycle makes)."""

    def best_node(
        self, task: TaskInfo, allowed: np.ndarray | None = None, bonus: np.ndarray | None = None
    ) -> Choice | None: ...


class _NoPlacer:
    def best_node(self, task: TaskInfo, allowed: np.ndarray | None = None, bonus: np.ndarray | None = None) -> None:
        raise RuntimeError("the Session has no Placer: open it with kai.scheduler.cycle.open_session")


_NO_PLACER = _NoPlacer()


QGPU = 0  # column of GPUs in queue vectors
# Module constants for the statuses the hot path compares against: reading an enum member as a class attribute
# (``TaskStatus.PENDING``) costs a descriptor call on Python 3.11, ten times a global's load.
_PENDING, _ALLOCATED, _PIPELINED = TaskStatus.PENDING, TaskStatus.ALLOCATED, TaskStatus.PIPELINED


@dataclass(slots=True)
class _Op:
    kind: str  # allocate | pipeline | evict | status | shared (any change to a shared-GPU pod) | shared_allocate
    task: int
    node: int
    prev_status: TaskStatus
    prev_node: int
    from_releasing: np.ndarray | None = None  # pipeline: the part taken from releasing
    saved: _SavedGpus | None = None  # shared: everything the operation changes, to put back as it was
    placed: _SharedPlacement | None = None  # shared_allocate: what to add back


class _SharedPlacement(NamedTuple):
    """A shared pod placed on idle resources: what it took, which rollback gives back (exact integers).

    Cheaper than ``_SavedGpus`` (no copy of the node's rows and slots), which matters when allocate places
    20,000 fractions in one cycle; pipelining and evictions, which move units between idle and releasing,
    keep the full before-image."""

    req: np.ndarray  # (n_res,) taken from the node's idle row
    need: int  # units taken on each slot
    slots: tuple[int, ...]  # the slots, one more pod each
    gpus: tuple[int, ...]  # the task's slots before


@dataclass(slots=True)
class _SavedGpus:
    """A shared-GPU operation's before-image: the node's rows and the slots it touched."""

    idle: np.ndarray  # (n_res,) the node's idle row
    releasing: np.ndarray  # (n_res,)
    rows: tuple[list[int], list[int], list[int], list[int]]  # the node's GPU slots: idle, rel, pods, gone
    gpus: tuple[int, ...]  # the task's slots before


def _copy(rows: tuple[list[int], list[int], list[int], list[int]]) -> tuple[list[int], list[int], list[int], list[int]]:
    return (rows[0][:], rows[1][:], rows[2][:], rows[3][:])


class Statement:
    """Tentative changes to a Session, undone in reverse by ``rollback``.

    The operations go into the Session's one undo log (``Session.journal``); a Statement is the part of it
    from where it opened. Statements follow each other, never interleave (an action opens one, then commits
    or rolls it back). ``commit`` keeps the operations in the journal until the next job's attempt begins
    (``Session.begin_job``), so a job whose attempt fails after a commit (``Session.drop_job``) is still
    undone whole."""

    def __init__(self, ssn: Session) -> None:
        self._ssn = ssn
        self._log = ssn.journal
        self._start = len(self._log)

    def checkpoint(self) -> int:
        """A position to ``rollback`` to (the journal's length now)."""
        return len(self._log)

    def allocate(self, task: TaskInfo, node: int, gpus: tuple[int, ...] | None = None) -> None:
        """Place *task* on *node*'s idle resources. A shared-GPU pod goes on *gpus* (slots of the node) if
        given, else on the GPUs ``gpusharing.choose`` picks."""
        if task.share is not None:
            self._place_shared(task, node, _ALLOCATED, gpus)
            return
        ssn = self._ssn
        self._log.append(_Op("allocate", task.index, node, ssn.status[task.index], ssn.node[task.index]))
        ssn.idle[node] -= task.request
        ssn.node_log.append(node)
        ssn._set(task, _ALLOCATED, node)

    def pipeline(self, task: TaskInfo, node: int, gpus: tuple[int, ...] | None = None) -> None:
        """Place *task* on *node* using resources still being released (then idle for the rest)."""
        if task.share is not None:
            self._place_shared(task, node, _PIPELINED, gpus)
            return
        ssn = self._ssn
        request = task.request
        releasing = ssn.releasing[node]  # the node's row as a view, changed in place
        if (releasing >= request).all():  # all of it from releasing (a victim put back where it was evicted)
            take = request  # half the array operations of the general case, which victim searches pay per pod
            releasing -= request
        else:
            take = np.minimum(request, np.maximum(releasing, 0))
            releasing -= take
            ssn.idle[node] -= request - take
        self._log.append(_Op("pipeline", task.index, node, ssn.status[task.index], ssn.node[task.index], take))
        ssn.node_log.append(node)
        ssn._set(task, _PIPELINED, node)

    def evict(self, task: TaskInfo) -> None:
        """Mark an active task releasing: its resources become releasing on its node. A pod bound to a node the
        snapshot does not have (deleted, or not Ready-listed yet) holds nothing here: only its status changes."""
        ssn = self._ssn
        node = ssn.node[task.index]
        if task.share is not None and node >= 0:
            self._evict_shared(task, node)
            return
        self._log.append(_Op("evict", task.index, node, ssn.status[task.index], node))
        if node >= 0:
            ssn.releasing[node] += task.request
            ssn.log_node(node, freed=True)
        ssn._set(task, TaskStatus.RELEASING, node)

    # --- shared GPUs (see gpusharing's module docstring for the state and its rules) ---------------------

    def _place_shared(self, task: TaskInfo, node: int, status: TaskStatus, gpus: tuple[int, ...] | None) -> None:
        ssn = self._ssn
        share = task.share
        assert share is not None
        rows = ssn.gpu_slots[node]
        pipelined = status == _PIPELINED
        picks = ssn.pick_gpus(task, node, allow_releasing=pipelined, gpus=gpus, rows=rows)
        if picks is None and gpus is not None:  # the slots asked for cannot take it (a stale Choice): the Session's
            picks = ssn.pick_gpus(task, node, allow_releasing=pipelined, rows=rows)  # own choice, never an error
        if picks is None:
            node_name = ssn.snap.nodes.names[node]
            raise AssertionError(f"{task.namespace}/{task.name} does not fit the GPUs of node {node_name}")
        # the node's row as a view, changed in place (``a[i] -= x`` would also write the row back onto itself)
        idle_row = ssn.idle[node]
        fresh, picked = 0, []
        for slot, kind in picks:
            picked.append(slot)
            if kind == "fresh":
                fresh += 1
        slots = tuple(picked)
        req = ssn.node_request(task, fresh)  # the whole GPUs it takes from the node's pool, in the GPU column
        need = share.units(ssn.gpu_cap[node])
        idle, rel, pods, _ = rows  # changed in place (the before-image or the amounts taken are in the log)
        if not pipelined:  # picks on idle resources are groups or fresh GPUs, never releasing ones
            placed = _SharedPlacement(req, need, slots, ssn.gpus[task.index])
            self._log.append(
                _Op("shared_allocate", task.index, node, ssn.status[task.index], ssn.node[task.index], placed=placed)
            )
            idle_row -= req
            for s in slots:
                idle[s] -= need
                pods[s] += 1
            ssn.any_groups = True
            self._placed_shared(task, node, status, slots)
            return
        releasing_row = ssn.releasing[node]
        saved = _SavedGpus(idle_row.copy(), releasing_row.copy(), _copy(rows), ssn.gpus[task.index])
        self._log.append(_Op("shared", task.index, node, ssn.status[task.index], ssn.node[task.index], saved=saved))
        take = np.minimum(req, np.maximum(releasing_row, 0))
        take[GPU] = 0  # fresh GPUs come from idle; releasing ones are counted below
        releasing_row -= take
        idle_row -= req - take
        for s, kind in picks:
            if kind == "released":
                ssn.releasing[node, GPU] -= MILLI
                if pods[s] == 0:  # a whole-GPU pod's releasing GPU: all of it is free only later
                    rel[s] += idle[s]
                    idle[s] = 0
            ssn.any_groups = True
            take_g = min(need, max(rel[s], 0))
            rel[s] -= take_g
            idle[s] -= need - take_g
            pods[s] += 1
        self._placed_shared(task, node, status, slots)

    def _placed_shared(self, task: TaskInfo, node: int, status: TaskStatus, slots: tuple[int, ...]) -> None:
        ssn = self._ssn
        ssn.summarize_groups(node)
        ssn.gpus[task.index] = slots
        ssn.node_log.append(node)
        ssn._set(task, status, node)

    def _evict_shared(self, task: TaskInfo, node: int) -> None:
        ssn = self._ssn
        share = task.share
        assert share is not None
        rows = ssn.gpu_rows(node)
        saved = _SavedGpus(ssn.idle[node].copy(), ssn.releasing[node].copy(), _copy(rows), ssn.gpus[task.index])
        self._log.append(_Op("shared", task.index, node, ssn.status[task.index], node, saved=saved))
        ssn.releasing[node] += ssn.node_request(task)
        need = share.units(ssn.gpu_cap[node])
        _, rel, pods, gone = rows
        for s in ssn.gpus[task.index]:
            rel[s] += need
            gone[s] += 1
            if gone[s] == pods[s]:  # all its pods are going: one releasing GPU
                ssn.releasing[node, GPU] += MILLI
        ssn.summarize_groups(node)
        ssn.log_node(node, freed=True)
        ssn._set(task, TaskStatus.RELEASING, node)

    def convert_to_pipelined(self, task: TaskInfo) -> None:
        """An allocated task of a gang that has pipelined members waits with them (KAI allocate step 3)."""
        ssn = self._ssn
        self._log.append(_Op("status", task.index, ssn.node[task.index], ssn.status[task.index], ssn.node[task.index]))
        ssn.status[task.index] = TaskStatus.PIPELINED
        ssn.changed.add(task.index)
        ssn._evictable.pop(task.job, None)

    def rollback(self, to: int | None = None) -> None:
        """Undo this Statement's operations after *to* (a ``checkpoint``; default: all of them)."""
        self._ssn.undo_to(self._start if to is None else max(to, self._start))

    def commit(self) -> None:
        self._start = len(self._log)
        self._ssn.settled += 1

    @property
    def tasks_touched(self) -> list[int]:
        return [op.task for op in self._log[self._start :]]


def _undo(ssn: Session, to: int) -> None:
    """Undo the journal's operations after position *to*, newest first (``Session.undo_to``)."""
    log = ssn.journal
    while len(log) > to:
        op = log.pop()
        task = ssn.snap.tasks[op.task]
        if op.kind == "allocate":
            ssn.idle[op.node] += task.request
        elif op.kind == "pipeline":
            taken = op.from_releasing
            assert taken is not None
            ssn.releasing[op.node] += taken
            if taken is not task.request:  # part of it came from idle
                ssn.idle[op.node] += task.request - taken
        elif op.kind == "evict":
            if op.node >= 0:
                ssn.releasing[op.node] -= task.request
        elif op.kind == "shared_allocate":
            placed = op.placed
            assert placed is not None
            ssn.idle[op.node] += placed.req
            idle, _, pods, _ = ssn.gpu_slots[op.node]
            for s in placed.slots:
                idle[s] += placed.need
                pods[s] -= 1
            ssn.summarize_groups(op.node)
            ssn.gpus[op.task] = placed.gpus
        elif op.kind == "shared":
            saved = op.saved
            assert saved is not None
            ssn.idle[op.node] = saved.idle
            ssn.releasing[op.node] = saved.releasing
            ssn.gpu_slots[op.node] = saved.rows
            ssn.summarize_groups(op.node)
            ssn.gpus[op.task] = saved.gpus
        if op.kind != "status" and op.node >= 0:
            ssn.log_node(op.node, freed=True)  # (an eviction's undo frees nothing; counting it is only safe)
        ssn._set(task, op.prev_status, op.prev_node)


def _int64_rows(rows: list[list[int]]) -> np.ndarray:
    """Per-queue sums (Python ints, exact) as an int64 (Q, 3) array, saturated where a sum passes int64 (only
    absurd input gets there: every amount is at most 2^50, kai.api.quantity)."""
    bound = 2**63 - 1
    return np.array([[min(max(v, -bound), bound) for v in row] for row in rows], dtype=np.int64).reshape(-1, 3)


class QueueState:
    """Per-queue accounting in QRES base units (milli-GPU, millicores, bytes), propagated to ancestors.

    Kept as lists of three Python ints: a placement adds one task's request to
    each ancestor, and NumPy's per-call overhead on 3-element rows cost more
    than the arithmetic. The array properties are for readers outside the hot path.
    """

    __slots__ = ("alloc", "alloc_np", "ancestors", "fair_share", "req")

    def __init__(
        self,
        alloc: list[list[int]],
        alloc_np: list[list[int]],
        req: list[list[int]],
        fair_share: np.ndarray,
        ancestors: list[list[int]],
    ) -> None:
        self.alloc = alloc  # allocated, per queue
        self.alloc_np = alloc_np  # allocated to non-preemptible jobs
        self.req = req  # allocated + pending of ready jobs
        self.fair_share = fair_share  # (Q, 3) float64
        self.ancestors = ancestors  # queue itself first, then up to the root

    @property
    def allocated(self) -> np.ndarray:
        return _int64_rows(self.alloc)

    @property
    def allocated_non_preemptible(self) -> np.ndarray:
        return _int64_rows(self.alloc_np)

    @property
    def requested(self) -> np.ndarray:
        return _int64_rows(self.req)


class Session:
    """The working state of one cycle. Actions read and change it only through Statements."""

    def __init__(self, snap: Snapshot, conf: SchedulerConf, hooks: Hooks) -> None:
        self.snap = snap
        self.conf = conf
        self.hooks = hooks  # the enabled plugins (kai.scheduler.plugins.build_hooks), composed per extension point
        # the node chooser the cycle gives the Session (kai.scheduler.placement.Placer); it follows every change
        # made through Statements
        self.placer: NodeChooser = _NO_PLACER
        nodes = snap.nodes
        self.idle = nodes.allocatable - nodes.used
        self.releasing = nodes.releasing.copy()
        self.status: list[TaskStatus] = [t.status for t in snap.tasks]
        self.node: list[int] = [t.node for t in snap.tasks]
        gpus = snap.gpus  # per-GPU state of shared GPUs (gpusharing), copied like the node rows
        # per node, its GPU slots as Python lists (idle, rel, pods, gone): a placement changes a few slots
        # of one node, which NumPy's per-call overhead would make slow; ``gpu_arrays`` builds arrays on demand
        self.gpu_slots: list[tuple[list[int], list[int], list[int], list[int]]] = list(
            zip(gpus.idle.tolist(), gpus.rel.tolist(), gpus.pods.tolist(), gpus.gone.tolist(), strict=True)
        )
        self.any_groups = bool((gpus.pods > 0).any())  # set once a group exists; only guards a precheck
        self.gpus: list[tuple[int, ...]] = [t.gpu_slots for t in snap.tasks]  # slots a shared pod holds
        # per node, the most any of its GPU groups has free (units): now, and with releasing pods gone; -1 if it
        # has no group (or, over-committed input, none with anything free: readers compare with a need >= 0)
        self.group_max_now = [-1] * nodes.n
        self.group_max_later = [-1] * nodes.n
        for row in np.flatnonzero((gpus.pods > 0).any(axis=1)).tolist() if gpus.pods.size else ():
            self.summarize_groups(row)
        self.invalid = {t.index for t in snap.tasks if t.spec_error}  # bad GPU-sharing annotations: never placed
        self._node_requests: dict[tuple[bytes, int], np.ndarray] = {}  # shared pods' node-column requests
        self.gpu_cap: list[int] = snap.gpus.cap.tolist()  # units per GPU, per node
        self._sharing_nodes: list[bool] = snap.gpus.sharing_nodes.tolist()
        self._gpu_pack = hooks.gpu_order(self) == "pack"  # gpupack, else gpuspread (gpusharing.choose)
        self._shared_free: tuple[int, np.ndarray] | None = None  # (node_log length, free_gpu_milli's shared part)
        self._all_gpu_arrays: tuple[int, tuple[np.ndarray, ...]] | None = None  # (node_log length, gpu_arrays())
        self.job_allocated = [0] * len(snap.jobs)  # active-allocated task count per job
        self.labels = NodeLabels(nodes)
        self._static: dict[int, NodeVerdict] = {}
        self.failures: dict[int, JobFailure] = {}
        self.events: list[tuple[str, str, str, str]] = []  # (object, type, reason, message)
        self.eviction_reasons: dict[int, tuple[str, str]] = {}  # task -> (action, message)
        self.node_log: list[int] = []  # rows whose idle/releasing changed, in order (the Placer catches up on it)
        # positions in node_log of the changes that may have given a row resources (evictions, rollbacks); every
        # other change only takes, and the Placer relies on that (see ``log_node``)
        self.node_freed: list[int] = []
        self.changed: set[int] = set()  # tasks whose status or node changed (close_session reports only these)
        self.journal: list[_Op] = []  # the changes of the current job's attempt, for undo (Statement, begin_job)
        # bumped by every change that stays (a Statement's commit, a job dropped, an action's work undone), never by
        # a rollback of tentative changes: what is derived from the settled state (the victim solver's pending
        # jobs) is kept while it does not move
        self.settled = 0
        # bumped by every change of a queue's allocation, tentative ones and their undo included: a JobQueue keeps
        # the queue keys of a popped job's path while it has not moved (JobQueue._recheck)
        self.alloc_changes = 0
        # jobs left out of the rest of the cycle after their attempt raised: job -> (action, what went wrong)
        self.job_errors: dict[int, tuple[str, str]] = {}
        self._ready = [False] * len(snap.jobs)  # per job, job_ready (filled by _open_queues: one pass over the tasks)
        self.notes: dict[int, list[str]] = {}  # job -> why eviction actions could not make room for it
        self.cache: dict[str, Any] = {}  # values derived from the snapshot alone, computed once per session
        self._evictable: dict[int, list[int]] = {}  # job -> evictable_tasks, dropped when a task changes
        self._pending: dict[int, list[TaskInfo]] = {}  # job -> pending_tasks, dropped when a task changes
        self.evicted_count = 0  # pods evicted (incl. moved) and committed this cycle
        self.nominations: set[int] = set()  # tasks placed on room an eviction made for them
        self.pdb_used = [0] * len(snap.pdbs)  # disruptions committed this cycle, per PodDisruptionBudget
        self._pdbs_of: dict[int, list[int]] = {}
        if conf.respect_pdbs:
            for i, pdb in enumerate(snap.pdbs):
                for t in pdb.tasks:
                    self._pdbs_of.setdefault(t, []).append(i)
        self.stale_since: dict[int, float | None] = {}  # job -> new stale timestamp (None = clear it)
        # scale for binpack scores: one more than the largest allocatable per resource
        self.score_scale = (nodes.allocatable.max(axis=0) + 1) if nodes.n else np.ones(len(snap.resources))
        self.queues = self._open_queues()
        self.queue_limits = [q.limit.tolist() for q in snap.queues]  # QRES base units, -1 = none
        self.queue_quotas = [q.deserved.tolist() for q in snap.queues]
        # what must be bound with a pod before it is bound (a WaitForFirstConsumer claim's volume): task -> bindings,
        # kept by the plugin whose rule chose them (kai.scheduler.podrules), read by close_session
        self.volume_bindings: dict[int, tuple[Any, ...]] = {}
        # the same for DRA: task -> its ResourceClaims' allocations (kai.scheduler.podrules._dra)
        self.claim_allocations: dict[int, tuple[Any, ...]] = {}
        hooks.session_opened(self)  # plugins with no stateful work this Session step out of the stateful points

    # --- accounting ---------------------------------------------------------------------------

    def _open_queues(self) -> QueueState:
        """Per-queue allocated and requested sums, and each job's allocated count and readiness (``_ready``):
        one pass over the jobs, from the sums the snapshot made of their tasks (``JobInfo.sums``)."""
        snap = self.snap
        nq = len(snap.queues)
        ancestors = []
        for q in snap.queues:
            chain, cur = [], q.index
            while cur >= 0:
                chain.append(cur)
                cur = snap.queues[cur].parent
            ancestors.append(chain)
        # each queue's own jobs first (one row per job instead of one per ancestor), then added up the tree
        own = [[0, 0, 0] for _ in range(nq)]
        own_np = [[0, 0, 0] for _ in range(nq)]
        own_req = [[0, 0, 0] for _ in range(nq)]
        tasks, ready_of, allocated = snap.tasks, self._ready, self.job_allocated
        for job in snap.jobs:
            sums = job.sums if job.sums is not None else job_sums(job.tasks, tasks)
            # enough live, ungated pods at snapshot time to satisfy minMember (KAI's FilterUnready)
            ready = ready_of[job.index] = sums.alive >= job.min_available
            qi = job.queue
            if qi < 0:
                continue
            allocated[job.index] = sums.allocated
            ag, ac, am = sums.alloc  # this job's allocated and pending sums, live pods
            row = own[qi]
            row[0] += ag
            row[1] += ac
            row[2] += am
            pg, pc, pm = sums.pending if ready else (0, 0, 0)  # an unready job's pending pods are not requested
            row = own_req[qi]
            row[0] += ag + pg
            row[1] += ac + pc
            row[2] += am + pm
            if not job.preemptible:
                row = own_np[qi]
                row[0] += ag
                row[1] += ac
                row[2] += am
        alloc = [[0, 0, 0] for _ in range(nq)]
        alloc_np = [[0, 0, 0] for _ in range(nq)]
        req = [[0, 0, 0] for _ in range(nq)]
        for qi in range(nq):
            for sums_of, totals in ((own, alloc), (own_np, alloc_np), (own_req, req)):
                g, c, m = sums_of[qi]
                if g or c or m:
                    for a in ancestors[qi]:
                        row = totals[a]
                        row[0] += g
                        row[1] += c
                        row[2] += m
        fair = self.hooks.fair_share(self, np.array(req, dtype=np.float64).reshape(-1, 3))  # float: sums pass int64
        return QueueState(alloc, alloc_np, req, fair, ancestors)

    def _set(self, task: TaskInfo, status: TaskStatus, node: int) -> None:
        """Change one task's status and keep job and queue accounting in step."""
        old = self.status[task.index]
        old_node = self.node[task.index]
        was, now = old in ACTIVE_ALLOCATED, status in ACTIVE_ALLOCATED
        self.status[task.index] = status
        self.node[task.index] = node
        self.changed.add(task.index)
        self._evictable.pop(task.job, None)
        self._pending.pop(task.job, None)
        notify = self.hooks.on_task_change
        if notify is not None:  # plugins with per-node state (NodeRule) follow every change, undo included
            notify(self, task, old, old_node)
        if was == now:
            return
        job = self.snap.jobs[task.job]
        self.job_allocated[job.index] += 1 if now else -1
        if job.queue >= 0:
            self.alloc_changes += 1
            g, c, m = task.qreq
            if not now:
                g, c, m = -g, -c, -m
            qs = self.queues
            for a in qs.ancestors[job.queue]:
                row = qs.alloc[a]
                row[0] += g
                row[1] += c
                row[2] += m
                if not job.preemptible:
                    row = qs.alloc_np[a]
                    row[0] += g
                    row[1] += c
                    row[2] += m

    def log_node(self, node: int, *, freed: bool) -> None:
        """Record a change of *node*'s resources. *freed*: the change may have given it resources (free now or
        later); a change that only takes (placing, pipelining) may say False, and then a pod that could not go
        there before the change still cannot, which spares the Placer rescoring such rows."""
        self.node_log.append(node)
        if freed:
            self.node_freed.append(len(self.node_log) - 1)

    # --- questions actions ask --------------------------------------------------------------------

    def statement(self) -> Statement:
        return Statement(self)

    def begin_job(self) -> int:
        """A job's attempt starts (no Statement is open): the changes before it will never be undone, so the
        journal is emptied (a cycle that commits 40,000 placements keeps no log of them); returns the mark
        ``drop_job`` undoes to if the attempt raises."""
        self.journal.clear()
        return 0

    def dissolve(self) -> None:
        """Drop all this Session holds, once its cycle is closed and nothing will read it again. Its Placer and
        plugins point back at it, so without this it would wait, with its journal and per-task lists, for the
        cyclic collector to find it (``run_cycle`` calls this; ``run_session`` hands the Session on instead)."""
        self.__dict__.clear()

    def undo_to(self, mark: int) -> None:
        """Undo every change after journal position *mark* (``len(journal)`` taken earlier), newest first."""
        _undo(self, mark)

    def drop_job(self, job: JobInfo, action: str, error: Exception, mark: int) -> None:
        """Leave *job* out of the rest of the cycle: its attempt in *action* raised *error*.

        Everything the attempt changed after journal position *mark* is undone, committed or not, so the
        cycle goes on for every other job as if this one had not been tried. One job's bad input or a bug
        its shape triggers costs only that job (reported as a Warning event and in
        ``CycleResult.job_errors``), never the cycle."""
        self.undo_to(mark)
        self.settled += 1
        self.failures.pop(job.index, None)
        self.notes.pop(job.index, None)
        self.job_errors[job.index] = (action, f"{type(error).__name__}: {error}")

    def static_fit(self, task: TaskInfo) -> NodeVerdict:
        """The nodes tasks of *task*'s scheduling signature may ever use (the predicate plugins, ANDed), cached
        per signature for the Session (a signature includes any GPU share)."""
        sf = self._static.get(task.signature)
        if sf is None:
            sf = self._static[task.signature] = self.hooks.predicate(
                self, self.snap.signature_pods[task.signature], task.share
            )
        return sf

    def job_ready(self, job: JobInfo) -> bool:
        """Enough live, ungated pods existed at snapshot time to satisfy minMember (KAI's FilterUnready)."""
        return self._ready[job.index]

    def evictable_tasks(self, job: JobInfo) -> list[int]:
        """Tasks that were placed before this cycle and still are: only those can be victims. A task
        placed earlier in this same cycle was never bound, so "evicting" it would free nothing real.
        Cached per job (every victim search asks for every job); ``_set`` drops a job's entry. The list is
        shared: copy it before changing it."""
        got = self._evictable.get(job.index)
        if got is None:
            tasks = self.snap.tasks
            status = self.status
            got = self._evictable[job.index] = [
                t for t in job.tasks if status[t] in ACTIVE_ALLOCATED and tasks[t].status == status[t]
            ]
        return got

    def waiting_jobs(self) -> list[JobInfo]:
        """The jobs with a pending pod in the snapshot, in job index order: only they can have one now, since a
        cycle moves a pod out of PENDING and back only by undoing that. From the snapshot's sums, so made once
        per Session; allocate and the three eviction actions each look for jobs with pending pods, and walking
        every job's pods was most of that (most of a big cluster's jobs run whole)."""
        got = self.cache.get("waiting_jobs")
        if got is None:
            got = self.cache["waiting_jobs"] = [j for j in self.snap.jobs if j.sums is None or j.sums.waiting]
        return got

    def ready_jobs(self) -> list[JobInfo]:
        """The waiting jobs an action may try now: in a leaf queue that exists and admits them (a job without one
        has ``queue`` -1 and its ``unschedulable_reason``), not dropped this cycle, with a pending pod that may be
        placed, and with enough pods for its gang. Allocate and the eviction actions start from this one set; it is
        walked again at each call, since an earlier action's placements and dropped jobs change it."""
        errors = self.job_errors
        return [
            job
            for job in self.waiting_jobs()
            if job.queue >= 0
            and not job.unschedulable_reason
            and job.index not in errors
            and self.pending_tasks(job)
            and self.job_ready(job)
        ]

    def pending_tasks(self, job: JobInfo) -> list[TaskInfo]:
        """Pending tasks that may be placed (a pod with invalid GPU-sharing annotations never is).

        Cached per job: allocate asks several times per job (candidate, queue order, tasks to allocate,
        anything left after placing) and 20,000 single-pod jobs made the rebuilt lists a measurable part
        of the cycle. ``_set``, the only place a task leaves or enters PENDING, drops the job's entry.
        The list is shared: copy it before changing it."""
        got = self._pending.get(job.index)
        if got is None:
            tasks, status, invalid = self.snap.tasks, self.status, self.invalid
            if invalid:
                got = [tasks[t] for t in job.tasks if status[t] == _PENDING and t not in invalid]
            else:
                got = [tasks[t] for t in job.tasks if status[t] == _PENDING]
            self._pending[job.index] = got
        return got

    def tasks_to_allocate(self, job: JobInfo, pending: list[TaskInfo] | None = None) -> list[TaskInfo]:
        """Gang phase: exactly minAvailable - allocated tasks; elastic phase: one task at a time. *pending*:
        ``pending_tasks(job)`` if the caller has it at hand."""
        if pending is None:
            pending = self.pending_tasks(job)
        missing = job.min_available - self.job_allocated[job.index]
        return pending[: max(missing, 1)]

    def fail(self, job: JobInfo, reason: str, message: str) -> None:
        self.failures[job.index] = JobFailure(reason, message)

    def note(self, job: JobInfo, action: str, message: str) -> None:
        """Add an eviction action's reason to the job's pending explanation."""
        self.notes.setdefault(job.index, []).append(f"{action}: {message}")

    def disruption_guard(self, evicted: list[int]) -> str | None:
        """Cluster-wide limits on evictions (kai, beyond KAI): PodDisruptionBudgets and the per-cycle cap.
        None if *evicted* may go."""
        cap = self.conf.max_evictions_per_cycle
        if cap >= 0 and self.evicted_count + len(evicted) > cap:
            return f"the cap of {cap} evictions per cycle would be exceeded ({self.evicted_count} already)"
        if self._pdbs_of:
            hits: dict[int, int] = {}
            for t in evicted:
                for i in self._pdbs_of.get(t, ()):
                    hits[i] = hits.get(i, 0) + 1
            for i, k in sorted(hits.items()):
                pdb = self.snap.pdbs[i]
                left = pdb.allowed - self.pdb_used[i]
                if k > left:
                    return (
                        f"PodDisruptionBudget {pdb.ref} allows {max(left, 0)} more disruption"
                        f"{'' if left == 1 else 's'}, the victims include {k} of its pods"
                    )
        return None

    def disruption_blocked(self, tasks: tuple[int, ...]) -> bool:
        """Evicting *tasks* together would exceed some PodDisruptionBudget's allowance left this cycle."""
        if not self._pdbs_of:
            return False
        hits: dict[int, int] = {}
        for t in tasks:
            for i in self._pdbs_of.get(t, ()):
                hits[i] = hits.get(i, 0) + 1
        pdbs = self.snap.pdbs
        return any(k > pdbs[i].allowed - self.pdb_used[i] for i, k in hits.items())

    def record_evictions(self, tasks: list[int], action: str, message_of: Callable[[int], str]) -> None:
        for t in tasks:
            self.eviction_reasons[t] = (action, message_of(t))
            for i in self._pdbs_of.get(t, ()):
                self.pdb_used[i] += 1
        self.evicted_count += len(tasks)

    def event(self, obj: str, type_: str, reason: str, message: str) -> None:
        self.events.append((obj, type_, reason, message))

    def gpu_request(self, task: TaskInfo) -> float:
        return float(task.request[GPU]) / MILLI

    # --- shared GPUs ------------------------------------------------------------------------------------

    def node_request(self, task: TaskInfo, fresh_gpus: int = 0) -> np.ndarray:
        """What *task* takes from its node's resource columns: a shared pod's GPU column is its GPU
        groups' business, except for the *fresh_gpus* whole GPUs it takes out of the node's pool."""
        if task.share is None:
            return task.request
        # keyed by the request, not the task: the array depends on nothing else, and a cycle placing 20,000
        # fractions of a few sizes then builds a few arrays instead of one per pod
        key = (task.request.tobytes(), fresh_gpus)
        req = self._node_requests.get(key)
        if req is None:
            req = self._node_requests[key] = task.request.copy()
            req[GPU] = fresh_gpus * MILLI
            req.flags.writeable = False
        return req

    def gpu_rows(self, node: int) -> tuple[list[int], list[int], list[int], list[int]]:
        """The node's GPU slots (idle, rel, pods, gone): the live lists; change them only in a Statement."""
        return self.gpu_slots[node]

    def gpu_arrays(self, rows: list[int] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(idle, rel, pods, gone) as (nodes, slots) int64 arrays, for all nodes or the given *rows*.

        All nodes' arrays are read-only and kept until the next change (``node_log`` grows with every change):
        each failing fractional job's explanation asks for them, and the failures come in runs once GPUs are out.
        """
        if rows is None and self._all_gpu_arrays is not None and self._all_gpu_arrays[0] == len(self.node_log):
            return self._all_gpu_arrays[1]
        picked = self.gpu_slots if rows is None else [self.gpu_slots[r] for r in rows]
        n, width = len(picked), self.snap.gpus.pods.shape[1]
        arrays = tuple(  # fromiter over the chained rows: about half the time of np.array on a list of lists
            np.fromiter(chain.from_iterable([r[k] for r in picked]), dtype=np.int64, count=n * width).reshape(n, width)
            for k in range(4)
        )
        if rows is None:
            for a in arrays:
                a.flags.writeable = False
            self._all_gpu_arrays = (len(self.node_log), arrays)
        return arrays  # type: ignore[return-value]

    def summarize_groups(self, node: int) -> None:
        """Refresh ``group_max_now`` / ``group_max_later`` after the node's GPU slots changed (the Placer's
        one-device fit reads them). One pass, no lists: every shared placement and rollback calls it."""
        idle, rel, pods, gone = self.gpu_slots[node]
        max_now = -1
        if any(rel):
            max_later = -1
            for i, r, p, g in zip(idle, rel, pods, gone):
                if p > g:
                    if i > max_now:
                        max_now = i
                    if i + r > max_later:
                        max_later = i + r
        else:  # nothing releasing (the usual case): the same maximum
            for i, p, g in zip(idle, pods, gone):
                if p > g and i > max_now:
                    max_now = i
            max_later = max_now
        self.group_max_now[node] = max_now
        self.group_max_later[node] = max_later

    def group_free(self, node: int) -> tuple[list[int], list[int]]:
        """What each of the node's GPU groups has free (units): now, and with releasing pods gone. Built on
        demand: only multi-device fractions ask, and a one-device placement needs just the maxima."""
        idle, rel, pods, gone = self.gpu_slots[node]
        now = [i for i, p, g in zip(idle, pods, gone) if p > g]
        return now, [i + r for i, r, p, g in zip(idle, rel, pods, gone) if p > g]

    def pick_gpus(
        self,
        task: TaskInfo,
        node: int,
        *,
        allow_releasing: bool,
        gpus: tuple[int, ...] | None = None,
        rows: tuple[list[int], list[int], list[int], list[int]] | None = None,
    ) -> list[Pick] | None:
        """The GPUs of *node* a shared pod would take (``gpusharing.choose``), or, with *gpus*, whether
        exactly those slots can take it; None if they cannot. *rows*: ``gpu_rows(node)`` if at hand."""
        share = task.share
        assert share is not None
        if not self._sharing_nodes[node]:
            return None
        cap = self.gpu_cap[node]
        idle, rel, pods, gone = rows if rows is not None else self.gpu_slots[node]
        idle_gpu = self.idle.item(node, GPU)  # item(): a Python int, no NumPy scalar
        whole_idle = max(idle_gpu, 0) // MILLI
        # releasing first pays what an over-committed node's idle owes (gpusharing.fit_one)
        whole_rel = max(self.releasing.item(node, GPU) + min(idle_gpu, 0), 0) // MILLI if allow_releasing else 0
        if gpus is None:
            return choose(share, cap, idle, rel, pods, gone, whole_idle, whole_rel, self._gpu_pack, allow_releasing)
        return check_gpus(share, cap, idle, rel, pods, gone, whole_idle, whole_rel, allow_releasing, gpus)

    def fit_on(self, task: TaskInfo, node: int, gpus: tuple[int, ...] | None = None) -> int:
        """NOW if *task* fits on *node*'s idle resources, LATER if only with what is being released,
        0 if not at all. The task's stateful rules (inter-pod affinity, spread, ports, volumes) count: a row
        they refuse is 0, one they allow only once the pods being released are gone is LATER. Static
        predicates are the caller's business."""
        fit = self._resource_fit(task, node, gpus)
        if fit and self.hooks.has_node_filter:
            rules = self.hooks.node_rules(self, task)
            if rules:
                if not rules.allows(node):
                    return 0
                if fit == NOW and not rules.allows_now(node):
                    return LATER
        return fit

    def _resource_fit(self, task: TaskInfo, node: int, gpus: tuple[int, ...] | None) -> int:
        req = self.node_request(task)
        cols = np.flatnonzero(req)
        idle = self.idle[node, cols]
        now = bool((idle >= req[cols]).all())
        later = now or bool((idle + self.releasing[node, cols] >= req[cols]).all())
        if task.share is None:
            return NOW if now else LATER if later else 0
        if now and self.pick_gpus(task, node, allow_releasing=False, gpus=gpus) is not None:
            return NOW
        if later and self.pick_gpus(task, node, allow_releasing=True, gpus=gpus) is not None:
            return LATER
        return 0

    def free_gpu_milli(self) -> np.ndarray:
        """(n_nodes,) milli-GPU idle or releasing per node: whole GPUs plus what GPU groups have left."""
        g = self.snap.gpus
        whole = np.maximum(self.idle[:, GPU] + self.releasing[:, GPU], 0)
        if not self.any_groups:
            return whole
        if self._shared_free is None or self._shared_free[0] != len(self.node_log):  # any change appends there
            idle, rel, pods, _ = self.gpu_arrays()
            self._shared_free = (len(self.node_log), shared_free_milli(g.cap, idle, rel, pods))
        return whole + self._shared_free[1]

    def gpu_group_names(self, task: TaskInfo) -> tuple[str, ...]:
        """The names of the GPU groups a placed shared pod holds (its slots' names, or kai's for new ones)."""
        node = self.node[task.index]
        if task.share is None or node < 0:
            return ()
        names = self.snap.gpus.names[node]
        node_name = self.snap.nodes.names[node]
        slots = self.gpus[task.index]
        if len(slots) == 1:  # one device (most fractions): no list to build
            return (names[slots[0]] or default_group_name(node_name, slots[0]),)
        return tuple([names[s] or default_group_name(node_name, s) for s in slots])
