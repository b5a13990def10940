"""Soak benchmark: ``kai scheduler`` under pods churned for 30 minutes on a real API server; memory and CPU over time.

Run with ``.venv/bin/python benchmarks/soak.py`` (flags: ``--minutes 30 --pods 50000 --nodes 100 --gpus 8
--sample-s 30 --json out.json``; ``--kai-args`` adds flags to kai's; ``--probe counts|tracemalloc`` reports
the containers kai's objects hold at each sample, to find what grows). Needs the control-plane binaries
(``make control-plane``). Issue 14's figure: flat RSS while 50,000 pods come and go; benchmarks/RESULTS.md
has the runs.

Theory of operation:

* **Real parts.** A fresh etcd + kube-apiserver + kube-controller-manager (its garbage collector removes
  the PodGroups kai's pod-grouper made for bare pods, and the ConfigMaps of shared-GPU pods, once their
  pods are gone), ``kai install``, ``--nodes`` Ready nodes of ``--gpus`` GPUs, and ``kai scheduler`` as
  a real process, as deployed (leader election on, default flags), its /metrics on a free port. A
  replica that exits (a Lease it could not renew on an overloaded API server) is replaced, as its
  Deployment would, and counted (``restarts``): each replacement starts from an empty heap.
* **Played by the benchmark**, because nothing real stands in for them here: the kubelets (a bound pod
  is marked Running, as ``kai.k8s.envtest.mark_pod_running`` does; a pod being deleted is removed once
  "its containers stopped"), the device plugin of GPU reservation pods (each gets a free GPU of its node
  and that GPU's UUID written on it, as ``kai resource-reservation`` does), kai's admission webhook (a
  half-GPU pod is created as the webhook admits it: kai's own mutation, ``kai.k8s._admission``, applied
  in-process), and the workload's owners. One asyncio loop does all of it from two watches (the
  workload's namespace and the reservation namespace); it decodes no more of a pod than it needs, since
  it shares the machine's cores with what it measures.
* **The workload.** For ``--minutes``, pods are created at the rate that makes ``--pods`` in that time,
  in ticks of 0.1 s, drawn from a seeded generator: bare one-GPU pods (as users make them: queue label
  and schedulerName; kai's pod-grouper groups them), gangs of 2-4 one-GPU pods with their PodGroup
  (minMember = size, priority train), half-GPU pods (``gpu-fraction: 0.5``), and two-GPU pods of the
  higher PriorityClass build-preemptible, which preempt train pods when the cluster is full. Once
  Running, a pod lives ``--lifetime`` seconds (uniform; a gang as one), then its owner deletes it (a
  gang: its pods and PodGroup). A pod kai evicts is gone; a gang that loses a pod is deleted whole by
  its owner, as a failed job would be. A pod (or gang) still unbound after ``--patience`` seconds is
  cancelled by its owner, so the backlog stays bounded whatever the load: the live state is bounded
  while the churn is not, which is what a memory soak needs. The defaults keep the GPUs about 90% busy.
* **Samples**, every ``--sample-s``: kai's RSS (``VmRSS``) and CPU seconds (``/proc``), the API server's
  and etcd's RSS for context, pods created / bound / deleted / evicted / cancelled so far, pods pending
  and running now, kai's /metrics (cycles, binds, task failures, job errors, API errors, re-lists,
  dropped events, the number of series), creation-to-bind latency of the pods bound in the window, and
  the invariant read from a full list at that moment: no node over its GPUs (whole GPUs, plus one per
  GPU group or reservation pod; no GPU reserved twice). Also: no pod ever seen bound to two nodes.
* **The end.** The workload stops creating; the pods still unbound are counted with their reasons
  (PodScheduled=False messages); then the owners and kubelets go on until the namespace is empty (or
  ``--drain-s``), and after ``--idle-s`` of an empty cluster a last sample is taken: kai's RSS idle
  before the churn and idle after it is the plainest reading of a leak.

No figure here is asserted: this is a benchmark, read by a person (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import time
import traceback
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from e2e_fill import (  # noqa: E402
    byte_compile,
    cpu_seconds,
    kai_install,
    machine,
    make_nodes,
    scheduler_cmd,
    stop_scheduler,
)
from kai.api import constants as C  # noqa: E402
from kai.k8s._admission import Admission, AdmissionConfig  # noqa: E402
from kai.k8s._api import Api, ApiError, load_config  # noqa: E402
from kai.k8s.envtest import Binaries, ControlPlane, free_port, running_pod_status  # noqa: E402
from kai.k8s.envtest._controlplane import _die_with_parent as die_with_parent  # noqa: E402
from kai.store import Store  # noqa: E402

NS = "soak"
RES_NS = C.RESERVATION_NAMESPACE
GPU = "nvidia.com/gpu"
TICK_S = 0.1
CONCURRENCY = 96  # the harness's requests in flight at most
PG_PATH = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"
MERGE = "application/merge-patch+json"
ADMISSION = Admission(Store(), AdmissionConfig(gpu_fraction_runtime_class=""))  # no RuntimeClass here
# kinds of pods, by the workload's draw per action: (kind, share of actions)
ACTIONS = (("bare", 0.45), ("gang", 0.15), ("half", 0.20), ("high", 0.20))
METRICS = {  # kai's /metrics series tracked over time (summed over labels), by the column's name
    "cycles": "kai_scheduler_cycles_total",
    "task_failures": "kai_task_failures_total",
    "job_errors": "kai_cycle_job_errors_total",
    "api_errors": "kai_api_errors_total",
    "relists": "kai_informer_relists_total",
    "events_dropped": "kai_events_dropped_total",
    "fenced": "kai_writes_fenced_total",
}


# With --probe, kai runs under this (``python -c PROBE scheduler ...``): on SIGUSR2 it writes to
# $KAI_SOAK_PROBE, for kai's objects reachable from its running tasks, per class and attribute the
# summed length of the containers they hold (a dict that only grows shows here), plus, with
# $KAI_SOAK_TRACEMALLOC, tracemalloc's top lines. A diagnostic: it costs kai a pass over every object
# per sample, so the figures of a probed run are not the benchmark's.
PROBE = r"""
import asyncio, gc, json, os, signal, sys, tracemalloc

