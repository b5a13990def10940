"""A task's stateful node rules (``node_filter``), combined: what the Placer, ``Session.fit_on`` and the pending
explanations ask of them.

Rules: made once per task per Session (``Hooks.node_rules``), so what is derived here (which rules filter,
which tell "now" from "later") is worked out once. A rule without ``now_mask`` (or whose ``now_differs`` is
False) answers the same now and later; a rule whose ``filters`` is False only scores; a rule without
``loosens`` is taken to loosen (the safe answer for allocate's "a shape that failed stays failed" shortcut).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from kai.scheduler.framework._plugin import NodeRule


class NodeRules:
    """The rules of one task, ANDed (masks) and summed (scores)."""

    __slots__ = ("filters", "loosens", "now", "rules")

    def __init__(self, rules: Sequence[NodeRule]) -> None:
        self.rules = tuple(rules)
        self.filters = tuple(r for r in rules if getattr(r, "filters", True))
        self.now = tuple(r for r in self.filters if hasattr(r, "now_mask") and getattr(r, "now_differs", True))
        self.loosens = any(getattr(r, "loosens", True) for r in self.filters)

    def __bool__(self) -> bool:
        return bool(self.rules)

    def mask(self) -> np.ndarray | None:
        """(n,) bool: rows every rule allows (once pods being released are gone); None if no rule filters."""
        return _all([r.mask() for r in self.filters])

    def now_mask(self) -> np.ndarray | None:
        """(n,) bool: rows every rule allows while the pods being released are still there (a task placed
        there now rather than pipelined); None if no rule tells now from later."""
        return _all([r.now_mask() for r in self.now])  # type: ignore[attr-defined]

    def scores(self) -> np.ndarray | None:
        total = None
        for r in self.rules:
            s = r.scores()
            if s is not None:
                total = s if total is None else total + s
        return total

    def allows(self, row: int) -> bool:
        return all(r.allows(row) for r in self.filters)

    def allows_now(self, row: int) -> bool:
        return all(r.allows_now(row) for r in self.now)  # type: ignore[attr-defined]

    def failures(self) -> list[tuple[str, np.ndarray]]:
        out: list[tuple[str, np.ndarray]] = []
        for r in self.filters:
            out.extend(r.failures())
        return out


def _all(masks: list[np.ndarray]) -> np.ndarray | None:
    if not masks:
        return None
    out = masks[0]
    for m in masks[1:]:
        out = out & m
    return out


NO_RULES = NodeRules(())
