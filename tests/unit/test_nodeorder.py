"""The node-order plugins (kai.scheduler.plugins.nodeorder; docs/reference/kai-behaviour.md §4.1, 4.5): each case is
a cluster where one plugin's score decides the node the Placer chooses, checked with the plugin on and off (or
set one way and the other), and gpupack against gpuspread for the GPU a fraction takes on a node."""

from __future__ import annotations

from typing import Any

import pytest

from kai.scheduler.conf import SchedulerConf
from tests.unit.builders import job_docs, node, queue, session_of, task

QUEUES = [queue("dept"), queue("team", "dept")]
DEFAULT = SchedulerConf()


def off(name: str) -> SchedulerConf:
    return DEFAULT.with_plugin(name, enabled=False)


def chosen(docs: list[dict[str, Any]], pod_name: str, conf: SchedulerConf) -> tuple[str, bool]:
    """(node, fits now) the Placer answers for *pod_name*."""
    ssn = session_of([*QUEUES, *docs], conf)
    choice = ssn.placer.best_node(task(ssn.snap, pod_name))
    assert choice is not None
    return ssn.snap.nodes.names[choice.node], choice.now


# a: its 2 GPUs are being released (fits later); b: 2 of 4 GPUs free now. Binpack alone prefers the fuller a.
AVAILABILITY = [
    node("a", gpu=2),
    node("b", gpu=4),
    *job_docs("leaving", "team", 1, on="a", gpu=2, releasing=True),
    *job_docs("used", "team", 1, on="b", gpu=2),
    *job_docs("p", "team", 1, gpu=2),
]
# a CPU-only pod: the GPU node is fuller on CPU (binpack's choice), the CPU-only node is the resource type's
RESOURCE_TYPE = [
    node("cpu-only", gpu=0),
    node("gpu", gpu=4),
    *job_docs("used", "team", 1, on="gpu", gpu=0, cpu="6"),
    *job_docs("p", "team", 1, gpu=0),
]
# a fraction: "shared" has a GPU group with room for it; "full" is fuller (binpack's choice) with a free GPU
GPU_SHARING = [
    node("shared", gpu=4),
    node("full", gpu=2),
    *job_docs("half", "team", 1, on="shared", fraction="0.5", gpu_groups=("shared-gpu0",)),
    *job_docs("used", "team", 1, on="full", gpu=1),
    *job_docs("p", "team", 1, fraction="0.5"),
]
# a GPU pod and a CPU-only pod; a is fuller than b on GPUs and CPU
PLACEMENT = [
    node("a"),
    node("b"),
    *job_docs("used", "team", 1, on="a", gpu=2, cpu="4"),
    *job_docs("g", "team", 1, gpu=1),
    *job_docs("c", "team", 1, gpu=0),
]


@pytest.mark.parametrize(
    ("docs", "pod_name", "conf", "want"),
    [
        (AVAILABILITY, "p-0", DEFAULT, ("b", True)),  # +1000: fits without waiting
        (AVAILABILITY, "p-0", off("nodeavailability"), ("a", False)),  # pipelined onto what a releases
        (RESOURCE_TYPE, "p-0", DEFAULT, ("cpu-only", True)),  # +10 beats binpack's at most 9
        (RESOURCE_TYPE, "p-0", off("resourcetype"), ("gpu", True)),
        (GPU_SHARING, "p-0", DEFAULT, ("shared", True)),  # +10000: a shared GPU it fits on
        (GPU_SHARING, "p-0", off("gpusharingorder"), ("full", True)),
        (PLACEMENT, "g-0", DEFAULT.with_plugin("nodeplacement", gpu="binpack", cpu="spread"), ("a", True)),
        (PLACEMENT, "c-0", DEFAULT.with_plugin("nodeplacement", gpu="binpack", cpu="spread"), ("b", True)),
        (PLACEMENT, "g-0", DEFAULT.with_plugin("nodeplacement", gpu="spread", cpu="binpack"), ("b", True)),
        (PLACEMENT, "c-0", DEFAULT.with_plugin("nodeplacement", gpu="spread", cpu="binpack"), ("a", True)),
    ],
    ids=[
        "nodeavailability",
        "nodeavailability-off",
        "resourcetype",
        "resourcetype-off",
        "gpusharingorder",
        "gpusharingorder-off",
        "gpu-binpack",
        "cpu-spread",
        "gpu-spread",
        "cpu-binpack",
    ],
)
def test_node_choice(docs: list[dict[str, Any]], pod_name: str, conf: SchedulerConf, want: tuple[str, bool]) -> None:
    assert chosen(docs, pod_name, conf) == want


@pytest.mark.parametrize(
    ("conf", "slots"),
    [
        (DEFAULT, (0,)),  # gpupack: onto the shared GPU
        (DEFAULT.with_plugin("gpupack", enabled=False).with_plugin("gpuspread"), (1,)),  # gpuspread: a fresh GPU
    ],
    ids=["gpupack", "gpuspread"],
)
def test_gpu_order_on_a_node(conf: SchedulerConf, slots: tuple[int, ...]) -> None:
    docs = [
        *QUEUES,
        node("n", gpu=2),
        *job_docs("half", "team", 1, on="n", fraction="0.5", gpu_groups=("n-gpu0",)),
        *job_docs("p", "team", 1, fraction="0.25"),
    ]
    ssn = session_of(docs, conf)
    t = task(ssn.snap, "p-0")
    choice = ssn.placer.best_node(t)
    assert choice is not None
    ssn.statement().allocate(t, choice.node, choice.gpus)
    assert ssn.gpus[t.index] == slots
