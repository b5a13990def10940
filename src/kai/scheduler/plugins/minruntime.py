"""minruntime: a job that started recently keeps its pods (KAI's minruntime plugin, kai-behaviour §4.5).

A protected job keeps its minAvailable core; an elastic one may still lose the pods above its minimum (the
victim order offers surplus pods one by one; only the core is refused here). The protection window comes
from the first queue that sets it, walking up the tree:

* preempt: from the victim's own queue, ``preemptMinRuntime``;
* reclaim, method ``queue``: from the victim's queue, ``reclaimMinRuntime``;
* reclaim, method ``lca`` (default): from the victim-side child of the lowest common ancestor of reclaimer and
  victim, so a department-level setting governs reclaims between departments;
* else the plugin's default (``defaultPreemptMinRuntime``, ``defaultReclaimMinRuntime``; 0: no protection;
  the SchedulingShard's ``spec.minRuntime`` sets these too).

Consolidation only moves pods, so it is never refused here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from kai.scheduler.framework import Arg, Plugin
from kai.scheduler.model import JobInfo, QueueInfo
from kai.scheduler.plugins._args import duration, one_of
from kai.scheduler.reclaimable import leveled_queues
from kai.scheduler.session import Session


def _walk(ssn: Session, start: int, attr: str, default: float) -> float:
    queues = ssn.snap.queues
    cur = start
    while cur >= 0:
        value = getattr(queues[cur], attr)
        if value is not None:
            return value
        cur = queues[cur].parent
    return default


def protected(ssn: Session, victim: JobInfo, min_runtime: float) -> bool:
    """Still inside its min runtime: started less than *min_runtime* seconds ago."""
    if min_runtime <= 0 or victim.last_start is None:
        return False
    return victim.last_start + min_runtime > ssn.snap.now


def preempt_min_runtime(ssn: Session, victim: JobInfo) -> float:
    """The preempt min runtime that protects *victim* in this Session (0 when the plugin is disabled)."""
    plugin = ssn.hooks.plugins.get("minruntime")
    return plugin._preempt_min_runtime(ssn, victim) if isinstance(plugin, MinRuntime) else 0.0


def reclaim_min_runtime(ssn: Session, reclaimer: JobInfo, victim: JobInfo) -> float:
    """The reclaim min runtime that protects *victim* from *reclaimer* (0 when the plugin is disabled)."""
    plugin = ssn.hooks.plugins.get("minruntime")
    return plugin._reclaim_min_runtime(ssn, reclaimer, victim) if isinstance(plugin, MinRuntime) else 0.0


def protection_windows(plugins: Mapping[str, Any], queues: Iterable[QueueInfo]) -> set[float]:
    """Every min runtime that may protect a job, given the enabled *plugins* by name (none without minruntime)
    and the *queues*: what the cycle memo checks the clock against (kai.scheduler.memo.clock_neutral)."""
    plugin = plugins.get("minruntime")
    if not isinstance(plugin, MinRuntime):
        return set()
    out = {plugin.args["defaultPreemptMinRuntime"], plugin.args["defaultReclaimMinRuntime"]}
    for q in queues:
        out.update(v for v in (q.preempt_min_runtime, q.reclaim_min_runtime) if v is not None)
    return out


class MinRuntime(Plugin):
    name: ClassVar[str] = "minruntime"
    ARGS: ClassVar[Mapping[str, Arg]] = {
        "defaultPreemptMinRuntime": duration,
        "defaultReclaimMinRuntime": duration,
        "reclaimResolveMethod": one_of("lca", "queue"),
    }
    DEFAULTS: ClassVar[Mapping[str, Any]] = {
        "defaultPreemptMinRuntime": 0.0,
        "defaultReclaimMinRuntime": 0.0,
        "reclaimResolveMethod": "lca",
    }

    def _preempt_min_runtime(self, ssn: Session, victim: JobInfo) -> float:
        return _walk(ssn, victim.queue, "preempt_min_runtime", self.args["defaultPreemptMinRuntime"])

    def _reclaim_min_runtime(self, ssn: Session, reclaimer: JobInfo, victim: JobInfo) -> float:
        start = victim.queue
        if self.args["reclaimResolveMethod"] == "lca" and reclaimer.queue != victim.queue:
            start = leveled_queues(ssn, reclaimer.queue, victim.queue)[1]
        return _walk(ssn, start, "reclaim_min_runtime", self.args["defaultReclaimMinRuntime"])

    def victim_core_allowed(self, ssn: Session, action: str, preemptor: JobInfo, victim: JobInfo) -> bool:
        if action == "preempt":
            return not protected(ssn, victim, self._preempt_min_runtime(ssn, victim))
        if action == "reclaim":
            return not protected(ssn, victim, self._reclaim_min_runtime(ssn, preemptor, victim))
        return True
