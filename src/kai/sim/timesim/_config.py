"""The ``Simulation`` document (``kai.sim/v1alpha1``): how a time-based ``kai sim`` run goes.

Rules: one optional document among the manifests; every field has a default, so a run with only
``--until`` needs none. Parsing is strict and every error is a ManifestError naming the file, the
``Simulation/<name>`` object and the field. Nothing here runs anything: the result is frozen data.

```yaml
apiVersion: kai.sim/v1alpha1
kind: Simulation
metadata: {name: two-teams-day}
spec:
  seed: 7                    # every generator draws from it (default 0)
  duration: 24h              # the horizon (default: until no work is left)
  schedulePeriod: 10s        # cycles happen on multiples of it (default 1s, KAI's)
  idleRecheck: 5m            # longest gap between cycles while work waits and nothing changes (0s: every period)
  checkpointInterval: 30m    # default for pods without kai.sim/checkpoint-interval (default: restart from scratch)
  occupancyAt: [6h, 12h]     # instants of the node x GPU map (default: four, evenly spaced)
  nodePools: [{name: dgx, count: 4, gpus: 8, cpu: "64", memory: 512Gi, labels: {}}]
  nodeEvents: [{at: 6h, node: dgx-1, action: drain}]    # drain | uncordon | fail | repair
  generators: [...]          # see GeneratorSpec
  traces: [...]              # see TraceSpec: jobs shaped like a trace's pods (docs/simulation.md)
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from kai.api.errors import ManifestError
from kai.api.quantity import parse_quantity
from kai.sim.timesim._random import (
    CountDist,
    DurationDist,
    parse_count_dist,
    parse_duration_dist,
    seconds,
)

SIM_API_VERSION = "kai.sim/v1alpha1"
SIM_KIND = "Simulation"
NODE_ACTIONS = ("drain", "uncordon", "fail", "repair")
DEFAULT_PERIOD_S = 1.0  # KAI's --schedule-period
DEFAULT_IDLE_RECHECK_S = 300.0
_DNS = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class NodePoolSpec:
    """``count`` identical GPU nodes named ``<name>-0`` ... ``<name>-<count-1>``."""

    name: str
    count: int
    gpus: int
    cpu: str
    memory: str
    labels: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NodeEventSpec:
    """At ``at`` seconds: drain (cordon and evict its pods), uncordon, fail (gone with its pods) or repair
    (a failed node comes back empty) the node."""

    at: float
    node: str
    action: str
    field: str  # spec.nodeEvents[i], for messages at run time


@dataclass(frozen=True, slots=True)
class GeneratorSpec:
    """Jobs of one kind from one team: a PodGroup of ``pods`` pods, each with ``gpusPerPod`` GPUs, arriving
    from ``start`` with random gaps (``interArrival``) until ``jobs`` have arrived or ``end`` has passed."""

    name: str
    queue: str
    namespace: str
    jobs: int | None
    start: float
    end: float | None
    inter_arrival: DurationDist
    pods: CountDist
    gpus_per_pod: CountDist
    cpu_per_pod: str
    memory_per_pod: str
    duration: DurationDist
    priority_class: str
    checkpoint: float | None
    field: str  # spec.generators[i]


TRACE_PICKS = ("random", "first")
TRACE_GPU_SPEC = ("nodeAffinity", "ignore")
TRACE_NODES_DEFAULT = "default"  # the data folder's node list
TRACE_NODES_MANIFESTS = "manifests"  # add no nodes: the manifests' (and node pools') nodes run the trace


@dataclass(frozen=True, slots=True)
class QueueChoice:
    """Which queue each job goes to: round-robin over ``names`` (``weights`` None) or a weighted draw."""

    names: tuple[str, ...]
    weights: tuple[float, ...] | None  # normalized; None = round-robin in order
    field: str  # spec.traces[i].queue or .queues, for messages


@dataclass(frozen=True, slots=True)
class TraceSpec:
    """Jobs with the pod shapes of a trace (``pods``: a variant of data/alibaba-gpu-v2023 or a pod CSV),
    one pod per job, with synthetic arrivals (``interArrival``) and durations (``duration``). ``nodes``
    is the node CSV whose nodes join the cluster, ``default`` (the data folder's node list) or
    ``manifests`` (none: the input's nodes run the trace). Files are read when the run is planned."""

    name: str
    pods: str
    nodes: str
    gpu_spec: str  # nodeAffinity | ignore
    jobs: int | None  # None: every pod of the trace once
    pick: str  # random (a seeded permutation) | first (file order)
    start: float
    end: float | None
    inter_arrival: DurationDist
    duration: DurationDist
    queues: QueueChoice
    namespace: str
    priority_class: str
    checkpoint: float | None
    field: str  # spec.traces[i]


@dataclass(frozen=True, slots=True)
class SimulationSpec:
    name: str = "simulation"
    source: str = ""
    seed: int = 0
    duration: float | None = None
    period: float = DEFAULT_PERIOD_S
    idle_recheck: float = DEFAULT_IDLE_RECHECK_S
    checkpoint: float | None = None
    occupancy_at: tuple[float, ...] = ()
    node_pools: tuple[NodePoolSpec, ...] = ()
    node_events: tuple[NodeEventSpec, ...] = ()
    generators: tuple[GeneratorSpec, ...] = ()
    traces: tuple[TraceSpec, ...] = ()

    @property
    def ref(self) -> str:
        return f"{SIM_KIND}/{self.name}"

    def error(self, field: str, message: str) -> ManifestError:
        return ManifestError(message, source=self.source, obj=self.ref, field=field)


def is_simulation(doc: Any) -> bool:
    return isinstance(doc, dict) and doc.get("apiVersion") == SIM_API_VERSION and doc.get("kind") == SIM_KIND


def _mapping(value: Any, at: str, fail: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise fail(at, f"expected a mapping, got {type(value).__name__}")
    return value


def _list(value: Any, at: str, fail: Any) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise fail(at, f"expected a list, got {type(value).__name__}")
    return value


def _each(spec: dict[str, Any], key: str, parse: Any, fail: Any) -> tuple[Any, ...]:
    """``parse(item, "spec.<key>[i]", fail)`` for each item of the optional list ``spec.<key>``."""
    return tuple(parse(v, f"spec.{key}[{i}]", fail) for i, v in enumerate(_list(spec.get(key), f"spec.{key}", fail)))


def _name(value: Any, at: str, fail: Any) -> str:
    if not isinstance(value, str) or not _DNS.match(value) or len(value) > 50:
        raise fail(at, f"expected a DNS label of at most 50 characters (a-z, 0-9, -), got {value!r}")
    return value


def _quantity(value: Any, at: str, fail: Any) -> str:
    try:
        q = parse_quantity(value)
    except (ValueError, TypeError):
        raise fail(at, f"{value!r} is not a quantity (expected e.g. 500m, 2, 16Gi)") from None
    if q < 0:
        raise fail(at, f"{value!r} must not be negative")
    return str(value)


def _check_keys(doc: dict[str, Any], allowed: tuple[str, ...], at: str, fail: Any) -> None:
    for k in doc:
        if k not in allowed:
            raise fail(f"{at}.{k}" if at else k, f"unknown field (expected one of {', '.join(allowed)})")


def parse_simulation(doc: dict[str, Any], source: str = "") -> SimulationSpec:
    """The Simulation document → SimulationSpec; ManifestError naming the field on bad input."""
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name") or "simulation")
    ref = f"{SIM_KIND}/{name}"

    def fail(at: str, message: str) -> ManifestError:
        return ManifestError(message, source=source, obj=ref, field=at)

    spec = _mapping(doc.get("spec"), "spec", fail)
    _check_keys(
        spec,
        (
            "seed",
            "duration",
            "schedulePeriod",
            "idleRecheck",
            "checkpointInterval",
            "occupancyAt",
            "nodePools",
            "nodeEvents",
            "generators",
            "traces",
        ),
        "spec",
        fail,
    )
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise fail("spec.seed", f"expected a non-negative whole number, got {seed!r}")
    duration = seconds(spec["duration"], "spec.duration", fail, positive=True) if "duration" in spec else None
    period = (
        seconds(spec["schedulePeriod"], "spec.schedulePeriod", fail, positive=True)
        if "schedulePeriod" in spec
        else DEFAULT_PERIOD_S
    )
    idle = seconds(spec["idleRecheck"], "spec.idleRecheck", fail) if "idleRecheck" in spec else DEFAULT_IDLE_RECHECK_S
    checkpoint = _checkpoint(spec, "spec", fail)
    occupancy = _each(spec, "occupancyAt", seconds, fail)
    pools = _each(spec, "nodePools", _node_pool, fail)
    events = _each(spec, "nodeEvents", _node_event, fail)
    generators = _each(spec, "generators", _generator, fail)
    traces = _each(spec, "traces", _trace, fail)
    seen: set[str] = set()
    for g in (*generators, *traces):
        if g.name in seen:  # job names are <name>-<i>: one name, one source
            raise fail(f"{g.field}.name", f"{g.name!r} is used by an earlier generator or trace")
        seen.add(g.name)
    return SimulationSpec(
        name=name,
        source=source,
        seed=seed,
        duration=duration,
        period=period,
        idle_recheck=idle,
        checkpoint=checkpoint,
        occupancy_at=occupancy,
        node_pools=pools,
        node_events=events,
        generators=generators,
        traces=traces,
    )


def _node_pool(value: Any, at: str, fail: Any) -> NodePoolSpec:
    doc = _mapping(value, at, fail)
    _check_keys(doc, ("name", "count", "gpus", "cpu", "memory", "labels"), at, fail)
    count, gpus = doc.get("count"), doc.get("gpus", 8)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise fail(f"{at}.count", f"expected a whole number >= 1, got {count!r}")
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise fail(f"{at}.gpus", f"expected a whole number >= 0, got {gpus!r}")
    labels = _mapping(doc.get("labels"), f"{at}.labels", fail)
    return NodePoolSpec(
        name=_name(doc.get("name"), f"{at}.name", fail),
        count=count,
        gpus=gpus,
        cpu=_quantity(doc.get("cpu", "64"), f"{at}.cpu", fail),
        memory=_quantity(doc.get("memory", "512Gi"), f"{at}.memory", fail),
        labels={str(k): str(v) for k, v in labels.items()},
    )


def _node_event(value: Any, at: str, fail: Any) -> NodeEventSpec:
    doc = _mapping(value, at, fail)
    _check_keys(doc, ("at", "node", "action"), at, fail)
    if "at" not in doc:
        raise fail(f"{at}.at", "is required")
    action = doc.get("action")
    if action not in NODE_ACTIONS:
        raise fail(f"{at}.action", f"expected one of {', '.join(NODE_ACTIONS)}, got {action!r}")
    node = doc.get("node")
    if not isinstance(node, str) or not node:
        raise fail(f"{at}.node", "expected a node name")
    return NodeEventSpec(seconds(doc["at"], f"{at}.at", fail), node, action, at)


_GENERATOR_KEYS = (
    "name",
    "queue",
    "namespace",
    "jobs",
    "start",
    "end",
    "interArrival",
    "pods",
    "gpusPerPod",
    "cpuPerPod",
    "memoryPerPod",
    "duration",
    "priorityClassName",
    "checkpointInterval",
)


def _arrival_keys(doc: dict[str, Any], required: tuple[str, ...], at: str, fail: Any) -> int | None:
    """What a generator and a trace section share: their required keys are there; the optional
    ``jobs`` cap, checked (a whole number >= 0, or None)."""
    for key in required:
        if key not in doc:
            raise fail(f"{at}.{key}", "is required")
    jobs = doc.get("jobs")
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 0):
        raise fail(f"{at}.jobs", f"expected a whole number >= 0, got {jobs!r}")
    return jobs


def _generator(value: Any, at: str, fail: Any) -> GeneratorSpec:
    doc = _mapping(value, at, fail)
    _check_keys(doc, _GENERATOR_KEYS, at, fail)
    jobs = _arrival_keys(doc, ("name", "queue", "interArrival", "duration"), at, fail)
    start = seconds(doc["start"], f"{at}.start", fail) if "start" in doc else 0.0
    end = seconds(doc["end"], f"{at}.end", fail) if "end" in doc else None
    if jobs is None and end is None:
        raise fail(f"{at}.jobs", "give jobs (how many) or end (until when), or both")
    if end is not None and end < start:
        raise fail(f"{at}.end", "must not be before start")
    queue = doc.get("queue")
    if not isinstance(queue, str) or not queue:
        raise fail(f"{at}.queue", "expected a queue name")
    priority = doc.get("priorityClassName", "train")
    if not isinstance(priority, str) or not priority:
        raise fail(f"{at}.priorityClassName", "expected a priority class name")
    inter = parse_duration_dist(doc["interArrival"], f"{at}.interArrival", fail)
    if inter.law == "fixed" and inter.a == 0 and jobs is None:
        raise fail(f"{at}.interArrival", "a zero gap needs jobs (how many), or the generator never ends")
    return GeneratorSpec(
        name=_name(doc.get("name"), f"{at}.name", fail),
        queue=queue,
        namespace=_name(doc.get("namespace", "default"), f"{at}.namespace", fail),
        jobs=jobs,
        start=start,
        end=end,
        inter_arrival=inter,
        pods=parse_count_dist(doc.get("pods", 1), f"{at}.pods", fail),
        gpus_per_pod=parse_count_dist(doc.get("gpusPerPod", 1), f"{at}.gpusPerPod", fail, minimum=0),
        cpu_per_pod=_quantity(doc.get("cpuPerPod", "4"), f"{at}.cpuPerPod", fail),
        memory_per_pod=_quantity(doc.get("memoryPerPod", "16Gi"), f"{at}.memoryPerPod", fail),
        duration=parse_duration_dist(doc["duration"], f"{at}.duration", fail),
        priority_class=priority,
        checkpoint=_checkpoint(doc, at, fail),
        field=at,
    )


_TRACE_KEYS = (
    "name",
    "pods",
    "nodes",
    "gpuSpec",
    "jobs",
    "pick",
    "start",
    "end",
    "interArrival",
    "duration",
    "queue",
    "queues",
    "namespace",
    "priorityClassName",
    "checkpointInterval",
)


def _file_ref(value: Any, at: str, fail: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise fail(at, f"expected a trace variant name or a CSV file path, got {value!r}")
    return value.strip()


def _queue_choice(doc: dict[str, Any], at: str, fail: Any) -> QueueChoice:
    """``queue: a`` | ``queues: [a, b]`` (round-robin) | ``queues: {choices: [a, b], weights: [3, 1]}``."""
    if ("queue" in doc) == ("queues" in doc):
        raise fail(f"{at}.queue", "give queue (one queue) or queues (several), not both or neither")
    if "queue" in doc:
        queue = doc["queue"]
        if not isinstance(queue, str) or not queue:
            raise fail(f"{at}.queue", "expected a queue name")
        return QueueChoice((queue,), None, f"{at}.queue")
    at = f"{at}.queues"
    value = doc["queues"]
    weighted = isinstance(value, dict)
    if weighted:
        _check_keys(value, ("choices", "weights"), at, fail)
        names_raw = value.get("choices")
        where = f"{at}.choices"
    else:
        names_raw, where = value, at
    if not isinstance(names_raw, list) or not names_raw:
        raise fail(where, "expected a non-empty list of queue names")
    names = []
    for i, n in enumerate(names_raw):
        if not isinstance(n, str) or not n:
            raise fail(f"{where}[{i}]", f"expected a queue name, got {n!r}")
        names.append(n)
    if not weighted:
        return QueueChoice(tuple(names), None, at)
    raw = value.get("weights", [1] * len(names))
    if not isinstance(raw, list) or len(raw) != len(names):
        raise fail(f"{at}.weights", f"expected a list of {len(names)} numbers, one per queue")
    for i, w in enumerate(raw):
        if isinstance(w, bool) or not isinstance(w, int | float) or w < 0:
            raise fail(f"{at}.weights[{i}]", f"expected a non-negative number, got {w!r}")
    total = float(sum(raw))
    if total <= 0:
        raise fail(f"{at}.weights", "must not all be zero")
    return QueueChoice(tuple(names), tuple(float(w) / total for w in raw), at)


def _trace(value: Any, at: str, fail: Any) -> TraceSpec:
    doc = _mapping(value, at, fail)
    _check_keys(doc, _TRACE_KEYS, at, fail)
    jobs = _arrival_keys(doc, ("name", "pods", "interArrival", "duration"), at, fail)
    pick = doc.get("pick", "random")
    if pick not in TRACE_PICKS:
        raise fail(f"{at}.pick", f"expected one of {', '.join(TRACE_PICKS)}, got {pick!r}")
    gpu_spec = doc.get("gpuSpec", "nodeAffinity")
    if gpu_spec not in TRACE_GPU_SPEC:
        raise fail(f"{at}.gpuSpec", f"expected one of {', '.join(TRACE_GPU_SPEC)}, got {gpu_spec!r}")
    start = seconds(doc["start"], f"{at}.start", fail) if "start" in doc else 0.0
    end = seconds(doc["end"], f"{at}.end", fail) if "end" in doc else None
    if end is not None and end < start:
        raise fail(f"{at}.end", "must not be before start")
    priority = doc.get("priorityClassName", "train")
    if not isinstance(priority, str) or not priority:
        raise fail(f"{at}.priorityClassName", "expected a priority class name")
    return TraceSpec(
        name=_name(doc.get("name"), f"{at}.name", fail),
        pods=_file_ref(doc["pods"], f"{at}.pods", fail),
        nodes=_file_ref(doc.get("nodes", TRACE_NODES_DEFAULT), f"{at}.nodes", fail),
        gpu_spec=gpu_spec,
        jobs=jobs,
        pick=pick,
        start=start,
        end=end,
        inter_arrival=parse_duration_dist(doc["interArrival"], f"{at}.interArrival", fail),
        duration=parse_duration_dist(doc["duration"], f"{at}.duration", fail),
        queues=_queue_choice(doc, at, fail),
        namespace=_name(doc.get("namespace", "default"), f"{at}.namespace", fail),
        priority_class=priority,
        checkpoint=_checkpoint(doc, at, fail),
        field=at,
    )


def _checkpoint(doc: dict[str, Any], at: str, fail: Any) -> float | None:
    """``checkpointInterval`` (positive seconds) at *at*, or None when absent: a restart from scratch."""
    if "checkpointInterval" not in doc:
        return None
    return seconds(doc["checkpointInterval"], f"{at}.checkpointInterval", fail, positive=True)
