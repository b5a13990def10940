"""When every victim is re-allocated before the preemptor: a simulation whose failure is known in advance.

KAI's victim simulation re-allocates the victim jobs that its queue order puts before the preemptor first
(``Solver._victims_before``). In a saturated cluster that is the usual case for reclaim: queues hover at
their fair share, so evicting a few pods makes the victim's queue the more deserving one, and every victim
takes its room back. When each of them can only go back to the node it came from, the cluster after those
re-allocations is the cluster before the evictions, node for node, and the preemptor did not fit there.

The saturated time simulation (benchmarks/bench_timesim.py) ran about 50,000 such simulations in its first two
days, each one placing every victim back (a Placer query and a pipeline per pod) and undoing it, to learn that
the preemptor does not fit. ``VictimsFirst`` proves it from per-node arithmetic instead, and the solver skips
the placing. The simulation is still counted (budget, tries, the rejection reason), so every decision is the
one the full simulation makes; the property test ``test_a_known_failure_decides_as_the_full_simulation`` holds
them equal.

The proof, for a Session without GPU groups or stateful node rules (``of`` says when it applies), and a
simple job whose first pod fits on no node before the evictions ("the state S0"):

* every victim job is re-allocated before the preemptor (the caller checks ``first``);
* a victim pod fits, in S0, on no node but its own, and, with the victims evicted, on no other node that
  lost a victim: nodes that lost none are as in S0, and re-allocating only takes room, so the Placer can
  only put it back home;
* home has room for it at its turn: it still passes home's static predicates (checked: a node cordoned,
  relabelled or tainted since the pod started would leave it evicted, and the preemptor could fit in what it
  held), and S0's idle plus releasing on the node is not negative (and no node's releasing is, so "fits now"
  implies "fits later", and a node_choice plugin picks among nodes that fit); then every pod goes back home,
  taking from releasing what its eviction added, and the node rows are S0's;
* its queue takes it back: ``job_over_capacity`` said None for its unit in S0, where the queues held at
  least as much as at any point of the re-allocation (the check is monotone in the allocation: a job over
  capacity stays over with more allocated; proportion's limits and quotas are).
"""

from __future__ import annotations

import numpy as np

from kai.scheduler.actions.gang import is_simple
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.session import Session
from kai.scheduler.victims import VictimUnit


class VictimsFirst:
    """Whether re-allocating a set of victims restores S0, the state the job's first pod fits nowhere in.

    One lives for one victim search (``Solver.solve``): S0 is the Session's state at its start, and it holds
    until a scenario is committed, which ends the search."""

    def __init__(self, ssn: Session, free: np.ndarray) -> None:
        self._ssn = ssn
        self._free = free  # (n, R) idle + releasing in S0
        self._home_ok = (free >= 0).all(axis=1).tolist()  # S0 room not negative in any column
        self._fits: dict[tuple[int, bytes], tuple[int, np.ndarray]] = {}  # victim shape -> nodes it fits in S0
        self._back: dict[int, bool] = {}  # a unit's first task -> its queue takes it back in S0

    @classmethod
    def of(cls, ssn: Session, job: JobInfo, tasks: list[TaskInfo], free: np.ndarray) -> VictimsFirst | None:
        """The check for a search of *job* placing *tasks* from S0 (*free*: idle + releasing per node), or
        None where the proof does not hold: GPU groups, stateful rules, a job allocate places by other means
        (subgroups, topology), a node releasing less than nothing, or a first pod that fits somewhere now. None
        too with a node_choice plugin (kai's GPU policies): the random one draws from its generator at every
        placement, so placements skipped would change the draws after them."""
        hooks = ssn.hooks
        if ssn.any_groups or hooks.has_node_filter or hooks.has_node_choice or not is_simple(job):
            return None
        if (ssn.releasing < 0).any() or ssn.placer.best_node(tasks[0]) is not None:
            return None
        return cls(ssn, free)

    def note(self, units: list[VictimUnit]) -> None:
        """Before the evictions (the state is S0): whether each unit's queue takes it back."""
        ssn = self._ssn
        snap = ssn.snap
        over = ssn.hooks.job_over_capacity
        back = self._back
        for u in units:
            if u.tasks[0] not in back:
                back[u.tasks[0]] = over(ssn, snap.jobs[u.job], [snap.tasks[t] for t in u.tasks]) is None

    def restores(self, units: list[VictimUnit], home: dict[int, tuple[int, tuple[int, ...]]]) -> bool:
        """With *units* evicted (their pods' *home* nodes), whether re-allocating them all gives back S0."""
        ssn = self._ssn
        tasks = ssn.snap.tasks
        if not all(self._back.get(u.tasks[0], False) for u in units):
            return False
        lost = sorted({node for node, _ in home.values()})  # the nodes that lost a victim
        if lost[0] < 0 or not all(self._home_ok[n] for n in lost):
            return False
        rows = np.array(lost, dtype=np.intp)
        free_now = ssn.idle[rows] + ssn.releasing[rows]  # the lost nodes with every victim evicted
        others: dict[tuple[int, bytes], list[int]] = {}  # victim shape -> the lost nodes it fits now
        for t, (node, _) in home.items():
            task = tasks[t]
            if task.share is not None:
                return False
            key = (task.signature, task.request.tobytes())
            fits = self._fits.get(key)
            if fits is None:
                fits = self._fits[key] = self._fits_in_s0(task)
            if fits[0] > fits[1].item(node):  # some other node has room for it already
                return False
            fit = others.get(key)
            if fit is None:
                cols = np.flatnonzero(task.request)
                ok = ssn.static_fit(task).mask[rows] & (free_now[:, cols] >= task.request[cols]).all(axis=1)
                fit = others[key] = rows[ok].tolist()
            if fit != [node]:  # another lost node would take it, or its own would not (it would stay evicted)
                return False
        return True

    def _fits_in_s0(self, task: TaskInfo) -> tuple[int, np.ndarray]:
        """How many nodes *task*'s shape fits in S0, and which (static predicates and idle + releasing)."""
        cols = np.flatnonzero(task.request)
        fits = self._ssn.static_fit(task).mask & (self._free[:, cols] >= task.request[cols]).all(axis=1)
        return int(fits.sum()), fits
