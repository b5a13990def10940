"""The node-order plugins: KAI's nodeavailability, resourcetype, nodeplacement and gpusharingorder, and gpupack
and gpuspread (which rank the shared GPUs of one node). Each contributes weights to the Placer's resource
score kernel (``ScoreTerms``) with KAI's magnitudes (kai-behaviour §4.1's score table), so scores stay vectorized
over nodes and current row by row as the Session changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from kai.scheduler.framework import Arg, Plugin, ScoreTerms
from kai.scheduler.model import GPU, TaskInfo
from kai.scheduler.plugins._args import one_of
from kai.scheduler.session import Session

AVAILABILITY = 1000.0  # fits on idle resources now, without waiting for releases
RESOURCE_TYPE = 10.0  # a CPU-only task on a CPU-only node
GPU_SHARING = 10000.0  # a node with a shared GPU that takes the fraction


class NodeAvailability(Plugin):
    name: ClassVar[str] = "nodeavailability"

    def node_order_terms(self, ssn: Session, task: TaskInfo) -> ScoreTerms:
        return ScoreTerms(fits_now=AVAILABILITY)


class ResourceType(Plugin):
    name: ClassVar[str] = "resourcetype"

    def node_order_terms(self, ssn: Session, task: TaskInfo) -> ScoreTerms:
        return ScoreTerms(cpu_node=RESOURCE_TYPE)


class NodePlacement(Plugin):
    """binpack (fullest node first, 0..9) or spread (emptiest first): ``gpu`` for GPU tasks, ``cpu`` for the rest."""

    name: ClassVar[str] = "nodeplacement"
    ARGS: ClassVar[Mapping[str, Arg]] = {"gpu": one_of("binpack", "spread"), "cpu": one_of("binpack", "spread")}
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"gpu": "binpack", "cpu": "binpack"}

    def node_order_terms(self, ssn: Session, task: TaskInfo) -> ScoreTerms:
        strategy = self.args["gpu"] if task.request[GPU] > 0 else self.args["cpu"]
        return ScoreTerms(binpack=1.0) if strategy == "binpack" else ScoreTerms(spread=1.0)


class GpuSharingOrder(Plugin):
    name: ClassVar[str] = "gpusharingorder"

    def node_order_terms(self, ssn: Session, task: TaskInfo) -> ScoreTerms:
        return ScoreTerms(shared_fit=GPU_SHARING)


class GpuPack(Plugin):
    """A fraction goes on the fullest shared GPU it fits, before a fresh one."""

    name: ClassVar[str] = "gpupack"

    def gpu_order(self, ssn: Session) -> str:
        return "pack"


class GpuSpread(Plugin):
    """A fraction goes on the emptiest GPU, a fresh one first."""

    name: ClassVar[str] = "gpuspread"

    def gpu_order(self, ssn: Session) -> str:
        return "spread"
