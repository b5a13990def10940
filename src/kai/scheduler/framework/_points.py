"""Every extension point of the engine, in one place: its signature, how the answers combine, when it is called.

Rules (pytest's hookspecs, kube-scheduler's framework interfaces, KAI's session functions): a plugin
implements an extension point by defining a method of the point's name and signature (it may ignore
arguments it does not need). ``Hooks`` (``_hooks.py``) composes the enabled plugins' methods once per
Session, in plugin priority order (higher first, as KAI's), with the point's combine rule:

* ``ALL``: every answer must agree (masks are ANDed, booleans all True); no answer = allowed.
* ``SUM``: answers add up (scores, score weights); no answer = 0.
* ``TIERS``: answers are sort-key parts, concatenated in priority order, so the first plugin that tells two
  items apart decides (KAI's "first non-zero comparator wins"); the point's fallback key closes the tuple.
* ``FIRST``: the first plugin with a non-None answer decides; no answer = the point's default.
* ``GATE``: each plugin answers for itself, once per Session: False switches its ``node_filter`` and
  ``on_task_change`` off for that Session (a cycle whose pods have no affinity, spread, ports or claims pays
  nothing for the rules that follow them).

Plugins run once per Session and may keep state for that Session only (they are made anew each cycle).
Per-node answers are NumPy arrays over all node rows, never loops in Python over nodes: the hot path stays
vectorized. Bugs raise; a refusal is an answer (a mask, a reason string), never an exception.

The points, by family (the contract of each is the docstring of the method of the same name on
``kai.scheduler.framework.Plugin``):

ordering       queue_order (FIRST), job_order (TIERS), task_order (TIERS), subgroup_order (TIERS)
fair share     fair_share (FIRST)
capacity       job_over_capacity (FIRST)
node filter    predicate (ALL, per signature), node_filter (ALL, stateful, per task), stateful (GATE, per Session)
node score     node_order_terms (SUM of kernel weights), node_order (SUM, per signature),
               node_choice (FIRST: a plugin that picks the node and GPUs itself)
GPU choice     gpu_order (FIRST)
reclaim        can_reclaim (FIRST reason), reclaim_victim_filter (ALL), reclaim_scenario_validator (FIRST reason)
preempt        preempt_victim_filter (ALL), preempt_scenario_validator (FIRST reason)
victims        victim_core_allowed (ALL)
topology       subset_nodes (FIRST: a job's topology constraints)
events         on_task_change (every implementation is told; no answer)
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Combine(enum.Enum):
    ALL = "all"
    SUM = "sum"
    TIERS = "tiers"
    FIRST = "first"
    GATE = "gate"  # asked once per plugin when the Session opens: False turns its stateful points off for the Session
    NOTIFY = "notify"  # events: every implementation is called, nothing is returned


@dataclass(frozen=True, slots=True)
class ExtensionPoint:
    name: str
    combine: Combine
    called: str  # when the engine calls it, for the docs and for readers


POINTS: tuple[ExtensionPoint, ...] = (
    ExtensionPoint("queue_order", Combine.FIRST, "once per JobQueue (each action's job loop)"),
    ExtensionPoint("job_order", Combine.TIERS, "per job queued in a JobQueue"),
    ExtensionPoint("task_order", Combine.TIERS, "per pod, when the snapshot is built"),
    ExtensionPoint("subgroup_order", Combine.TIERS, "per subgroup, when a gang's pods are planned"),
    ExtensionPoint("fair_share", Combine.FIRST, "once per Session, when it opens"),
    ExtensionPoint("job_over_capacity", Combine.FIRST, "per job attempt, before any placement"),
    ExtensionPoint("predicate", Combine.ALL, "once per scheduling signature per Session"),
    ExtensionPoint("node_filter", Combine.ALL, "once per task per Session; its rules follow the Session by events"),
    ExtensionPoint("stateful", Combine.GATE, "once per plugin when the Session opens"),
    ExtensionPoint("node_order_terms", Combine.SUM, "once per task shape per Session"),
    ExtensionPoint("node_order", Combine.SUM, "once per scheduling signature per Session"),
    ExtensionPoint("node_choice", Combine.FIRST, "per placement, before the Placer's own choice"),
    ExtensionPoint("gpu_order", Combine.FIRST, "once per Session: how shared GPUs of a node are ranked"),
    ExtensionPoint("can_reclaim", Combine.FIRST, "per reclaimer attempt"),
    ExtensionPoint("reclaim_victim_filter", Combine.ALL, "per (reclaimer, candidate victim job)"),
    ExtensionPoint("reclaim_scenario_validator", Combine.FIRST, "per simulated reclaim scenario"),
    ExtensionPoint("preempt_victim_filter", Combine.ALL, "per (preemptor, candidate victim job)"),
    ExtensionPoint("preempt_scenario_validator", Combine.FIRST, "per simulated preempt scenario"),
    ExtensionPoint("victim_core_allowed", Combine.ALL, "per (action, preemptor, victim job)"),
    ExtensionPoint("subset_nodes", Combine.FIRST, "per job attempt with a topology constraint"),
    ExtensionPoint("on_task_change", Combine.NOTIFY, "after every change of a task's status or node, undo included"),
)

POINT_NAMES = frozenset(p.name for p in POINTS)
