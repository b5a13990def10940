"""Seeded synthetic GPU clusters for benchmarks: typed API objects built directly, or YAML manifests.

Why build the typed objects (``kai.api.objects``) directly instead of writing and
parsing YAML: parsing 50,000 pods takes longer than the cycle we want to time, and
the benchmark is about the engine, not the loader. ``write_manifests`` writes the
very same cluster as multi-document YAML so a scenario can also be run end to end
with ``kai sim`` (and so the two paths can be checked against each other).

Everything is a function of ``ClusterSpec`` (which includes the seed): the same spec
always yields the same objects, in the same order, with the same names and times.

Shape of a cluster
------------------
* ``nodes`` nodes named ``node-00000``...: 64 cores, 512Gi, 110 pods and
  ``gpus_per_node`` GPUs each; a ``cpu_only_fraction`` of them (chosen at random)
  have no GPUs.
* One department queue ``dept`` with ``queues`` leaf queues ``team-00``...: GPU quotas
  split the cluster's GPUs evenly (they sum to the total), GPU limit -1, over-quota
  weight 1; CPU and memory quota -1 and limit -1. Team ``i`` lives in namespace ``team-i``.
* ``jobs`` pending gangs: a PodGroup (``minMember`` = gang size) and that many pods,
  each pod with ``spec.schedulerName: kai-scheduler`` and the ``pod-group-name``
  annotation. Gang sizes and GPUs per pod are drawn from ``Dist`` distributions; CPU
  and memory scale with the GPUs (a 0-GPU pod asks for a fixed CPU slice). Priority
  classes are drawn from ``priority_mix`` (train / build / inference by default).
* Optionally, running gangs that occupy about ``running_fraction`` of the GPUs, placed
  best-fit so no node is over-committed.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as _dt
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from kai.api import constants as C
from kai.api.objects import Node, ObjectMeta, Pod, PodGroup, PriorityClass, Queue, QueueResource
from kai.sim.cluster import default_priority_classes

GI = 2**30
NODE_CPU_MILLI = 64_000
NODE_MEMORY = 512 * GI
NODE_PODS = 110
NOW = 1_700_000_000.0  # fixed clock: benchmarks must not depend on the wall clock
DEPARTMENT = "dept"


@dataclass(frozen=True, slots=True)
class Dist:
    """A discrete distribution: ``values`` with relative ``weights`` (equal weights when empty)."""

    values: tuple[int, ...]
    weights: tuple[float, ...] = ()

    def sample(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """*size* draws as an int64 array (one vectorized call: a Python loop would dominate generation)."""
        p = None
        if self.weights:
            w = np.asarray(self.weights, dtype=np.float64)
            p = w / w.sum()
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=size, p=p)

    def mean(self) -> float:
        w = np.asarray(self.weights or [1.0] * len(self.values), dtype=np.float64)
        return float(np.dot(self.values, w) / w.sum())


def fixed(value: int) -> Dist:
    return Dist((value,))


def uniform(lo: int, hi: int) -> Dist:
    """Every integer in ``lo..hi`` (inclusive) equally likely."""
    return Dist(tuple(range(lo, hi + 1)))


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """What to generate. Every field has a default so scenarios state only what they change."""

    nodes: int = 100
    gpus_per_node: int = 8
    cpu_only_fraction: float = 0.0
    queues: int = 4
    jobs: int = 500  # pending gangs
    gang_size: Dist = field(default_factory=lambda: fixed(1))
    gpus_per_pod: Dist = field(default_factory=lambda: uniform(1, 8))
    priority_mix: tuple[tuple[str, float], ...] = (
        (C.PRIORITY_TRAIN, 0.6),
        (C.PRIORITY_BUILD, 0.25),
        (C.PRIORITY_INFERENCE, 0.15),
    )
    running_fraction: float = 0.0  # share of the cluster's GPUs already taken by running gangs
    cpu_milli_per_gpu: int = 6_000  # capped so a full node's worth of GPUs never exceeds its CPU
    memory_per_gpu: int = 48 * GI
    cpu_only_pod_cpu_milli: int = 4_000
    cpu_only_pod_memory: int = 16 * GI
    seed: int = 0


@dataclass(slots=True)
class Cluster:
    """The generated objects, ready for ``build_snapshot(**cluster.snapshot_args())``."""

    spec: ClusterSpec
    nodes: list[Node]
    pods: list[Pod]
    podgroups: list[PodGroup]
    queues: list[Queue]
    priority_classes: list[PriorityClass]
    now: float = NOW

    def snapshot_args(self) -> dict[str, Any]:
        return {
            "nodes": self.nodes,
            "pods": self.pods,
            "podgroups": self.podgroups,
            "queues": self.queues,
            "priority_classes": self.priority_classes,
            "now": self.now,
        }

    @property
    def pending_pods(self) -> int:
        return sum(1 for p in self.pods if not p.node_name)

    @property
    def running_pods(self) -> int:
        return sum(1 for p in self.pods if p.node_name)

    @property
    def total_gpus(self) -> int:
        return sum(n.allocatable.get(C.RESOURCE_GPU, 0) for n in self.nodes)


def _queues(spec: ClusterSpec, total_gpus: int) -> list[Queue]:
    """The department and its leaves; leaf GPU quotas split *total_gpus* evenly and sum to it exactly."""
    unlimited = QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0)
    dept = Queue(
        ObjectMeta(DEPARTMENT, None, f"Queue/{DEPARTMENT}", creation_timestamp=0.0),
        resources={
            "gpu": QueueResource(quota=float(total_gpus), limit=-1.0, over_quota_weight=1.0),
            "cpu": unlimited,
            "memory": unlimited,
        },
    )
    out = [dept]
    base, extra = divmod(total_gpus, spec.queues)
    for i in range(spec.queues):
        name = f"team-{i:02d}"
        quota = float(base + (1 if i < extra else 0))
        out.append(
            Queue(
                ObjectMeta(name, None, f"Queue/{name}", creation_timestamp=float(i + 1)),
                parent=DEPARTMENT,
                resources={
                    "gpu": QueueResource(quota=quota, limit=-1.0, over_quota_weight=1.0),
                    "cpu": unlimited,
                    "memory": unlimited,
                },
            )
        )
    return out


def _nodes(spec: ClusterSpec, rng: np.random.Generator) -> list[Node]:
    n_cpu_only = round(spec.nodes * spec.cpu_only_fraction)
    cpu_only = np.zeros(spec.nodes, dtype=bool)
    if n_cpu_only:
        cpu_only[rng.choice(spec.nodes, size=n_cpu_only, replace=False)] = True
    nodes = []
    for i in range(spec.nodes):
        name = f"node-{i:05d}"
        alloc = {C.RESOURCE_CPU: NODE_CPU_MILLI, C.RESOURCE_MEMORY: NODE_MEMORY, C.RESOURCE_PODS: NODE_PODS}
        labels = {C.LABEL_HOSTNAME: name}
        if cpu_only[i]:
            labels[C.LABEL_NODE_ROLE_CPU_WORKER] = ""
        else:
            alloc[C.RESOURCE_GPU] = spec.gpus_per_node
            labels[C.LABEL_NODE_ROLE_GPU_WORKER] = ""
        nodes.append(Node(ObjectMeta(name, None, f"Node/{name}", labels=labels, creation_timestamp=0.0), alloc))
    return nodes


def _requests(spec: ClusterSpec, gpus: int) -> dict[str, int]:
    """A pod's effective request as ``parse_pod`` would compute it (including the ``pods`` slot)."""
    if gpus == 0:
        return {
            C.RESOURCE_CPU: spec.cpu_only_pod_cpu_milli,
            C.RESOURCE_MEMORY: spec.cpu_only_pod_memory,
            C.RESOURCE_PODS: 1,
        }
    g = max(spec.gpus_per_node, 1)
    cpu = min(spec.cpu_milli_per_gpu, NODE_CPU_MILLI * 3 // (4 * g))
    mem = min(spec.memory_per_gpu, NODE_MEMORY * 3 // (4 * g))
    return {C.RESOURCE_CPU: gpus * cpu, C.RESOURCE_MEMORY: gpus * mem, C.RESOURCE_GPU: gpus, C.RESOURCE_PODS: 1}


class _BestFit:
    """Free GPUs per node in buckets, so placing a running pod costs O(GPUs per node), not O(nodes)."""

    def __init__(self, nodes: list[Node], gpus_per_node: int) -> None:
        self.free = [n.allocatable.get(C.RESOURCE_GPU, 0) for n in nodes]
        self.buckets: list[list[int]] = [[] for _ in range(gpus_per_node + 1)]
        for i in reversed(range(len(nodes))):  # pop() from the end takes the lowest row first
            if self.free[i]:
                self.buckets[self.free[i]].append(i)

    def take(self, gpus: int) -> int:
        """Row of the fullest node with *gpus* free (and take them), or -1."""
        for free in range(gpus, len(self.buckets)):
            if self.buckets[free]:
                row = self.buckets[free].pop()
                self.free[row] = free - gpus
                self.buckets[free - gpus].append(row)
                return row
        return -1

    def give_back(self, row: int, gpus: int) -> None:
        self.buckets[self.free[row]].remove(row)
        self.free[row] += gpus
        self.buckets[self.free[row]].append(row)


def _gang(
    spec: ClusterSpec,
    *,
    name: str,
    team: int,
    size: int,
    gpus: int,
    priority_class: str,
    created: float,
    nodes: Sequence[str] = (),
) -> tuple[PodGroup, list[Pod]]:
    """One PodGroup and its pods; with *nodes*, the pods are Running there."""
    ns = f"team-{team:02d}"
    pg = PodGroup(
        ObjectMeta(name, ns, f"PodGroup/{ns}/{name}", creation_timestamp=created),
        min_member=size,
        queue=ns,
        priority_class_name=priority_class,
    )
    req = _requests(spec, gpus)
    pods = []
    for k in range(size):
        pod_name = f"{name}-{k}"
        pods.append(
            Pod(
                ObjectMeta(
                    pod_name,
                    ns,
                    f"Pod/{ns}/{pod_name}",
                    annotations={C.ANNOTATION_POD_GROUP_NAME: name},
                    creation_timestamp=created,
                ),
                requests=dict(req),
                node_name=nodes[k] if nodes else "",
                scheduler_name=C.SCHEDULER_NAME,
                priority_class_name=priority_class,
                phase="Running" if nodes else "Pending",
                container_names=("main",),
            )
        )
    return pg, pods


def generate(spec: ClusterSpec) -> Cluster:
    """The cluster *spec* describes; deterministic in *spec* (including its seed)."""
    rng = np.random.default_rng(spec.seed)
    nodes = _nodes(spec, rng)
    total_gpus = sum(n.allocatable.get(C.RESOURCE_GPU, 0) for n in nodes)
    queues = _queues(spec, total_gpus)
    classes = [c for c, _ in spec.priority_mix]
    class_p = np.asarray([w for _, w in spec.priority_mix], dtype=np.float64)
    class_p /= class_p.sum()
    podgroups: list[PodGroup] = []
    pods: list[Pod] = []

    if spec.running_fraction > 0 and total_gpus:
        fit = _BestFit(nodes, spec.gpus_per_node)
        target = spec.running_fraction * total_gpus
        used = 0
        # Draw in batches; stop at the target or at the first gang that no longer fits.
        batch = max(16, int(target / max(spec.gang_size.mean() * spec.gpus_per_pod.mean(), 1.0)) + 16)
        sizes, gpus_l = spec.gang_size.sample(rng, batch), spec.gpus_per_pod.sample(rng, batch)
        teams, prios = rng.integers(0, spec.queues, size=batch), rng.choice(len(classes), size=batch, p=class_p)
        for j in range(batch):
            size, gpus = int(sizes[j]), max(int(gpus_l[j]), 1)  # running CPU-only pods are left out
            if used + size * gpus > target or gpus > spec.gpus_per_node:
                break
            rows = []
            for _ in range(size):
                row = fit.take(gpus)
                if row < 0:
                    break
                rows.append(row)
            if len(rows) < size:  # does not fit as a whole: undo and stop
                for row in rows:
                    fit.give_back(row, gpus)
                break
            used += size * gpus
            pg, gang_pods = _gang(
                spec,
                name=f"run-{j:06d}",
                team=int(teams[j]),
                size=size,
                gpus=gpus,
                priority_class=classes[int(prios[j])],
                created=NOW - 10 * 86_400 + j,
                nodes=[nodes[r].meta.name for r in rows],
            )
            podgroups.append(pg)
            pods.extend(gang_pods)

    sizes, gpus_l = spec.gang_size.sample(rng, spec.jobs), spec.gpus_per_pod.sample(rng, spec.jobs)
    teams, prios = rng.integers(0, spec.queues, size=spec.jobs), rng.choice(len(classes), size=spec.jobs, p=class_p)
    for j in range(spec.jobs):
        pg, gang_pods = _gang(
            spec,
            name=f"job-{j:06d}",
            team=int(teams[j]),
            size=int(sizes[j]),
            gpus=int(gpus_l[j]),
            priority_class=classes[int(prios[j])],
            created=NOW - spec.jobs + j,  # older jobs first, one second apart
        )
        podgroups.append(pg)
        pods.extend(gang_pods)
    return Cluster(spec, nodes, pods, podgroups, queues, default_priority_classes())


# ---------------------------------------------------------------------------------------------
# YAML manifests, for `kai sim`
# ---------------------------------------------------------------------------------------------


def _time(t: float | None) -> str | None:
    if t is None:
        return None
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantity(name: str, amount: int) -> str | int:
    if name == C.RESOURCE_CPU:
        return f"{amount // 1000}" if amount % 1000 == 0 else f"{amount}m"
    if name == C.RESOURCE_MEMORY and amount % GI == 0:
        return f"{amount // GI}Gi"
    return amount


def _resources(res: dict[str, int], *, skip_pods: bool) -> dict[str, str | int]:
    return {k: _quantity(k, v) for k, v in res.items() if not (skip_pods and k == C.RESOURCE_PODS)}


def _meta(meta: ObjectMeta) -> dict[str, Any]:
    out: dict[str, Any] = {"name": meta.name}
    if meta.namespace is not None:
        out["namespace"] = meta.namespace
    if meta.labels:
        out["labels"] = dict(meta.labels)
    if meta.annotations:
        out["annotations"] = dict(meta.annotations)
    if meta.creation_timestamp is not None:
        out["creationTimestamp"] = _time(meta.creation_timestamp)
    return out


def _queue_doc(q: Queue) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if q.parent:
        spec["parentQueue"] = q.parent
    spec["resources"] = {
        r: {"quota": qr.quota, "limit": qr.limit, "overQuotaWeight": qr.over_quota_weight}
        for r, qr in q.resources.items()
    }
    return {"apiVersion": C.QUEUE_API_VERSION, "kind": "Queue", "metadata": _meta(q.meta), "spec": spec}


def manifest_documents(cluster: Cluster) -> Iterator[dict[str, Any]]:
    """The cluster as manifest dicts: queues, nodes, PodGroups, pods (parents before children).

    Priority classes are left out: ``kai sim`` installs KAI's defaults itself. A pod's
    ``pods`` request is left out too, since ``parse_pod`` adds it back.
    """
    for q in cluster.queues:
        yield _queue_doc(q)
    for n in cluster.nodes:
        yield {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": _meta(n.meta),
            "status": {"allocatable": _resources(n.allocatable, skip_pods=False)},
        }
    for pg in cluster.podgroups:
        yield {
            "apiVersion": C.PODGROUP_API_VERSION,
            "kind": "PodGroup",
            "metadata": _meta(pg.meta),
            "spec": {"minMember": pg.min_member, "queue": pg.queue, "priorityClassName": pg.priority_class_name},
        }
    for p in cluster.pods:
        spec: dict[str, Any] = {"schedulerName": p.scheduler_name}
        if p.priority_class_name:
            spec["priorityClassName"] = p.priority_class_name
        if p.node_name:
            spec["nodeName"] = p.node_name
        spec["containers"] = [
            {"name": name, "resources": {"requests": _resources(p.requests, skip_pods=True)}}
            for name in p.container_names or ("main",)
        ]
        yield {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": _meta(p.meta),
            "spec": spec,
            "status": {"phase": p.phase},
        }


def write_manifests(cluster: Cluster, path: str | Path) -> Path:
    """Write *cluster* as one multi-document YAML file; run it with ``kai sim PATH --now`` ``now_rfc3339``."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml is much faster on 50k documents
    path = Path(path)
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump_all(manifest_documents(cluster), fh, Dumper=dumper, sort_keys=False, default_flow_style=None)
    return path


def now_rfc3339(cluster: Cluster) -> str:
    """The ``--now`` to pass to ``kai sim`` so creation times and ages match the typed objects."""
    return _time(cluster.now) or ""


def main(argv: list[str] | None = None) -> int:
    """Write a scenario of ``bench_allocate.py`` (or a custom small cluster) as YAML for ``kai sim``."""
    from bench_allocate import SCENARIOS  # here, not at the top: bench_allocate imports this module

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--scenario", choices=sorted(SCENARIOS), default="small")
    ap.add_argument("--seed", type=int, default=None, help="override the scenario's seed")
    ap.add_argument("-o", "--output", required=True, help="YAML file to write")
    args = ap.parse_args(argv)
    spec = SCENARIOS[args.scenario].spec
    if args.seed is not None:
        spec = dataclasses.replace(spec, seed=args.seed)
    cluster = generate(spec)
    path = write_manifests(cluster, args.output)
    print(
        f"wrote {path}: {len(cluster.nodes)} nodes, {len(cluster.podgroups)} PodGroups, {len(cluster.pods)} pods\n"
        f"run: kai sim {path} --actions allocate --now {now_rfc3339(cluster)} -o json",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
