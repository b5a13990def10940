"""The engine's view of the cluster for one cycle: tasks, jobs, queues, nodes.

Rules: built by ``snapshot.build_snapshot`` from Store objects, read-only for
the session (the session copies what it changes). Words are KAI's: a *job* is a
PodGroup in a session, a *task* is a pod, a *queue* is a Queue.

Units: node resource columns follow ``Snapshot.resources``; cpu in millicores,
GPUs in milli-GPUs (so fractions stay integral), everything else in whole
units (bytes, counts). Queue vectors use ``QRES`` = (gpu, cpu, memory) in the
same base units.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from kai.api.objects import Pod, PodGroup, TopologyConstraint

CPU, MEMORY, GPU, PODS = 0, 1, 2, 3  # fixed node resource columns; extended resources follow
BASE_RESOURCES = ("cpu", "memory", "nvidia.com/gpu", "pods")
QRES = ("gpu", "cpu", "memory")
Q_GPU, Q_CPU, Q_MEMORY = 0, 1, 2  # positions in a queue vector (QRES); not the node columns above
QRES_INDEXES = (Q_GPU, Q_CPU, Q_MEMORY)  # loop over a queue vector's resources with this, not range(3)
QRES_COLUMNS = np.array([GPU, CPU, MEMORY])  # node column of each queue resource
MILLI = 1000
UNITS_PER_MIB = 1000  # per-GPU memory units: 1/1000 MiB


@dataclass(frozen=True, slots=True)
class GpuShare:
    """A fractional GPU request: the same portion on each of ``devices`` GPUs."""

    fraction_milli: int  # share of one GPU in milli-GPU; 0 for a gpu-memory request
    memory_mib: int  # MiB of one GPU; 0 for a fraction request
    devices: int = 1
    container: str = ""  # gpu-fraction-container-name ("" = the first container)

    def units(self, cap: int) -> int:
        """Memory units one device's portion takes on a GPU of *cap* units."""
        if self.fraction_milli:
            return self.fraction_milli * cap // MILLI
        return self.memory_mib * UNITS_PER_MIB

    def units_array(self, cap: np.ndarray) -> np.ndarray:
        if self.fraction_milli:
            return self.fraction_milli * cap // MILLI
        return np.full(cap.shape, self.memory_mib * UNITS_PER_MIB, dtype=np.int64)

    def accounted_milli(self, gpu_memory_mib: int) -> int:
        """The GPU amount queues are charged (milli-GPU, all devices): f x N, or for gpu-memory the share
        of a GPU of *gpu_memory_mib* rounded up to 0.01 GPU, as KAI's getGpuMemoryFractionalOnNode."""
        if self.fraction_milli:
            return self.fraction_milli * self.devices
        hundredths = -(-self.memory_mib * 100 // max(gpu_memory_mib, 1))
        return min(hundredths, 100) * 10 * self.devices

    def describe(self) -> str:
        """'0.5 GPU' / '2000 MiB of GPU memory', with ' on each of 2 GPUs' for several devices."""
        if self.fraction_milli:
            amount = f"{self.fraction_milli / MILLI:g} GPU"
        else:
            amount = f"{self.memory_mib} MiB of GPU memory"
        return amount if self.devices == 1 else f"{amount} on each of {self.devices} GPUs"


@dataclass(slots=True)
class GangNode:
    """One subgroup: a set (has children) or a leaf (has pods)."""

    name: str  # "" for the root
    parent: int  # -1 for the root
    children: list[int] = field(default_factory=list)
    min_member: int = 0  # leaf: pods needed; root set: pods needed in all (0 = no such rule)
    min_subgroup: int | None = None  # set: children needed (None = all of them)
    constraint: TopologyConstraint | None = None
    tasks: list[int] = field(default_factory=list)  # leaf: task indices, in task order
    counted: bool = True  # False for the implicit leaf of pods that name no subgroup
    leaf: bool = True

    @property
    def label(self) -> str:
        return f"subgroup {self.name}" if self.name else "the podgroup"


@dataclass(slots=True)
class Gang:
    nodes: list[GangNode]  # 0 is the root; a parent always comes before its children
    leaf_of: dict[int, int]  # task index -> leaf node (empty for a flat gang: use ``leaf``)
    min_pods: int
    constrained: bool  # some node has a topology constraint with a topology or a level

    @property
    def flat(self) -> bool:
        """One leaf holding every pod: the classic gang with one minMember."""
        return len(self.nodes) == 1

    def leaf(self, task: int) -> int:
        """The leaf holding *task*."""
        return self.leaf_of[task] if self.leaf_of else 0

    def required(self, node: int) -> int:
        """Children a set needs satisfied."""
        g = self.nodes[node]
        counted = sum(1 for c in g.children if self.nodes[c].counted)
        return counted if g.min_subgroup is None else g.min_subgroup

    def path(self, node: int) -> list[int]:
        """Root first, down to *node*."""
        out = []
        while node >= 0:
            out.append(node)
            node = self.nodes[node].parent
        return out[::-1]


class TaskStatus(enum.IntEnum):
    PENDING = 0
    GATED = 1
    ALLOCATED = 2
    PIPELINED = 3
    BINDING = 4
    BOUND = 5
    RUNNING = 6
    RELEASING = 7
    SUCCEEDED = 8
    FAILED = 9
    # Running with a deletionTimestamp older than the threshold (KAI's StuckInReleasing): it still holds its
    # resources, but they are no longer counted as releasing, so nothing is pipelined onto them; not a victim
    STUCK_IN_RELEASING = 10


ACTIVE_ALLOCATED = frozenset(
    {TaskStatus.ALLOCATED, TaskStatus.PIPELINED, TaskStatus.BINDING, TaskStatus.BOUND, TaskStatus.RUNNING}
)
ACTIVE_USED = ACTIVE_ALLOCATED | {TaskStatus.RELEASING, TaskStatus.STUCK_IN_RELEASING}
# on its node for good as far as this cycle sees: its ports, volumes and place among other pods stay taken
HOLDING = ACTIVE_ALLOCATED | {TaskStatus.STUCK_IN_RELEASING}
ALIVE = ACTIVE_ALLOCATED | {TaskStatus.PENDING, TaskStatus.GATED}


@dataclass(slots=True)
class TaskInfo:
    """One pod. ``status`` and ``node`` are the state at snapshot time."""

    index: int  # position in Snapshot.tasks
    job: int  # position in Snapshot.jobs
    pod: Pod
    status: TaskStatus
    node: int  # row in the node table, -1 if none
    request: np.ndarray  # (n_res,) int64
    signature: int  # tasks with equal signatures share predicate masks
    order_key: tuple  # task order inside the job (smaller first)
    qreq: tuple[int, int, int] = (0, 0, 0)  # request in QRES base units, as Python ints for per-job arithmetic
    nominated: int = -1  # node row of status.nominatedNodeName (room an eviction made for it), -1 if none
    share: GpuShare | None = None  # a fractional GPU request (gpu-fraction / gpu-memory annotations)
    gpu_slots: tuple[int, ...] = ()  # the GPU groups (slots of its node) a placed shared pod holds
    # why kai will not place it ("" = nothing wrong): bad GPU-sharing annotations, or a request above what kai can
    # account for; the field is named. Only a pod kai still has to place has one: a bound pod counts as it is bound.
    spec_error: str = ""
    spec_error_reason: str = ""  # the event reason: InvalidGpuRequest | InvalidRequest

    @property
    def namespace(self) -> str:
        return self.pod.meta.namespace or ""

    @property
    def name(self) -> str:
        return self.pod.meta.name


ALIVE_UNGATED = ALIVE - {TaskStatus.GATED}


class JobSums(NamedTuple):
    """What a job's tasks add up to at snapshot time, as the Session's queue accounting needs it."""

    alive: int  # live, ungated pods with a valid spec (KAI's FilterUnready counts these against minMember)
    allocated: int  # pods holding their place (allocated, pipelined, binding, bound, running)
    alloc: tuple[int, int, int]  # their requests, QRES base units
    pending: tuple[int, int, int]  # the requests of its pending pods with a valid spec
    # The three below let a cycle pass over a job its pods rule out without reading them (stalegangeviction,
    # the eviction actions' pending jobs): thousands of jobs a cycle, most of them running and whole.
    used: int  # pods holding resources, Releasing ones too (ACTIVE_USED: what a gang's minimum counts)
    succeeded: bool  # a pod Succeeded: the job did its work, and is never a stale gang
    waiting: int  # PENDING pods, whatever their spec: a cycle places only these


def job_sums(task_indices: Iterable[int], tasks: Sequence[TaskInfo]) -> JobSums:
    ag = ac = am = pg = pc = pm = count = alive = used = waiting = 0
    succeeded = False
    for ti in task_indices:
        t = tasks[ti]
        status = t.status
        if status in ALIVE_UNGATED and not t.spec_error:
            alive += 1
        if status in ACTIVE_ALLOCATED:
            g, c, m = t.qreq
            ag += g
            ac += c
            am += m
            count += 1
            used += 1
        elif status == TaskStatus.PENDING:
            waiting += 1
            if not t.spec_error:
                g, c, m = t.qreq
                pg += g
                pc += c
                pm += m
        elif status in ACTIVE_USED:  # Releasing, or stuck in it
            used += 1
        elif status == TaskStatus.SUCCEEDED:
            succeeded = True
    return JobSums(alive, count, (ag, ac, am), (pg, pc, pm), used, succeeded, waiting)


@dataclass(slots=True)
class JobInfo:
    """One PodGroup and its tasks."""

    index: int
    podgroup: PodGroup
    queue: int  # row in the queue table; -1 if the queue is missing or not a leaf
    queue_name: str
    priority: int
    preemptible: bool
    min_available: int
    creation: float
    tasks: list[int] = field(default_factory=list)  # task indices, in task order
    unschedulable_reason: str = ""  # set when the job can never be scheduled as is (missing queue, ...)
    last_start: float | None = None  # latest start of its active pods (KAI's LastStartTimestamp); min runtime
    gang: Gang | None = None  # its subgroup tree (kai.scheduler.subgroups), set by the snapshot
    # job_sums of its tasks, set by the snapshot (the Session reads it instead of walking every task per cycle)
    sums: JobSums | None = None

    @property
    def namespace(self) -> str:
        return self.podgroup.meta.namespace or ""

    @property
    def name(self) -> str:
        return self.podgroup.meta.name

    @property
    def uid(self) -> str:
        return self.podgroup.meta.uid

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(slots=True)
class QueueInfo:
    index: int
    name: str
    parent: int  # -1 for a top-level queue
    children: list[int]
    priority: int
    creation: float
    uid: str
    deserved: np.ndarray  # (3,) float64 in QRES base units; -1 = unlimited
    limit: np.ndarray  # (3,) float64; -1 = no limit
    over_quota_weight: np.ndarray  # (3,) float64
    preempt_min_runtime: float | None = None  # seconds; None = not set on this queue (look further up)
    reclaim_min_runtime: float | None = None
    display_name: str = ""  # spec.displayName ("" = none): metrics and outputs show it beside the name

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(slots=True)
class JobFailure:
    """Why a job got nothing (or less than it needs) this cycle: KAI reason code + user words."""

    reason: str  # Unschedulable | OverLimit | NonPreemptibleOverQuota | QueueDoesNotExist | NotReady | ...
    message: str
    queue: int = -1  # OverLimit: the queue whose limit binds (evicting pods under it may make room)


@dataclass(frozen=True, slots=True)
class NodeTable:
    """Nodes as arrays; row i is ``names[i]``, sorted by name (ties in scoring go to the lower row)."""

    names: tuple[str, ...]
    labels: tuple[dict[str, str], ...]
    taints: tuple[tuple[tuple[str, str, str], ...], ...]  # per node: (key, value, effect)
    allocatable: np.ndarray  # (n_nodes, n_res) int64
    used: np.ndarray  # (n_nodes, n_res) int64: requests of every active pod on the node
    releasing: np.ndarray  # (n_nodes, n_res) int64: part of ``used`` held by terminating pods
    schedulable: np.ndarray  # (n_nodes,) bool: Ready (a cordon is a taint, see snapshot)
    gpu_memory_mib: np.ndarray  # (n_nodes,) int64 per-GPU memory (label nvidia.com/gpu.memory)
    mig_mixed: np.ndarray  # (n_nodes,) bool: no whole GPUs to give
    # (n_nodes,) bool: a legacy MIG pod runs there, so no new MIG pod goes there (KAI); None: no such node
    legacy_mig: np.ndarray | None = None

    @property
    def n(self) -> int:
        return len(self.names)
