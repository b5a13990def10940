"""gpupolicy (kai): a GPU placement policy picks the node and GPUs of each task that fits on idle resources.

``placementStrategy.gpu: <policy>`` on a SchedulingShard enables it (``fragmentation``, ``bestfit``, ``fgd``,
``gpupacking``, ``gpuclustering``, ``dotprod``, ``random``; docs/trace.md). The policy
(``kai.scheduler.policyplacer``) chooses among the rows the Placer allows; when it declines, the Placer's own
choice stands. Arguments: ``policy`` and ``seed`` (the random policy's generator seed, also
``spec.args.gpu-policy-seed``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from kai.api.objects import GPU_POLICIES
from kai.scheduler.framework import Arg, Choice, Plugin
from kai.scheduler.model import TaskInfo
from kai.scheduler.plugins._args import integer, one_of
from kai.scheduler.policyplacer import PolicyPlacer
from kai.scheduler.session import Session


class GpuPolicy(Plugin):
    name: ClassVar[str] = "gpupolicy"
    ARGS: ClassVar[Mapping[str, Arg]] = {"policy": one_of(*GPU_POLICIES), "seed": integer}
    DEFAULTS: ClassVar[Mapping[str, Any]] = {"policy": "fragmentation", "seed": 0}

    def __init__(self, args: Mapping[str, Any] | None = None, *, where: str = "") -> None:
        super().__init__(args, where=where)
        self._placer: PolicyPlacer | None = None

    def _policy(self, ssn: Session) -> PolicyPlacer:
        if self._placer is None:
            self._placer = PolicyPlacer(ssn, self.args["policy"], self.args["seed"])
        return self._placer

    def node_choice(
        self,
        ssn: Session,
        task: TaskInfo,
        static: np.ndarray,
        fits_now: np.ndarray,
        allowed: np.ndarray | None,
        bonus: np.ndarray | None,
    ) -> Choice | None:
        return self._policy(ssn).best_node(task, static, fits_now, allowed, bonus)
