"""minruntime (kai.scheduler.plugins.minruntime; docs/reference/kai-behaviour.md §4.5): which victims' cores are
still protected, where the protection window comes from, and its arguments.

The table asks the Session's ``victim_core_allowed`` extension point (the plugin as the eviction actions reach
it) about victims that started at ``STARTED``, one hour before the cycle, in this tree::

    dept-1 ── team-a, team-b
    dept-2 ── team-c
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kai.scheduler.conf import ConfigError, SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.plugins import check_conf
from tests.unit.builders import job, job_docs, node, pod, podgroup, queue, session_of, snapshot_of

HOUR = "1h"  # exactly how long the victims have run: protection ends at now, so they are no longer protected
LONGER = "3601s"


@dataclass
class Case:
    id: str
    action: str
    victim_queue: str
    allowed: bool
    preemptor_queue: str = "team-a"
    queues: dict[str, dict[str, str]] = field(default_factory=dict)  # queue -> preempt/reclaim_min_runtime
    args: dict[str, Any] = field(default_factory=dict)  # the plugin's arguments
    started: bool = True


CASES = [
    Case("no protection by default", "preempt", "team-a", True),
    Case("plugin default protects", "preempt", "team-a", False, args={"defaultPreemptMinRuntime": "2h"}),
    Case("ran exactly the min runtime", "preempt", "team-a", True, args={"defaultPreemptMinRuntime": HOUR}),
    Case("one second short", "preempt", "team-a", False, args={"defaultPreemptMinRuntime": LONGER}),
    Case("seconds as a number", "preempt", "team-a", False, args={"defaultPreemptMinRuntime": 3601}),
    Case("a pod not started yet", "preempt", "team-a", True, args={"defaultPreemptMinRuntime": "2h"}, started=False),
    Case("the victim's queue", "preempt", "team-a", False, queues={"team-a": {"preempt_min_runtime": "2h"}}),
    Case("inherited from the department", "preempt", "team-a", False, queues={"dept-1": {"preempt_min_runtime": "2h"}}),
    Case(
        "the leaf's 0 overrides the department",
        "preempt",
        "team-a",
        True,
        queues={"team-a": {"preempt_min_runtime": "0s"}, "dept-1": {"preempt_min_runtime": "2h"}},
    ),
    Case(
        "a queue's setting overrides the plugin default",
        "preempt",
        "team-a",
        True,
        queues={"team-a": {"preempt_min_runtime": "10m"}},
        args={"defaultPreemptMinRuntime": "2h"},
    ),
    Case(
        "preempt ignores reclaim settings", "preempt", "team-a", True, queues={"team-a": {"reclaim_min_runtime": "2h"}}
    ),
    Case(
        "reclaim ignores preempt settings", "reclaim", "team-b", True, queues={"team-b": {"preempt_min_runtime": "2h"}}
    ),
    Case("reclaim default", "reclaim", "team-b", False, args={"defaultReclaimMinRuntime": "2h"}),
    # reclaim, lca: the walk starts at the victim-side child of the lowest common ancestor
    Case(
        "lca between siblings: the victim's queue",
        "reclaim",
        "team-b",
        False,
        queues={"team-b": {"reclaim_min_runtime": "2h"}},
    ),
    Case(
        "lca between siblings: their department",
        "reclaim",
        "team-b",
        False,
        queues={"dept-1": {"reclaim_min_runtime": "2h"}},
    ),
    Case(
        "lca across departments: the victim's department",
        "reclaim",
        "team-c",
        False,
        queues={"dept-2": {"reclaim_min_runtime": "2h"}, "team-c": {"reclaim_min_runtime": "0s"}},
    ),
    Case(
        "lca across departments ignores the victim's own leaf",
        "reclaim",
        "team-c",
        True,
        queues={"team-c": {"reclaim_min_runtime": "2h"}},
    ),
    Case(
        "queue method reads the victim's own leaf",
        "reclaim",
        "team-c",
        False,
        queues={"team-c": {"reclaim_min_runtime": "2h"}},
        args={"reclaimResolveMethod": "queue"},
    ),
    Case(
        "queue method: the leaf's 0 overrides its department",
        "reclaim",
        "team-c",
        True,
        queues={"team-c": {"reclaim_min_runtime": "0s"}, "dept-2": {"reclaim_min_runtime": "2h"}},
        args={"reclaimResolveMethod": "queue"},
    ),
    Case(
        "consolidation only moves pods: never refused",
        "consolidation",
        "team-a",
        True,
        queues={"team-a": {"preempt_min_runtime": "2h", "reclaim_min_runtime": "2h"}},
        args={"defaultPreemptMinRuntime": "2h", "defaultReclaimMinRuntime": "2h"},
    ),
]


def _tree(settings: dict[str, dict[str, str]]) -> list[dict[str, Any]]:
    shape = [("dept-1", None), ("team-a", "dept-1"), ("team-b", "dept-1"), ("dept-2", None), ("team-c", "dept-2")]
    return [queue(name, parent, **settings.get(name, {})) for name, parent in shape]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_victim_core_allowed(case: Case) -> None:
    victim_pod = pod("victim-0", "victim", node_name="n0", started="2025-12-31T23:00:00Z" if case.started else None)
    docs = [
        node("n0"),
        *_tree(case.queues),
        podgroup("victim", case.victim_queue),
        victim_pod,
        *job_docs("preemptor", case.preemptor_queue, 1, priority_class="build"),
    ]
    conf = SchedulerConf().with_plugin("minruntime", **case.args)
    ssn = session_of(docs, conf)
    preemptor, victim = job(ssn.snap, "preemptor"), job(ssn.snap, "victim")
    assert ssn.hooks.victim_core_allowed(ssn, case.action, preemptor, victim) is case.allowed


def test_without_the_plugin_nothing_is_protected() -> None:
    docs = [node("n0"), *_tree({"team-a": {"preempt_min_runtime": "2h"}}), *job_docs("victim", "team-a", 1, on="n0")]
    ssn = session_of(docs, SchedulerConf().with_plugin("minruntime", enabled=False))
    victim = job(ssn.snap, "victim")
    assert ssn.hooks.victim_core_allowed(ssn, "preempt", victim, victim)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"reclaimResolveMethod": "nearest"}, r"reclaimResolveMethod: 'nearest' is not one of lca, queue"),
        ({"defaultPreemptMinRuntime": "-5s"}, r"defaultPreemptMinRuntime: '-5s' must not be negative"),
        ({"defaultReclaimMinRuntime": "soon"}, r"defaultReclaimMinRuntime: 'soon' is not a duration"),
        ({"minRuntime": "1h"}, r"minRuntime: unknown argument"),
    ],
)
def test_bad_arguments_are_errors_naming_them(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_conf(SchedulerConf().with_plugin("minruntime", **args))


# --- through the preempt action: a protected elastic victim keeps its core, loses its surplus ----------------------


@pytest.mark.parametrize(
    ("min_runtime", "need", "evicted"),
    [
        ("2h", 1, ["low-2"]),  # protected, but its surplus pod makes room
        ("2h", 2, []),  # the surplus is not enough and the core is protected: nothing is evicted
        # the window has ended: the core goes, and the surplus pod with it (a victim job comes back gang first,
        # so its surplus pod is not put back alone below minMember: KAI re-allocates victims from the gang phase)
        (HOUR, 2, ["low-0", "low-1", "low-2"]),
    ],
)
def test_preempt_takes_only_the_surplus_of_a_protected_victim(min_runtime: str, need: int, evicted: list[str]) -> None:
    """A lower-priority elastic job (minMember 2) fills the node's 3 GPUs; the preemptor needs *need* of them."""
    docs = [
        node("n0", gpu=3),
        *_tree({}),
        *job_docs("low", "team-a", 3, on="n0", min_member=2),
        *job_docs("high", "team-a", 1, gpu=need, priority_class="build-preemptible"),
    ]
    conf = SchedulerConf(actions=("preempt",)).with_plugin("minruntime", defaultPreemptMinRuntime=min_runtime)
    result = run_cycle(snapshot_of(docs, conf=conf), conf)
    assert sorted(e.pod.name for e in result.evictions) == evicted
    assert [p.pod.name for p in result.pipelines] == (["high-0"] if evicted else [])
