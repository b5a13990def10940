"""A trace as a workload source: the pod shapes of Alibaba's GPU trace, with synthetic arrivals and
durations, and the trace's nodes as Nodes.

Rules:

* The CSVs are read by ``kai.trace.alibaba`` (the loader ``kai bench trace`` uses), never here, so a
  pod means the same in both: ``num_gpu`` 0 is CPU-only, ``gpu_milli`` < 1000 is a ``gpu-fraction``
  of one GPU, otherwise ``num_gpu`` whole GPUs; ``gpu_spec`` limits the pod to those GPU models. The
  loader's errors (file and line) pass through, wrapped in a ManifestError naming the trace's field.
* Only shapes come from the trace. Its times (creation, deletion) are ignored: arrivals are the
  ``interArrival`` gaps and durations the ``duration`` law, drawn from the trace's own random stream.
* Each trace source draws from a stream spawned from ``(seed, 1)`` by its position, apart from the
  generators' streams, so adding a trace changes no generator and the reverse. Draws: the pick order
  first (a permutation of the trace per pass over it, for ``pick: random``), then per job in a fixed
  order (gap, queue for weighted queues, duration).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.objects import Node, parse_node
from kai.sim.timesim._config import TRACE_NODES_DEFAULT, TRACE_NODES_MANIFESTS, SimulationSpec, TraceSpec
from kai.sim.timesim._generators import job_objects
from kai.sim.timesim._sources import Arrival
from kai.trace.alibaba import (
    DEFAULT_DATA_DIR,
    DEFAULT_NODES,
    POD_PREFIX,
    NodeTable,
    PodShape,
    TraceError,
    load_nodes,
    load_pods,
    trace_variants,
)

TRACE_STREAM = 1  # trace streams are spawned from SeedSequence([seed, TRACE_STREAM])
ANNOTATION_TRACE_POD = "kai.sim/trace-pod"  # the trace row a pod was made from (for people and tests)
NODE_PODS = 110  # the kubelet's default max pods per node; the trace has no such column


def trace_streams(spec: SimulationSpec) -> list[np.random.Generator]:
    """One independent random stream per trace, in document order."""
    children = np.random.SeedSequence([spec.seed, TRACE_STREAM]).spawn(len(spec.traces))
    return [np.random.Generator(np.random.PCG64(c)) for c in children]


def _relative(spec: SimulationSpec, value: str) -> Path:
    """A path in the document: relative to the document's folder (the current folder without a file)."""
    path = Path(value)
    if path.is_absolute() or not spec.source:
        return path
    return Path(spec.source).parent / path


def pods_file(spec: SimulationSpec, trace: TraceSpec) -> Path:
    """``pods``: a variant of the data folder (``default``, ``cpu050``, ...) or a pod CSV."""
    variant = DEFAULT_DATA_DIR / f"{POD_PREFIX}{trace.pods}.csv"
    if variant.is_file():
        return variant
    path = _relative(spec, trace.pods)
    if path.is_file():
        return path
    known = ", ".join(trace_variants()) or f"none in {DEFAULT_DATA_DIR}"
    raise spec.error(
        f"{trace.field}.pods", f"{trace.pods!r} is not a trace variant ({known}) nor a pod CSV file ({path} not found)"
    )


def nodes_file(spec: SimulationSpec, trace: TraceSpec) -> Path | None:
    """``nodes``: ``default`` (the data folder's node list), ``manifests`` (None) or a node CSV."""
    if trace.nodes == TRACE_NODES_MANIFESTS:
        return None
    if trace.nodes == TRACE_NODES_DEFAULT:
        return DEFAULT_DATA_DIR / DEFAULT_NODES
    path = _relative(spec, trace.nodes)
    if not path.is_file():
        raise spec.error(
            f"{trace.field}.nodes",
            f"{trace.nodes!r} is not a node CSV file ({path} not found); or give "
            f"{TRACE_NODES_DEFAULT} (the data folder's node list) or {TRACE_NODES_MANIFESTS} (the input's nodes)",
        )
    return path


def trace_nodes(table: NodeTable) -> list[Node]:
    """The node table as Nodes: cpu, memory, ``nvidia.com/gpu`` and the GPU model as
    ``nvidia.com/gpu.product``, named as in the CSV."""
    nodes = []
    for i, name in enumerate(table.names):
        gpus = int(table.gpus[i])
        labels = {C.LABEL_GPU_PRODUCT: table.models[i]} if gpus else {}
        nodes.append(
            parse_node(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "status": {
                        "allocatable": {
                            "cpu": f"{int(table.cpu_milli[i])}m",
                            "memory": f"{int(table.memory_mib[i])}Mi",
                            C.RESOURCE_GPU: gpus,
                            "pods": NODE_PODS,
                        }
                    },
                }
            )
        )
    return nodes


@dataclass(frozen=True, slots=True)
class LoadedTraces:
    """What the traces of a document add: their nodes (once per node CSV) and each trace's pod shapes."""

    nodes: list[Node]
    shapes: list[list[PodShape]]  # per trace, in document order


