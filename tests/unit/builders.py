"""Manifests for the engine's unit tests, and the Snapshot and Session they make.

Every cluster is built from Kubernetes manifests (plain dicts, as a user writes them) through the real parsers
(``load_manifests``), ``build_snapshot`` and ``kai.scheduler.cycle.open_session``: the road objects take in the
Kubernetes backend, with no embedded-cluster checks in the way (so a test can hand the engine an
over-committed node or an oversize request, as an API server can). Nothing is mocked.

Conventions: ``NOW`` is the cycle's clock; running pods started at ``STARTED`` (an hour before) unless told; a
*releasing* pod was deleted at ``DELETED`` (30 s before, so not StuckInReleasing);
objects are created in the order they are built (``created``), so job and pod order follow the test's text.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import yaml

from kai.api import constants as C
from kai.api.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice
from kai.api.manifests import load_manifests
from kai.api.objects import Node, Pod, PodGroup, PriorityClass, Queue, Topology
from kai.api.pdb import PodDisruptionBudget
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session
from kai.scheduler.dra import build_dra
from kai.scheduler.model import JobInfo, TaskInfo
from kai.scheduler.plugins import task_order_of
from kai.scheduler.session import Session
from kai.scheduler.snapshot import Snapshot, build_snapshot
from kai.sim.cluster import default_priority_classes

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
STARTED = "2025-12-31T23:00:00Z"  # one hour before NOW
DELETED = "2025-12-31T23:59:30Z"  # 30 s before NOW: terminating, not yet StuckInReleasing (2m)
UNLIMITED = (-1, -1, 1)  # (quota, limit, overQuotaWeight) of a resource with no bounds

_clock = itertools.count()
_EPOCH = datetime(2025, 12, 1, tzinfo=UTC)  # before every fixed time the tests write (December 31)


def _created() -> str:
    """A fresh creation time, one second after the last one: objects sort in the order the test builds them
    (the clock never wraps, whatever ran before in the process)."""
    return (_EPOCH + timedelta(seconds=next(_clock))).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(
    name: str,
    *,
    cpu: str = "8",
    memory: str = "64Gi",
    gpu: int | str = 4,
    labels: dict[str, str] | None = None,
    ready: bool = True,
    unschedulable: bool = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Node; *extra*: more allocatable resources (e.g. ``{"pods": 2}``)."""
    allocatable: dict[str, Any] = {"cpu": cpu, "memory": memory, C.RESOURCE_GPU: str(gpu), **(extra or {})}
    status: dict[str, Any] = {"allocatable": allocatable}
    if not ready:
        status["conditions"] = [{"type": "Ready", "status": "False"}]
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": status}
    if labels:
        doc["metadata"]["labels"] = dict(labels)
    if unschedulable:
        doc["spec"] = {"unschedulable": True}
    return doc


Bounds = tuple[float | None, float | None, float | None] | None


def queue(
    name: str,
    parent: str | None = None,
    *,
    gpu: Bounds = UNLIMITED,
    cpu: Bounds = UNLIMITED,
    memory: Bounds = UNLIMITED,
    priority: int | None = None,
    preempt_min_runtime: str | None = None,
    reclaim_min_runtime: str | None = None,
) -> dict[str, Any]:
    """A Queue; each resource is (quota, limit, overQuotaWeight) in the CRD's units (GPUs, millicores, MB).
    None for a resource leaves it out of ``spec.resources``; None for one of its fields leaves that field out."""
    resources: dict[str, Any] = {}
    for key, bounds in (("gpu", gpu), ("cpu", cpu), ("memory", memory)):
        if bounds is None:
            continue
        fields = dict(zip(("quota", "limit", "overQuotaWeight"), bounds, strict=True))
        resources[key] = {k: v for k, v in fields.items() if v is not None}
    spec: dict[str, Any] = {"resources": resources}
    if parent:
        spec["parentQueue"] = parent
    if priority is not None:
        spec["priority"] = priority
    if preempt_min_runtime is not None:
        spec["preemptMinRuntime"] = preempt_min_runtime
    if reclaim_min_runtime is not None:
        spec["reclaimMinRuntime"] = reclaim_min_runtime
    meta = {"name": name, "creationTimestamp": _created()}
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": meta, "spec": spec}