def _kai(o):
    return (type(o).__module__ or "").startswith("kai.")

def _attrs(o):
    d = getattr(o, "__dict__", None)
    if d is not None:
        return d.items()
    return [(k, getattr(o, k)) for k in getattr(type(o), "__slots__", ()) if hasattr(o, k)]

def _walk(roots):
    # kai's objects reachable from the running tasks through kai objects' attributes (and small dicts,
    # lists and sets of them): the size of every container they hold, summed over distinct containers.
    # kai gc.freeze()s its start-up objects, so gc.get_objects() does not see them; this walk does.
    held, instances, seen, stack = {}, {}, set(), list(roots)
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        name = f"{type(o).__module__}.{type(o).__qualname__}"
        instances[name] = instances.get(name, 0) + 1
        for k, v in _attrs(o):
            if isinstance(v, (dict, set, list, frozenset, tuple)) or type(v).__name__ in ("OrderedDict", "deque"):
                if id(v) in seen:
                    continue
                seen.add(id(v))
                key = f"{name}.{k}"
                held[key] = held.get(key, 0) + len(v)
                if len(v) <= 64:
                    items = v.values() if isinstance(v, dict) else v
                    for x in items:
                        if _kai(x):
                            stack.append(x)
                        elif isinstance(x, (dict, set, list)) and isinstance(v, dict):
                            held[key + "[*]"] = held.get(key + "[*]", 0) + len(x)
            elif _kai(v):
                stack.append(v)
    return held, instances

