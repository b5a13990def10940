"""What a plugin is, and the contract of every extension point it may implement.

A plugin is a class with a ``name`` (KAI's, where KAI has the plugin), the arguments it accepts (``ARGS``:
name -> parser) and one method per extension point it implements, named after the point (``_points.py``
lists them with their combine rules). It is made anew for each Session from its validated arguments, so it
may keep state for that Session only. ``Contract`` below documents each point's signature and meaning:
a plugin's method takes the same arguments and returns what the contract says.

Rules checked when a plugin is registered (``check_plugin``): every public method is an extension point
(a typo is an error, not a hook that is never called), and every argument has a parser. Arguments are
validated when the plugin is made: an unknown argument, or a value its parser refuses, is a ConfigError
naming the plugin and the argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple, Protocol

import numpy as np

from kai.scheduler.conf import ConfigError
from kai.scheduler.framework._points import POINT_NAMES


@dataclass(frozen=True, slots=True)
class NodeVerdict:
    """A filter's answer over every node row: where the pod may go, and why not elsewhere, per reason."""

    mask: np.ndarray  # (n_nodes,) bool: passes
    failures: tuple[tuple[str, np.ndarray], ...] = ()  # (reason, (n_nodes,) bool: fails it), for explanations


@dataclass(frozen=True, slots=True)
class ScoreTerms:
    """Weights of the Placer's resource-score kernel, summed over plugins (KAI's node-order magnitudes).

    The kernel scores a node row, for a task that fits there (now or once releases end), as
    ``fits_now * [fits on idle now] + cpu_node * [CPU-only task on a CPU-only node]
    + binpack * 9 * (1 - free / scale) + spread * 9 * free / allocatable
    + shared_fit * [a shared GPU there takes the fraction]`` where *free* is the node's idle amount of the
    resource the task ranks by (GPU for GPU tasks, CPU otherwise). Each term is vectorized over rows and
    kept current row by row as the Session changes (``kai.scheduler.placement``)."""

    fits_now: float = 0.0
    cpu_node: float = 0.0
    binpack: float = 0.0
    spread: float = 0.0
    shared_fit: float = 0.0

    def __add__(self, other: ScoreTerms) -> ScoreTerms:
        return ScoreTerms(
            self.fits_now + other.fits_now,
            self.cpu_node + other.cpu_node,
            self.binpack + other.binpack,
            self.spread + other.spread,
            self.shared_fit + other.shared_fit,
        )


class Choice(NamedTuple):
    """Where a task goes: a node row, whether it fits on idle resources now (else it is pipelined onto what is
    being released), and for a shared-GPU pod the GPU slots of that node it takes (None: the Session picks).
    A NamedTuple: allocate makes one per placement, 20,000 in a busy cycle."""

    node: int
    now: bool
    gpus: tuple[int, ...] | None = None


class NodeRule(Protocol):
    """A stateful filter and score over node rows for one task (``node_filter``): inter-pod affinity, topology
    spread, host ports, volumes. The plugin keeps it current through ``on_task_change`` (every change of a
    task's status or node, placements, pipelining, evictions and rollbacks included).

    The Placer applies a task's rules when it answers for that task, in one vectorized pass (the AND of their
    masks, the sum of their scores, over its own resource scores), so a change of a rule's answer needs no
    ``Session.log_node``: the next question reads the rule as it is. A rule may recompute lazily (when the
    counts it reads have moved). Arrays it returns are read, never written, by callers.

    Optional members: ``now_mask()`` / ``allows_now(row)``, the rows it allows while the pods being released
    are still there (a host port or an anti-affinity a terminating pod still holds: the task may be pipelined
    there, not placed now); without them the rule answers the same now and later. ``filters = False``: the
    rule only scores (its mask is never read). ``loosens = False``: placing pods never makes the rule allow a
    row it refused (anti-affinity, ports), so a task shape that failed stays failed while only placements
    happen; without it the rule is taken to loosen (affinity, spread)."""

    def mask(self) -> np.ndarray:
        """(n_nodes,) bool: rows the task may use (once the pods being released there are gone)."""
        ...

    def allows(self, row: int) -> bool:
        """``mask()[row]``, as a Python bool."""
        ...

    def scores(self) -> np.ndarray | None:
        """(n_nodes,) float added to the node score, or None if the rule only filters."""
        ...

    def score(self, row: int) -> float:
        """``scores()[row]`` (0.0 if the rule only filters)."""
        ...

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        """(reason with numbers, (n_nodes,) bool rows failing it), for "why is my pod pending"."""
        ...


