"""Where a simulation's work comes from: the WorkloadSource interface and the manifest source.

Rules: a source yields ``Arrival``s in non-decreasing time; each holds fresh objects (never yielded
twice) that the simulator applies to the embedded cluster at that time, stamping their
``creationTimestamp`` with the arrival time. Sources never see the cluster, so they stay deterministic:
the same input and seed give the same arrivals. Three kinds plug in here: manifests with the
``kai.sim/arrival`` annotation (this module), seeded generators (``_generators``) and traces
(``_trace``: one trace pod per job → one Arrival).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import ApiObject, object_ref
from kai.api.workloads import Workload
from kai.sim.cluster import parse_sim_annotation

SimObject = ApiObject | Workload


@dataclass(frozen=True, slots=True)
class Arrival:
    """Objects applied together at ``at`` seconds after the simulation starts, as (source, object) pairs."""

    at: float
    objects: tuple[tuple[str, SimObject], ...]


class WorkloadSource(Protocol):
    """A stream of arrivals in non-decreasing time (manifests, a generator, a trace)."""

    name: str

    def arrivals(self) -> Iterator[Arrival]:
        """Arrivals in time order; objects are new each time and belong to the simulator once yielded."""
        ...


def arrival_time(source: str, obj: SimObject) -> float:
    """Seconds from the start given by the object's ``kai.sim/arrival`` annotation (0 without one)."""
    text = obj.meta.annotations.get(C.ANNOTATION_SIM_ARRIVAL)
    if text is None:
        return 0.0
    ref = object_ref(obj.kind, obj.meta.namespace, obj.meta.name)
    field = f"metadata.annotations.{C.ANNOTATION_SIM_ARRIVAL}"
    return parse_sim_annotation(
        C.ANNOTATION_SIM_ARRIVAL, text, lambda m: ManifestError(m, source=source, obj=ref, field=field)
    )


class ManifestSource:
    """Manifests as given: each object arrives at its ``kai.sim/arrival`` (default 0, the start), objects
    with the same time together, in input order."""

    name = "manifests"

    def __init__(self, objects: Sequence[tuple[str, SimObject]]) -> None:
        timed = [(arrival_time(src, obj), i, src, obj) for i, (src, obj) in enumerate(objects)]
        timed.sort(key=lambda x: (x[0], x[1]))
        self._groups = [
            Arrival(at, tuple((src, obj) for _, _, src, obj in group))
            for at, group in itertools.groupby(timed, key=lambda x: x[0])
        ]

    def arrivals(self) -> Iterator[Arrival]:
        yield from self._groups


def merge_arrivals(sources: Iterable[WorkloadSource]) -> Iterator[Arrival]:
    """All sources' arrivals in time order; ties go to the earlier source (deterministic)."""
    streams = [((a.at, i, n, a) for n, a in enumerate(s.arrivals())) for i, s in enumerate(sources)]
    for _, _, _, arrival in heapq.merge(*streams, key=lambda x: (x[0], x[1], x[2])):
        yield arrival