def _probe(signum, frame):
    roots = []
    try:
        for t in asyncio.all_tasks(asyncio.get_running_loop()):
            c = t.get_coro()
            while c is not None:
                f = getattr(c, "cr_frame", None)
                if f is not None:
                    roots += [v for v in f.f_locals.values() if _kai(v)]
                c = getattr(c, "cr_await", None)
    except RuntimeError:
        pass
    held, instances = _walk(roots)
    out = {
        "held": dict(sorted(held.items(), key=lambda kv: -kv[1])[:80]),
        "instances": dict(sorted(instances.items(), key=lambda kv: -kv[1])[:30]),
        "gc_counts": gc.get_count(),
        "gc_tracked": len(gc.get_objects()),
        "gc_frozen": gc.get_freeze_count(),
    }
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot()
        out["tracemalloc_top"] = [
            [str(s.traceback[0]), s.size, s.count] for s in snap.statistics("lineno")[:40]
        ]
    path = os.environ["KAI_SOAK_PROBE"]
    with open(path + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(path + ".tmp", path)

signal.signal(signal.SIGUSR2, _probe)
if os.environ.get("KAI_SOAK_TRACEMALLOC"):
    tracemalloc.start(1)
sys.argv = ["kai", *sys.argv[1:]]
from kai.cli import main
main()
"""


# ---- what the harness decodes of a pod -------------------------------------------------------------


class _Cond(msgspec.Struct):
    type: str = ""
    status: str = ""
    message: str = ""


class _Meta(msgspec.Struct):
    name: str = ""
    uid: str = ""
    resourceVersion: str = ""
    deletionTimestamp: str | None = None
    annotations: dict[str, str] = msgspec.field(default_factory=dict)
    labels: dict[str, str] = msgspec.field(default_factory=dict)


class _Res(msgspec.Struct):
    limits: dict[str, str] = msgspec.field(default_factory=dict)


class _Ctr(msgspec.Struct):
    resources: _Res = msgspec.field(default_factory=_Res)


class _Spec(msgspec.Struct):
    nodeName: str = ""
    containers: list[_Ctr] = msgspec.field(default_factory=list)


class _Status(msgspec.Struct):
    phase: str = ""
    conditions: list[_Cond] = msgspec.field(default_factory=list)


class _Pod(msgspec.Struct):
    metadata: _Meta
    spec: _Spec = msgspec.field(default_factory=_Spec)
    status: _Status = msgspec.field(default_factory=_Status)


class _ListMeta(msgspec.Struct):
    resourceVersion: str = ""


class _PodList(msgspec.Struct):
    items: list[_Pod]
    metadata: _ListMeta


class _Ev(msgspec.Struct):
    type: str
    object: msgspec.Raw


class _ErrStatus(msgspec.Struct):
    code: int = 0


class _Bookmark(msgspec.Struct):
    metadata: _ListMeta


_ev = msgspec.json.Decoder(_Ev)
_bookmark = msgspec.json.Decoder(_Bookmark)
_pod = msgspec.json.Decoder(_Pod)
_list = msgspec.json.Decoder(_PodList)


def _gpus(p: _Pod) -> int:
    return sum(int(c.resources.limits.get(GPU, "0") or 0) for c in p.spec.containers)


# ---- the workload's state ----------------------------------------------------------------------------


@dataclass
class Live:
    """A pod the workload made and has not yet seen deleted."""

    kind: str
    gang: str | None
    sent: float  # monotonic, when its create went out (restamped once it leaves the harness's queue)
    created: bool = False  # the API server answered its create: the owner may cancel it
    uid: str = ""
    bound_at: float | None = None
    node: str = ""
    marked: bool = False  # the kubelet reported it Running
    timed: bool = False  # seen Running: its lifetime runs
    evicted: bool = False  # deleted by someone other than its owner (kai)
    owner_deleted: bool = False
    finishing: bool = False  # the kubelet removes it (it was being deleted)


@dataclass
class Gang:
    pods: list[str]
    running_due: bool = False  # its lifetime timer is set
    deleted: bool = False


@dataclass
class Counts:
    created: int = 0
    create_errors: int = 0
    bound: int = 0
    deleted: int = 0  # pods seen gone
    finished: int = 0  # deleted by their owner at the end of their lifetime
    evicted: int = 0  # deleted by someone else (kai's preemption or gang eviction)
    cancelled: int = 0  # deleted by their owner while still unbound after --patience
    marked_running: int = 0
    reservations_served: int = 0
    bound_twice: list[str] = field(default_factory=list)


@dataclass
class Soak:
    """The workload, the kubelets and the device plugin, over one Api (module docstring)."""

    api: Api
    args: argparse.Namespace
    rng: random.Random = field(init=False)
    live: dict[str, Live] = field(default_factory=dict)
    gangs: dict[str, Gang] = field(default_factory=dict)
    counts: Counts = field(default_factory=Counts)
    latencies: list[float] = field(default_factory=list)  # creation to bind, every pod bound
    window: list[float] = field(default_factory=list)  # the same, since the last sample
    reserved: dict[str, str] = field(default_factory=dict)  # reservation pod -> GPU UUID given to it
    reservation_done: set[str] = field(default_factory=set)  # reservation pod uids served or being removed
    ever_bound: dict[str, str] = field(default_factory=dict)  # uid -> node, pods bound so far (no twice)
    failures: collections.Counter[str] = field(default_factory=collections.Counter)  # harness API errors
    heard: dict[str, float] = field(default_factory=dict)  # namespace -> when its watch last said something
    stop_creating: asyncio.Event = field(default_factory=asyncio.Event)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.args.seed)
        self._sem = asyncio.Semaphore(CONCURRENCY)
        self._tasks: set[asyncio.Task[Any]] = set()
        self._n = 0

    # ---- requests ---------------------------------------------------------------------------------

    def spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def call(
        self, what: str, method: str, path: str, body: Any = None, ctype: str = "application/json", stamp: Any = None
    ) -> bool:
        """One request, bounded in concurrency; False (counted by *what* and code) when it failed.
        404 and 409 are not failures here: the object is gone or changed, which the watch will show.
        *stamp* (a Live) gets the moment the request leaves the harness's queue."""
        async with self._sem:
            if stamp is not None:
                stamp.sent = time.monotonic()
            try:
                await self.api.request(method, path, body=body, content_type=ctype)
                return True
            except ApiError as e:
                if e.code not in (404, 409):
                    self.failures[f"{what} {e.code}"] += 1
                return False

    # ---- the owners ---------------------------------------------------------------------------------

    def _name(self, kind: str) -> str:
        self._n += 1
        return f"{kind}-{self._n:06d}"

    def _pod_doc(self, name: str, *, gpus: int, annotations: dict[str, str] | None = None, **spec: Any) -> Any:
        meta: dict[str, Any] = {"name": name, "namespace": NS, "labels": {"kai.scheduler/queue": "default-queue"}}
        if annotations:
            meta["annotations"] = annotations
        resources = {"limits": {GPU: str(gpus)}} if gpus else {}
        doc = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "schedulerName": "kai-scheduler",
                "containers": [{"name": "c", "image": "x", "resources": resources}],
                **spec,
            },
        }
        return admitted(doc)

    async def _create_pod(self, name: str, kind: str, doc: Any, gang: str | None = None) -> None:
        live = self.live[name] = Live(kind, gang, time.monotonic())
        if await self.call("create pod", "POST", f"/api/v1/namespaces/{NS}/pods", doc, stamp=live):
            live.created = True
            self.counts.created += 1
            if live.owner_deleted:  # its gang was deleted while this create waited: it goes too
                await self.call("delete pod", "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")
        else:
            self.counts.create_errors += 1
            self.live.pop(name, None)

    async def _create_gang(self, name: str, size: int) -> None:
        pg = {
            "apiVersion": "scheduling.run.ai/v2alpha2",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"queue": "default-queue", "minMember": size, "priorityClassName": "train"},
        }
        pods = [f"{name}-{i}" for i in range(size)]
        self.gangs[name] = Gang(pods)
        if not await self.call("create podgroup", "POST", PG_PATH, pg):
            self.gangs.pop(name, None)
            self.counts.create_errors += size
            return
        await asyncio.gather(
            *(
                self._create_pod(p, "gang", self._pod_doc(p, gpus=1, annotations={"pod-group-name": name}), name)
                for p in pods
            )
        )

    def _one_action(self) -> int:
        """Create one bare, gang, half or high pod; how many pods that is."""
        r, acc = self.rng.random(), 0.0
        kind = ACTIONS[-1][0]
        for k, share in ACTIONS:
            acc += share
            if r < acc:
                kind = k
                break
        if kind == "gang":
            size = self.rng.randint(2, 4)
            self.spawn(self._create_gang(self._name("gang"), size))
            return size
        name = self._name(kind)
        if kind == "bare":
            doc = self._pod_doc(name, gpus=1)
        elif kind == "half":
            doc = self._pod_doc(name, gpus=0, annotations={"gpu-fraction": "0.5"})
        else:
            doc = self._pod_doc(name, gpus=2, priorityClassName="build-preemptible")
        self.spawn(self._create_pod(name, kind, doc))
        return 1

    async def workload(self) -> None:
        """Create pods at ``pods / minutes`` per second until the time is up or ``--pods`` are made."""
        rate = self.args.pods / (self.args.minutes * 60)
        t0 = time.monotonic()
        owed, made, tick = 0.0, 0, 0
        while made < self.args.pods and not self.stop_creating.is_set():
            owed += rate * TICK_S
            while owed >= 1 and made < self.args.pods:
                n = self._one_action()
                owed -= n
                made += n
            tick += 1
            await asyncio.sleep(max(0.0, t0 + tick * TICK_S - time.monotonic()))
        self.stop_creating.set()

    def _lifetime(self) -> float:
        lo, hi = self.args.lifetime
        return self.rng.uniform(lo, hi)

    def _finish_later(self, name: str) -> None:
        asyncio.get_running_loop().call_later(
            self._lifetime(), lambda: self.spawn(self._owner_delete(name, "finished"))
        )

    async def _owner_delete(self, name: str, why: str) -> None:
        """The owner deletes its pod (or gang: every pod and the PodGroup): finished or cancelled."""
        live = self.live.get(name)
        if live is None or live.owner_deleted:
            return
        if live.gang is not None:
            await self._delete_gang(live.gang, why)
            return
        live.owner_deleted = True
        if why == "cancelled":
            self.counts.cancelled += 1
        else:
            self.counts.finished += 1
        await self.call("delete pod", "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}")

    async def _delete_gang(self, gang: str, why: str) -> None:
        g = self.gangs.get(gang)
        if g is None or g.deleted:
            return
        g.deleted = True
        calls = []
        for p in g.pods:
            live = self.live.get(p)
            if live is not None and not live.owner_deleted:
                live.owner_deleted = True
                if why == "cancelled":
                    self.counts.cancelled += 1
                elif why == "finished":
                    self.counts.finished += 1
                calls.append(self.call("delete pod", "DELETE", f"/api/v1/namespaces/{NS}/pods/{p}"))
        calls.append(self.call("delete podgroup", "DELETE", f"{PG_PATH}/{gang}"))
        await asyncio.gather(*calls)

    async def patience(self) -> None:
        """Owners cancel what waited unbound longer than ``--patience`` (the backlog stays bounded)."""
        while not self.stop.is_set():
            now = time.monotonic()
            for name, live in list(self.live.items()):
                if (
                    live.created
                    and live.bound_at is None
                    and not live.owner_deleted
                    and now - live.sent > self.args.patience
                ):  # a pod whose create is still queued here is not cancelled: the create would outlive it
                    self.spawn(self._owner_delete(name, "cancelled"))  # in parallel: the deletes keep up
            await asyncio.sleep(2.0)

    # ---- the watch of the workload's pods: kubelets and owners react ---------------------------------

    def on_pod(self, kind: str, p: _Pod) -> None:
        name = p.metadata.name
        live = self.live.get(name)
        if live is None:
            return  # not the workload's (or already seen gone)
        if kind == "DELETED":
            self._gone(name, live)
            return
        live.uid = p.metadata.uid
        node = p.spec.nodeName
        if node and live.bound_at is None:
            live.bound_at, live.node = time.monotonic(), node
            self.counts.bound += 1
            lat = live.bound_at - live.sent
            self.latencies.append(lat)
            self.window.append(lat)
            first = self.ever_bound.setdefault(live.uid, node)
            if first != node:
                self.counts.bound_twice.append(f"{name}: {first} then {node}")
        if p.metadata.deletionTimestamp is not None:
            if not live.owner_deleted and not live.evicted:
                live.evicted = True
                self.counts.evicted += 1
            if node and not live.finishing:  # the kubelet stops its containers, then the pod goes
                live.finishing = True
                if not live.owner_deleted and live.gang is not None:  # a gang member evicted: the job fails
                    self.spawn(self._delete_gang(live.gang, "evicted"))
                body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
                self.spawn(self.call("kubelet delete", "DELETE", f"/api/v1/namespaces/{NS}/pods/{name}", body))
            return
        if node and p.status.phase == "Pending" and not live.marked:
            live.marked = True
            self.spawn(self._mark_running(name))
        elif p.status.phase == "Running" and not live.timed and not live.owner_deleted:
            live.timed = True
            if live.gang is None:
                self._finish_later(name)
            else:
                self._gang_running(live.gang)

    def _gang_running(self, gang: str) -> None:
        g = self.gangs.get(gang)
        if g is None or g.running_due:
            return
        if all((lv := self.live.get(p)) is not None and lv.timed for p in g.pods):
            g.running_due = True
            delay = self._lifetime()
            asyncio.get_running_loop().call_later(delay, lambda: self.spawn(self._delete_gang(gang, "finished")))

    async def _mark_running(self, name: str) -> None:
        body = {"status": running_pod_status()}
        if await self.call("kubelet status", "PATCH", f"/api/v1/namespaces/{NS}/pods/{name}/status", body, MERGE):
            self.counts.marked_running += 1

    def _gone(self, name: str, live: Live) -> None:
        del self.live[name]
        self.counts.deleted += 1
        if not live.owner_deleted and not live.evicted:
            self.counts.evicted += 1
        if live.uid:
            self.ever_bound.pop(live.uid, None)
        if live.gang is not None:
            g = self.gangs.get(live.gang)
            if g is not None and not any(p in self.live for p in g.pods):
                del self.gangs[live.gang]
                if not g.deleted:  # its pods went without its owner: the PodGroup goes too
                    self.spawn(self.call("delete podgroup", "DELETE", f"{PG_PATH}/{live.gang}"))

    # ---- the device plugin of GPU reservation pods ------------------------------------------------------

    def on_reservation(self, kind: str, p: _Pod) -> None:
        name = p.metadata.name
        if kind == "DELETED":
            self.reserved.pop(name, None)
            self.reservation_done.discard(p.metadata.uid)
            return
        node = p.spec.nodeName
        if not node or p.metadata.uid in self.reservation_done:
            return
        path = f"/api/v1/namespaces/{RES_NS}/pods/{name}"
        if p.metadata.deletionTimestamp is not None:
            self.reservation_done.add(p.metadata.uid)
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
            self.spawn(self.call("device plugin delete", "DELETE", path, body))
            return
        have = p.metadata.annotations.get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX)
        if have:
            self.reserved[name] = have
            return
        held = set(self.reserved.values())
        free = [g for g in (f"GPU-{node}-{i}" for i in range(self.args.gpus)) if g not in held]
        if not free:
            return  # the device plugin has none: the pod stays Pending and kai's bind times out
        self.reserved[name] = free[0]
        self.reservation_done.add(p.metadata.uid)
        self.spawn(self._serve_reservation(path, free[0]))

    async def _serve_reservation(self, path: str, uuid: str) -> None:
        await self.call("device plugin status", "PATCH", f"{path}/status", {"status": running_pod_status()}, MERGE)
        annotations = {"metadata": {"annotations": {C.ANNOTATION_RESERVE_FOR_GPU_INDEX: uuid}}}
        if await self.call("device plugin annotate", "PATCH", path, annotations, MERGE):
            self.counts.reservations_served += 1

    # ---- watches ----------------------------------------------------------------------------------

    async def watch(self, ns: str, handle: Any) -> None:
        """List then watch the pods of *ns*, feeding *handle*; resumes from the last resourceVersion, and
        re-lists (treating pods no longer listed as deleted) on 410 Gone or an error."""
        path = f"/api/v1/namespaces/{ns}/pods"
        rv = ""
        seen: dict[str, _Pod] = {}
        while not self.stop.is_set():
            try:
                if not rv:
                    lst = _list.decode(await self.api.get_raw(path))
                    now = {p.metadata.name: p for p in lst.items}
                    for name, old in seen.items():
                        if name not in now:
                            handle("DELETED", old)
                    seen = now
                    for p in lst.items:
                        handle("ADDED", p)
                    rv = lst.metadata.resourceVersion
                params = {"watch": "1", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "240"}
                async for line in self.api.stream_lines(path, params, read_timeout=300):
                    self.heard[ns] = time.monotonic()
                    ev = _ev.decode(line)
                    if ev.type == "ERROR":
                        rv = ""  # 410 Gone (or another error): list again
                        break
                    if ev.type == "BOOKMARK":  # its object is a bare Pod (containers: null) with a resourceVersion
                        rv = _bookmark.decode(ev.object).metadata.resourceVersion or rv
                        continue
                    p = _pod.decode(ev.object)
                    rv = p.metadata.resourceVersion or rv
                    if ev.type == "DELETED":
                        seen.pop(p.metadata.name, None)
                    else:
                        seen[p.metadata.name] = p
                    handle(ev.type, p)
            except ApiError as e:
                self.failures[f"watch {ns} {e.code}"] += 1
                if e.code == 410:
                    rv = ""
                await asyncio.sleep(0.5)
            except Exception as e:  # a bug of the harness: said loudly, and the watch goes on from a list
                self.failures[f"harness: {type(e).__name__}: {e}"] += 1
                traceback.print_exc()
                rv = ""
                await asyncio.sleep(0.5)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def admitted(doc: dict[str, Any]) -> dict[str, Any]:
    """*doc* as kai's mutating webhook would let it in (its JSON patch: "add" operations only)."""
    for op in ADMISSION.mutate_pod({"operation": "CREATE", "object": doc}).patch or []:
        *path, last = op["path"].strip("/").split("/")
        target: Any = doc
        for part in path:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = op["value"]
    return doc