class QueueOrder(Protocol):
    """How the JobQueue ranks sibling queues (``queue_order``): a sortable key per queue given the request of
    its best pending job, smaller first, and the choice among queues whose keys tie. A queue none of whose
    siblings has jobs is taken without asking its key (there is nothing to rank it against).

    A key may read, besides what is fixed for the Session, only the queue's allocation (``ssn.queues.alloc``)
    and *request*: the JobQueue keeps a popped path's keys while neither moved (``JobQueue._recheck``)."""

    def queue_key(self, queue: int, request: tuple[int, int, int] | list[float]) -> tuple: ...

    def tie_break(self, tied: list[int]) -> int: ...


class Contract:
    """The extension points' signatures and meaning. Documentation only: never instantiated or subclassed.

    ``ssn`` is the Session; ``job`` a JobInfo, ``task`` a TaskInfo, ``pod`` a Pod (a scheduling signature's
    representative); ``req`` a request in queue units (milli-GPU, millicores, bytes) as a 3-tuple.
    """

    def queue_order(self, ssn: Any) -> QueueOrder | None:
        """FIRST. The order of sibling queues in every JobQueue (KAI's QueueOrderFn). Default: creation order."""

    def job_order(self, ssn: Any, job: Any) -> tuple:
        """TIERS. This plugin's part of a job's sort key within its leaf queue, smaller first (KAI's JobOrderFn:
        the first plugin that tells two jobs apart decides). Fallback after all tiers: older, then lower UID."""

    def task_order(self, pod: Any) -> tuple:
        """TIERS. This plugin's part of a pod's order within its job, smaller first (KAI's TaskOrderFn).
        Called when the snapshot is built. Fallback: older, then name."""

    def subgroup_order(self, gang: Any, node: int, count: Any) -> tuple:
        """TIERS. This plugin's part of a subgroup's order (a leaf or a set) among its siblings when a gang's pods
        are planned, smaller first; *count* is each gang node's active pods."""

    def fair_share(self, ssn: Any, requested: np.ndarray) -> np.ndarray | None:
        """FIRST. Each queue's fair share, (n_queues, 3) float in queue units, given what each requests
        ((n_queues, 3) float). Default: zeros (no plugin divides the cluster)."""

    def job_over_capacity(self, ssn: Any, job: Any, tasks: list[Any]) -> Any:
        """FIRST. A JobFailure (reason code and message) if placing *tasks* would break a queue's capacity
        rule (limit, non-preemptible quota); None if it may go on. Called before any placement. Must be
        monotone in the queues' allocations (a job over capacity stays over with more allocated): the victim
        solver reads a victim's answer in the state before its evictions as good for the whole put-back."""

    def predicate(self, ssn: Any, pod: Any, share: Any) -> NodeVerdict | None:
        """ALL. The nodes a pod of this scheduling signature may ever use, whatever the Session's state
        (labels, taints, readiness, static volume topology). *share*: its GpuShare or None. Cached per
        signature for the Session; None = no opinion."""

    def node_filter(self, ssn: Any, task: Any) -> NodeRule | Sequence[NodeRule] | None:
        """ALL. Stateful rules (NodeRule) for *task*: inter-pod affinity, topology spread, host ports, volumes...
        whose answers change as the Session places, pipelines and evicts. Asked once per task per Session (the
        rules stay the task's rules and follow the Session themselves); a plugin shares one rule between tasks
        of the same shape. None or () = no rule."""

    def stateful(self, ssn: Any) -> bool:
        """GATE. Whether this plugin has any stateful work in this Session (asked once, when it opens): False
        turns its node_filter and on_task_change off for the Session."""

    def node_order_terms(self, ssn: Any, task: Any) -> ScoreTerms | None:
        """SUM. This plugin's weights in the Placer's resource-score kernel for tasks of this shape."""

    def node_order(self, ssn: Any, pod: Any) -> np.ndarray | None:
        """SUM. A (n_nodes,) float score added for pods of this scheduling signature (static preferences)."""

    def node_choice(
        self,
        ssn: Any,
        task: Any,
        static: np.ndarray,
        fits_now: np.ndarray,
        allowed: np.ndarray | None,
        bonus: np.ndarray | None,
    ) -> Choice | None:
        """FIRST. A plugin that picks the node (and GPUs) itself among rows where *static* and *fits_now* hold
        (and *allowed*, with the highest *bonus* where given). None = the Placer chooses."""

    def gpu_order(self, ssn: Any) -> str | None:
        """FIRST. How the shared GPUs of a node are ranked for a fraction: "pack" (fullest first, KAI's
        gpupack) or "spread" (emptiest first, gpuspread). Default: pack."""

    def can_reclaim(self, ssn: Any, job: Any, req: tuple[int, int, int]) -> str | None:
        """FIRST. Why *job* may not reclaim at all (None: it may try). With no implementation, no job may."""

    def reclaim_victim_filter(self, ssn: Any, reclaimer: Any, req: tuple[int, int, int], victim: Any) -> bool:
        """ALL. May *victim* (a job of another queue) lose pods to *reclaimer*?"""

    def reclaim_scenario_validator(self, ssn: Any, scenario: Any) -> str | None:
        """FIRST. Why a simulated reclaim scenario must be rejected (None: accept). The Session holds the
        state after the scenario; ``scenario.before_alloc`` the queues' allocation before it."""

    def preempt_victim_filter(self, ssn: Any, preemptor: Any, victim: Any) -> bool:
        """ALL. May *victim* (a preemptible job of the same queue) lose pods to *preemptor*?"""

    def preempt_scenario_validator(self, ssn: Any, scenario: Any) -> str | None:
        """FIRST. Why a simulated preempt scenario must be rejected (None: accept)."""

    def victim_core_allowed(self, ssn: Any, action: str, preemptor: Any, victim: Any) -> bool:
        """ALL. May *victim* lose its minAvailable core pods (not only surplus ones) in *action*?"""

    def subset_nodes(self, ssn: Any, job: Any) -> list[Any] | None:
        """FIRST. The job's topology constraints, one per gang node (None where unconstrained), or None if the
        plugin has no say; raises TopologyError naming the missing Topology or level."""

    def on_task_change(self, ssn: Any, task: Any, old_status: Any, old_node: int) -> None:
        """NOTIFY. *task*'s status or node changed (placed, pipelined, evicted, or such a change undone); its
        new state is in the Session. For plugins that keep per-node state (NodeRule)."""


