"""The plugin layer: registration checks, configuration errors, combine rules, and the Placer's use of a
stateful ``node_filter`` rule kept current through ``on_task_change``.

The stateful rule here is a small plugin written for the test ("at most one pod of an app per node", an
anti-affinity in miniature): the built-in rules of that family come with inter-pod affinity; this checks
the contract they rely on, with the real Session, Statement and Placer.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import pytest

from kai.scheduler.conf import ConfigError, SchedulerConf
from kai.scheduler.cycle import open_session
from kai.scheduler.framework import POINT_NAMES, Hooks, Plugin, ScoreTerms, check_plugin
from kai.scheduler.model import ACTIVE_USED, TaskInfo, TaskStatus
from kai.scheduler.placement import Placer
from kai.scheduler.plugins import NOT_OFFERED, REGISTRY, check_conf, make_plugins
from kai.scheduler.session import Session
from tests.unit.test_isolation import cluster
from tests.unit.test_statement import node, pod, podgroup, queue

# --- registration and configuration ---------------------------------------------------------------------


def test_every_builtin_plugin_implements_only_extension_points() -> None:
    for cls in REGISTRY.values():
        check_plugin(cls)
        assert any(hasattr(cls, p) for p in POINT_NAMES) or cls.name == "nominatednode", cls.name


def test_a_method_that_is_no_extension_point_is_refused() -> None:
    class Typo(Plugin):
        name = "typo"

        def node_oder(self, ssn: Any, pod: Any) -> None:  # a typo of node_order
            return None

    with pytest.raises(ConfigError, match="typo: node_oder is not an extension point"):
        check_plugin(Typo)


def test_unknown_plugin_argument_and_bad_value_are_errors_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"plugins\.proportion\.arguments\.kvalue: unknown argument"):
        check_conf(SchedulerConf().with_plugin("proportion", kvalue=2))
    with pytest.raises(ConfigError, match=r"plugins\.nodeplacement\.arguments\.gpu: 'pack' is not one of"):
        check_conf(SchedulerConf().with_plugin("nodeplacement", gpu="pack"))
    with pytest.raises(ConfigError, match="unknown plugin 'proportional'"):
        SchedulerConf().with_plugin("proportional")


def test_kai_plugins_not_offered_accept_only_what_kai_does() -> None:
    check_conf(SchedulerConf().with_plugin("numa", enabled=False))
    with pytest.raises(ConfigError, match="plugin numa cannot be enabled in kai"):
        check_conf(SchedulerConf().with_plugin("numa"))
    with pytest.raises(ConfigError, match="plugin sg-multinodegang cannot be disabled in kai"):
        check_conf(SchedulerConf().with_plugin("sg-multinodegang", enabled=False))
    assert set(NOT_OFFERED).isdisjoint(REGISTRY)


def test_plugins_run_in_priority_order_and_disabled_ones_not_at_all() -> None:
    names = [p.name for p in make_plugins(SchedulerConf())]
    assert names[:3] == ["predicates", "proportion", "priority"]
    assert "gpuspread" not in names and "gpupack" in names
    spread = [p.name for p in make_plugins(SchedulerConf().with_placement(gpu="spread"))]
    assert "gpuspread" in spread and "gpupack" not in spread and "gpusharingorder" not in spread


def test_score_terms_add_up_over_plugins() -> None:
    docs = [node("n0"), queue("root"), queue("team", "root"), podgroup("p", "team"), pod("p-0", "p")]
    ssn = open_session(cluster(docs).snapshot(), SchedulerConf())
    task = ssn.snap.tasks[0]
    assert ssn.hooks.node_order_terms(ssn, task) == ScoreTerms(
        fits_now=1000.0, cpu_node=10.0, binpack=1.0, spread=0.0, shared_fit=10000.0
    )


def test_without_proportion_nobody_reclaims_and_queues_go_oldest_first() -> None:
    docs = [node("n0"), queue("root"), queue("team", "root"), podgroup("p", "team"), pod("p-0", "p")]
    ssn = open_session(cluster(docs).snapshot(), SchedulerConf().with_plugin("proportion", enabled=False))
    job = ssn.snap.jobs[0]
    assert "proportion plugin is disabled" in (ssn.hooks.can_reclaim(ssn, job, (1000, 0, 0)) or "")
    assert ssn.hooks.queue_order(ssn) is None
    assert np.array_equal(ssn.queues.fair_share, np.zeros((2, 3)))


# --- a stateful node rule -------------------------------------------------------------------------------


class OnePerNode:
    """NodeRule: no two pods with the same ``app`` label on one node (counted from the Session, live)."""

    def __init__(self, ssn: Session, app: str) -> None:
        self.ssn, self.app = ssn, app
        self.count = np.zeros(ssn.snap.nodes.n, dtype=np.int64)
        for t in ssn.snap.tasks:
            if ssn.status[t.index] in ACTIVE_USED and ssn.node[t.index] >= 0 and _app(t) == app:
                self.count[ssn.node[t.index]] += 1

    def mask(self) -> np.ndarray:
        return self.count == 0

    def allows(self, row: int) -> bool:
        return bool(self.count[row] == 0)

    def scores(self) -> np.ndarray | None:
        return None

    def score(self, row: int) -> float:
        return 0.0

    def failures(self) -> tuple[tuple[str, np.ndarray], ...]:
        return ((f"hold a pod of app {self.app}", self.count > 0),)


def _app(task: TaskInfo) -> str:
    return task.pod.meta.labels.get("app", "")


class OnePerNodePlugin(Plugin):
    name: ClassVar[str] = "one-per-node"

    def __init__(self) -> None:
        super().__init__()
        self.rules: dict[str, OnePerNode] = {}

    def node_filter(self, ssn: Session, task: TaskInfo) -> OnePerNode | None:
        app = _app(task)
        if not app:
            return None
        if app not in self.rules:
            self.rules[app] = OnePerNode(ssn, app)
        return self.rules[app]

    def on_task_change(self, ssn: Session, task: TaskInfo, old_status: TaskStatus, old_node: int) -> None:
        rule = self.rules.get(_app(task))
        if rule is None:
            return
        was = old_status in ACTIVE_USED and old_node >= 0
        now = ssn.status[task.index] in ACTIVE_USED and ssn.node[task.index] >= 0
        if was:
            rule.count[old_node] -= 1
            ssn.log_node(old_node, freed=True)  # the row may allow the app again
        if now:
            rule.count[ssn.node[task.index]] += 1
            ssn.log_node(ssn.node[task.index], freed=False)


def _web_session() -> Session:
    docs = [node(f"n{i}") for i in range(3)] + [queue("root"), queue("team", "root")]
    for i in range(4):
        docs.append(podgroup(f"web-{i}", "team"))
        p = pod(f"web-{i}-0", f"web-{i}")
        p["metadata"]["labels"] = {"app": "web"}
        docs.append(p)
    conf = SchedulerConf()
    snap = cluster(docs).snapshot(conf)
    ssn = Session(snap, conf, Hooks([*make_plugins(conf), OnePerNodePlugin()]))
    ssn.placer = Placer(ssn)
    return ssn


def test_a_stateful_rule_spreads_pods_and_follows_placements_and_rollbacks() -> None:
    ssn = _web_session()
    stmt = ssn.statement()
    rows = []
    mark = None
    for i, task in enumerate(ssn.snap.tasks):
        if i == 2:
            mark = stmt.checkpoint()
        choice = ssn.placer.best_node(task)
        if choice is None:
            rows.append(None)
            continue
        stmt.allocate(task, choice.node)
        rows.append(choice.node)
    assert rows == [0, 1, 2, None]  # binpack alone would stack them on n0; the rule spreads them, then refuses
    assert mark is not None
    stmt.rollback(mark)  # web-2 leaves n2: the rule allows n2 again, and the Placer sees it
    last = ssn.snap.tasks[3]
    assert ssn.placer.best_node(last) == (2, True, None)
    fresh = Placer(ssn)
    assert np.array_equal(ssn.placer._candidates(last).score, fresh._candidates(last).score)