# ---- reading the processes and the cluster ----------------------------------------------------------------


def rss_mib(pid: int) -> float:
    """A process's resident set (``VmRSS``), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _rss_or_zero(pid: int) -> float:
    with contextlib.suppress(OSError):  # it just ended
        return rss_mib(pid)
    return 0.0


def kai_metrics(port: int) -> dict[str, float]:
    """kai's /metrics: the METRICS series summed over their labels, binds by result, and the number of
    series (a series per object that is never dropped would show here)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    sums: dict[str, float] = collections.defaultdict(float)
    series = 0
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        series += 1
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        sums[name] += float(value)
        if name == "kai_binds_total":
            result = labels.split('result="', 1)[1].split('"', 1)[0] if 'result="' in labels else ""
            sums[f"binds_{result}"] += float(value)
    out = {col: sums.get(name, 0.0) for col, name in METRICS.items()}
    out.update({k: v for k, v in sums.items() if k.startswith("binds_")})
    out["series"] = series
    return out


async def overcommit(api: Api, gpus: int) -> list[str]:
    """Nodes over their GPUs in one list of the pods (the workload's and the reservation pods): whole GPUs
    plus one per GPU group in use (a reservation pod's or a fraction pod's); and GPUs reserved twice.
    A node over says what holds it (name, GPUs or group, phase, "deleting")."""
    pods = _list.decode(await api.get_raw(f"/api/v1/namespaces/{NS}/pods")).items
    res = _list.decode(await api.get_raw(f"/api/v1/namespaces/{RES_NS}/pods")).items
    whole: collections.Counter[str] = collections.Counter()
    groups: dict[str, set[str]] = collections.defaultdict(set)
    shares: dict[tuple[str, str], float] = collections.defaultdict(float)
    held: dict[str, list[str]] = collections.defaultdict(list)  # node -> what holds its GPUs
    out = []
    uuids: dict[str, list[str]] = collections.defaultdict(list)
    for p in res:
        node = p.spec.nodeName
        if node and p.metadata.deletionTimestamp is None:
            group = p.metadata.labels.get(C.LABEL_GPU_GROUP, p.metadata.name)
            groups[node].add(group)
            held[node].append(f"{p.metadata.name} reserves {group} ({p.status.phase})")
            uuid = p.metadata.annotations.get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX)
            if uuid:
                uuids[uuid].append(p.metadata.name)
    out += [f"GPU {u} reserved by {names}" for u, names in uuids.items() if len(names) > 1]
    for p in pods:
        node = p.spec.nodeName
        if not node or p.status.phase in ("Succeeded", "Failed"):
            continue
        fraction = p.metadata.annotations.get("gpu-fraction")
        deleting = " deleting" if p.metadata.deletionTimestamp is not None else ""
        if fraction is not None:
            group = p.metadata.labels.get(C.LABEL_GPU_GROUP, f"<no group: {p.metadata.name}>")
            groups[node].add(group)
            shares[(node, group)] += float(fraction)
            held[node].append(f"{p.metadata.name} {fraction} of {group} ({p.status.phase}{deleting})")
        else:
            whole[node] += _gpus(p)
            held[node].append(f"{p.metadata.name} {_gpus(p)} GPUs ({p.status.phase}{deleting})")
    out += [f"GPU group {g} on {n} holds {f:g} GPUs" for (n, g), f in shares.items() if f > 1 + 1e-9]
    for node in sorted(set(whole) | set(groups)):
        used = whole[node] + len(groups[node])
        if used > gpus:
            out.append(f"node {node}: {used} GPUs in use, {gpus} allocatable: {'; '.join(held[node])}")
    return out