def podgroup(
    name: str,
    queue_name: str,
    *,
    min_member: int = 1,
    priority_class: str = "train",
    preemptibility: str | None = None,
    subgroups: list[dict[str, Any]] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"minMember": min_member, "queue": queue_name, "priorityClassName": priority_class}
    if preemptibility is not None:
        spec["preemptibility"] = preemptibility
    if subgroups is not None:
        spec["subGroups"] = subgroups
    meta = {"name": name, "creationTimestamp": created or _created()}
    return {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": spec}


def pod(
    name: str,
    group: str,
    *,
    cpu: str = "1",
    memory: str = "1Gi",
    gpu: int | str = 1,
    node_name: str | None = None,
    phase: str | None = None,
    releasing: bool = False,
    started: str | None = STARTED,
    fraction: str | None = None,
    gpu_memory: int | None = None,
    devices: int | None = None,
    gpu_groups: tuple[str, ...] = (),
    labels: dict[str, str] | None = None,
    scheduler: str = C.SCHEDULER_NAME,
    extra: dict[str, Any] | None = None,
    created: str | None = None,
) -> dict[str, Any]:
    """A pod of PodGroup *group*. Bound (``node_name``) pods are Running unless *phase* says otherwise;
    *releasing* gives the pod a deletionTimestamp. *fraction* / *gpu_memory* / *devices* are KAI's GPU-sharing
    annotations (the pod then requests no whole GPU); *gpu_groups* the ``runai-gpu-group`` labels of a bound
    shared pod (one label for one group, one per GPU for several)."""
    annotations: dict[str, str] = {C.ANNOTATION_POD_GROUP_NAME: group}
    requests: dict[str, Any] = {"cpu": cpu, "memory": memory, **(extra or {})}
    if fraction is not None or gpu_memory is not None:
        if fraction is not None:
            annotations[C.ANNOTATION_GPU_FRACTION] = fraction
        if gpu_memory is not None:
            annotations[C.ANNOTATION_GPU_MEMORY] = str(gpu_memory)
        if devices is not None:
            annotations[C.ANNOTATION_GPU_FRACTION_NUM_DEVICES] = str(devices)
    elif gpu:
        requests[C.RESOURCE_GPU] = gpu
    all_labels = dict(labels or {})
    if len(gpu_groups) == 1:
        all_labels[C.LABEL_GPU_GROUP] = gpu_groups[0]
    else:
        all_labels.update({f"{C.LABEL_GPU_GROUP}/{g}": g for g in gpu_groups})
    meta: dict[str, Any] = {"name": name, "annotations": annotations, "creationTimestamp": created or _created()}
    if all_labels:
        meta["labels"] = all_labels
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"requests": requests}}],
    }
    doc: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if node_name is not None:
        spec["nodeName"] = node_name
        status: dict[str, Any] = {"phase": phase or "Running"}
        if started is not None:
            status["startTime"] = started
        doc["status"] = status
    elif phase is not None:
        doc["status"] = {"phase": phase}
    if releasing:
        meta["deletionTimestamp"] = DELETED
    return doc


def job_docs(
    name: str,
    queue_name: str,
    pods: int = 1,
    *,
    on: str | list[str] | None = None,
    min_member: int | None = None,
    priority_class: str = "train",
    **pod_fields: Any,
) -> list[dict[str, Any]]:
    """A PodGroup and its *pods* pods ``<name>-<k>``; *on*: the node (or one node per pod) they run on, None
    for pending pods; *min_member*: default all of them."""
    docs = [
        podgroup(name, queue_name, min_member=pods if min_member is None else min_member, priority_class=priority_class)
    ]
    for k in range(pods):
        where = on[k] if isinstance(on, list) else on
        docs.append(pod(f"{name}-{k}", name, node_name=where, **pod_fields))
    return docs


DRA_KINDS = (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate)


def snapshot_of(
    docs: list[dict[str, Any]],
    *,
    now: float = NOW,
    conf: SchedulerConf | None = None,
    queue_usage: dict[str, tuple[float, float, float]] | None = None,
    bare_pods_return: bool = True,
) -> Snapshot:
    """The Snapshot of *docs* (parsed as ``kai sim`` and the informers parse them), with Helm's PriorityClasses
    unless *docs* bring their own; *queue_usage*: time-based fair share's normalized usage per queue;
    *bare_pods_return*: False as a Kubernetes backend builds it."""
    objects, ignored = load_manifests([("cluster.yaml", yaml.safe_dump_all(docs, sort_keys=False))])
    assert not ignored, ignored
    by_kind: dict[type, list[Any]] = {}
    for _, obj in objects:
        by_kind.setdefault(type(obj), []).append(obj)
    return build_snapshot(
        nodes=by_kind.get(Node, []),
        pods=by_kind.get(Pod, []),
        podgroups=by_kind.get(PodGroup, []),
        queues=by_kind.get(Queue, []),
        priority_classes=by_kind.get(PriorityClass) or default_priority_classes(),
        now=now,
        pdbs=by_kind.get(PodDisruptionBudget, []),
        topologies=by_kind.get(Topology, []),
        task_order=task_order_of(conf or SchedulerConf()),
        queue_usage=queue_usage,
        bare_pods_return=bare_pods_return,
        dra=build_dra(
            *(by_kind.get(k, []) for k in (DeviceClass, ResourceSlice, ResourceClaim, ResourceClaimTemplate))
        ),
    )


def session_of(
    docs: list[dict[str, Any]],
    conf: SchedulerConf | None = None,
    *,
    now: float = NOW,
    queue_usage: dict[str, tuple[float, float, float]] | None = None,
) -> Session:
    """A Session on the Snapshot of *docs*, opened as the cycle opens it (plugins, fair share, Placer)."""
    conf = conf or SchedulerConf()
    return open_session(snapshot_of(docs, now=now, conf=conf, queue_usage=queue_usage), conf)


# --- finding things by name -------------------------------------------------------------------------------


def task(snap: Snapshot, name: str) -> TaskInfo:
    return next(t for t in snap.tasks if t.name == name)


def job(snap: Snapshot, name: str) -> JobInfo:
    return next(j for j in snap.jobs if j.name == name)


def qi(snap: Snapshot, name: str) -> int:
    return snap.queue_index[name]


def row(snap: Snapshot, node_name: str) -> int:
    return snap.nodes.names.index(node_name)
