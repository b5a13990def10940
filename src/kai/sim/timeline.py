"""kai sim's timeline: which manifests arrive before which cycle, and what every cycle did.

Rules: a timeline is data. ``Step`` says "just before cycle N, apply these files" (``kai sim --at
N:FILE[,FILE...]``); ``play`` runs the cycles on an embedded cluster, applies each step's objects after the
cluster has moved on to that cycle and before it is scheduled, and returns one ``CycleRecord`` per cycle:
the files applied, the decisions (bind, pipeline, evict, each with its reason), the pods afterwards and
the PodGroups that wait, with why. The records are what the table view prints cycle by cycle and what
``-o json`` carries as ``timeline``; a time-based simulator can produce the same records at its own
instants (``time`` is the cluster's clock).

A cycle number is 1-based and at most ``--cycles``; a step with a bad form, a cycle out of range or a
file that cannot be read is a ManifestError naming ``--at`` and the value, raised before any cycle runs.
The scheduler's configuration is read once, before the first cycle, so a SchedulingShard in a step is
an error too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import format_time
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import CycleResult, Event
from kai.sim.cluster import EmbeddedCluster, SimObject

AT_FORM = "N:FILE[,FILE...]"

Loaded = Sequence[tuple[str, SimObject]]  # (source file, object), in input order


@dataclass(frozen=True, slots=True)
class Step:
    """Apply *files* just before cycle *cycle* (1-based)."""

    cycle: int
    files: tuple[str, ...]


def parse_steps(values: Sequence[str], cycles: int) -> tuple[Step, ...]:
    """``--at`` values → steps in cycle order (two values for one cycle are applied in the order given)."""
    steps: dict[int, list[str]] = {}
    for value in values:
        number, sep, rest = value.partition(":")
        files = tuple(f.strip() for f in rest.split(",") if f.strip())
        if not sep or not files or not number.strip().lstrip("+-").isdigit():
            raise ManifestError(f"{value!r} is not {AT_FORM}", source="--at")
        cycle = int(number)
        if cycle < 1:
            raise ManifestError(f"{value!r}: cycle {number!r} is not a cycle number (1, 2, ...)", source="--at")
        if cycle > cycles:
            raise ManifestError(
                f"{value!r}: cycle {cycle} is beyond the last cycle ({cycles}); raise --cycles", source="--at"
            )
        steps.setdefault(cycle, []).extend(files)
    return tuple(Step(c, tuple(files)) for c, files in sorted(steps.items()))


def check_arrivals(step: Step, objects: Loaded) -> None:
    """Objects a step may not bring: the scheduler's configuration is fixed before the first cycle."""
    for source, obj in objects:
        if obj.kind == "SchedulingShard":
            raise ManifestError(
                f"arrives at cycle {step.cycle}; the scheduler reads its configuration once, so apply it "
                "with the FILES given before the first cycle",
                source=source,
                obj=f"SchedulingShard/{obj.meta.name}",
            )


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision of a cycle, as a line a person reads: bind, pipeline or evict one pod."""

    type: str  # bind | pipeline | evict
    pod: str  # namespace/name
    node: str | None  # where it goes (bind, pipeline) or was (evict)
    pod_group: str
    action: str | None  # the action that evicted (reclaim, preempt, ...); None for bind and pipeline
    reason: str
    volumes: tuple[str, ...] = ()  # bind: "claim -> volume" bound first ("claim -> new volume" when provisioned)
    claims: tuple[str, ...] = ()  # bind: DRA "claim -> pool/device, ..." written first ("-> reserved": allocated)


@dataclass(frozen=True, slots=True)
class PodState:
    """A pod after a cycle, in the sim contract's words (status Pending, Binding, Running, ...)."""

    namespace: str
    name: str
    status: str
    node: str | None
    nominated_node: str | None
    pod_group: str | None
    created: float  # creationTimestamp, for an age
    containers: int  # for kubectl's READY column
    gpu_groups: tuple[str, ...] = ()  # the shared GPUs it holds (or is promised)


@dataclass(frozen=True, slots=True)
class Waiting:
    """A PodGroup that waits after a cycle, with the condition that says why."""

    pod_group: str  # namespace/name
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class CycleRecord:
    cycle: int  # 1-based
    time: float  # the cluster's clock when the cycle ran
    applied: tuple[str, ...]  # files applied just before it (cycle 1: the FILES and any --at 1:)
    decisions: tuple[Decision, ...]
    pods: tuple[PodState, ...]
    waiting: tuple[Waiting, ...]


@dataclass(slots=True)
class Run:
    """The outcome of play: the last cycle's result, every event with its cycle, and the records."""

    last: CycleResult | None = None
    events: list[tuple[int, Event]] = field(default_factory=list)
    records: list[CycleRecord] = field(default_factory=list)


