"""From ``kai sim``'s input to a ready run: the Simulation document split from the manifests, the
command line's overrides, the workload sources, and the checks that need everything at once.

Rules: every check that can be made before the run is made here, so a bad configuration stops before
the first cycle with a ManifestError naming the file, the object and the field (a node event naming a
node nobody creates, a generator or trace naming a queue or priority class nobody creates, a trace file
that is missing or bad).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.manifests import Ignored, ManifestObject, iter_documents, parse_document
from kai.api.objects import Node, PriorityClass, Queue
from kai.sim.timesim._config import SimulationSpec, is_simulation, parse_simulation
from kai.sim.timesim._engine import RunParams
from kai.sim.timesim._generators import GeneratorSource, generator_streams, node_pool_nodes
from kai.sim.timesim._sources import ManifestSource, WorkloadSource, arrival_time
from kai.sim.timesim._trace import TraceSource, load_traces, trace_streams

SAMPLES = 240  # fragmentation samples over a run with a horizon
OCCUPANCY_FRACTIONS = (0.25, 0.5, 0.75)  # default instants of the node x GPU map, as parts of the horizon


def load_input(
    texts: Iterable[tuple[str, str]],
) -> tuple[list[tuple[str, ManifestObject]], list[Ignored], SimulationSpec | None]:
    """(source, text) pairs → manifests, ignored documents and the Simulation document (if any)."""
    objects: list[tuple[str, ManifestObject]] = []
    ignored: list[Ignored] = []
    spec: SimulationSpec | None = None
    for source, text in texts:
        for doc in iter_documents(text, source):
            if is_simulation(doc):
                if spec is not None:
                    raise ManifestError(
                        f"a second Simulation document ({spec.ref} came first); give one",
                        source=source,
                        obj=f"Simulation/{(doc.get('metadata') or {}).get('name', '?')}",
                    )
                spec = parse_simulation(doc, source)
                continue
            obj = parse_document(doc, source)
            if isinstance(obj, Ignored):
                ignored.append(obj)
            else:
                objects.append((source, obj))
    return objects, ignored, spec


@dataclass(frozen=True, slots=True)
class Overrides:
    """``kai sim``'s flags, over the Simulation document's fields."""

    until: float | None = None
    period: float | None = None
    seed: int | None = None


@dataclass(frozen=True, slots=True)
class Plan:
    spec: SimulationSpec
    params: RunParams
    sources: tuple[WorkloadSource, ...]


def plan(objects: list[tuple[str, ManifestObject]], spec: SimulationSpec | None, over: Overrides) -> Plan:
    """The run's parameters and sources; ManifestError for anything that cannot work."""
    spec = spec if spec is not None else SimulationSpec()
    changes: dict[str, Any] = {}
    if over.until is not None:
        changes["duration"] = over.until
    if over.period is not None:
        changes["period"] = over.period
    if over.seed is not None:
        changes["seed"] = over.seed
    spec = dataclasses.replace(spec, **changes)
    pool_nodes = [n for pool in spec.node_pools for n in node_pool_nodes(pool)]
    _check(objects, spec)
    for src, obj in objects:
        arrival_time(src, obj)  # a bad kai.sim/arrival stops here, before the run
    traces = load_traces(spec, [*pool_nodes, *(o for _, o in objects if isinstance(o, Node))])
    _check_node_events(objects, [*pool_nodes, *traces.nodes], spec)
    manifests = [*((spec.source, n) for n in (*pool_nodes, *traces.nodes)), *objects]
    sources: list[WorkloadSource] = [ManifestSource(manifests)]
    for gen, rng in zip(spec.generators, generator_streams(spec), strict=True):
        sources.append(GeneratorSource(gen, rng, spec.source))
    for trace, shapes, rng in zip(spec.traces, traces.shapes, trace_streams(spec), strict=True):
        sources.append(TraceSource(trace, shapes, rng, spec.source))
    horizon = spec.duration
    occupancy = spec.occupancy_at or (tuple(horizon * f for f in OCCUPANCY_FRACTIONS) if horizon else ())
    params = RunParams(
        until=horizon,
        period=spec.period,
        idle_recheck=spec.idle_recheck,
        checkpoint=spec.checkpoint,
        occupancy_at=occupancy,
        sample_every=max(spec.period, horizon / SAMPLES) if horizon else 300.0,
    )
    return Plan(spec, params, tuple(sources))


def _check_node_events(objects: list[tuple[str, ManifestObject]], made: list[Node], spec: SimulationSpec) -> None:
    nodes = {n.meta.name for n in made} | {o.meta.name for _, o in objects if isinstance(o, Node)}
    for ev in spec.node_events:
        if ev.node not in nodes:
            raise spec.error(
                f"{ev.field}.node",
                f"node {ev.node!r} is not in the input (nor in a node pool) nor in a trace's node list",
            )


def _check(objects: list[tuple[str, ManifestObject]], spec: SimulationSpec) -> None:
    """Queues and priority classes the generators and traces name."""
    queues = {o.meta.name: o for _, o in objects if isinstance(o, Queue)}
    parents = {q.parent for q in queues.values() if q.parent}
    classes = set(C.DEFAULT_PRIORITY_CLASSES) | {o.meta.name for _, o in objects if isinstance(o, PriorityClass)}
    for g in spec.generators:
        if g.queue not in queues:
            raise spec.error(f"{g.field}.queue", f"queue {g.queue!r} does not exist (apply it with the manifests)")
        if g.queue in parents:
            raise spec.error(f"{g.field}.queue", f"queue {g.queue!r} is a parent queue; only leaf queues hold jobs")
        if g.priority_class not in classes:
            raise spec.error(f"{g.field}.priorityClassName", f"priority class {g.priority_class!r} does not exist")
    for t in spec.traces:
        for name in t.queues.names:
            if name not in queues:
                raise spec.error(t.queues.field, f"queue {name!r} does not exist (apply it with the manifests)")
            if name in parents:
                raise spec.error(t.queues.field, f"queue {name!r} is a parent queue; only leaf queues hold jobs")
        if t.priority_class not in classes:
            raise spec.error(f"{t.field}.priorityClassName", f"priority class {t.priority_class!r} does not exist")
