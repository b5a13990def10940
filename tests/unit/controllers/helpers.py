"""A fake View for controller tests: children by owner, names taken, a clock."""

from __future__ import annotations

from typing import Any

from kai.api.objects import Pod, parse_pod
from kai.api.workloads import Workload, parse_workload
from kai.sim.controllers import Result

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


class FakeView:
    def __init__(self, children: list[Workload | Pod] = (), taken: set[tuple[str, str]] = (), now: float = NOW) -> None:  # type: ignore[assignment]
        self._children = list(children)
        self._taken = set(taken)
        self._now = now

    @property
    def now(self) -> float:
        return self._now

    def children(self, owner: Workload | Pod) -> list[Workload | Pod]:
        out = []
        for c in self._children:
            ref = c.meta.owner_references[0] if c.meta.owner_references else None
            if ref is not None and ref.kind == owner.kind and ref.name == owner.meta.name:
                out.append(c)
        return out

    def taken(self, kind: str, namespace: str, name: str) -> bool:
        return (kind, name) in self._taken


def workload(doc: dict[str, Any]) -> Workload:
    doc.setdefault("metadata", {}).setdefault("namespace", "default")
    return parse_workload(doc)


def made(result: Result) -> list[Workload | Pod]:
    """The Result's manifests parsed, as the embedded cluster would apply them."""
    return [parse_pod(c.doc) if c.doc["kind"] == "Pod" else parse_workload(c.doc) for c in result.create]


def names(result: Result) -> list[str]:
    return [c.doc["metadata"]["name"] for c in result.create]


def with_phase(pod: Pod, phase: str, node: str = "n0") -> Pod:
    pod.phase = phase
    pod.node_name = node if phase != "Pending" else ""
    return pod


CONTAINER = {"name": "c", "image": "x", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 1}}}
TEMPLATE = {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [CONTAINER]}}
