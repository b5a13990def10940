"""The enabled plugins of one Session, composed per extension point with the point's combine rule.

Rules: composition happens once, when the Session opens: each point becomes one attribute or method whose
cost on the hot path is that of the plugins' own methods (a single implementation is called directly; no
dispatch loop for it). Plugins are consulted in priority order (higher first, KAI's default priorities),
which is also the order of TIERS keys. ``Contract`` in ``_plugin.py`` documents each point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from kai.scheduler.framework._plugin import Choice, NodeRule, NodeVerdict, Plugin, QueueOrder, ScoreTerms, implements
from kai.scheduler.framework._rules import NO_RULES, NodeRules

NO_TERMS = ScoreTerms()


def _methods(plugins: Sequence[Plugin], point: str) -> list[Callable[..., Any]]:
    return [getattr(p, point) for p in plugins if implements(p, point)]


class Hooks:
    """The Session's plugins (``plugins``: name -> instance, in priority order) and the composed points."""

    def __init__(self, plugins: Sequence[Plugin]) -> None:
        self.plugins: dict[str, Plugin] = {p.name: p for p in plugins}
        ps = list(plugins)
        self._queue_order = _methods(ps, "queue_order")
        self._job_order = _methods(ps, "job_order")
        self._subgroup_order = _methods(ps, "subgroup_order")
        self._fair_share = _methods(ps, "fair_share")
        self._capacity = _methods(ps, "job_over_capacity")
        self._predicate = _methods(ps, "predicate")
        self._node_filter = _methods(ps, "node_filter")
        self._terms = _methods(ps, "node_order_terms")
        self._node_order = _methods(ps, "node_order")
        self._node_choice = _methods(ps, "node_choice")
        self._gpu_order = _methods(ps, "gpu_order")
        self._can_reclaim = _methods(ps, "can_reclaim")
        self._reclaim_filter = _methods(ps, "reclaim_victim_filter")
        self._reclaim_validator = _methods(ps, "reclaim_scenario_validator")
        self._preempt_filter = _methods(ps, "preempt_victim_filter")
        self._preempt_validator = _methods(ps, "preempt_scenario_validator")
        self._core_allowed = _methods(ps, "victim_core_allowed")
        self._subset_nodes = _methods(ps, "subset_nodes")
        self._changes = _methods(ps, "on_task_change")
        self._stateful = {p.name: p.stateful for p in ps if implements(p, "stateful")}
        self._compose_changes(self._changes)
        self.has_node_choice = bool(self._node_choice)
        self.has_node_filter = bool(self._node_filter)
        # Points called per job or per victim (thousands of times a cycle): with one implementation, the
        # plugin's method itself stands in for the composed one (an instance attribute shadows the method
        # below), so the hot path pays no loop or generator; with none, a constant answer.
        for point, impls, none_answer in (
            ("reclaim_victim_filter", self._reclaim_filter, True),
            ("preempt_victim_filter", self._preempt_filter, True),
            ("victim_core_allowed", self._core_allowed, True),
            ("job_over_capacity", self._capacity, None),
            ("reclaim_scenario_validator", self._reclaim_validator, None),
            ("preempt_scenario_validator", self._preempt_validator, None),
            ("subset_nodes", self._subset_nodes, None),
        ):
            if len(impls) == 1:
                setattr(self, point, impls[0])
            elif not impls:
                setattr(self, point, lambda *_, _a=none_answer: _a)
        self.job_order = _tiers(self._job_order)  # type: ignore[method-assign]
        if len(self._subgroup_order) == 1:  # the usual subgrouporder alone: its key as it is, asked per subgroup
            self.subgroup_order = self._subgroup_order[0]  # type: ignore[method-assign]
        self._rules: dict[int, NodeRules] = {}  # task index -> its rules (asked once per task per Session)

    def _compose_changes(self, changes: list[Callable[..., Any]]) -> None:
        # None when no plugin listens: Session._set checks this once per change (20,000 per busy cycle)
        if len(changes) > 1:

            def notify(ssn: Any, task: Any, old: Any, old_node: int) -> None:
                for f in changes:
                    f(ssn, task, old, old_node)

            self.on_task_change: Callable[[Any, Any, Any, int], None] | None = notify
        else:
            self.on_task_change = changes[0] if changes else None

    def session_opened(self, ssn: Any) -> None:
        """Called by the Session once it is built: each plugin with a ``stateful`` gate says whether it has
        stateful work in this Session; one that has none is left out of node_filter and on_task_change."""
        if not self._stateful:
            return
        idle = {name for name, gate in self._stateful.items() if not gate(ssn)}
        if not idle:
            return
        active = [p for name, p in self.plugins.items() if name not in idle]
        self._node_filter = _methods(active, "node_filter")
        self._compose_changes(_methods(active, "on_task_change"))
        self.has_node_filter = bool(self._node_filter)

    def enabled(self, name: str) -> bool:
        return name in self.plugins

    # --- ordering -------------------------------------------------------------------------------------

    def queue_order(self, ssn: Any) -> QueueOrder | None:
        for f in self._queue_order:
            got = f(ssn)
            if got is not None:
                return got
        return None

    def job_order(self, ssn: Any, job: Any) -> tuple:
        """The job's sort key: every tier, then (creation, UID). Asked once per job queued (composed per
        Session by ``_tiers``; this method documents the point and is replaced on the instance)."""
        return _tiers(self._job_order)(ssn, job)

    def subgroup_order(self, gang: Any, node: int, count: Any) -> tuple:
        key: tuple = ()
        for f in self._subgroup_order:
            key += f(gang, node, count)
        return key

    # --- fair share and capacity ----------------------------------------------------------------------

    def fair_share(self, ssn: Any, requested: np.ndarray) -> np.ndarray:
        for f in self._fair_share:
            got = f(ssn, requested)
            if got is not None:
                return got
        return np.zeros_like(requested, dtype=np.float64)

    def job_over_capacity(self, ssn: Any, job: Any, tasks: list[Any]) -> Any:
        for f in self._capacity:
            got = f(ssn, job, tasks)
            if got is not None:
                return got
        return None

    # --- nodes ----------------------------------------------------------------------------------------

    def predicate(self, ssn: Any, pod: Any, share: Any) -> NodeVerdict:
        """Every filter plugin's verdict ANDed; the failures concatenated in plugin order."""
        n = ssn.snap.nodes.n
        mask = np.ones(n, dtype=bool)
        failures: list[tuple[str, np.ndarray]] = []
        for f in self._predicate:
            v = f(ssn, pod, share)
            if v is not None:
                mask &= v.mask
                failures.extend(v.failures)
        return NodeVerdict(mask, tuple(failures))

    def node_rules(self, ssn: Any, task: Any) -> NodeRules:
        """*task*'s stateful rules from every node_filter plugin, combined (asked of the plugins once per task)."""
        got = self._rules.get(task.index)
        if got is None:
            rules: list[NodeRule] = []
            for f in self._node_filter:
                r = f(ssn, task)
                if r is None:
                    continue
                if isinstance(r, (list, tuple)):
                    rules.extend(r)
                else:
                    rules.append(r)
            got = self._rules[task.index] = NodeRules(rules) if rules else NO_RULES
        return got

    def node_order_terms(self, ssn: Any, task: Any) -> ScoreTerms:
        terms = NO_TERMS
        for f in self._terms:
            t = f(ssn, task)
            if t is not None:
                terms = terms + t
        return terms

    def node_order(self, ssn: Any, pod: Any) -> np.ndarray | None:
        total = None
        for f in self._node_order:
            s = f(ssn, pod)
            if s is not None:
                total = s.astype(np.float64) if total is None else total + s
        return total

    def node_choice(
        self, ssn: Any, task: Any, static: np.ndarray, fits_now: np.ndarray, allowed: Any, bonus: Any
    ) -> Choice | None:
        for f in self._node_choice:
            got = f(ssn, task, static, fits_now, allowed, bonus)
            if got is not None:
                return got
        return None

    def gpu_order(self, ssn: Any) -> str:
        for f in self._gpu_order:
            got = f(ssn)
            if got is not None:
                return got
        return "pack"

    # --- evictions ------------------------------------------------------------------------------------

    def can_reclaim(self, ssn: Any, job: Any, req: tuple[int, int, int]) -> str | None:
        if not self._can_reclaim:
            return "no plugin decides who may reclaim (the proportion plugin is disabled)"
        for f in self._can_reclaim:
            why = f(ssn, job, req)
            if why is not None:
                return why
        return None

    def reclaim_victim_filter(self, ssn: Any, reclaimer: Any, req: tuple[int, int, int], victim: Any) -> bool:
        return all(f(ssn, reclaimer, req, victim) for f in self._reclaim_filter)

    def reclaim_scenario_validator(self, ssn: Any, scenario: Any) -> str | None:
        for f in self._reclaim_validator:
            why = f(ssn, scenario)
            if why is not None:
                return why
        return None

    def preempt_victim_filter(self, ssn: Any, preemptor: Any, victim: Any) -> bool:
        return all(f(ssn, preemptor, victim) for f in self._preempt_filter)

    def preempt_scenario_validator(self, ssn: Any, scenario: Any) -> str | None:
        for f in self._preempt_validator:
            why = f(ssn, scenario)
            if why is not None:
                return why
        return None

    def victim_core_allowed(self, ssn: Any, action: str, preemptor: Any, victim: Any) -> bool:
        return all(f(ssn, action, preemptor, victim) for f in self._core_allowed)

    def subset_nodes(self, ssn: Any, job: Any) -> list[Any] | None:
        for f in self._subset_nodes:
            got = f(ssn, job)
            if got is not None:
                return got
        return None


def _tiers(fs: list[Callable[..., tuple]]) -> Callable[[Any, Any], tuple]:
    """The job-order key of tiers *fs* (priority order), then (creation, UID), without a loop for the usual
    one or two tiers: JobQueue asks once per job it queues, 20,000 times in a busy cycle."""
    if len(fs) == 2:
        f0, f1 = fs
        return lambda ssn, job: (*f0(ssn, job), *f1(ssn, job), job.creation, job.podgroup.meta.uid)
    if len(fs) == 1:
        (f0,) = fs
        return lambda ssn, job: (*f0(ssn, job), job.creation, job.podgroup.meta.uid)

    def key(ssn: Any, job: Any) -> tuple:
        out: tuple = ()
        for f in fs:
            out += f(ssn, job)
        return (*out, job.creation, job.podgroup.meta.uid)

    return key
