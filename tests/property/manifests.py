"""Manifest pieces the property tests draw their clusters from, GPU sharing included.

Every cluster strategy draws its GPU requests from ``gpu_requests``: whole GPUs, ``gpu-fraction``,
``gpu-memory`` and multi-device fractions (``gpu-fraction-num-devices``), so every property also runs on shared
GPUs. Running pods are placed through a ``GpuBook``, which keeps what the drawn pods hold per node and per GPU,
so a drawn cluster is consistent and never over-committed (``kai sim`` refuses an over-committed node): a shared
pod sits on GPU groups named by its ``runai-gpu-group`` labels (kai's ``<node>-gpu<k>`` names or other names, as
KAI's UUIDs are), each group one whole GPU of its node holding portions that add up to at most one GPU.
``check_gpus`` is the invariant every cycle must keep, read from the pods themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

from kai.api import constants as C
from kai.api.gpugroups import group_labels
from kai.scheduler.gpusharing import parse_share
from kai.sim.cluster import EmbeddedCluster

NOW = "2026-01-01T00:00:00Z"
STARTED = "2025-12-31T23:00:00Z"
PRIORITIES = ["train", "build-preemptible", "build", "inference"]
GPU_MEMORY_LABELS = [None, 40000, 81920]  # nvidia.com/gpu.memory (MiB); None: KAI's default of 100 MiB
MEMORY_REQUESTS = [10, 50, 80, 20000, 40000, 70000]  # gpu-memory (MiB); capped at the largest node's GPU memory


def queue_doc(name: str, parent: str | None, quota: int, weight: int) -> dict[str, Any]:
    """A Queue with a GPU quota and over-quota weight; CPU and memory unlimited."""
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": quota, "limit": -1, "overQuotaWeight": weight},
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def podgroup_doc(
    name: str, queue: str, min_member: int, priority_class: str, created: str | None = None
) -> dict[str, Any]:
    """A PodGroup of *queue* with *min_member* and a PriorityClass; *created*: its creationTimestamp."""
    meta: dict[str, Any] = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = created
    spec = {"minMember": min_member, "queue": queue, "priorityClassName": priority_class}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": spec}


def node_doc(name: str, gpus: int, memory_mib: int | None, labels: dict[str, str] | None = None) -> dict[str, Any]:
    all_labels = dict(labels or {})
    if memory_mib is not None:
        all_labels[C.LABEL_GPU_MEMORY] = str(memory_mib)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpus)}},
    }


# --- node pools -------------------------------------------------------------------------------------------------
# Nodes in pools (``pool: a|b``) and pods that select one: pods of one job then differ in where they fit, and a
# running pod's node may no longer match it (relabelled since it started), so evicted it cannot come back there.


def pool_labels(draw: st.DrawFn, pools: bool) -> dict[str, str] | None:
    """A node's pool label, or None when the cluster has no pools."""
    return {"pool": draw(st.sampled_from("ab"))} if pools else None


def select_pool(draw: st.DrawFn, pod: dict[str, Any], pools: bool, one_in: int) -> dict[str, Any]:
    """*pod*, selecting a random pool in about one draw of *one_in* when the cluster has pools."""
    if pools and draw(st.integers(1, one_in)) == 1:
        pod["spec"]["nodeSelector"] = {"pool": draw(st.sampled_from("ab"))}
    return pod


# --- GPU requests ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuRequest:
    """One pod's GPU request: ``whole`` GPUs, or the same portion on each of ``devices`` shared GPUs, a
    ``fraction`` (milli-GPU) or ``memory_mib``."""

    whole: int = 0
    fraction: int = 0
    memory_mib: int = 0
    devices: int = 1

    @property
    def shared(self) -> bool:
        return not self.whole

    def units(self, cap: int) -> int:
        """What one device's portion takes of a GPU of *cap* units (MiB x 1000), as the engine counts it."""
        return self.fraction * cap // 1000 if self.fraction else self.memory_mib * 1000

    def annotations(self) -> dict[str, str]:
        out: dict[str, str] = {}
        if self.fraction:
            out[C.ANNOTATION_GPU_FRACTION] = f"{self.fraction / 1000:g}"
        elif self.memory_mib:
            out[C.ANNOTATION_GPU_MEMORY] = str(self.memory_mib)
        if self.devices > 1:
            out[C.ANNOTATION_GPU_FRACTION_NUM_DEVICES] = str(self.devices)
        return out

    def requests(self) -> dict[str, Any]:
        return {"nvidia.com/gpu": self.whole} if self.whole else {}


@st.composite
def gpu_requests(draw: st.DrawFn, max_memory_mib: int, max_whole: int = 2) -> GpuRequest:
    """Whole GPUs, a fraction, a gpu-memory request (at most *max_memory_mib*, the largest GPU any node has, so it
    is a valid request) or a fraction on 2-3 devices; shared kinds are drawn as often as whole GPUs."""
    kind = draw(st.sampled_from(["whole", "whole", "whole", "fraction", "memory", "multi"]))
    if kind == "whole":
        return GpuRequest(whole=draw(st.integers(1, max_whole)))
    if kind == "memory":
        return GpuRequest(memory_mib=min(draw(st.sampled_from(MEMORY_REQUESTS)), max_memory_mib))
    fraction = draw(st.sampled_from([100, 250, 300, 500, 700, 750, 900]))
    return GpuRequest(fraction=fraction, devices=draw(st.integers(2, 3)) if kind == "multi" else 1)


# --- placing running pods consistently -------------------------------------------------------------------------