async def pending_reasons(api: Api) -> dict[str, int]:
    """The workload's unbound pods, counted by why kai says they wait (PodScheduled=False's message with
    its numbers dropped, so that like reasons count together); "no reason" for one without."""
    out: collections.Counter[str] = collections.Counter()
    for p in _list.decode(await api.get_raw(f"/api/v1/namespaces/{NS}/pods")).items:
        if p.spec.nodeName or p.metadata.deletionTimestamp is not None:
            continue
        msg = next((c.message for c in p.status.conditions if c.type == "PodScheduled" and c.status == "False"), "")
        out["".join("#" if ch.isdigit() else ch for ch in msg)[:160] or "no reason"] += 1
    return dict(out.most_common())


def _quantiles(xs: list[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    if len(xs) == 1:
        return round(xs[0], 3), round(xs[0], 3)
    q = statistics.quantiles(xs, n=100)
    return round(q[49], 3), round(q[98], 3)


# ---- the run ------------------------------------------------------------------------------------------------


@dataclass
class Kai:
    """``kai scheduler`` as its Deployment keeps it: a replica that exits (a Lease it could not renew in
    time on an overloaded API server: it stops writing and exits 1, by design) is replaced by a new one.
    Each replacement starts from an empty heap, so the RSS series says which process it is (``restarts``)."""

    cmd: list[str]
    env: dict[str, str]
    log: Path
    proc: subprocess.Popen[bytes] | None = None
    exits: list[dict[str, Any]] = field(default_factory=list)  # (when, exit code) of each replica that ended
    t0: float = 0.0
    dead_cpu_s: float = 0.0  # CPU seconds of the replicas that ended (as last read)
    last_cpu_s: float = 0.0

    def start(self) -> None:
        with open(self.log, "ab") as fh:
            self.proc = subprocess.Popen(
                self.cmd, stdout=fh, stderr=subprocess.STDOUT, env=self.env, preexec_fn=die_with_parent
            )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_s(self) -> float:
        """CPU seconds of every replica so far (an ended one's as last read)."""
        with contextlib.suppress(OSError):  # it just ended
            self.last_cpu_s = cpu_seconds(self.pid)
        return self.dead_cpu_s + self.last_cpu_s

    async def keep(self) -> None:
        while True:
            await asyncio.sleep(1.0)
            code = self.proc.poll() if self.proc is not None else None
            if code is not None:
                self.exits.append({"t_s": round(time.monotonic() - self.t0, 1), "code": code})
                print(f"kai exited ({code}); a new replica starts, as its Deployment would", flush=True)
                self.dead_cpu_s += self.last_cpu_s
                self.last_cpu_s = 0.0
                self.start()

    def stop(self) -> None:
        if self.proc is not None:
            stop_scheduler(self.proc)


@dataclass
class Sampler:
    soak: Soak
    kai: Kai
    port: int
    pids: dict[str, int]
    probe: Path | None = None  # where kai under PROBE writes its counts
    t0: float = 0.0
    samples: list[dict[str, Any]] = field(default_factory=list)
    _last_cpu: float = 0.0
    _last_t: float = 0.0

    async def sample(self, phase: str) -> dict[str, Any]:
        s = self.soak
        now = time.monotonic()
        cpu = self.kai.cpu_s()
        try:
            metrics = await asyncio.to_thread(kai_metrics, self.port)
        except OSError as e:
            metrics = {"error": str(e)}
        try:
            over = await overcommit(s.api, s.args.gpus)
        except ApiError as e:
            over = [f"(not read: {e})"]
        p50, p99 = _quantiles(s.window)
        row = {
            "phase": phase,
            "t_s": round(now - self.t0, 1),
            "created": s.counts.created,
            "bound": s.counts.bound,
            "deleted": s.counts.deleted,
            "evicted": s.counts.evicted,
            "cancelled": s.counts.cancelled,
            "pending": sum(1 for lv in s.live.values() if lv.created and lv.bound_at is None),
            "queued": sum(1 for lv in s.live.values() if not lv.created),  # creates the harness has not sent
            "bound_now": sum(1 for lv in s.live.values() if lv.bound_at is not None),
            "kai_rss_mib": _rss_or_zero(self.kai.pid),
            "kai_cpu_s": round(cpu, 1),
            "kai_cpu_pct": round(100 * (cpu - self._last_cpu) / (now - self._last_t), 1) if self._last_t else None,
            "restarts": len(self.kai.exits),
            "load1": round(os.getloadavg()[0], 1),  # the machine is shared: its load, for reading the rest
            "apiserver_rss_mib": rss_mib(self.pids["kube-apiserver"]),
            "etcd_rss_mib": rss_mib(self.pids["etcd"]),
            "bind_p50_s": p50,
            "bind_p99_s": p99,
            "overcommit": over,
            "harness_tasks": len(s._tasks),
            "watch_silent_s": round(time.monotonic() - s.heard[NS], 1) if NS in s.heard else None,  # pods' watch
            **metrics,
        }
        if self.probe is not None:
            row["probe"] = await self._probe()
            after = self.kai.cpu_s()
            row["probe_cpu_s"] = round(after - cpu, 2)  # kai's CPU spent on the probe: left out of kai_cpu_pct
            cpu = after
        s.window.clear()
        self._last_cpu, self._last_t = cpu, time.monotonic()
        self.samples.append(row)
        print(format_row(row), flush=True)
        return row

    async def _probe(self) -> Any:
        """Ask kai (run under PROBE) for its counts: SIGUSR2, then the file it writes."""
        assert self.probe is not None
        self.probe.unlink(missing_ok=True)
        os.kill(self.kai.pid, signal.SIGUSR2)
        for _ in range(300):
            await asyncio.sleep(0.1)
            if self.probe.exists():
                return json.loads(self.probe.read_text())
        return None

    async def every(self, seconds: float) -> None:
        while not self.soak.stop_creating.is_set():
            try:
                await asyncio.wait_for(self.soak.stop_creating.wait(), seconds)
            except TimeoutError:
                await self.sample("churn")


COLUMNS = (
    ("t_s", "t s", 6),
    ("created", "created", 7),
    ("bound", "bound", 7),
    ("deleted", "deleted", 7),
    ("evicted", "evict", 5),
    ("cancelled", "cancel", 6),
    ("pending", "pend", 5),
    ("queued", "queue", 5),
    ("bound_now", "bnd", 4),
    ("kai_rss_mib", "kai MiB", 7),
    ("kai_cpu_pct", "kai %", 5),
    ("apiserver_rss_mib", "api MiB", 7),
    ("load1", "load", 4),
    ("restarts", "rst", 3),
    ("cycles", "cycles", 6),
    ("task_failures", "tfail", 5),
    ("series", "series", 6),
    ("bind_p50_s", "p50 s", 6),
    ("bind_p99_s", "p99 s", 6),
)


def format_row(row: dict[str, Any]) -> str:
    cells = []
    for key, _, width in COLUMNS:
        v = row.get(key)
        cells.append(f"{'-' if v is None else (f'{v:g}' if isinstance(v, float) else v)!s:>{width}}")
    over = row.get("overcommit") or []
    return " ".join(cells) + (f"  OVER: {over[:2]}" if over else "")


def header() -> str:
    return " ".join(f"{title:>{width}}" for _, title, width in COLUMNS)


async def wait_leader(port: int, deadline_s: float = 120.0) -> None:
    """Until kai holds its Lease and has run a cycle."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                text = r.read().decode()
            if "kai_is_leader 1.0" in text and "kai_scheduler_cycles_total 0.0" not in text:
                return
        except OSError:
            pass
        await asyncio.sleep(0.5)
    raise TimeoutError("kai did not lead and cycle in time")


async def measure(cp: ControlPlane, binaries: Binaries, args: argparse.Namespace, log: Path) -> dict[str, Any]:
    api = Api(load_config(str(cp.kubeconfig)))
    kai: Kai | None = None
    try:
        await make_nodes(api, args.nodes, args.gpus)
        await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
        port = free_port()
        cmd = [*scheduler_cmd("kai", binaries, cp), f"--metrics-bind-address=127.0.0.1:{port}", *args.kai_args.split()]
        env = dict(os.environ)
        probe = None
        if args.probe:
            probe = log.with_suffix(".probe.json")
            cmd = [sys.executable, "-c", PROBE, *cmd[1:]]
            env["KAI_SOAK_PROBE"] = str(probe)
            if args.probe == "tracemalloc":
                env["KAI_SOAK_TRACEMALLOC"] = "1"
        log.write_bytes(b"")
        kai = Kai(cmd, env, log)
        kai.start()
        await wait_leader(port)
        keeper = asyncio.ensure_future(kai.keep())
        soak = Soak(api, args)
        sampler = Sampler(soak, kai, port, cp.pids(), probe)
        watches = [
            asyncio.ensure_future(soak.watch(NS, soak.on_pod)),
            asyncio.ensure_future(soak.watch(RES_NS, soak.on_reservation)),
        ]
        await asyncio.sleep(1.0)  # the watches are open before the first pod
        print(header(), flush=True)
        sampler.t0 = kai.t0 = time.monotonic()
        await sampler.sample("start")
        patience = asyncio.ensure_future(soak.patience())
        every = asyncio.ensure_future(sampler.every(args.sample_s))
        await soak.workload()
        churn_s = time.monotonic() - sampler.t0
        await every
        await sampler.sample("end of churn")
        reasons = await pending_reasons(api)
        drain_end = time.monotonic() + args.drain_s
        while (soak.live or soak.gangs) and time.monotonic() < drain_end:
            await asyncio.sleep(2.0)
        left = {name: lv.kind for name, lv in soak.live.items()}
        drained_s = round(time.monotonic() - sampler.t0 - churn_s, 1)
        await asyncio.sleep(args.idle_s)
        await sampler.sample("idle after")
        soak.stop.set()
        for t in (*watches, patience, keeper):
            t.cancel()
        await asyncio.gather(*watches, patience, keeper, return_exceptions=True)
        await soak.close()
        p50, p99 = _quantiles(soak.latencies)
        samples = sampler.samples
        churn = [s for s in samples if s["phase"] != "idle after"]
        rss = [s["kai_rss_mib"] for s in samples]
        return {
            "churn_s": round(churn_s, 1),
            "drained_s": drained_s,
            "counts": {k: v for k, v in vars(soak.counts).items() if k != "bound_twice"},
            "bound_twice": soak.counts.bound_twice,
            "pending_at_end_of_churn": reasons,
            "left_after_drain": left,
            "bind_latency_s": {
                "p50": p50,
                "p99": p99,
                "max": round(max(soak.latencies), 3) if soak.latencies else None,
            },
            "kai_rss_mib": {
                "start": rss[0],
                "end_of_churn": churn[-1]["kai_rss_mib"],
                "idle_after": rss[-1],
                "max": max(rss),
            },
            "kai_cpu_s": samples[-1]["kai_cpu_s"],
            "overcommit_samples": [  # not a sample whose list could not be read
                s["t_s"] for s in samples if any(not o.startswith("(not read") for o in s["overcommit"])
            ],
            "harness_api_failures": dict(soak.failures),
            "kai_exits": kai.exits,
            "samples": samples,
        }
    finally:
        if kai is not None:
            kai.stop()
        await api.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--pods", type=int, default=50_000, help="pods created in --minutes (sets the rate)")
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument(
        "--lifetime",
        type=float,
        nargs=2,
        default=(5.0, 40.0),
        metavar=("MIN", "MAX"),
        help="seconds a pod (or gang) runs before its owner deletes it, uniform",
    )
    ap.add_argument("--patience", type=float, default=120.0, help="seconds unbound before the owner cancels")
    ap.add_argument("--sample-s", type=float, default=30.0)
    ap.add_argument("--drain-s", type=float, default=180.0, help="at most this long for the namespace to empty")
    ap.add_argument("--idle-s", type=float, default=30.0, help="then this long idle before the last sample")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--log", type=Path, default=None, help="kai's log file (default: in a temp dir, kept)")
    ap.add_argument("--json", type=Path, default=None, help="write the figures and every sample here")
    ap.add_argument(
        "--kai-args",
        default="",
        help="flags added to kai scheduler's (as deployed without): e.g. longer Lease timings on a machine "
        "so loaded that the API server answers renewals late",
    )
    ap.add_argument(
        "--probe",
        choices=["counts", "tracemalloc"],
        default=None,
        help="diagnose a growing RSS: kai's live objects and container sizes (and tracemalloc's top lines) "
        "in each sample; slows kai, so not for the benchmark's figures",
    )
    args = ap.parse_args()
    os.environ.pop("KAI_E2E_PYSPY", None)  # py-spy's pid is not kai's: the RSS read would be py-spy's
    binaries = Binaries.find()
    byte_compile()
    log = args.log or Path(f"/tmp/kai-soak-{int(time.time())}.log")
    cp = ControlPlane(binaries)
    cp.start()
    try:
        cp.start_controller_manager()
        kai_install(cp)
        rate = args.pods / (args.minutes * 60)
        print(
            f"{machine()} | {args.nodes} nodes x {args.gpus} GPUs, {args.pods} pods in {args.minutes:g} min "
            f"({rate:.1f}/s), lifetime {args.lifetime[0]:g}-{args.lifetime[1]:g} s; kai's log: {log}",
            flush=True,
        )
        out = asyncio.run(measure(cp, binaries, args, log))
    finally:
        cp.stop()
    out = {
        "machine": machine(),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        **out,
    }
    summary = {k: v for k, v in out.items() if k != "samples"}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
