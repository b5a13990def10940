"""PodDisruptionBudget (policy/v1): how many of a set of pods may be down at once.

KAI deletes victims without looking at PDBs; kai checks them (on by default),
because an eviction that takes a replicated service below its budget is the
"surprise eviction" users complain about. Only the fields the scheduler needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kai.api.errors import ManifestError
from kai.api.objects import ObjectMeta, parse_go_int, parse_meta
from kai.api.selectors import LabelSelector, parse_label_selector


@dataclass(frozen=True, slots=True)
class IntOrPercent:
    value: int
    percent: bool

    def resolve(self, total: int, *, round_up: bool) -> int:
        if not self.percent:
            return self.value
        scaled = self.value * total / 100
        return math.ceil(scaled) if round_up else math.floor(scaled)


@dataclass(slots=True)
class PodDisruptionBudget:
    meta: ObjectMeta
    selector: LabelSelector  # an empty selector selects every pod in the namespace (policy/v1)
    min_available: IntOrPercent | None
    max_unavailable: IntOrPercent | None

    kind = "PodDisruptionBudget"

    def selects(self, labels: dict[str, str]) -> bool:
        return self.selector.matches(labels)

    def allowed_disruptions(self, expected: int, healthy: int) -> int:
        """Pods that may still be disrupted: healthy minus the desired healthy count (Kubernetes' rule)."""
        if self.min_available is not None:
            desired = self.min_available.resolve(expected, round_up=True)
        else:
            assert self.max_unavailable is not None
            desired = expected - self.max_unavailable.resolve(expected, round_up=True)
        return max(0, healthy - desired)


def _int_or_percent(value: Any, path: str) -> IntOrPercent | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ManifestError(f"{value!r} is not an integer or a percentage", field=path)
    if isinstance(value, int):
        n, percent = value, False
    elif isinstance(value, str) and value.endswith("%") and parse_go_int(value[:-1]) is not None:
        n, percent = int(value[:-1]), True
    elif isinstance(value, str) and parse_go_int(value) is not None:
        n, percent = int(value), False
    else:
        raise ManifestError(f"{value!r} is not an integer or a percentage", field=path)
    if n < 0:
        raise ManifestError("must not be negative", field=path)
    return IntOrPercent(n, percent)


def parse_pdb(doc: dict[str, Any]) -> PodDisruptionBudget:
    meta = parse_meta(doc, "PodDisruptionBudget", namespaced=True)
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        raise ManifestError("must be a mapping", field="spec")
    selector = parse_label_selector(spec.get("selector"), "spec.selector") or LabelSelector()
    min_available = _int_or_percent(spec.get("minAvailable"), "spec.minAvailable")
    max_unavailable = _int_or_percent(spec.get("maxUnavailable"), "spec.maxUnavailable")
    if (min_available is None) == (max_unavailable is None):
        raise ManifestError("set exactly one of minAvailable and maxUnavailable", field="spec.minAvailable")
    return PodDisruptionBudget(
        meta=meta,
        selector=selector,
        min_available=min_available,
        max_unavailable=max_unavailable,
    )