Arg = Callable[[Any], Any]  # parses one argument's value (a string from the SchedulingShard); ValueError if bad


class Plugin:
    """Base of every plugin: its name, its arguments, made once per Session."""

    name: ClassVar[str] = ""
    ARGS: ClassVar[Mapping[str, Arg]] = {}
    DEFAULTS: ClassVar[Mapping[str, Any]] = {}

    def __init__(self, args: Mapping[str, Any] | None = None, *, where: str = "") -> None:
        self.args: dict[str, Any] = dict(self.DEFAULTS)
        for key, value in (args or {}).items():
            field = f"{where or 'plugins.' + self.name}.arguments.{key}"
            parse = self.ARGS.get(key)
            if parse is None:
                known = ", ".join(sorted(self.ARGS)) or "none"
                raise ConfigError(f"{field}: unknown argument of plugin {self.name} (it takes: {known})")
            try:
                self.args[key] = parse(value)
            except (TypeError, ValueError) as e:
                raise ConfigError(f"{field}: {e}") from None


def implements(plugin: type[Plugin] | Plugin, point: str) -> bool:
    cls = plugin if isinstance(plugin, type) else type(plugin)
    return callable(getattr(cls, point, None))


def check_plugin(cls: type[Plugin]) -> None:
    """Registration check (pluggy's ``_verify_hook``): every public method names an extension point."""
    if not cls.name:
        raise ConfigError(f"plugin class {cls.__name__} has no name")
    for attr in dir(cls):
        if attr.startswith("_") or attr in ("name", "ARGS", "DEFAULTS", "args"):
            continue
        if callable(getattr(cls, attr)) and attr not in POINT_NAMES:
            raise ConfigError(f"plugin {cls.name}: {attr} is not an extension point")
    unknown = set(cls.DEFAULTS) - set(cls.ARGS)
    if unknown:
        raise ConfigError(f"plugin {cls.name}: defaults without a parser: {', '.join(sorted(unknown))}")
