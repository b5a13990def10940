"""proportion: fair share, queue order, queue capacity and the reclaim rules (KAI's proportion plugin).

The algorithms live beside the engine's other rules, one module each, as KAI splits its plugin:
``kai.scheduler.fairshare`` (resource division), ``kai.scheduler.ordering`` (queue order),
``kai.scheduler.capacity`` (limits, non-preemptible quota) and ``kai.scheduler.reclaimable`` (reclaim). This
module is the plugin: its arguments, and which extension point each rule answers.

Arguments: ``kValue`` (>= 0, default 1: how much a queue's weight counts against its usage in time-based
fair share; also the SchedulingShard's ``spec.kValue``) and the reclaimer saturation multiplier (>= 1,
default 1), under KAI's spelling ``relcaimerSaturationMultiplier`` and the corrected ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from kai.scheduler.capacity import check_capacity, job_request
from kai.scheduler.fairshare import QueueShareInput, compute_fair_share
from kai.scheduler.framework import Arg, Plugin, QueueOrder
from kai.scheduler.model import MILLI, JobInfo
from kai.scheduler.ordering import ProportionQueueOrder
from kai.scheduler.plugins._args import number
from kai.scheduler.reclaimable import ReclaimRules
from kai.scheduler.session import Session

_SATURATION_KEYS = ("relcaimerSaturationMultiplier", "reclaimerSaturationMultiplier", "reclaimerUtilizationMultiplier")


def reclaim_rules(ssn: Session) -> ReclaimRules | None:
    """This Session's reclaim rules (the proportion plugin's), or None when the plugin is disabled."""
    plugin = ssn.hooks.plugins.get("proportion")
    return plugin._rules_of(ssn) if isinstance(plugin, Proportion) else None


class Proportion(Plugin):
    name: ClassVar[str] = "proportion"
    ARGS: ClassVar[Mapping[str, Arg]] = {"kValue": number(0.0), **{k: number(1.0) for k in _SATURATION_KEYS}}
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"kValue": 1.0}

    def __init__(self, args: Mapping[str, Any] | None = None, *, where: str = "") -> None:
        super().__init__(args, where=where)
        given = [self.args[k] for k in _SATURATION_KEYS if k in self.args]
        self.saturation_multiplier = given[-1] if given else 1.0
        self._rules: ReclaimRules | None = None
        self._order: ProportionQueueOrder | None = None

    # --- fair share and queue order -------------------------------------------------------------------

    def fair_share(self, ssn: Session, requested: np.ndarray) -> np.ndarray:
        """KAI's resource division over the queue tree (kai.scheduler.fairshare), in queue base units."""
        snap = ssn.snap
        if not snap.queues:
            return np.zeros((0, 3))
        # fairshare works in GPUs (so over-quota GPU shares floor to whole GPUs, as KAI's), millicores, bytes
        to_api = np.array([1.0 / MILLI, 1.0, 1.0])
        age = {q.index: r for r, q in enumerate(sorted(snap.queues, key=lambda q: (q.creation, q.uid)))}
        usage = snap.queue_usage  # time-based fair share: normalized historical usage per queue
        inputs = []
        for q in snap.queues:
            inputs.append(
                QueueShareInput(
                    name=q.name,
                    parent=snap.queues[q.parent].name if q.parent >= 0 else None,
                    priority=q.priority,
                    age_rank=age[q.index],
                    deserved=np.where(q.deserved == -1, -1.0, q.deserved * to_api),
                    limit=np.where(q.limit == -1, -1.0, q.limit * to_api),
                    over_quota_weight=q.over_quota_weight.copy(),
                    request=requested[q.index] * to_api if q.is_leaf else np.zeros(3),
                    usage=None if usage is None or q.name not in usage else np.array(usage[q.name], dtype=float),
                )
            )
        shares = compute_fair_share(inputs, snap.total * to_api, k_value=self.args["kValue"])
        out = np.zeros((len(snap.queues), 3))
        for q in snap.queues:
            out[q.index] = shares[q.name] / to_api
        return out

    def queue_order(self, ssn: Session) -> QueueOrder:
        """One order per Session (the plugin is made anew for each): what it precomputes (fair, deserved and
        allocatable shares) is fixed for the Session, and the victim solver asks for a JobQueue per simulation."""
        if self._order is None:
            self._order = ProportionQueueOrder(ssn)
        return self._order

    # --- capacity -------------------------------------------------------------------------------------

    # the capacity rules themselves, no wrapper frame: allocate asks for every job it pops
    job_over_capacity = staticmethod(check_capacity)

    # --- reclaim --------------------------------------------------------------------------------------

    def _rules_of(self, ssn: Session) -> ReclaimRules:
        """The reclaim rules of this Session (they read fair shares, fixed once the Session is open)."""
        if self._rules is None:
            self._rules = ReclaimRules(ssn, self.saturation_multiplier)
        return self._rules

    def can_reclaim(self, ssn: Session, job: JobInfo, req: tuple[int, int, int]) -> str | None:
        return self._rules_of(ssn).cannot_reclaim(job, req)

    def reclaim_victim_filter(
        self, ssn: Session, reclaimer: JobInfo, req: tuple[int, int, int], victim: JobInfo
    ) -> bool:
        return self._rules_of(ssn).victim_allowed(reclaimer, req, victim)

    def reclaim_scenario_validator(self, ssn: Session, scenario: Any) -> str | None:  # an actions.solver.Scenario
        """KAI's reclaimable strategies per victim (what each victim queue really loses: a pod only moved by a
        consolidating reclaim does not count, with allow-consolidating-reclaim), then saturation."""
        tasks = ssn.snap.tasks
        moved = {t for t, _ in scenario.moved}
        victims = []
        for unit in scenario.evicted:
            lost = [0, 0, 0]
            for t in unit.tasks:
                if t in moved and ssn.conf.allow_consolidating_reclaim:
                    continue
                if t in moved or t in scenario.evicted_tasks:
                    g, c, m = tasks[t].qreq
                    lost[0] += g
                    lost[1] += c
                    lost[2] += m
            victims.append((ssn.snap.jobs[unit.job].queue, (lost[0], lost[1], lost[2])))
        return self._rules_of(ssn).reject(scenario.job, job_request(scenario.tasks), victims, scenario.before_alloc)
