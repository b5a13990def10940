"""The order of a job's pods (kai.scheduler.taskorder; KAI's TaskOrderFn tiers, docs/reference/kai-behaviour.md
§4.1): each tier on its own, then the tiers together with creation time and name."""

from __future__ import annotations

from typing import Any

import pytest

from kai.api import constants as C
from kai.api.objects import Pod, parse_pod
from kai.scheduler.taskorder import (
    default_task_order,
    kubeflow_tier,
    ray_tier,
    task_order,
    task_priority_tier,
)
from tests.unit.builders import pod


def labelled(name: str, created: str | None = None, **labels: str) -> Pod:
    return parse_pod(pod(name, "j", labels=labels, created=created))


@pytest.mark.parametrize(
    ("labels", "tier"),
    [
        ({C.LABEL_KUBEFLOW_JOB_ROLE: "master"}, (0,)),
        ({C.LABEL_KUBEFLOW_JOB_ROLE: "launcher"}, (0,)),
        ({C.LABEL_KUBEFLOW_JOB_ROLE: "worker"}, (1,)),
        ({}, (1,)),
    ],
)
def test_kubeflow_tier(labels: dict[str, str], tier: tuple) -> None:
    assert kubeflow_tier(labelled("p", **labels)) == tier


@pytest.mark.parametrize(
    ("labels", "tier"),
    [({C.LABEL_RAY_NODE_TYPE: "head"}, (0,)), ({C.LABEL_RAY_NODE_TYPE: "worker"}, (1,)), ({}, (1,))],
)
def test_ray_tier(labels: dict[str, str], tier: tuple) -> None:
    assert ray_tier(labelled("p", **labels)) == tier


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        ("10", ((0, -10),)),
        ("-3", ((0, 3),)),
        (None, ((1, 0),)),  # unlabelled pods after every labelled one
        ("high", ((1, 0),)),  # not an integer: as if unlabelled
    ],
)
def test_task_priority_tier(value: str | None, tier: tuple) -> None:
    labels = {C.LABEL_TASK_PRIORITY: value} if value is not None else {}
    assert task_priority_tier(labelled("p", **labels)) == tier


def _sorted(pods: list[Pod], key: Any = default_task_order) -> list[str]:
    return [p.meta.name for p in sorted(pods, key=key)]


def test_default_order_kubeflow_then_ray_then_task_priority_then_age_then_name() -> None:
    t = "2025-12-31T21:00:00Z"
    pods = [
        labelled("w-b", t),
        labelled("w-a", t),
        labelled("older", "2025-12-31T20:00:00Z"),
        labelled("neg", t, **{C.LABEL_TASK_PRIORITY: "-1"}),
        labelled("prio-5", t, **{C.LABEL_TASK_PRIORITY: "5"}),
        labelled("head", t, **{C.LABEL_RAY_NODE_TYPE: "head", C.LABEL_TASK_PRIORITY: "9"}),
        labelled("launcher", t, **{C.LABEL_KUBEFLOW_JOB_ROLE: "launcher"}),
    ]
    assert _sorted(pods) == ["launcher", "head", "prio-5", "neg", "older", "w-a", "w-b"]


def test_tiers_apply_in_the_order_given() -> None:
    """Task priority first: the labelled worker goes before the ray head and the launcher."""
    pods = [
        labelled("launcher", None, **{C.LABEL_KUBEFLOW_JOB_ROLE: "launcher"}),
        labelled("head", None, **{C.LABEL_RAY_NODE_TYPE: "head"}),
        labelled("worker", None, **{C.LABEL_TASK_PRIORITY: "1"}),
    ]
    key = task_order([task_priority_tier, ray_tier, kubeflow_tier])
    assert _sorted(pods, key) == ["worker", "head", "launcher"]
    assert _sorted(pods, task_order([])) == ["launcher", "head", "worker"]  # no tiers: by age
