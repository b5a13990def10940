"""Label selectors (``metav1.LabelSelector``): which pods (or namespaces) a rule is about.

Rules: a selector is parsed once, strictly (an unknown operator, ``In`` without values, ``Exists`` with
values are errors naming the field), into a canonical, hashable value: requirements sorted and without
duplicates, so two pods that wrote the same selector differently share one. ``None`` stands for an absent
selector, which in an inter-pod affinity term or a spread constraint matches nothing; the empty selector
``{}`` matches everything. Node selectors (which also take ``Gt``/``Lt``) share the requirement type.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kai.api._read import _list, _map, _required, _str
from kai.api.errors import ManifestError

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def cached_hash(self: Any) -> int:
    """``__hash__`` of a frozen dataclass with a ``_hash`` slot: the rules of a Session key their caches by
    selectors and terms thousands of times, and a dataclass would rehash every nested field each time."""
    h = self._hash
    if h == 0:
        h = hash(tuple(getattr(self, f) for f in self.__match_args__)) or 1
        object.__setattr__(self, "_hash", h)
    return h


def _hash_slot() -> Any:
    return field(default=0, init=False, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class SelectorRequirement:
    key: str
    operator: str
    values: tuple[str, ...]
    _hash: int = _hash_slot()

    __hash__ = cached_hash


def requirement_holds(r: SelectorRequirement, labels: Mapping[str, str]) -> bool:
    """A label requirement (In, NotIn, Exists, DoesNotExist) on a label set."""
    value = labels.get(r.key)
    op = r.operator
    if op == "In":
        return value is not None and value in r.values
    if op == "NotIn":
        return value is None or value not in r.values
    if op == "Exists":
        return value is not None
    return value is None  # DoesNotExist


def describe_requirement(r: SelectorRequirement) -> str:
    vals = ",".join(r.values)
    return {
        "In": f"{r.key} in ({vals})",
        "NotIn": f"{r.key} notin ({vals})",
        "Exists": f"{r.key} exists",
        "DoesNotExist": f"!{r.key}",
        "Gt": f"{r.key} > {vals}",
        "Lt": f"{r.key} < {vals}",
    }[r.operator]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """matchLabels and matchExpressions, ANDed; canonical (sorted, no duplicates)."""

    match_labels: tuple[tuple[str, str], ...] = ()
    match_expressions: tuple[SelectorRequirement, ...] = ()
    _hash: int = _hash_slot()

    __hash__ = cached_hash

    @staticmethod
    def of(labels: Mapping[str, str] | None = None, exprs: tuple[SelectorRequirement, ...] = ()) -> LabelSelector:
        return LabelSelector(
            tuple(sorted((labels or {}).items())),
            tuple(sorted(set(exprs), key=lambda r: (r.key, r.operator, r.values))),
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        for k, v in self.match_labels:
            if labels.get(k) != v:
                return False
        return all(requirement_holds(r, labels) for r in self.match_expressions)

    @property
    def everything(self) -> bool:
        """The empty selector: every label set matches."""
        return not self.match_labels and not self.match_expressions

    def merged(self, required: Mapping[str, str], refused: Mapping[str, str] = {}) -> LabelSelector:
        """This selector with ``key in (value)`` for each of *required* and ``key notin (value)`` for each of
        *refused*: how matchLabelKeys / mismatchLabelKeys take the pod's own label values (the API server
        merges them into the selector when the pod is created; merging again changes nothing)."""
        if not required and not refused:
            return self
        exprs = [
            *self.match_expressions,
            *(SelectorRequirement(k, "In", (v,)) for k, v in required.items()),
            *(SelectorRequirement(k, "NotIn", (v,)) for k, v in refused.items()),
        ]
        return LabelSelector.of(dict(self.match_labels), tuple(exprs))

    def equalities(self) -> list[tuple[str, tuple[str, ...]]]:
        """(key, values) a matching label set must have one of: matchLabels and ``In`` requirements (for
        indexing: a pod can match only if it carries one of these labels)."""
        out = [(k, (v,)) for k, v in self.match_labels]
        out += [(r.key, r.values) for r in self.match_expressions if r.operator == "In"]
        return out

    def describe(self) -> str:
        """``app=web,tier in (a,b)``; ``all pods`` for the empty selector."""
        parts = [f"{k}={v}" for k, v in self.match_labels] + [describe_requirement(r) for r in self.match_expressions]
        return ",".join(parts) if parts else "all pods"


def _label_value(v: Any, path: str) -> str:
    """A label value: a string (YAML's ``1`` or ``true`` is not one; the API server refuses it too)."""
    if not isinstance(v, str):
        raise ManifestError(f"{v!r} is not a string (quote it)", field=path)
    return v


def parse_requirement(
    r: Any, p: str, operators: tuple[str, ...] = LABEL_OPERATORS, value: Callable[[Any, str], str] = _label_value
) -> SelectorRequirement:
    """One matchExpressions item, checked as the API server checks it (*value* reads each value)."""
    r = _map(r, p)
    key = _required(r.get("key"), f"{p}.key")
    op = _str(r.get("operator"), f"{p}.operator")
    if op not in operators:
        raise ManifestError(f"{op!r} is not one of {', '.join(operators)}", field=f"{p}.operator")
    values = tuple(value(v, f"{p}.values[{i}]") for i, v in enumerate(_list(r.get("values"), f"{p}.values")))
    if op in ("In", "NotIn") and not values:
        raise ManifestError(f"operator {op} needs at least one value", field=f"{p}.values")
    if op in ("Exists", "DoesNotExist") and values:
        raise ManifestError(f"operator {op} takes no values", field=f"{p}.values")
    return SelectorRequirement(key, op, values)


def parse_label_selector(obj: Any, path: str) -> LabelSelector | None:
    """A LabelSelector, or None when absent."""
    if obj is None:
        return None
    m = _map(obj, path)
    labels = {}
    for k, v in _map(m.get("matchLabels"), f"{path}.matchLabels").items():
        if not str(k):
            raise ManifestError("a label key is required", field=f"{path}.matchLabels")
        labels[str(k)] = _label_value(v, f"{path}.matchLabels.{k}")
    exprs = tuple(
        parse_requirement(r, f"{path}.matchExpressions[{i}]")
        for i, r in enumerate(_list(m.get("matchExpressions"), f"{path}.matchExpressions"))
    )
    return LabelSelector.of(labels, exprs)
