"""The order of a job's pods (KAI's TaskOrderFn tiers), as pure functions of a Pod.

Rules: each tier is one plugin's key part (``kai.scheduler.plugins``: kubeflow, ray, taskorder), smaller
first; the snapshot sorts each job's pods by the configured tiers followed by creation time and name. The
tiers live here, below both the snapshot and the plugins, so the snapshot can apply KAI's default order
without importing the plugin layer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kai.api import constants as C
from kai.api.objects import Pod

TaskOrderTier = Callable[[Pod], tuple]


def kubeflow_tier(pod: Pod) -> tuple:
    """kubeflow: the master or launcher pod first."""
    return (0 if pod.meta.labels.get(C.LABEL_KUBEFLOW_JOB_ROLE, "") in ("master", "launcher") else 1,)


def ray_tier(pod: Pod) -> tuple:
    """ray: the head pod first."""
    return (0 if pod.meta.labels.get(C.LABEL_RAY_NODE_TYPE, "") == "head" else 1,)


def task_priority_tier(pod: Pod) -> tuple:
    """taskorder: pods labelled kai.scheduler/task-priority first, the higher value first."""
    text = pod.meta.labels.get(C.LABEL_TASK_PRIORITY)
    try:
        return ((0, -int(text)) if text is not None else (1, 0),)
    except ValueError:
        return ((1, 0),)


DEFAULT_TIERS: tuple[TaskOrderTier, ...] = (kubeflow_tier, ray_tier, task_priority_tier)


def _default_key(pod: Pod) -> tuple:
    """``task_order(DEFAULT_TIERS)`` written out: the snapshot asks once per pod (50,000 in a big cycle)."""
    labels = pod.meta.labels
    text = labels.get(C.LABEL_TASK_PRIORITY)
    try:
        prio = (0, -int(text)) if text is not None else (1, 0)
    except ValueError:
        prio = (1, 0)
    return (
        0 if labels.get(C.LABEL_KUBEFLOW_JOB_ROLE, "") in ("master", "launcher") else 1,
        0 if labels.get(C.LABEL_RAY_NODE_TYPE, "") == "head" else 1,
        prio,
        pod.meta.creation_timestamp or 0.0,
        pod.meta.name,
    )


def task_order(tiers: Sequence[TaskOrderTier] = DEFAULT_TIERS) -> Callable[[Pod], tuple]:
    """The sort key of a pod: every tier in order, then creation time, then name."""
    tiers = tuple(tiers)
    if tiers == DEFAULT_TIERS:
        return _default_key

    def key(pod: Pod) -> tuple:
        out: tuple = ()
        for tier in tiers:
            out += tier(pod)
        return (*out, pod.meta.creation_timestamp or 0.0, pod.meta.name)

    return key


default_task_order = task_order()
