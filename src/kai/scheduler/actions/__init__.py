"""Actions, in KAI's default order: allocate, consolidation, reclaim, preempt, stalegangeviction."""

from __future__ import annotations

from typing import Protocol

from kai.scheduler.actions.allocate import Allocate
from kai.scheduler.actions.consolidation import Consolidation
from kai.scheduler.actions.preempt import Preempt
from kai.scheduler.actions.reclaim import Reclaim
from kai.scheduler.actions.stalegang import StaleGangEviction
from kai.scheduler.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


ACTIONS: dict[str, Action] = {
    "allocate": Allocate(),
    "consolidation": Consolidation(),
    "reclaim": Reclaim(),
    "preempt": Preempt(),
    "stalegangeviction": StaleGangEviction(),
}

__all__ = ["ACTIONS", "Action"]
