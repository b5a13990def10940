"""Apply a CycleResult to the API server: binds, evictions, statuses, conditions and events.

Rules:

* **Binds** are plain POSTs to ``pods/{name}/binding``, after the pod's volumes are bound (``_volumes``:
  the decision says which claim gets which volume) (a typed client raises on the answer after the
  bind succeeded), ``bind_concurrency`` at a time, each carrying the pod's uid so a pod recreated
  under the same name is never bound by mistake. 201 = bound; 409 = already bound (by an earlier
  replica or an earlier cycle whose answer was lost); 404 = gone. A bind that fails otherwise is not
  assumed: the next cycle plans the pod again (a ``FailedBinding`` event says why).
* **Assumed state**, as kube-scheduler's assume cache: a pod bound (or evicted) here counts as bound
  (or releasing) in the next snapshots until the watch shows it, so a cycle that runs before the watch
  event arrives neither binds it twice nor gives its room to another pod. An assumption the watch has
  not confirmed within ``assume_ttl_s`` is dropped.
* **Evictions** delete the pod (with its uid as precondition), or go through the Eviction API when a
  PodDisruptionBudget selects it; a refused eviction (429) is a Warning event, nothing more.
* **Status** is written only when it changed from what the watch last showed: PodGroup
  ``status.schedulingConditions`` and Queue ``status.{allocated, allocatedNonPreemptible, requested}``
  through the status subresource, pod condition ``PodScheduled=False`` with the engine's reason
  (unless the PodGroup's ``markUnschedulable`` is false), ``status.nominatedNodeName`` for pipelined
  pods an eviction made room for, and the stale-gang timestamp annotation on the PodGroup.
* **Events** go to the EventRecorder, which writes them in the background.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kai.api import constants as C
from kai.api.gpugroups import gpu_group_labels, group_labels, is_gpu_group_label
from kai.api.objects import Pod, format_time
from kai.k8s._api import Api, ApiError
from kai.k8s._decode import pod_scheduled_condition
from kai.k8s._dra import ClaimWriter
from kai.k8s._events import EventRecorder
from kai.k8s._informer import Informer
from kai.k8s._metrics import Metrics
from kai.k8s._volumes import VolumeBinder
from kai.scheduler.decisions import Bind, CycleResult, Event, Evict, PodGroupStatus, QueueStatus
from kai.store import Key, Store

if TYPE_CHECKING:
    from kai.k8s._gpushare import GpuSharingBinder

log = logging.getLogger("kai.k8s.apply")

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


@dataclass
class ApplyStats:
    bound: int = 0
    already_bound: int = 0
    bind_failed: int = 0
    evicted: int = 0
    evict_failed: int = 0
    status_writes: int = 0
    bind_s: float = 0.0  # evictions and binds
    bind_cpu_s: float = 0.0
    status_s: float = 0.0  # statuses, conditions, nominations (events are written in the background)


@dataclass
class Assumed:
    """What this process did that the watch has not shown yet."""

    binds: dict[Key, tuple[str, str, float, tuple[str, ...]]] = field(
        default_factory=dict
    )  # pod → (uid, node, when, GPU groups)
    evictions: dict[Key, tuple[str, float]] = field(default_factory=dict)  # pod → (uid, when)

    def expire(self, pods: Store, ttl_s: float, now: float) -> None:
        """Forget assumptions the Store now shows (or that are too old)."""
        for key, (uid, _node, t, _groups) in list(self.binds.items()):
            pod = pods.get("Pod", key)
            if pod is None or pod.meta.uid != uid or pod.node_name or now - t > ttl_s:
                del self.binds[key]
        for key, (uid, t) in list(self.evictions.items()):
            pod = pods.get("Pod", key)
            if pod is None or pod.meta.uid != uid or pod.meta.deletion_timestamp is not None or now - t > ttl_s:
                del self.evictions[key]

    def pods(self, store: Store, now: float) -> list[Pod]:
        """The Store's pods with the assumptions laid over them (copies; the Store is not changed)."""
        pods = store.list("Pod")
        if not self.binds and not self.evictions:
            return pods
        out = []
        for pod in pods:
            key = (pod.meta.namespace or "", pod.meta.name)
            b = self.binds.get(key)
            if b is not None and b[0] == pod.meta.uid and not pod.node_name:
                pod = dataclasses.replace(pod, node_name=b[1])
                if b[3] and set(group_labels(pod)) != set(b[3]):
                    labels = {k: v for k, v in pod.meta.labels.items() if not is_gpu_group_label(k)}
                    labels.update(gpu_group_labels(b[3]))
                    pod = dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, labels=labels))
            ev = self.evictions.get(key)
            if ev is not None and ev[0] == pod.meta.uid and pod.meta.deletion_timestamp is None:
                pod = dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, deletion_timestamp=now))
            out.append(pod)
        return out