@dataclass
class NodeGpus:
    name: str
    cap: int  # units per GPU: MiB x 1000
    whole_free: int  # GPUs held by no whole-GPU pod and by no GPU group
    groups: dict[str, int] = field(default_factory=dict)  # GPU group -> units still free on it


@dataclass
class GpuBook:
    """What the running pods drawn so far hold, per node and per GPU."""

    nodes: list[NodeGpus]
    named: int = 0  # groups given a non-kai name so far

    @classmethod
    def of(cls, nodes: list[tuple[str, int, int | None]]) -> GpuBook:
        """From (name, GPUs, gpu.memory label or None) per node."""
        return cls([NodeGpus(n, (m or C.DEFAULT_GPU_MEMORY_MIB) * 1000, g) for n, g, m in nodes])

    def _fits(self, node: NodeGpus, req: GpuRequest) -> bool:
        if not req.shared:
            return node.whole_free >= req.whole
        need = req.units(node.cap)
        if need > node.cap:
            return False
        return sum(1 for free in node.groups.values() if free >= need) + node.whole_free >= req.devices

    def place(self, draw: st.DrawFn, req: GpuRequest) -> tuple[str, tuple[str, ...]] | None:
        """A node for a running pod of *req* (and the GPU groups it sits on, for a shared one), taken from the
        book; None if no node has room."""
        spots = [n for n in self.nodes if self._fits(n, req)]
        if not spots:
            return None
        node = draw(st.sampled_from(spots))
        if not req.shared:
            node.whole_free -= req.whole
            return node.name, ()
        need = req.units(node.cap)
        chosen: list[str] = []
        for _ in range(req.devices):
            options = [g for g, free in sorted(node.groups.items()) if free >= need and g not in chosen]
            if node.whole_free > 0:
                options.append("")  # a fresh GPU: a new group
            pick = draw(st.sampled_from(options))
            if not pick:
                pick = self._new_group(draw, node)
                node.whole_free -= 1
                node.groups[pick] = node.cap
            node.groups[pick] -= need
            chosen.append(pick)
        return node.name, tuple(chosen)

    def _new_group(self, draw: st.DrawFn, node: NodeGpus) -> str:
        """kai's ``<node>-gpu<k>`` (k a GPU of the node no group names yet) or another name (as KAI's UUIDs)."""
        total = node.whole_free + len(node.groups)
        free_k = [k for k in range(total) if f"{node.name}-gpu{k}" not in node.groups]
        if free_k and draw(st.booleans()):
            return f"{node.name}-gpu{free_k[0]}"
        self.named += 1
        return f"group-{self.named}"


def gpu_pod(
    name: str,
    req: GpuRequest,
    *,
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    cpu: str | None = None,
    node: str | None = None,
    groups: tuple[str, ...] = (),
    releasing: bool = False,
) -> dict[str, Any]:
    """A kai pod asking for *req*; with *node*, running there (a shared one on *groups*, as its labels say), and
    *releasing*: being deleted (what it holds is free later: pods can be pipelined onto it)."""
    all_labels = dict(labels or {})
    if len(groups) == 1:
        all_labels[C.LABEL_GPU_GROUP] = groups[0]
    else:
        all_labels.update({f"{C.LABEL_GPU_GROUP}/{g}": g for g in groups})
    requests = req.requests()
    if cpu is not None:
        requests["cpu"] = cpu
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": all_labels, "annotations": {**(annotations or {}), **req.annotations()}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "resources": {"requests": requests}}]},
    }
    if node is not None:
        doc["spec"]["nodeName"] = node
        doc["status"] = {"phase": "Running", "startTime": STARTED}
        if releasing:
            doc["metadata"]["deletionTimestamp"] = NOW
    return doc


# --- the invariant ------------------------------------------------------------------------------------------------


def check_gpus(cluster: EmbeddedCluster) -> None:
    """No GPU is over-committed, read from what the cluster holds (the pods' annotations and group labels), not
    from the engine's accounting: on every GPU group the portions add up to at most one GPU's memory, each
    shared pod names one group per device, and whole-GPU pods plus groups never use more GPUs than the node has."""
    nodes = {n.meta.name: n for n in cluster.nodes()}
    held: dict[tuple[str, str], int] = {}  # (node, group) -> units held
    whole: dict[str, int] = {}
    for pod in cluster.store.list("Pod"):
        if not pod.node_name or pod.phase in ("Succeeded", "Failed"):
            continue
        node = nodes[pod.node_name]
        memory = int(node.meta.labels.get(C.LABEL_GPU_MEMORY, C.DEFAULT_GPU_MEMORY_MIB))
        share, error = parse_share(pod)
        assert not error
        if share is None:
            whole[pod.node_name] = whole.get(pod.node_name, 0) + pod.requests.get(C.RESOURCE_GPU, 0)
            continue
        groups = group_labels(pod)
        assert len(groups) == share.devices, (pod.meta.name, groups)
        for g in groups:
            key = (pod.node_name, g)
            held[key] = held.get(key, 0) + share.units(memory * 1000)
    for (node, group), units in held.items():
        memory = int(nodes[node].meta.labels.get(C.LABEL_GPU_MEMORY, C.DEFAULT_GPU_MEMORY_MIB))
        assert units <= memory * 1000, f"GPU {group} on {node} holds {units / 1000} MiB of {memory}"
    for name, node in nodes.items():
        groups = sum(1 for (n, _) in held if n == name)
        assert whole.get(name, 0) + groups <= node.allocatable.get(C.RESOURCE_GPU, 0), (name, whole, groups)
