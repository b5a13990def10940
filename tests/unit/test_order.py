"""The ordering plugins (kai.scheduler.plugins.order; docs/reference/kai-behaviour.md §4.1, 4.5): job order by
priority then elastic state, the preempt victim filter, subgroup order; each through the Session's Hooks, as
the actions ask them, with the plugins on and off."""

from __future__ import annotations

from typing import Any

import pytest

from kai.scheduler.actions.preempt import Preempt
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.model import ACTIVE_ALLOCATED
from kai.scheduler.session import Session
from kai.scheduler.subgroups import counts
from tests.unit.builders import job, job_docs, node, pod, podgroup, queue, session_of

QUEUES = [queue("dept"), queue("team", "dept")]


def job_order(ssn: Session) -> list[str]:
    return [j.name for j in sorted(ssn.snap.jobs, key=lambda j: ssn.hooks.job_order(ssn, j))]


def _jobs() -> list[dict[str, Any]]:
    """In creation order: a pending job (below its minimum, as every pending job is), a running elastic job above its
    minimum, one at it, one below it (all train), and a pending high-priority one created last."""
    return [
        node("n0", gpu=8),
        *QUEUES,
        *job_docs("low", "team", 1, priority_class="train"),
        *job_docs("above", "team", 3, on="n0", min_member=1),
        *job_docs("at", "team", 2, on="n0"),
        podgroup("below", "team", min_member=2),
        pod("below-0", "below", node_name="n0"),
        pod("below-1", "below"),
        *job_docs("high", "team", 1, priority_class="inference"),
    ]


@pytest.mark.parametrize(
    ("disabled", "want"),
    [
        ((), ["high", "low", "below", "at", "above"]),  # priority, then below < at < above min, then age
        (("elastic",), ["high", "low", "above", "at", "below"]),  # priority, then age
        (("priority",), ["low", "below", "high", "at", "above"]),  # elastic state, then age
        (("priority", "elastic"), ["low", "above", "at", "below", "high"]),  # age alone (KAI's fallback)
    ],
)
def test_job_order(disabled: tuple[str, ...], want: list[str]) -> None:
    conf = SchedulerConf()
    for name in disabled:
        conf = conf.with_plugin(name, enabled=False)
    assert job_order(session_of(_jobs(), conf)) == want


@pytest.mark.parametrize(
    ("preemptor", "victim", "allowed"),
    [
        ("inference", "train", True),
        ("build", "build-preemptible", True),
        ("train", "train", False),  # strictly lower only
        ("train", "inference", False),
    ],
)
def test_preempt_takes_victims_of_strictly_lower_priority_only(preemptor: str, victim: str, allowed: bool) -> None:
    docs = [
        node("n0"),
        *QUEUES,
        *job_docs("victim", "team", 1, on="n0", priority_class=victim),
        *job_docs("preemptor", "team", 1, priority_class=preemptor),
    ]
    ssn = session_of(docs)
    victims = Preempt().victims(ssn, job(ssn.snap, "preemptor"), (0, 0, 0))
    assert (job(ssn.snap, "victim") in victims) is allowed


def test_subgroup_order_unsatisfied_first_then_the_lower_ratio() -> None:
    """Three subgroups: a (2 of minMember 2: satisfied), b (1 of 4: ratio 0.25), c (1 of 2: ratio 0.5)."""
    subgroups = [{"name": n, "minMember": m} for n, m in (("a", 2), ("b", 4), ("c", 2))]
    docs = [node("n0", gpu=8), *QUEUES, podgroup("sg", "team", min_member=8, subgroups=subgroups)]
    for name, running in (("a", 2), ("b", 1), ("c", 1)):
        docs += [
            pod(f"{name}-{k}", "sg", node_name="n0", labels={"kai.scheduler/subgroup-name": name})
            for k in range(running)
        ]
    ssn = session_of(docs)
    gang = job(ssn.snap, "sg").gang
    assert gang is not None
    count = counts(gang, ssn.status, ACTIVE_ALLOCATED)
    leaves = [i for i, g in enumerate(gang.nodes) if g.leaf]
    ordered = sorted(leaves, key=lambda leaf: (ssn.hooks.subgroup_order(gang, leaf, count), leaf))
    assert [gang.nodes[i].name for i in ordered] == ["b", "c", "a"]