def _quantities(values: dict[str, float]) -> dict[str, str]:
    """A QueueStatus resource dict (GPUs, millicores, bytes) as a ResourceList."""
    gpu = values.get("gpu", 0.0)
    return {
        C.RESOURCE_GPU: f"{round(gpu * 1000)}m" if gpu != int(gpu) else str(int(gpu)),
        C.RESOURCE_CPU: f"{round(values.get('cpu', 0.0))}m",
        C.RESOURCE_MEMORY: str(round(values.get("memory", 0.0))),
    }


def _same_quantities(old: Any, new: dict[str, str]) -> bool:
    if not isinstance(old, dict):
        return False
    from kai.api.quantity import QuantityError, to_milli

    try:
        return all(to_milli(old.get(k, "0")) == to_milli(v) for k, v in new.items())
    except QuantityError:
        return False


class Applier:
    """Sends one cycle's decisions; keeps the assumed binds and evictions for the next snapshots."""

    def __init__(
        self,
        api: Api,
        store: Store,
        pods: Informer,
        podgroups: Informer,
        queues: Informer,
        events: EventRecorder,
        metrics: Metrics,
        *,
        bind_concurrency: int = 64,
        assume_ttl_s: float = 30.0,
        pdb_api_version: str = "policy/v1",
    ) -> None:
        self.api = api
        self.store = store
        self.pods = pods
        self.podgroups = podgroups
        self.queues = queues
        self.events = events
        self.metrics = metrics
        self.assumed = Assumed()
        self.volumes = VolumeBinder(api)
        self.claims = ClaimWriter(api, store, assume_ttl_s=assume_ttl_s)
        self.assume_ttl_s = assume_ttl_s
        self.pdb_api_version = pdb_api_version
        self._concurrency = bind_concurrency
        self._bound = metrics.binds.labels("bound")  # labelled once: .labels() locks and looks up per call
        self._scheduled = metrics.scheduled.labels("allocate")
        self._uids: dict[Key, str] = {}
        self.gpu_sharing: GpuSharingBinder | None = None  # set by the scheduler: shared binds go through it

    async def apply(self, result: CycleResult, uids: dict[Key, str] | None = None) -> ApplyStats:
        """Send *result*. *uids* are the pods' uids in the snapshot the cycle decided on: a pod deleted and
        made again under the same name since then is not bound or evicted (the next cycle sees it)."""
        self._uids = uids or {}
        stats = ApplyStats()
        extra: list[Event] = []
        t0 = time.perf_counter()
        c0 = time.process_time()
        await self._gather(self._evict(e, stats, extra) for e in result.evictions)
        await self._gather(self._bind(b, stats, extra) for b in result.binds)
        stats.bind_s = time.perf_counter() - t0
        stats.bind_cpu_s = time.process_time() - c0
        bound = {(b.pod.namespace, b.pod.name) for b in result.binds}
        failed_binds = {f"Pod/{b.pod}" for b in result.binds if (b.pod.namespace, b.pod.name) not in self.assumed.binds}
        events = [e for e in result.events if not (e.reason == "Scheduled" and e.object in failed_binds)]
        self.events.record(events + extra)
        writes: list[Awaitable[None]] = []
        writes += self._nominations(result)
        writes += self._podgroup_writes(result.podgroups, bound)
        writes += self._queue_writes(result.queues)
        await self._gather(self._counted(w, stats) for w in writes)
        if self.gpu_sharing is not None:  # reservation pods of emptied GPU groups go (kai.k8s._gpushare)
            await self.gpu_sharing.sync({g for *_, groups in self.assumed.binds.values() for g in groups})
        stats.status_s = time.perf_counter() - t0 - stats.bind_s
        return stats

    async def _gather(self, calls: Iterable[Awaitable[None]]) -> None:
        """Await *calls*, at most ``bind_concurrency`` at a time: that many workers take the next call
        from one iterator, so 4,000 binds are 64 tasks, not 4,000 tasks queued on a semaphore, and a
        call's coroutine is only made when a worker is free for it."""
        it = iter(calls)

        async def worker() -> None:
            for c in it:
                await c

        await asyncio.gather(*(worker() for _ in range(self._concurrency)))

    async def _counted(self, call: Awaitable[None], stats: ApplyStats) -> None:
        await call
        stats.status_writes += 1

    # ---- bind ------------------------------------------------------------------------------

    async def _bind(self, b: Bind, stats: ApplyStats, extra: list[Event]) -> None:
        key = (b.pod.namespace, b.pod.name)
        pod = self.store.get("Pod", key)
        if pod is None or self._uids.get(key, pod.meta.uid) != pod.meta.uid:
            return
        if b.gpu_groups and self.gpu_sharing is not None:
            # GPU sharing: reservation pods, ConfigMaps and labels first, in the background (kai.k8s._gpushare)
            self.gpu_sharing.submit(b, pod, self)
            return
        await self.send_bind(b, pod, stats, extra)

    async def send_bind(
        self,
        b: Bind,
        pod: Pod,
        stats: ApplyStats | None = None,
        extra: list[Event] | None = None,
        *,
        labels: bool = True,
    ) -> bool:
        """POST the binding of *pod* (after its GPU group labels, when *labels* and it has groups); whether it
        is bound (409: by an earlier attempt). A failure goes to *extra* as a FailedBinding event."""
        stats = stats if stats is not None else ApplyStats()
        extra = extra if extra is not None else []
        key = (b.pod.namespace, b.pod.name)
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": b.pod.name, "namespace": b.pod.namespace, "uid": pod.meta.uid},
            "target": {"apiVersion": "v1", "kind": "Node", "name": b.node},
        }
        t0 = time.perf_counter()
        try:
            if b.gpu_groups and labels:  # a shared-GPU pod: the GPU group labels first, as KAI's binder writes them
                patch: dict[str, str | None] = {k: None for k in pod.meta.labels if is_gpu_group_label(k)}
                patch.update(gpu_group_labels(b.gpu_groups))
                await self.api.request(
                    "PATCH",
                    f"/api/v1/namespaces/{b.pod.namespace}/pods/{b.pod.name}",
                    body={"metadata": {"labels": patch, "uid": pod.meta.uid}},
                    content_type=MERGE,
                )
            if b.volumes:  # its volumes first, bound and waited for (kube-scheduler's VolumeBinding PreBind)
                await self.volumes.bind(b)
            if b.claims:  # its ResourceClaims' allocation and reservedFor (kube-scheduler's DynamicResources PreBind)
                await self.claims.write(b, pod.meta.uid)
            await self.api.request("POST", f"/api/v1/namespaces/{b.pod.namespace}/pods/{b.pod.name}/binding", body=body)
        except ApiError as e:
            if e.code == 409:  # already bound (or the uid no longer matches): the watch has the truth
                stats.already_bound += 1
                self.metrics.binds.labels("conflict").inc()
                return True
            if e.code == 404:
                self.metrics.binds.labels("gone").inc()
                return False
            stats.bind_failed += 1
            self.metrics.binds.labels("error").inc()
            self.metrics.api_errors.labels("bind").inc()
            message = f"Failed to bind pod {b.pod} to node {b.node}: {e}"
            extra.append(Event(f"Pod/{b.pod}", "Warning", "FailedBinding", message))
            log.warning(
                "bind failed: %s to %s: %s",
                b.pod,
                b.node,
                e,
                extra={"pod": str(b.pod), "node": b.node, "error": str(e)},
            )
            return False
        self.metrics.bind_latency.observe((time.perf_counter() - t0) * 1000)
        self._bound.inc()
        self._scheduled.inc()
        self.assumed.binds[key] = (pod.meta.uid, b.node, time.monotonic(), tuple(b.gpu_groups))
        stats.bound += 1
        return True

    # ---- evict -----------------------------------------------------------------------------

    def _pdb_applies(self, pod: Pod) -> bool:
        ns = pod.meta.namespace or ""
        return any(
            (pdb.meta.namespace or "") == ns and pdb.selects(pod.meta.labels)
            for pdb in self.store.list("PodDisruptionBudget")
        )

    async def _evict(self, e: Evict, stats: ApplyStats, extra: list[Event]) -> None:
        key = (e.pod.namespace, e.pod.name)
        pod = self.store.get("Pod", key)
        if pod is None or self._uids.get(key, pod.meta.uid) != pod.meta.uid:
            return
        base = f"/api/v1/namespaces/{e.pod.namespace}/pods/{e.pod.name}"
        options = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.meta.uid}}
        try:
            if self._pdb_applies(pod):
                body = {
                    "apiVersion": self.pdb_api_version,
                    "kind": "Eviction",
                    "metadata": {"name": e.pod.name, "namespace": e.pod.namespace},
                    "deleteOptions": options,
                }
                await self.api.request("POST", f"{base}/eviction", body=body)
            else:
                await self.api.request("DELETE", base, body=options)
        except ApiError as err:
            if err.code in (404, 409):  # gone already, or a new pod under the same name
                return
            stats.evict_failed += 1
            self.metrics.api_errors.labels("evict").inc()
            reason = "EvictionRefused" if err.code == 429 else "EvictionFailed"
            extra.append(Event(f"Pod/{e.pod}", "Warning", reason, f"Eviction of pod {e.pod} ({e.action}): {err}"))
            return
        self.assumed.evictions[key] = (pod.meta.uid, time.monotonic())
        pg = self.store.get("PodGroup", (e.pod.namespace, e.podgroup))
        self.metrics.evicted.labels(
            e.podgroup,
            pg.meta.uid if pg is not None else "",
            pod.meta.labels.get(C.LABEL_NODE_POOL, "default"),
            e.action,
        ).inc()
        stats.evicted += 1

    # ---- status ----------------------------------------------------------------------------

    def _patch(self, path: str, body: dict[str, Any], content_type: str, op: str) -> Awaitable[None]:
        async def call() -> None:
            try:
                await self.api.request("PATCH", path, body=body, content_type=content_type)
            except ApiError as e:
                if e.code != 404:
                    self.metrics.api_errors.labels(op).inc()
                    log.info("status write failed", extra={"path": path, "error": str(e)})

        return call()

    def _nominations(self, result: CycleResult) -> list[Awaitable[None]]:
        held = {(p.pod.namespace, p.pod.name): p.node for p in result.pipelines if p.nominated}
        out = []
        for pod in self.store.list("Pod"):
            if pod.scheduler_name != C.SCHEDULER_NAME or pod.node_name:
                continue
            key = (pod.meta.namespace or "", pod.meta.name)
            want = held.get(key, "")
            if pod.nominated_node_name != want:
                path = f"/api/v1/namespaces/{key[0]}/pods/{key[1]}/status"
                out.append(self._patch(path, {"status": {"nominatedNodeName": want or None}}, STRATEGIC, "nominate"))
        return out

    def _podgroup_writes(self, statuses: list[PodGroupStatus], bound: set[Key]) -> list[Awaitable[None]]:
        now = format_time(time.time())
        out: list[Awaitable[None]] = []
        members: dict[Key, list[Pod]] = {}
        for pod in self.store.list("Pod"):
            if pod.scheduler_name == C.SCHEDULER_NAME and not pod.node_name:
                pg = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
                if pg:
                    members.setdefault((pod.meta.namespace or "", pg), []).append(pod)
        for st in statuses:
            key = (st.namespace, st.name)
            pg = self.store.get("PodGroup", key)
            if pg is None:
                continue
            path = f"/apis/{C.PODGROUP_API_VERSION}/namespaces/{st.namespace}/podgroups/{st.name}"
            old = (self.podgroups.statuses.get(key) or {}).get("schedulingConditions") or []
            new = [
                {
                    "type": c.type,
                    "nodePool": pg.meta.labels.get(C.LABEL_NODE_POOL, "default"),
                    "reason": c.reason,
                    "message": c.message,
                    "status": c.status,
                    "transitionID": "0",
                    "lastTransitionTime": now,
                }
                for c in st.conditions
            ]
            if _conditions_key(old) != _conditions_key(new):
                out.append(self._patch(f"{path}/status", {"status": {"schedulingConditions": new}}, MERGE, "podgroup"))
            if st.stale_changed:
                value = None if st.stale_since is None else format_time(st.stale_since)
                if pg.meta.annotations.get(C.ANNOTATION_STALE_TIMESTAMP) != value:
                    body = {"metadata": {"annotations": {C.ANNOTATION_STALE_TIMESTAMP: value}}}
                    out.append(self._patch(path, body, MERGE, "podgroup"))
            if pg.mark_unschedulable:
                cond = next((c for c in st.conditions if c.status == "True"), None)
                for pod in members.get(key, ()):
                    pkey = (pod.meta.namespace or "", pod.meta.name)
                    if pkey in bound:
                        continue
                    want = ("False", "Unschedulable", cond.message) if cond is not None else None
                    have = pod_scheduled_condition(self.pods.statuses.get(pkey))
                    if want is not None and have != want:
                        body = {
                            "status": {
                                "conditions": [
                                    {
                                        "type": "PodScheduled",
                                        "status": "False",
                                        "reason": "Unschedulable",
                                        "message": cond.message,
                                        "lastTransitionTime": now,
                                    }
                                ]
                            }
                        }
                        path_p = f"/api/v1/namespaces/{pkey[0]}/pods/{pkey[1]}/status"
                        out.append(self._patch(path_p, body, STRATEGIC, "pod-condition"))
        return out

    def _queue_writes(self, queues: list[QueueStatus]) -> list[Awaitable[None]]:
        out: list[Awaitable[None]] = []
        for q in queues:
            if self.store.get("Queue", ("", q.name)) is None:
                continue
            old = self.queues.statuses.get(("", q.name)) or {}
            new = {
                "allocated": _quantities(q.allocated),
                "allocatedNonPreemptible": _quantities(q.allocated_non_preemptible),
                "requested": _quantities(q.requested),
            }
            if all(_same_quantities(old.get(k), v) for k, v in new.items()):
                continue
            path = f"/apis/{C.QUEUE_API_VERSION}/queues/{q.name}/status"
            out.append(self._patch(path, {"status": new}, MERGE, "queue"))
        return out


def _conditions_key(conds: list[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    return [(c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", "")) for c in conds]