def play(
    cluster: EmbeddedCluster,
    conf: SchedulerConf,
    cycles: int,
    arrivals: Mapping[int, Loaded] | None = None,
    *,
    first: Sequence[str] = (),
) -> Run:
    """Run *cycles* cycles, applying ``arrivals[n]`` just before cycle n; *first* names the files applied
    before the first cycle (for the record). A ManifestError from a late arrival names its cycle."""
    run = Run()
    arrivals = arrivals or {}
    for c in range(1, cycles + 1):
        objects = arrivals.get(c, ())
        try:
            result = cluster.run_cycle(conf, objects)
        except ManifestError as e:
            message = f"{e.message} (applied at cycle {c})"
            raise ManifestError(message, source=e.source, obj=e.obj, field=e.field) from None
        run.last = result
        run.events.extend((c, e) for e in cluster.take_events())  # pod-grouper and controllers, before the cycle
        run.events.extend((c, e) for e in result.events)
        applied = tuple(dict.fromkeys([*(first if c == 1 else ()), *(s for s, _ in objects)]))
        run.records.append(_record(cluster, c, applied, result))
    return run


def _record(cluster: EmbeddedCluster, cycle: int, applied: tuple[str, ...], result: CycleResult) -> CycleRecord:
    groups = {(pg.meta.namespace, pg.meta.name): pg for pg in cluster.store.list("PodGroup")}
    placed: dict[tuple[str, str], int] = {}
    for d in (*result.binds, *result.pipelines):
        placed[(d.pod.namespace, d.podgroup)] = placed.get((d.pod.namespace, d.podgroup), 0) + 1

    def gang(namespace: str, name: str) -> str:
        pg = groups.get((namespace, name))
        n = placed.get((namespace, name), 0)
        if pg is None:
            return f"{name}: {n} pods placed together"
        return f"{name}, queue {pg.queue}: {n} pods placed together (minMember {pg.min_member})"

    # evictions first: they make the room the pipelined pods wait for
    nodes = {(v.pod.meta.namespace or "", v.pod.meta.name): v.pod.node_name for v in cluster.pod_views()}
    decisions = [
        Decision("evict", str(e.pod), nodes.get((e.pod.namespace, e.pod.name)) or None, e.podgroup, e.action, e.reason)
        for e in result.evictions
    ]
    decisions += [
        Decision(
            "pipeline",
            str(p.pod),
            p.node,
            p.podgroup,
            None,
            f"{gang(p.pod.namespace, p.podgroup)}, on resources still being released",
        )
        for p in result.pipelines
    ]
    decisions += [
        Decision(
            "bind",
            str(b.pod),
            b.node,
            b.podgroup,
            None,
            gang(b.pod.namespace, b.podgroup),
            tuple(f"{v.namespace}/{v.claim} -> {v.volume or 'new volume'}" for v in b.volumes),
            tuple(
                f"{c.namespace}/{c.claim} -> " + (", ".join(f"{d[2]}/{d[3]}" for d in c.devices) or "reserved")
                for c in b.claims
            ),
        )
        for b in result.binds
    ]
    pods = tuple(
        PodState(
            namespace=v.pod.meta.namespace or "",
            name=v.pod.meta.name,
            status=v.status,
            node=v.node or None,
            nominated_node=v.pod.nominated_node_name or None,
            pod_group=v.pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME) or None,
            created=v.pod.meta.creation_timestamp or cluster.now,
            containers=max(1, len(v.pod.container_names)),
            gpu_groups=v.gpu_groups,
        )
        for v in cluster.pod_views()
    )
    waiting = tuple(
        Waiting(f"{s.namespace}/{s.name}", c.reason, c.message) for s in result.podgroups for c in s.conditions
    )
    return CycleRecord(cycle, cluster.now, applied, tuple(decisions), pods, waiting)


def record_document(record: CycleRecord) -> dict[str, Any]:
    """One record as the sim contract's JSON (``timeline[]``)."""
    return {
        "cycle": record.cycle,
        "time": format_time(record.time),
        "applied": list(record.applied),
        "decisions": [
            {
                "type": d.type,
                "pod": d.pod,
                "node": d.node,
                "podGroup": d.pod_group,
                "action": d.action,
                "reason": d.reason,
                **({"volumes": list(d.volumes)} if d.volumes else {}),
                **({"claims": list(d.claims)} if d.claims else {}),
            }
            for d in record.decisions
        ],
        "pods": [
            {
                "namespace": p.namespace,
                "name": p.name,
                "status": p.status,
                "node": p.node,
                "podGroup": p.pod_group,
                "gpuGroups": list(p.gpu_groups),
            }
            for p in record.pods
        ],
        "waiting": [{"podGroup": w.pod_group, "reason": w.reason, "message": w.message} for w in record.waiting],
    }
