"""Seeded workload generators and node pools from the Simulation document.

Rules: each generator draws from its own stream, spawned from the document's seed by the generator's
position (``numpy.random.SeedSequence.spawn``), so a seed fixes every job and adding a generator at the
end changes none of the others. Draws per job are in a fixed order (gap, pods, GPUs per pod,
duration). A job is a PodGroup (minMember = its pods) and its bare pods, built as manifests and parsed
by the same parsers as user input, so generated objects obey every rule user objects do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.duration import format_duration
from kai.api.objects import Node, parse_node, parse_pod, parse_podgroup
from kai.sim.timesim._config import GeneratorSpec, NodePoolSpec, SimulationSpec
from kai.sim.timesim._sources import Arrival


def generator_streams(spec: SimulationSpec) -> list[np.random.Generator]:
    """One independent random stream per generator, in document order."""
    children = np.random.SeedSequence(spec.seed).spawn(len(spec.generators))
    return [np.random.Generator(np.random.PCG64(c)) for c in children]


def _seconds_text(s: float) -> str:
    return f"{round(s, 3):g}s"


class GeneratorSource:
    """Jobs of one GeneratorSpec as arrivals (one per job), drawn lazily."""

    def __init__(self, gen: GeneratorSpec, rng: np.random.Generator, source: str) -> None:
        self.gen = gen
        self.name = f"generator {gen.name}"
        self._rng = rng
        self._source = source

    def arrivals(self) -> Iterator[Arrival]:
        g, rng = self.gen, self._rng
        at = g.start
        i = 0
        while g.jobs is None or i < g.jobs:
            at += float(g.inter_arrival.sample(rng, 1)[0])
            if g.end is not None and at > g.end:
                return
            pods = int(g.pods.sample(rng, 1)[0])
            gpus = int(g.gpus_per_pod.sample(rng, 1)[0])
            duration = float(g.duration.sample(rng, 1)[0])
            yield Arrival(at, tuple((self._source, o) for o in self.job(i, pods, gpus, duration)))
            i += 1

    def job(self, i: int, pods: int, gpus: int, duration: float) -> list[Any]:
        """The PodGroup and pods of the generator's *i*-th job."""
        g = self.gen
        requests: dict[str, Any] = {"cpu": g.cpu_per_pod, "memory": g.memory_per_pod}
        limits: dict[str, Any] = {}
        if gpus:
            requests[C.RESOURCE_GPU] = gpus
            limits[C.RESOURCE_GPU] = gpus
        return job_objects(
            f"{g.name}-{i:05d}",
            g.namespace,
            g.queue,
            g.priority_class,
            pods,
            {"requests": requests, "limits": limits},
            duration=duration,
            checkpoint=g.checkpoint,
        )


def job_objects(
    name: str,
    namespace: str,
    queue: str,
    priority_class: str,
    pods: int,
    resources: dict[str, Any],
    *,
    duration: float,
    checkpoint: float | None,
    annotations: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
) -> list[Any]:
    """A job as manifests through the user-input parsers: a PodGroup (``minMember`` = *pods*) and its
    pods ``<name>-<k>``, each with *resources*, ``kai.sim/duration`` and the extra *annotations* and
    *pod_spec* fields (node selector, affinity)."""
    pg = parse_podgroup(
        {
            "apiVersion": C.PODGROUP_API_VERSION,
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": pods, "queue": queue, "priorityClassName": priority_class},
        }
    )
    ann = {C.ANNOTATION_POD_GROUP_NAME: name, C.ANNOTATION_SIM_DURATION: _seconds_text(duration), **(annotations or {})}
    if checkpoint is not None:
        ann[C.ANNOTATION_SIM_CHECKPOINT] = format_duration(checkpoint)
    out: list[Any] = [pg]
    for k in range(pods):
        out.append(
            parse_pod(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": f"{name}-{k}",
                        "namespace": namespace,
                        "labels": {C.LABEL_QUEUE: queue},
                        "annotations": dict(ann),
                    },
                    "spec": {
                        "schedulerName": C.SCHEDULER_NAME,
                        "priorityClassName": priority_class,
                        "containers": [
                            {
                                "name": "main",
                                "resources": {k: dict(v) for k, v in resources.items()},
                            }
                        ],
                        **(pod_spec or {}),
                    },
                }
            )
        )
    return out


def node_pool_nodes(pool: NodePoolSpec) -> list[Node]:
    """The pool's nodes, ``<name>-<i>``, each with ``gpus`` GPUs and the pool's labels."""
    return [
        parse_node(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": f"{pool.name}-{i}", "labels": {**pool.labels, "kai.sim/node-pool": pool.name}},
                "status": {
                    "allocatable": {
                        "cpu": pool.cpu,
                        "memory": pool.memory,
                        C.RESOURCE_GPU: pool.gpus,
                        "pods": 110,
                    }
                },
            }
        )
        for i in range(pool.count)
    ]
