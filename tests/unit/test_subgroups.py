"""The subgroup tree of a PodGroup and when it is gang satisfied."""

from __future__ import annotations

from typing import Any

import numpy as np

from kai.api.objects import Pod, parse_pod, parse_podgroup
from kai.scheduler.model import ACTIVE_ALLOCATED, TaskInfo, TaskStatus
from kai.scheduler.subgroups import build_gang, counts, first_unsatisfied, node_satisfied, satisfied, surplus_task


def pg(spec: dict[str, Any]):
    return parse_podgroup(
        {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": {"name": "j"}, "spec": spec}
    )


def task(i: int, subgroup: str | None) -> TaskInfo:
    labels = {"kai.scheduler/subgroup-name": subgroup} if subgroup else {}
    pod: Pod = parse_pod(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"p{i}", "labels": labels}, "spec": {"containers": []}}
    )
    return TaskInfo(i, 0, pod, TaskStatus.PENDING, -1, np.zeros(4, dtype=np.int64), 0, ())


RUN, PEND = TaskStatus.RUNNING, TaskStatus.PENDING


def test_flat_podgroup_is_one_leaf() -> None:
    tasks = [task(i, None) for i in range(3)]
    gang = build_gang(pg({"minMember": 2}), tasks)
    assert gang.flat and gang.min_pods == 2 and not gang.constrained
    assert satisfied(gang, [RUN, RUN, PEND], ACTIVE_ALLOCATED)
    assert not satisfied(gang, [RUN, PEND, PEND], ACTIVE_ALLOCATED)


def test_every_leaf_needs_its_minimum() -> None:
    spec = {"subGroups": [{"name": "a", "minMember": 2}, {"name": "b", "minMember": 1}]}
    tasks = [task(0, "a"), task(1, "a"), task(2, "a"), task(3, "b")]
    gang = build_gang(pg(spec), tasks)
    assert not gang.flat and gang.min_pods == 3
    # three pods run, but all in a: b is short, so the job is not satisfied (a single count of 3 would say it is)
    status = [RUN, RUN, RUN, PEND]
    assert not satisfied(gang, status, ACTIVE_ALLOCATED)
    hit = first_unsatisfied(gang, counts(gang, status, ACTIVE_ALLOCATED))
    assert hit is not None and gang.nodes[hit].name == "b"
    assert satisfied(gang, [RUN, RUN, PEND, RUN], ACTIVE_ALLOCATED)


def test_min_subgroup_counts_children() -> None:
    spec = {
        "minSubGroup": 2,
        "subGroups": [
            {"name": "r0", "minMember": 2},
            {"name": "r1", "minMember": 2},
            {"name": "r2", "minMember": 1},
        ],
    }
    tasks = [task(0, "r0"), task(1, "r0"), task(2, "r1"), task(3, "r1"), task(4, "r2")]
    gang = build_gang(pg(spec), tasks)
    assert gang.min_pods == 3  # the two cheapest children: 2 + 1
    assert satisfied(gang, [RUN, RUN, PEND, PEND, RUN], ACTIVE_ALLOCATED)
    assert not satisfied(gang, [RUN, RUN, RUN, PEND, PEND], ACTIVE_ALLOCATED)


def test_nested_sets_and_parent_min_subgroup() -> None:
    spec = {
        "minSubGroup": 1,
        "subGroups": [
            {"name": "decode", "minSubGroup": 2},
            {"name": "d-lead", "parent": "decode", "minMember": 1},
            {"name": "d-work", "parent": "decode", "minMember": 2},
            {"name": "prefill"},
            {"name": "p-lead", "parent": "prefill", "minMember": 1},
        ],
    }
    tasks = [task(0, "d-lead"), task(1, "d-work"), task(2, "d-work"), task(3, "p-lead")]
    gang = build_gang(pg(spec), tasks)
    names = [n.name for n in gang.nodes]
    assert names.index("decode") < names.index("d-lead")  # parents before children
    assert gang.min_pods == 1  # prefill alone (one leader) satisfies minSubGroup 1
    assert satisfied(gang, [PEND, PEND, PEND, RUN], ACTIVE_ALLOCATED)
    count = counts(gang, [RUN, RUN, PEND, PEND], ACTIVE_ALLOCATED)
    assert not node_satisfied(gang, names.index("decode"), count)  # d-work has 1 of 2
    assert not satisfied(gang, [RUN, RUN, PEND, PEND], ACTIVE_ALLOCATED)


def test_pods_naming_no_leaf_go_to_an_uncounted_default() -> None:
    spec = {"minSubGroup": 1, "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    tasks = [task(0, "a"), task(1, None), task(2, "nope")]
    gang = build_gang(pg(spec), tasks)
    default = gang.nodes[gang.leaf_of[1]]
    assert default.name == "default" and not default.counted and gang.leaf_of[2] == gang.leaf_of[1]
    # the implicit leaf (minimum 0) must not count towards minSubGroup
    assert not satisfied(gang, [PEND, RUN, RUN], ACTIVE_ALLOCATED)
    assert satisfied(gang, [RUN, PEND, PEND], ACTIVE_ALLOCATED)


def test_root_min_member_beyond_leaves() -> None:
    spec = {"minMember": 3, "subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    tasks = [task(0, "a"), task(1, "a"), task(2, "b")]
    gang = build_gang(pg(spec), tasks)
    assert gang.min_pods == 3
    assert not satisfied(gang, [RUN, PEND, RUN], ACTIVE_ALLOCATED)
    assert satisfied(gang, [RUN, RUN, RUN], ACTIVE_ALLOCATED)


def test_surplus_keeps_every_subgroup() -> None:
    spec = {"subGroups": [{"name": "a", "minMember": 1}, {"name": "b", "minMember": 1}]}
    tasks = [task(0, "a"), task(1, "a"), task(2, "b")]
    gang = build_gang(pg(spec), tasks)
    assert surplus_task(gang, [0, 1, 2], gang.min_pods) == 1  # not b's only pod, though it is last
    assert surplus_task(gang, [0, 2], gang.min_pods) is None
    flat = build_gang(pg({"minMember": 1}), tasks)
    assert surplus_task(flat, [0, 1, 2], 1) == 2
