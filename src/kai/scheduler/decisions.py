"""What a cycle decides, as data. Backends apply these; the engine never does I/O.

The per-pod records (PodRef, Bind, Pipeline, Evict, Event) and the per-PodGroup
status are NamedTuples: a cycle that binds 40,000 pods makes 120,000 of them,
and a frozen dataclass's ``__init__`` costs several times a tuple's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple


class PodRef(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class VolumeBinding(NamedTuple):
    """A claim of a pod being bound, bound before the pod (kube-scheduler's VolumeBinding PreBind): to *volume*
    (a PersistentVolume: its claimRef is set), or, with volume "", provisioned for *node* (the claim's
    ``volume.kubernetes.io/selected-node`` annotation)."""

    namespace: str
    claim: str
    volume: str  # "" = provision
    node: str


class ClaimAllocation(NamedTuple):
    """A ResourceClaim of a pod being bound, written before the pod (kube-scheduler's DynamicResources PreBind):
    with *devices* (``(request, driver, pool, device)`` each), the claim is allocated on *node*
    (``status.allocation``); with none, it was allocated already and the pod is only added to its
    ``status.reservedFor``, as it is in both cases."""

    namespace: str
    claim: str
    node: str
    devices: tuple[tuple[str, str, str, str], ...] = ()


class Bind(NamedTuple):
    """Bind *pod* to *node* now (resources are free); its *volumes* and its *claims* first."""

    pod: PodRef
    node: str
    podgroup: str
    gpu_groups: tuple[str, ...] = ()
    volumes: tuple[VolumeBinding, ...] = ()
    claims: tuple[ClaimAllocation, ...] = ()


class Pipeline(NamedTuple):
    """*pod* will go to *node* once the resources being released there are free; bind in a later cycle."""

    pod: PodRef
    node: str
    podgroup: str
    gpu_groups: tuple[str, ...] = ()
    nominated: bool = False  # an eviction made this room for the pod: hold it (status.nominatedNodeName)


class Evict(NamedTuple):
    pod: PodRef
    podgroup: str
    action: str
    reason: str


class Event(NamedTuple):
    """A Kubernetes event: ``object`` is ``Kind/namespace/name`` (or ``Kind/name``)."""

    object: str
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str


class PodGroupStatus(NamedTuple):
    """The scheduling conditions of a PodGroup after this cycle (empty = schedulable/scheduled)."""

    namespace: str
    name: str
    conditions: tuple[Condition, ...]
    stale_since: float | None = None  # the stale-gang timestamp the PodGroup should carry (annotation)
    stale_changed: bool = False  # write (or clear) the annotation this cycle


@dataclass(frozen=True, slots=True)
class QueueStatus:
    """Per queue, in QRES units of the API: GPUs, millicores, bytes."""

    name: str
    parent: str
    fair_share: dict[str, float]
    allocated: dict[str, float]
    allocated_non_preemptible: dict[str, float]
    requested: dict[str, float]
    deserved: dict[str, float]
    limit: dict[str, float]
    display_name: str = ""


class JobError(NamedTuple):
    """A job left out of the cycle because its attempt in *action* raised (``Session.drop_job``)."""

    podgroup: str  # namespace/name
    action: str
    message: str


@dataclass(slots=True)
class CycleResult:
    binds: list[Bind] = field(default_factory=list)
    pipelines: list[Pipeline] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    podgroups: list[PodGroupStatus] = field(default_factory=list)
    queues: list[QueueStatus] = field(default_factory=list)
    stats: dict[str, float] = field(default_factory=dict)
    job_errors: list[JobError] = field(default_factory=list)  # jobs left out of this cycle, each costing only itself
    action_errors: list[tuple[str, str]] = field(default_factory=list)  # (action, error): an action stopped by an error
    # this cycle's input and result, for the next cycle's run_cycle (kai.scheduler.memo.CycleMemo; typed
    # loosely here: decisions are plain data and import nothing of the engine)
    memo: Any = None
