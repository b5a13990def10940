"""Why a job is pending, in words a user can act on, with the numbers.

Rules: pure functions of the session state; the same text goes to PodGroup
conditions, events and the ``kai sim`` table. Every node is counted once, under
the first check it fails (as kube-scheduler does): static predicates in order,
then resources (GPU, CPU, memory, pods, extended), then the task's stateful rules
(host ports, volumes, topology spread, inter-pod affinity), each naming itself with
its numbers.
"""

from __future__ import annotations

import numpy as np

from kai.api.quantity import format_bytes
from kai.scheduler.gpusharing import fit_rows
from kai.scheduler.model import CPU, GPU, MEMORY, MILLI, PODS, TaskInfo

_QRES_NAMES = ("GPU", "CPU", "memory")


def qres_name(r: int) -> str:
    return _QRES_NAMES[r]


def _num(x: float) -> str:
    return f"{x:g}" if x == int(x) else f"{x:.2f}".rstrip("0")


def fmt_amount(r: int, value: float) -> str:
    """A QRES amount (base units) for people: GPUs, cores, bytes."""
    if r == 0:
        v = value / MILLI
        return f"{_num(v)} GPU" + ("" if v == 1 else "s")
    if r == 1:
        cores = value / 1000
        if value >= 1000 or value == 0:
            return f"{_num(cores)} CPU core" + ("" if cores == 1 else "s")
        return f"{value:g}m CPU"
    return f"{format_bytes(value)} memory"


def fmt_resource(resources: tuple[str, ...], col: int, value: float) -> str:
    if col == GPU:
        return _num(value / MILLI)
    if col == CPU:
        return _num(value / 1000) if value % 1000 == 0 else f"{value:g}m"
    if col == MEMORY:
        return format_bytes(value)
    return _num(value)


def _resource_phrase(resources: tuple[str, ...], col: int) -> str:
    return {GPU: "free GPUs", CPU: "free CPU", MEMORY: "free memory", PODS: "free pod slots"}.get(
        col, f"free {resources[col]}"
    )


_SINGULAR = (("do not", "does not"), ("are ", "is "), ("have ", "has "), ("lack ", "lacks "), ("hold ", "holds "))


def _count(k: int, phrase: str) -> str:
    """'3 nodes lack ...' / '1 node lacks ...'."""
    if k == 1:
        for plural, single in _SINGULAR:
            if phrase.startswith(plural):
                phrase = single + phrase[len(plural) :]
                break
        return f"1 node {phrase}"
    return f"{k} nodes {phrase}"


def explain_no_node(ssn, task: TaskInfo) -> str:
    """'2 nodes lack free GPUs (need 4, most free 3), 3 nodes do not match nodeSelector gpu=a100'."""
    nodes = ssn.snap.nodes
    if nodes.n == 0:
        return "the cluster has no nodes"
    left = np.ones(nodes.n, dtype=bool)
    parts = []
    for reason, mask in ssn.static_fit(task).failures:
        hit = left & mask
        if hit.any():
            parts.append(_count(int(hit.sum()), reason))
            left &= ~hit
    free = ssn.idle + ssn.releasing
    order = [GPU, CPU, MEMORY, PODS, *range(PODS + 1, len(ssn.snap.resources))]
    for col in order:
        need = task.request[col]
        if need <= 0:
            continue
        if col == GPU and task.share is not None:  # a fraction: per-GPU room, not the whole-GPU pool
            g = ssn.snap.gpus
            node_gpu = (ssn.idle[:, GPU], ssn.releasing[:, GPU])
            _, later, _ = fit_rows(task.share, g.cap, *ssn.gpu_arrays(), *node_gpu)
            short = left & ~later
            if short.any():
                parts.append(_count(int(short.sum()), f"have no GPUs with room for {task.share.describe()}"))
                left &= ~short
            continue
        short = left & (free[:, col] < need)
        if short.any():
            k = int(short.sum())
            most = int(free[short, col].max())
            res = ssn.snap.resources
            parts.append(
                _count(
                    k,
                    f"lack {_resource_phrase(res, col)} "
                    f"(need {fmt_resource(res, col, need)}, most free {fmt_resource(res, col, max(most, 0))})",
                )
            )
            left &= ~short
    if ssn.hooks.has_node_filter:
        for reason, mask in ssn.hooks.node_rules(ssn, task).failures():
            hit = left & mask
            if hit.any():
                parts.append(_count(int(hit.sum()), reason))
                left &= ~hit
    return ", ".join(parts) if parts else "no node can take the pod"


def gang_message(placed: int, required: int, why: str) -> str:
    if required <= 1:
        return f"Unable to schedule pod: {why}"
    return (
        f"Resources were found for {placed} pods while {required} are required for gang scheduling. "
        f"Additional pods cannot be scheduled due to: {why}"
    )
