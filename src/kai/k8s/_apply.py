"""Apply a CycleResult to the API server: binds, evictions, statuses, conditions and events.

Rules:

* **Fencing**: every write of a cycle goes through the writer made for the Lease term the cycle
  started under (``kai.k8s._fence``); once the Lease is lost the next write raises ``Fenced`` and the
  rest of the cycle's writes are cancelled. This is the only place the binder decides which API it
  writes through.
* **Binds** are plain POSTs to ``pods/{name}/binding``, after the pod's volumes are bound (``_volumes``:
  the decision says which claim gets which volume) (a typed client raises on the answer after the
  bind succeeded), ``bind_concurrency`` at a time, each carrying the pod's uid so a pod recreated
  under the same name is never bound by mistake. 201 = bound; 409 = already bound (by an earlier
  replica or an earlier cycle whose answer was lost); 404 = gone. When the answer is unclear (the
  connection broke, a timeout, a 5xx, a 409) the pod is read back: bound (with its uid) counts as
  bound where the API server has it; unbound is a failed bind; unreadable is a bind *in doubt*
  (``kai.k8s._assume``). A bind that fails is not assumed: the next cycle plans the pod again (a
  ``FailedBinding`` event says why).
* **Assumed state** (``kai.k8s._assume``): a pod bound (or evicted) here counts as bound (or
  releasing) in the next snapshots until the watch confirms or refutes it, as kube-scheduler's cache.
* **Whole gangs**: a gang whose binds partly failed is marked broken, so the next cycle either
  completes it or evicts its bound part at once (``Assumed.broken``); victims are evicted gang by gang,
  whole or not at all where a PodDisruptionBudget covers them (``kai.k8s._evict``).
* **Status** (``kai.k8s._status``): only meaningful changes, rate-limited. Those that only report are sent
  while the next cycle runs (it waits for them before it makes its own, so writes to one object never pass
  each other); nominations and the stale-gang timestamp, which the next cycle reads, before the cycle ends.
* **Events** go to the EventRecorder, which writes them in the background.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections.abc import Awaitable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kai.api import constants as C
from kai.api.gpugroups import gpu_group_labels, is_gpu_group_label
from kai.api.objects import Pod, object_ref
from kai.k8s._api import Api, ApiError
from kai.k8s._assume import Assumed, AssumedBind, gone_since
from kai.k8s._decided import Decided
from kai.k8s._dra import ClaimWriteError, ClaimWriter
from kai.k8s._events import EventRecorder
from kai.k8s._evict import GangEvictor
from kai.k8s._fence import Fence, Fenced
from kai.k8s._informer import Informer
from kai.k8s._metrics import Metrics
from kai.k8s._status import StatusWriter
from kai.k8s._volumes import VolumeBinder, VolumeBindError
from kai.scheduler.decisions import Bind, CycleResult, Event
from kai.store import Key, Store

if TYPE_CHECKING:
    from kai.k8s._gpushare import GpuSharingBinder

log = logging.getLogger("kai.k8s.apply")

MERGE = "application/merge-patch+json"


@dataclass
class ApplyStats:
    bound: int = 0
    already_bound: int = 0
    bind_failed: int = 0
    evicted: int = 0
    evict_failed: int = 0
    status_writes: int = 0  # made by this cycle (those that only report are sent while the next one runs)
    bind_s: float = 0.0  # evictions and binds
    bind_cpu_s: float = 0.0
    status_s: float = 0.0  # the last cycle's status writes' end, this cycle's made, the GPU-sharing upkeep


def close_unstarted(calls: Iterable[Awaitable[None]]) -> None:
    """Close the coroutines of *calls* that never started, so none is reported "never awaited" when collected
    (one that ran, or is running, is left as it is)."""
    for c in calls:
        if asyncio.iscoroutine(c) and inspect.getcoroutinestate(c) == inspect.CORO_CREATED:
            c.close()


class Applier:
    """Sends one cycle's decisions; keeps the assumed binds and evictions for the next snapshots."""

    def __init__(
        self,
        api: Api,
        store: Store,
        pods: Informer,
        podgroups: Informer,
        queues: Informer,
        pdbs: Informer,
        events: EventRecorder,
        metrics: Metrics,
        *,
        fence: Fence | None = None,
        bind_concurrency: int = 64,
        pdb_api_version: str = "policy/v1",
        status_qps: float = 100.0,
        status_burst: float = 500.0,
    ) -> None:
        self.api = api
        self.store = store
        self.pods = pods
        self.pdbs = pdbs
        self.events = events
        self.metrics = metrics
        self.fence = fence if fence is not None else Fence.open_always()
        self.assumed = Assumed()
        self.status = StatusWriter(store, pods, podgroups, queues, metrics, qps=status_qps, burst=status_burst)
        self.volumes = VolumeBinder(api)
        self.claims = ClaimWriter(api, store)
        self.pdb_api_version = pdb_api_version
        self._concurrency = bind_concurrency
        self._bound = metrics.binds.labels("bound")  # labelled once: .labels() locks and looks up per call
        self._scheduled = metrics.scheduled.labels("allocate")
        self._decided_on: Mapping[Key, Pod] = {}
        self._w: Any = api  # the writer of the cycle being applied (fenced to its term)
        self.gpu_sharing: GpuSharingBinder | None = None  # set by the scheduler: shared binds go through it
        self.decided: Decided | None = None  # the pod-grouper's decisions: a Binding carries the pod's PodGroup
        self.idle = asyncio.Event()  # no cycle deciding, no binds or evictions in flight (the grouper's writes wait)
        self.idle.set()
        self._statuses: asyncio.Future[None] | None = None  # the last cycle's status writes, still going

    async def quiet(self) -> None:
        """Until no binds are in flight: PodGroup creates and pod patches yield to binds."""
        await self.idle.wait()

    async def apply(
        self,
        result: CycleResult,
        decided_on: Mapping[Key, Pod] | None = None,
        *,
        term: int = 0,
        gpu_groups_seen: set[str] | frozenset[str] = frozenset(),
    ) -> ApplyStats:
        """Send *result*, writing under Lease *term* (Fenced is raised, and the writes still under way
        cancelled, once the Lease is lost). *decided_on* are the pods of the snapshot the cycle decided on, by
        key: a pod deleted and made again under the same name since then (another uid) is not bound or evicted.
        *gpu_groups_seen* are the GPU groups of the binds assumed when that snapshot was taken
        (``Assumed.gpu_groups``): the reservation sync keeps their reservation pods (below)."""
        self._decided_on = decided_on or {}
        self._w = self.fence.api(self.api, term)
        # before this cycle's binds mark gangs broken again
        self.assumed.settle(result.podgroups, self.store, self._decided_on)
        stats = ApplyStats()
        extra: list[Event] = []
        t0 = time.perf_counter()
        c0 = time.process_time()
        self.idle.clear()
        try:
            evictor = GangEvictor(
                self._w,
                self.store,
                self.pdbs.statuses,
                self.assumed,
                self.metrics,
                pdb_api_version=self.pdb_api_version,
                decided_on=self._decided_on,
            )
            outcome = await evictor.run(result.evictions, self._gather)
            stats.evicted, stats.evict_failed = outcome.evicted, outcome.failed
            extra += outcome.events
            await self._gather(self._bind(b, stats, extra) for b in result.binds)
        finally:
            self.idle.set()
        self._mark_broken_gangs(result.binds, extra)
        stats.bind_s = time.perf_counter() - t0
        stats.bind_cpu_s = time.process_time() - c0
        bound = {(b.pod.namespace, b.pod.name) for b in result.binds}
        failed_binds = {f"Pod/{b.pod}" for b in result.binds if (b.pod.namespace, b.pod.name) not in self.assumed.binds}
        broken = {object_ref("PodGroup", ns, name) for ns, name in self.assumed.broken}
        events = [
            e
            for e in result.events
            if not (e.reason == "Scheduled" and e.object in failed_binds)
            and not (e.reason == "NotReady" and e.object in broken)  # the cycle saw only part of the gang
        ]
        self.events.record(events + extra)
        # Status writes that only report (Queue status, PodGroup and pod conditions) go out while the next cycle
        # decides and binds: waiting for them made every cycle of a pod stream longer by two API round trips or
        # more. The last cycle's writes end before this cycle's are made: writes to one object never pass each
        # other, and what they wrote counts in this cycle's comparison (kai.k8s._status). Those the next cycle
        # reads back (nominations, the stale-gang timestamp its grace period is timed from) are sent here, as
        # before: sent later, the next cycle would stamp the gang again, later.
        await self.statuses_sent()
        read, writes = self.status.writes(result, bound, self._w, quiet=self.assumed.broken)
        stats.status_writes = len(read) + len(writes)
        if read:
            await self._gather(send() for send in read)
        if writes:  # each call is made as a worker takes it: none is left unawaited if the task never runs
            self._statuses = asyncio.ensure_future(self._gather(send() for send in writes))
        if self.gpu_sharing is not None:  # reservation pods of emptied GPU groups go (kai.k8s._gpushare)
            # A group the snapshot showed in use stays this once, although its shared bind may have failed since
            # (the pod unlabelled, no longer assumed): this cycle did not plan that pod again, the next one does,
            # into the same group, and finds its reservation pod still there instead of deleted and made again.
            await self.gpu_sharing.sync(self.assumed.gpu_groups() | gpu_groups_seen, self._w)
        stats.status_s = time.perf_counter() - t0 - stats.bind_s
        return stats

    async def _gather(self, calls: Iterable[Awaitable[None]]) -> None:
        """Await *calls*, at most ``bind_concurrency`` at a time: that many workers take the next call
        from one iterator, so 4,000 binds are 64 tasks, not 4,000 tasks queued on a semaphore, and a
        call's coroutine is only made when a worker is free for it. The first error (``Fenced``, say)
        cancels the other workers and is raised; a cancellation of the caller cancels them and is raised;
        calls never started are closed unawaited.

        Not a TaskGroup: on Python 3.11 a TaskGroup whose child fails after its body has ended leaves the
        parent task's cancellation count raised (fixed in 3.12), so the caller could not tell a call's error
        from being cancelled, and a lost Lease during the binds came out as CancelledError instead of Fenced."""
        it = iter(calls)

        async def worker() -> None:
            for c in it:
                await c

        workers = [asyncio.ensure_future(worker()) for _ in range(self._concurrency)]
        try:
            await asyncio.wait(workers, return_when=asyncio.FIRST_EXCEPTION)
        finally:  # an error, or the caller cancelled: the other workers stop, nothing is left running
            for w in workers:
                w.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            close_unstarted(it)
        for w in workers:
            if not w.cancelled() and w.exception() is not None:
                raise w.exception()  # type: ignore[misc]

    async def statuses_sent(self) -> None:
        """Wait until the last cycle's status writes are done. ``Fenced`` (the Lease was lost meanwhile) is raised
        as from any write of the cycle; any other failure is logged and costs only those writes."""
        task, self._statuses = self._statuses, None
        if task is None:
            return
        try:
            await task
        except Fenced:
            raise
        except Exception:
            log.exception("status writes failed")

    async def close(self) -> None:
        """At shutdown: the status writes still going are given a moment if the Lease is held, then cancelled."""
        task, self._statuses = self._statuses, None
        if task is None:
            return
        if self.fence.current() is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(task), timeout=2)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    # ---- bind ------------------------------------------------------------------------------

    async def _bind(self, b: Bind, stats: ApplyStats, extra: list[Event]) -> None:
        key = (b.pod.namespace, b.pod.name)
        pod = self.store.get("Pod", key)
        if gone_since(key, pod, self._decided_on):
            return
        if b.gpu_groups and self.gpu_sharing is not None:
            # GPU sharing: reservation pods, ConfigMaps and labels first, in the background (kai.k8s._gpushare),
            # writing under this cycle's Lease term
            self.gpu_sharing.submit(b, pod, self, self._w)
            return
        await self.send_bind(b, pod, self._w, stats, extra)

    async def send_bind(
        self,
        b: Bind,
        pod: Pod,
        writer: Any,
        stats: ApplyStats | None = None,
        extra: list[Event] | None = None,
        *,
        labels: bool = True,
    ) -> bool:
        """POST the binding of *pod* through *writer* (a cycle's fenced Api), after its volumes and, when
        *labels* and it has groups, its GPU group labels; whether it counts as bound now (an unclear answer
        is read back first). A failure goes to *extra* as a FailedBinding event; ``Fenced`` is raised."""
        stats = stats if stats is not None else ApplyStats()
        extra = extra if extra is not None else []
        key = (b.pod.namespace, b.pod.name)
        uid = pod.meta.uid
        base = f"/api/v1/namespaces/{b.pod.namespace}/pods/{b.pod.name}"
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": b.pod.name, "namespace": b.pod.namespace, "uid": uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": b.node},
        }
        if self.decided is not None and (group := self.decided.annotation(key, pod.meta.uid)) is not None:
            # grouped in this cycle: the API server copies a Binding's annotations onto the pod, in the
            # write that binds it (docs/cluster.md, "What precedes a bind")
            body["metadata"]["annotations"] = {C.ANNOTATION_POD_GROUP_NAME: group}  # type: ignore[index]
        t0 = time.perf_counter()
        try:
            if b.gpu_groups and labels:  # a shared-GPU pod: the GPU group labels first, as KAI's binder writes them
                patch: dict[str, str | None] = {k: None for k in pod.meta.labels if is_gpu_group_label(k)}
                patch.update(gpu_group_labels(b.gpu_groups))
                await writer.request(
                    "PATCH", base, body={"metadata": {"labels": patch, "uid": uid}}, content_type=MERGE
                )
            if b.volumes:  # its volumes first, bound and waited for (kube-scheduler's VolumeBinding PreBind)
                await self.volumes.bind(b, writer)
            if b.claims:  # its ResourceClaims' allocation and reservedFor (kube-scheduler's DynamicResources PreBind)
                await self.claims.write(b, uid, writer)
            await writer.request("POST", f"{base}/binding", body=body)
        except (VolumeBindError, ClaimWriteError) as e:  # the pod's bind was never sent
            self._failed(b, e, stats, extra)
            return False
        except ApiError as e:
            if e.code == 404:
                self.metrics.binds.labels("gone").inc()
                return False
            if e.code == 409 or e.code == 0 or e.code >= 500:  # it may have happened: ask the API server
                return await self._unclear(b, uid, e, stats, extra)
            self._failed(b, e, stats, extra)
            return False
        self.metrics.bind_latency.observe((time.perf_counter() - t0) * 1000)
        self._bound.inc()
        self._scheduled.inc()
        self.assumed.binds[key] = AssumedBind(uid, b.node, time.monotonic(), tuple(b.gpu_groups))
        stats.bound += 1
        return True

    async def _unclear(self, b: Bind, uid: str, err: ApiError, stats: ApplyStats, extra: list[Event]) -> bool:
        """A bind whose answer does not say whether it happened: read the pod back (module docstring);
        whether it counts as bound (in doubt counts, where it was sent)."""
        key = (b.pod.namespace, b.pod.name)
        try:
            doc = await self.api.request("GET", f"/api/v1/namespaces/{b.pod.namespace}/pods/{b.pod.name}")
        except ApiError as e:
            if e.code == 404:
                self.metrics.binds.labels("gone").inc()
                return False
            # Unknown: count the pod where it was sent until the watch tells (Assumed's "doubt").
            self.assumed.binds[key] = AssumedBind(
                uid, b.node, time.monotonic(), tuple(b.gpu_groups), doubt=True, podgroup=b.podgroup
            )
            self.metrics.binds.labels("doubt").inc()
            log.warning(
                "bind in doubt", extra={"pod": str(b.pod), "node": b.node, "error": str(err), "read_back": str(e)}
            )
            return True
        meta = doc.get("metadata") or {}
        node = (doc.get("spec") or {}).get("nodeName") or ""
        if meta.get("uid") != uid:
            self.metrics.binds.labels("gone").inc()  # replaced by another pod of the same name
            return False
        if node:
            stats.already_bound += 1
            self.metrics.binds.labels("conflict").inc()
            groups = tuple(b.gpu_groups) if node == b.node else ()
            self.assumed.binds[key] = AssumedBind(uid, node, time.monotonic(), groups)
            return True
        self._failed(b, err, stats, extra)
        return False

    def _failed(self, b: Bind, e: ApiError, stats: ApplyStats, extra: list[Event]) -> None:
        stats.bind_failed += 1
        self.metrics.binds.labels("error").inc()
        self.metrics.api_errors.labels("bind").inc()
        message = f"Failed to bind pod {b.pod} to node {b.node}: {e}"
        extra.append(Event(f"Pod/{b.pod}", "Warning", "FailedBinding", message))
        log.warning(
            "bind failed: %s to %s: %s", b.pod, b.node, e, extra={"pod": str(b.pod), "node": b.node, "error": str(e)}
        )

    def _mark_broken_gangs(self, binds: list[Bind], extra: list[Event]) -> None:
        """A gang some of whose binds of this cycle went through and some did not is broken: the next
        cycle completes it or evicts its bound part at once (``kai.k8s._assume``)."""
        done: dict[Key, int] = {}
        failed: dict[Key, list[Key]] = {}
        for b in binds:
            gang = (b.pod.namespace, b.podgroup)
            key = (b.pod.namespace, b.pod.name)
            if key in self.assumed.binds:
                done[gang] = done.get(gang, 0) + 1
                self.assumed.bound_ok(key)
            else:
                failed.setdefault(gang, []).append(key)
        for gang, keys in failed.items():
            if gang in done:
                self._break(gang, keys, done[gang], extra)

    def shared_bind_failed(self, b: Bind) -> list[Event]:
        """A shared-GPU bind done in the background (``kai.k8s._gpushare``) did not go through after the
        cycle that decided it had ended: if other pods of its gang are bound (or being bound), the gang is
        broken, as when its binds fail within a cycle. The events to record."""
        gang = (b.pod.namespace, b.podgroup)
        key = (b.pod.namespace, b.pod.name)
        others = 0
        for pod in self.store.list("Pod"):
            pkey = (pod.meta.namespace or "", pod.meta.name)
            if pkey == key or pkey[0] != gang[0] or pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME) != gang[1]:
                continue
            if pod.meta.deletion_timestamp is None and (pod.node_name or pkey in self.assumed.binds):
                others += 1
        extra: list[Event] = []
        if others:
            self._break(gang, [key], others, extra)
        return extra

    def _break(self, gang: Key, failed: list[Key], bound: int, extra: list[Event]) -> None:
        now = time.monotonic()
        self.assumed.broken[gang] = now
        for key in failed:
            pod = self.store.get("Pod", key)
            if pod is not None:
                self.assumed.hold_back(key, pod.meta.uid, now)
        n = len(failed)
        message = (
            f"{n} of {n + bound} binds of gang {gang[0]}/{gang[1]} failed; if its bound pods do not meet "
            "its minimum on their own they are evicted at once, and the gang is placed whole again"
        )
        extra.append(Event(object_ref("PodGroup", gang[0], gang[1]), "Warning", "FailedBinding", message))
        log.warning("gang bound in part", extra={"podgroup": f"{gang[0]}/{gang[1]}", "failed": n})
