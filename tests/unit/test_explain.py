"""Why a job waits (kai.scheduler.explain): each reason with its numbers, every node counted once under the first
check it fails, singular and plural, amounts in units people read; and the same words on the PodGroup through
the cycle."""

from __future__ import annotations

from typing import Any

import pytest

from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.explain import explain_no_node, fmt_amount, gang_message
from tests.unit.builders import job_docs, node, queue, session_of, snapshot_of, task

QUEUES = [queue("dept"), queue("team", "dept")]


def with_selector(docs: list[dict[str, Any]], **selector: str) -> list[dict[str, Any]]:
    for d in docs:
        if d["kind"] == "Pod":
            d["spec"]["nodeSelector"] = selector
    return docs


def tainted(doc: dict[str, Any], key: str, effect: str = "NoSchedule") -> dict[str, Any]:
    doc.setdefault("spec", {})["taints"] = [{"key": key, "effect": effect}]
    return doc


CASES: list[tuple[str, list[dict[str, Any]], str]] = [
    ("no nodes", job_docs("j", "team", 1, gpu=4), "the cluster has no nodes"),
    (
        "GPUs: the most any node has free",
        [node("a", gpu=1), node("b", gpu=2), node("c", gpu=3), *job_docs("j", "team", 1, gpu=4)],
        "3 nodes lack free GPUs (need 4, most free 3)",
    ),
    (
        "one node: singular",
        [node("a", gpu=3), *job_docs("j", "team", 1, gpu=4)],
        "1 node lacks free GPUs (need 4, most free 3)",
    ),
    (
        "used GPUs are not free",
        [node("a", gpu=4), *job_docs("r", "team", 1, gpu=3, on="a"), *job_docs("j", "team", 1, gpu=2)],
        "1 node lacks free GPUs (need 2, most free 1)",
    ),
    (
        "each node once, under the first check it fails",
        [
            node("a", gpu=8, labels={"pool": "x"}, ready=False),  # not ready (and would fit)
            node("b", gpu=1, labels={"pool": "y"}),  # wrong pool (and too small)
            node("c", gpu=2, labels={"pool": "x"}),  # too small
            *with_selector(job_docs("j", "team", 1, gpu=4), pool="x"),
        ],
        "1 node is not ready, 1 node does not match nodeSelector pool=x, 1 node lacks free GPUs (need 4, most free 2)",
    ),
    (
        "untolerated taint",
        [tainted(node("a"), "dedicated"), node("b", gpu=0), *job_docs("j", "team", 1, gpu=1)],
        "1 node has untolerated taint dedicated:NoSchedule, 1 node lacks free GPUs (need 1, most free 0)",
    ),
    (
        "a cordoned node",
        [node("a", unschedulable=True), *job_docs("j", "team", 1, gpu=1)],
        "1 node has untolerated taint node.kubernetes.io/unschedulable:NoSchedule",
    ),
    (
        "CPU in millicores below a core",
        [node("a", cpu="1500m"), node("b", cpu="1"), *job_docs("j", "team", 1, gpu=0, cpu="2")],
        "2 nodes lack free CPU (need 2, most free 1500m)",
    ),
    (
        "memory in binary units",
        [node("a", memory="1Gi"), *job_docs("j", "team", 1, gpu=0, memory="1536Mi")],
        "1 node lacks free memory (need 1.5Gi, most free 1Gi)",
    ),
    (
        "GPUs are checked before CPU",
        [node("a", gpu=0, cpu="1"), *job_docs("j", "team", 1, gpu=1, cpu="2")],
        "1 node lacks free GPUs (need 1, most free 0)",
    ),
    (
        "pod slots",
        [node("a", extra={"pods": 1}), *job_docs("r", "team", 1, on="a"), *job_docs("j", "team", 1)],
        "1 node lacks free pod slots (need 1, most free 0)",
    ),
    (
        "an extended resource by its name",
        [
            node("a", extra={"example.com/fpga": 1}),
            node("b"),
            *job_docs("j", "team", 1, extra={"example.com/fpga": 2}),
        ],
        "2 nodes lack free example.com/fpga (need 2, most free 1)",
    ),
    (
        "a fraction: per-GPU room, not the whole-GPU pool",
        [
            node("a", gpu=1),
            node("b", gpu=1),
            *job_docs("r", "team", 2, on=["a", "b"], fraction="0.6"),
            *job_docs("j", "team", 1, fraction="0.5"),
        ],
        "2 nodes have no GPUs with room for 0.5 GPU",
    ),
    (
        "a multi-device fraction",
        [
            node("a", gpu=2),
            *job_docs("r", "team", 1, on="a", fraction="0.6"),
            *job_docs("j", "team", 1, fraction="0.5", devices=2),
        ],
        "1 node has no GPUs with room for 0.5 GPU on each of 2 GPUs",
    ),
    (
        "gpu-memory",
        [
            node("a", gpu=1, labels={"nvidia.com/gpu.memory": "40000"}),
            *job_docs("r", "team", 1, on="a", gpu_memory=30000),
            *job_docs("j", "team", 1, gpu_memory=20000),
        ],
        "1 node has no GPUs with room for 20000 MiB of GPU memory",
    ),
    (
        "a fraction cannot go to a node without GPUs to share",
        [node("cpu-only", gpu=0), *job_docs("j", "team", 1, fraction="0.5")],
        "1 node has no GPUs to share (no GPUs, or MIG)",
    ),
    (
        "resources being released count as free (the pod can be pipelined)",
        [node("a", gpu=2), *job_docs("r", "team", 1, on="a", gpu=2, releasing=True), *job_docs("j", "team", 1, gpu=2)],
        "no node can take the pod",
    ),
]


