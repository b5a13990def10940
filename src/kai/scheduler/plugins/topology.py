"""topology: a job's topology constraints resolved against the Topology objects (KAI's topology plugin).

``subset_nodes`` answers, per gang node, the required and preferred levels of the named Topology
(``kai.scheduler.topology``); the gang placement (``kai.scheduler.actions.gang``) then tries one domain at a
time and ranks nodes inside the preferred one. With this plugin disabled a job that asks for a topology
constraint waits with a reason saying so (the constraint is never silently dropped).
"""

from __future__ import annotations

from typing import ClassVar

from kai.scheduler.framework import Plugin
from kai.scheduler.model import JobInfo
from kai.scheduler.session import Session
from kai.scheduler.topology import Constraint, job_constraints_of


class TopologyPlugin(Plugin):
    name: ClassVar[str] = "topology"

    def subset_nodes(self, ssn: Session, job: JobInfo) -> list[Constraint | None]:
        return job_constraints_of(ssn, job)
