"""The discrete-event loop around the real scheduling cycle.

Theory of operation. Simulated time is not wall time: the loop jumps from one cycle straight to the
next one that can matter. Cycles happen on multiples of the schedule period (as KAI's scheduler wakes
every ``--schedule-period``), and only at

* the first period boundary at or after an *event*: a job arrives, a pod reaches its
  ``kai.sim/duration``, a node is drained, uncordoned, fails or is repaired;
* the next boundary after a cycle that decided something (binds, evictions, pipelines) while work
  is still pending: its effects (pods running, evicted pods gone) open new choices;
* while work is pending and nothing changes: after a gap that doubles from one period up to
  ``idle_recheck``, so rules driven by the clock alone (min runtime, stale-gang grace, time-based
  usage) are still seen, without a cycle for every idle period.

Each cycle is: ``advance`` the embedded cluster to the cycle's time (completions, evicted pods gone and
recreated), apply the node events and arrivals due, collect finished jobs, ``schedule``. Events at the
same time keep a fixed order (node events, then arrivals, each in the order given) and the heap breaks
ties by sequence number, as SimPy's does, so a run is a pure function of its input and seed.

A run without a horizon ends when nothing is left to happen: no arrival, node event or completion
ahead and the last cycle changed nothing. Jobs still pending then are *stalled* (reported, not an
error): typically a job larger than the cluster.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import Node, Pod, PodGroup
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import CycleResult, Event
from kai.scheduler.model import TaskStatus
from kai.sim.cluster import EmbeddedCluster
from kai.sim.timesim._config import NodeEventSpec
from kai.sim.timesim._metrics import Recorder, node_allocatable
from kai.sim.timesim._sources import Arrival
from kai.store import Key, key_of

_EPS = 1e-9
_TERMINATING = frozenset({TaskStatus.RELEASING, TaskStatus.STUCK_IN_RELEASING})  # gone at the next advance


@dataclass(frozen=True, slots=True)
class RunParams:
    until: float | None  # horizon in seconds from the start; None: until nothing is left to happen
    period: float = 1.0
    idle_recheck: float = 300.0  # 0: a cycle every period while work is pending
    checkpoint: float | None = None  # default checkpoint interval; None: evicted pods restart from scratch
    occupancy_at: tuple[float, ...] = ()
    sample_every: float = 300.0  # fragmentation samples


@dataclass(slots=True)
class RunResult:
    recorder: Recorder
    last: CycleResult | None
    events: list[Event] = field(default_factory=list)  # the last cycle's (cluster's own first)
    end: float = 0.0
    stalled: list[str] = field(default_factory=list)  # jobs pending when a run without horizon stopped


class TimeSimulation:
    """One run: an empty embedded cluster, how to configure the scheduler once the first objects are
    in, what arrives (from time 0 on), node events, the parameters and the recorder to feed."""

    def __init__(
        self,
        cluster: EmbeddedCluster,
        conf_for: Callable[[EmbeddedCluster], SchedulerConf],
        arrivals: Iterator[Arrival],
        node_events: Sequence[NodeEventSpec],
        params: RunParams,
        recorder: Recorder,
        *,
        progress: Callable[[float], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self._conf_for = conf_for
        self.params = params
        self.recorder = recorder
        self.t0 = cluster.now
        self._arrivals = arrivals
        self._next_arrival: Arrival | None = next(arrivals, None)
        self._node_events = [(e.at, i, e) for i, e in enumerate(node_events)]
        heapq.heapify(self._node_events)
        self._failed: dict[str, Node] = {}
        self._progress = progress
        self._alloc = node_allocatable(cluster.nodes())
        self._idle_gap = params.period
        cluster.default_checkpoint = params.checkpoint

    # --- the loop ----------------------------------------------------------------------------------

    def run(self) -> RunResult:
        p = self.params
        cluster, rec = self.cluster, self.recorder
        self._due(0.0)
        conf = self._conf_for(cluster)  # after the first objects: a SchedulingShard among them configures it
        out = RunResult(rec, None)
        t = 0.0
        while True:
            result = cluster.schedule(conf)
            snap = cluster.last_snapshot
            assert snap is not None
            rec.cycle(t, snap, result)
            out.last = result
            out.events = [*cluster.take_events(), *result.events]
            if self._progress is not None:
                self._progress(t)
            # terminating pods (evicted, drained) are gone at the next advance: that changes what can run
            releasing = bool(result.evictions) or any(task.status in _TERMINATING for task in snap.tasks)
            decided = releasing or bool(result.binds or result.pipelines)
            pending = sum(1 for task in snap.tasks if task.status == TaskStatus.PENDING) > len(result.binds)
            nxt = self._next_cycle(t, decided, pending or releasing)
            if nxt is None:
                if pending and p.until is None:
                    out.stalled = sorted(f"{ns}/{n}" for ns, n in self._pending_jobs(result))
                end = t if p.until is None else max(p.until, t)
                break
            if p.until is not None and nxt > p.until + _EPS:
                end = p.until
                break
            rec.hold(t, nxt, cluster)
            cluster.advance(self.t0 + nxt)
            self._due(nxt)
            t = nxt
        rec.hold(t, end, cluster)
        out.end = end
        if self._progress is not None:
            self._progress(end)
        return out

    def _next_cycle(self, t: float, decided: bool, pending: bool) -> float | None:
        """When the next cycle happens after the one at *t* (None: nothing will ever happen again)."""
        p = self.params
        candidates = []
        event = self._next_event()
        if event is not None:
            candidates.append(max(self._boundary(event), t + p.period))
        if pending:
            if decided or p.idle_recheck <= 0:
                self._idle_gap = p.period
                candidates.append(t + p.period)
            elif event is not None or p.until is not None:
                candidates.append(self._boundary(t + self._idle_gap))
                self._idle_gap = min(self._idle_gap * 2, max(p.idle_recheck, p.period))
        elif decided:
            self._idle_gap = p.period
        return min(candidates) if candidates else None

    def _boundary(self, x: float) -> float:
        period = self.params.period
        return math.ceil(x / period - _EPS) * period

    def _next_event(self) -> float | None:
        times = []
        if self._next_arrival is not None:
            times.append(self._next_arrival.at)
        if self._node_events:
            times.append(self._node_events[0][0])
        if (done := self.cluster.next_completion()) is not None:
            times.append(done - self.t0)
        return min(times) if times else None

    # --- events --------------------------------------------------------------------------------------

    def _due(self, t: float) -> None:
        """Apply node events, then arrivals, due at or before *t*; collect what finished."""
        cluster, rec = self.cluster, self.recorder
        while self._node_events and self._node_events[0][0] <= t + _EPS:
            _, _, ev = heapq.heappop(self._node_events)
            self._node_event(t, ev)
        batch: list[Arrival] = []
        while self._next_arrival is not None and self._next_arrival.at <= t + _EPS:
            batch.append(self._next_arrival)
            self._next_arrival = next(self._arrivals, None)
        if batch:
            self._apply(t, batch)
        rec.interrupted(cluster.take_interruptions())
        rec.finished(cluster.collect_finished())

    def _apply(self, t: float, batch: list[Arrival]) -> None:
        """Apply arrivals as one batch; each new PodGroup's job is recorded at its own arrival time."""
        cluster = self.cluster
        objects = []
        arrived_at: dict[tuple[str, Key], float] = {}  # by (kind, key): the cluster stores changed copies
        for a in batch:
            for i, (source, obj) in enumerate(a.objects):
                if a.at > 0 and obj.meta.creation_timestamp is None:
                    obj.meta.creation_timestamp = self.t0 + a.at + i * 1e-6  # job order: earlier arrival first
                arrived_at[(obj.kind, key_of(obj))] = a.at
                objects.append((source, obj))
        rv = cluster.store.resource_version
        try:
            cluster.apply(objects)
        except ManifestError as e:
            raise ManifestError(
                f"{e.message} (applied at {t:g}s of the simulation)", source=e.source, obj=e.obj, field=e.field
            ) from None
        pgs: list[PodGroup] = []
        pods: list[Pod] = []
        nodes_changed = False
        for change in cluster.store.changes_since(rv):
            if change.op != "ADDED":
                continue
            now = cluster.store.get(change.kind, change.key)  # as it is now (the pod-grouper annotated a copy)
            if change.kind == "PodGroup" and now is not None:
                pgs.append(now)
            elif change.kind == "Pod" and now is not None:
                pods.append(now)
            elif change.kind == "Node":
                nodes_changed = True
        if nodes_changed:
            self._alloc = node_allocatable(cluster.nodes())
        # a PodGroup the user wrote arrives with itself; one the pod-grouper made, with its first pod
        first_pod: dict[tuple[str, str], float] = {}
        for pod in pods:
            key = (pod.meta.namespace or "", pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, ""))
            first_pod.setdefault(key, arrived_at.get(("Pod", key_of(pod)), t))
        timed = [
            (arrived_at.get(("PodGroup", key_of(pg)), first_pod.get((pg.meta.namespace or "", pg.meta.name), t)), pg)
            for pg in pgs
        ]
        self.recorder.arrived(timed, pods, self._alloc)

    def _node_event(self, t: float, ev: NodeEventSpec) -> None:
        cluster, rec = self.cluster, self.recorder
        try:
            if ev.action == "drain":
                rec.node_event(ev.at, ev.node, ev.action, cluster.drain(ev.node))
            elif ev.action == "uncordon":
                cluster.cordon(ev.node, False)
                rec.node_event(ev.at, ev.node, ev.action, 0)
            elif ev.action == "fail":
                node, lost = cluster.fail_node(ev.node)
                self._failed[ev.node] = node
                rec.node_event(ev.at, ev.node, ev.action, lost)
            elif ev.node in self._failed:  # repair
                node = self._failed.pop(ev.node)
                node.unschedulable = False
                cluster.apply([("", node)])
                rec.node_event(ev.at, ev.node, ev.action, 0)
            else:
                rec.node_event(ev.at, ev.node, ev.action, 0, "skipped: the node has not failed")
        except KeyError:
            rec.node_event(ev.at, ev.node, ev.action, 0, "skipped: the node is not in the cluster")
        self._alloc = node_allocatable(cluster.nodes())

    def _pending_jobs(self, result: CycleResult) -> list[tuple[str, str]]:
        return [(st.namespace, st.name) for st in result.podgroups if st.conditions]