@pytest.mark.parametrize(("docs", "want"), [(d, w) for _, d, w in CASES], ids=[c[0] for c in CASES])
def test_explain_no_node(docs: list[dict[str, Any]], want: str) -> None:
    ssn = session_of([*QUEUES, *docs])
    assert explain_no_node(ssn, task(ssn.snap, "j-0")) == want


@pytest.mark.parametrize(
    ("r", "value", "text"),
    [
        (0, 1000, "1 GPU"),
        (0, 0, "0 GPUs"),
        (0, 2000, "2 GPUs"),
        (0, 500, "0.5 GPUs"),
        (0, 1250, "1.25 GPUs"),
        (0, 1_000_000, "1000 GPUs"),
        (1, 1000, "1 CPU core"),
        (1, 0, "0 CPU cores"),
        (1, 2500, "2.5 CPU cores"),
        (1, 250, "250m CPU"),
        (2, 1024**3, "1Gi memory"),
        (2, 0, "0 memory"),
    ],
)
def test_fmt_amount(r: int, value: float, text: str) -> None:
    assert fmt_amount(r, value) == text


def test_gang_message() -> None:
    assert gang_message(0, 1, "1 node lacks free GPUs") == "Unable to schedule pod: 1 node lacks free GPUs"
    assert gang_message(2, 3, "why") == (
        "Resources were found for 2 pods while 3 are required for gang scheduling. "
        "Additional pods cannot be scheduled due to: why"
    )


@pytest.mark.parametrize(
    ("docs", "message"),
    [
        (
            [node("a", gpu=3), *job_docs("j", "team", 1, gpu=4)],
            "Unable to schedule pod: 1 node lacks free GPUs (need 4, most free 3)",
        ),
        (  # the gang's first pod fits; the reason is the node as the second pod finds it
            [node("a", gpu=3), *job_docs("j", "team", 2, gpu=2)],
            "Resources were found for 1 pods while 2 are required for gang scheduling. Additional pods cannot be "
            "scheduled due to: 1 node lacks free GPUs (need 2, most free 1)",
        ),
        (
            [
                node("a", gpu=1),
                *job_docs("r", "team", 1, on="a", fraction="0.7"),
                *job_docs("j", "team", 1, fraction="0.5"),
            ],
            "Unable to schedule pod: 1 node has no GPUs with room for 0.5 GPU",
        ),
    ],
)
def test_the_podgroup_says_why(docs: list[dict[str, Any]], message: str) -> None:
    result = run_cycle(snapshot_of([*QUEUES, *docs]), SchedulerConf(actions=("allocate",)))
    (status,) = [s for s in result.podgroups if s.name == "j"]
    assert [(c.reason, c.message) for c in status.conditions] == [("Unschedulable", message)]
    assert [e.message for e in result.events if e.object == "PodGroup/default/j"] == [message]
