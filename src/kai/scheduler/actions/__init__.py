"""Actions, in KAI's default order. Eviction actions land with their issue; until then they do nothing."""

from __future__ import annotations

from typing import Protocol

from kai.scheduler.actions.allocate import Allocate
from kai.scheduler.session import Session


class Action(Protocol):
    name: str

    def execute(self, ssn: Session) -> None: ...


class _NotYetBuilt:
    """An action kai accepts in its configuration but does not implement yet: it changes nothing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def execute(self, ssn: Session) -> None:
        return None


ACTIONS: dict[str, Action] = {
    "allocate": Allocate(),
    "consolidation": _NotYetBuilt("consolidation"),
    "reclaim": _NotYetBuilt("reclaim"),
    "preempt": _NotYetBuilt("preempt"),
    "stalegangeviction": _NotYetBuilt("stalegangeviction"),
}

NOT_YET_BUILT = tuple(name for name, a in ACTIONS.items() if isinstance(a, _NotYetBuilt))

__all__ = ["ACTIONS", "NOT_YET_BUILT", "Action"]