def load_traces(spec: SimulationSpec, input_nodes: Collection[Node]) -> LoadedTraces:
    """Read every node and pod CSV the traces name; ManifestError naming the trace's field (the loader's
    message, with the file and line, inside it). A node CSV named by several traces adds its nodes once.
    A ``gpu_spec`` must name a model some node has (``nvidia.com/gpu.product``), unless ``gpuSpec: ignore``."""
    tables: dict[Path, NodeTable] = {}
    names = {n.meta.name: "the input" for n in input_nodes}
    nodes: list[Node] = []
    for t in spec.traces:
        path = nodes_file(spec, t)
        if path is None or path.resolve() in tables:
            continue
        try:
            table = load_nodes(path)
        except TraceError as e:
            raise spec.error(f"{t.field}.nodes", str(e)) from None
        tables[path.resolve()] = table
        for name in table.names:
            if name in names:
                raise spec.error(f"{t.field}.nodes", f"{path}: node {name!r} is also in {names[name]}")
            names[name] = str(path)
        nodes.extend(trace_nodes(table))
    models = {n.meta.labels.get(C.LABEL_GPU_PRODUCT, "") for n in (*input_nodes, *nodes)} - {""}
    shapes = []
    for t in spec.traces:
        try:
            shapes.append(load_pods(pods_file(spec, t), models if t.gpu_spec == "nodeAffinity" else None))
        except TraceError as e:
            raise spec.error(f"{t.field}.pods", str(e)) from None
    return LoadedTraces(nodes, shapes)


def pod_resources(shape: PodShape) -> tuple[dict[str, Any], dict[str, str]]:
    """A trace pod's container resources and GPU annotations: cpu and memory requests; ``num_gpu`` whole
    GPUs as ``nvidia.com/gpu`` (request = limit); a shared GPU as the ``gpu-fraction`` annotation."""
    requests: dict[str, Any] = {"cpu": f"{shape.cpu_milli}m", "memory": f"{shape.memory_mib}Mi"}
    limits: dict[str, Any] = {}
    annotations: dict[str, str] = {}
    if shape.num_gpu and shape.gpu_milli == 1000:
        requests[C.RESOURCE_GPU] = limits[C.RESOURCE_GPU] = shape.num_gpu
    elif shape.num_gpu:
        annotations[C.ANNOTATION_GPU_FRACTION] = f"{shape.gpu_milli / 1000:.3f}"
    return {"requests": requests, "limits": limits}, annotations


def gpu_model_constraint(models: Sequence[str]) -> dict[str, Any]:
    """``gpu_spec`` as pod spec fields: one model is a node selector, several a required node affinity."""
    if not models:
        return {}
    if len(models) == 1:
        return {"nodeSelector": {C.LABEL_GPU_PRODUCT: models[0]}}
    term = {"matchExpressions": [{"key": C.LABEL_GPU_PRODUCT, "operator": "In", "values": list(models)}]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    }


class TraceSource:
    """One trace's jobs as arrivals (one single-pod job per picked trace pod), drawn lazily."""

    def __init__(self, trace: TraceSpec, shapes: Sequence[PodShape], rng: np.random.Generator, source: str) -> None:
        self.trace = trace
        self.name = f"trace {trace.name}"
        self._shapes = shapes
        self._rng = rng
        self._source = source

    def _order(self) -> np.ndarray:
        """Indices of the picked shapes: the whole trace once without ``jobs``; with ``jobs``, as many as
        asked, passing over the trace again when it runs out (a new permutation per pass)."""
        n = len(self._shapes)
        count = n if self.trace.jobs is None else self.trace.jobs
        passes = -(-count // n)
        if self.trace.pick == "first":
            return np.tile(np.arange(n), passes)[:count]
        return np.concatenate([self._rng.permutation(n) for _ in range(passes)] or [np.zeros(0, np.int64)])[:count]

    def arrivals(self) -> Iterator[Arrival]:
        t, rng = self.trace, self._rng
        order = self._order()
        at = t.start
        for i, k in enumerate(order):
            at += float(t.inter_arrival.sample(rng, 1)[0])
            if t.end is not None and at > t.end:
                return
            if t.queues.weights is None:
                queue = t.queues.names[i % len(t.queues.names)]
            else:
                queue = t.queues.names[int(rng.choice(len(t.queues.names), p=np.array(t.queues.weights)))]
            duration = float(t.duration.sample(rng, 1)[0])
            yield Arrival(at, tuple((self._source, o) for o in self.job(i, self._shapes[int(k)], queue, duration)))

    def job(self, i: int, shape: PodShape, queue: str, duration: float) -> list[Any]:
        """The PodGroup and pod of the trace's *i*-th job, shaped like *shape*."""
        t = self.trace
        resources, annotations = pod_resources(shape)
        annotations[ANNOTATION_TRACE_POD] = shape.name
        return job_objects(
            f"{t.name}-{i:05d}",
            t.namespace,
            queue,
            t.priority_class,
            1,
            resources,
            duration=duration,
            checkpoint=t.checkpoint,
            annotations=annotations,
            pod_spec=gpu_model_constraint(shape.gpu_models if t.gpu_spec == "nodeAffinity" else ()),
        )
