"""``kai scheduler``: one process running the scheduler, binder, pod-grouper and status updaters.

Theory of operation:

1. With leader election on, wait for the Lease (a second replica waits here, doing nothing else).
2. Start one Informer per kind (Nodes, Pods, Queues, PodGroups, PriorityClasses, Topologies,
   SchedulingShards, PodDisruptionBudgets) into one Store; wait until every kind is listed, then
   ``gc.freeze()`` the initial objects so the collector stops rescanning them.
3. The pod-grouper groups every pending kai pod that names no PodGroup, now and as pods arrive.
4. Cycle every ``schedule_period`` and as soon as new schedulable pods arrive: Store (with the
   binds and evictions this process made that the watch has not shown yet laid over it) →
   ``build_snapshot`` → ``run_cycle`` (the pure engine, in a worker thread so watches keep flowing) →
   the Applier sends the decisions. No cycle runs while an informer is re-listing after a 410.
5. Losing the Lease ends ``run`` with exit code 1 (the process exits, as kube-scheduler does). Every
   write is fenced (``kai.k8s._fence``): the Fence closes the moment the Lease is lost, before ``run``
   returns, and a cycle writes under the Lease term it started with.

Every background task (informers, pod-grouper and event workers, the cycle loop, the Lease renewal)
runs under one Supervisor, which restarts a task that fails, with backoff, and counts it
(``kai_task_failures_total``). Health is honest: ``/healthz`` fails when a task keeps failing or, on
the leader, when no cycle has completed for ``health_cycle_periods`` periods (a minute at least);
``/readyz`` says whether this replica could serve now (every informer live, nothing failing), leader
or standby alike, so a rolling update can replace a leader with a ready standby.

With ``--shard NAME`` the process serves that SchedulingShard's node pool only (``kai.k8s._shard`` reads
it at start and names the Lease; ``kai.scheduler.partition`` filters each cycle's input), and with the
shard's ``usageDBConfig`` each cycle reads historical usage cached by ``kai.k8s._usage``.

Network I/O lives in the Informers, Applier, EventRecorder, PodGrouper, LeaderElector and UsageFetcher;
this module only wires them and never decides anything about placement.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import gc
import importlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.k8s._api import MAX_CONNECTIONS, Api, ApiError, load_config
from kai.k8s._apply import Applier
from kai.k8s._collector import CollectorPacing
from kai.k8s._decode import KINDS, PDB_V1BETA1, KindSpec
from kai.k8s._events import EventRecorder
from kai.k8s._fence import Fence, Fenced
from kai.k8s._gpushare import GpuSharingBinder, ReservationOptions
from kai.k8s._grouper import PodGrouper
from kai.k8s._informer import PROGRESS_DEADLINE_S, WATCH_TIMEOUT_S, Informer
from kai.k8s._leader import LeaderElector, LeaseConfig
from kai.k8s._metrics import Metrics, serve_http
from kai.k8s._shard import lease_name, resolve_partition
from kai.k8s._supervisor import Supervisor
from kai.k8s._usage import UsageFetcher
from kai.scheduler.decisions import CycleResult, Event
from kai.scheduler.partition import Partition, PartitionedInput, partition_input
from kai.store import Key, Store

if TYPE_CHECKING:
    from kai.k8s._early import EarlyStart
    from kai.k8s._webhookproc import WebhookProcess
    from kai.scheduler.conf import SchedulerConf
    from kai.scheduler.memo import CycleMemo
    from kai.scheduler.snapshot import SnapshotBuilder

log = logging.getLogger("kai.k8s.scheduler")

EXIT_OK = 0
EXIT_LOST_LEASE = 1
NEW_POD_DEBOUNCE_S = 0.02  # a burst of new pods becomes one cycle
FIRST_DECISIONS_WAIT_S = 10.0  # the first cycle waits this long at most for the pod-grouper's first decisions
DEFAULT_RESERVATION_IMAGE = "kai:0.1.0"  # deploy/scheduler.yaml's image
CYCLES_KEPT = 1_000  # cycle records kept in memory (KaiScheduler.cycles); older ones are dropped


@dataclass
class SchedulerOptions:
    kubeconfig: str | None = None
    schedule_period_s: float = 1.0
    actions: tuple[str, ...] | None = None
    shard: str = "default"
    nodepool_label_key: str = C.LABEL_NODE_POOL  # KAI's --nodepool-label-key (kai.scheduler.partition)
    shard_lease: bool = True  # the Lease's name gets the shard's partitionLabelValue (kai.k8s._shard)
    leader_elect: bool = True
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    identity: str = ""
    metrics_address: str = "0.0.0.0"
    metrics_port: int | None = 8080  # None: no HTTP endpoints; 0: any free port
    bind_concurrency: int = 64
    max_connections: int = MAX_CONNECTIONS
    watch_timeout_s: int = WATCH_TIMEOUT_S  # each watch ends after this and is opened again
    progress_deadline_s: float = PROGRESS_DEADLINE_S  # a kind not heard from for this long is not live
    status_qps: float = 100.0  # status writes a second (token bucket), and the burst above it
    status_burst: float = 500.0
    health_cycle_periods: int = 60  # /healthz fails on a leader with no cycle for this many periods (>= 60 s)
    # run_scheduler pauses Python's cyclic collector from the process's start: the start-up and the
    # initial lists allocate ~10^5 objects that all live on, so collections then only cost time. The
    # collector is enabled again once the initial objects are frozen (end of _start_informers), by a
    # leader and a standby alike, and paused once more from the Lease's first decisions (the pod-grouper's)
    # to the end of the first cycle: what those make lives on too (kai.k8s._collector).
    gc_paused_until_synced: bool = False
    # run_scheduler also paces the collector (kai.k8s._collector): what each cycle leaves is frozen, and one full
    # collection runs every full_every_s. Off in-process (the tests): the collector there is the test process's.
    pace_collector: bool = False
    # GPU sharing and admission (docs/gpu-sharing.md): the webhooks' HTTPS address (None: not served), the
    # namespace of their certificate Secret, the runtime class given to fraction pods, the reservation pods
    webhook_listen: tuple[str, int] | None = None
    webhook_cert_namespace: str = "kai-scheduler"
    webhook_metrics_port: int | None = None  # the webhook process's own /metrics (kai_admission_*)
    webhook_refresh_s: float = 60.0  # how often the webhook process checks its certificate
    gpu_fraction_runtime_class: str = C.DEFAULT_GPU_FRACTION_RUNTIME_CLASS
    reservation: ReservationOptions = field(default_factory=ReservationOptions)
    dashboard_listen: str = ""  # host:port of the read-only dashboard (kai.k8s._dashboard); "" = off


@dataclass
class CycleRecord:
    """What one cycle did (for logs, tests and benchmarks)."""

    index: int
    pods: int
    binds: int
    evictions: int
    pipelined: int
    seconds: float
    engine_s: float
    repeated: bool = False  # the input equalled the last cycle's: its decisions were handed back, not worked out


class View(NamedTuple):
    """What a cycle decides on (``KaiScheduler.view``)."""

    by_key: dict[Key, Any]  # every pod of the Store by key, with kai's overlays (the applier checks uids on it)
    laid: set[Key]  # the pods given their decided PodGroup's name here (the pod-grouper settles them after)
    mine: PartitionedInput  # the objects of this scheduler's partition


class KaiScheduler:
    """The process's state: Store, informers, applier, pod-grouper, leader elector."""

    def __init__(self, options: SchedulerOptions, early: EarlyStart | None = None) -> None:
        self.options = options
        self.early = early  # the process's API client and first lists, made before its imports (kai.k8s._early)
        self.identity = options.identity or f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"
        self.store = Store(feed_limit=1000)
        self.metrics = Metrics()
        self.supervisor = Supervisor(on_failure_metric=lambda name: self.metrics.task_failures.labels(name).inc())
        self.fence = Fence() if options.leader_elect else Fence.open_always()
        self.informers: dict[str, Informer] = {}
        self._warming: asyncio.Future[int] | None = None  # connections opened ahead of the first binds
        # the last cycles, for tests and `kai explain`; bounded, as a scheduler runs for months
        self.cycles: collections.deque[CycleRecord] = collections.deque(maxlen=CYCLES_KEPT)
        self.cycles_run = 0
        self.last_result: CycleResult | None = None
        self.leader: LeaderElector | None = None
        self.api: Api | None = None
        self.applier: Applier | None = None
        self.grouper: PodGrouper | None = None
        self.events: EventRecorder | None = None
        self.http_port = 0
        self.webhook: WebhookProcess | None = None
        self.dashboard_port = 0
        self.partition: Partition | None = None  # the node pool of --shard (None: the whole cluster)
        self.usage: UsageFetcher | None = None  # historical usage from Prometheus, once leading
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        self._started_sync = False
        self._gc_paused_for_first_cycle = False  # _start_writers pauses the collector until the first cycle ends
        self._shard_read = False  # run() has read the SchedulingShard: the partition and the Lease's name are known
        self._conf_error = ""
        self.snapshot_builder: SnapshotBuilder | None = None
        # the last cycle's input and result: a cycle on an unchanged cluster (the periodic recheck of jobs that
        # cannot run) hands back that result instead of running the actions again (kai.scheduler.memo)
        self.memo: CycleMemo | None = None
        self.collector = CollectorPacing() if options.pace_collector else None
        self._relists_counted: dict[str, int] = {}
        self._cycle_wanted_since: float | None = None  # monotonic: a cycle was due and none has completed since
        self.last_cycle_end: float | None = None
        self._logged_not_live: tuple[str, ...] = ()
        self.cycle_listeners: list[Callable[[CycleResult, CycleRecord], None]] = []  # after each applied cycle

    # ---- probes ----------------------------------------------------------------------------

    def synced(self) -> bool:
        """Every kind listed, its informer running and heard from within the progress deadline."""
        started = len(self.informers) == len(KINDS)  # the PDB informer starts after a discovery call
        now = time.monotonic()
        return started and all(i.live(now) for i in self.informers.values())

    def not_live(self) -> list[str]:
        now = time.monotonic()
        return [k for k, i in self.informers.items() if not i.live(now)]

    def _healthz(self) -> tuple[bool, str]:
        ok, why = self.supervisor.healthy()
        if not ok:
            return False, why
        stall = max(60.0, self.options.health_cycle_periods * self.options.schedule_period_s)
        since = self._cycle_wanted_since
        if since is not None and time.monotonic() - since > stall:
            return False, f"no cycle completed for {time.monotonic() - since:.0f} s"
        return True, "ok"

    def _readyz(self) -> tuple[bool, str]:
        ok, why = self._healthz()
        if not ok:
            return False, why
        if not self.synced():
            missing = self.not_live() or [k.kind for k in KINDS if k.kind not in self.informers]
            return False, f"informers not live: {', '.join(missing)}"
        if not self._shard_read:  # neither leader nor standby yet: the Lease's name comes from the shard
            return False, f"reading SchedulingShard {self.options.shard!r}"
        if self.options.webhook_listen is not None and not self.webhook_serving():
            return False, "admission webhooks not serving yet"
        if self.leader is not None and not self.leader.is_leader:
            return True, "ok (standby)"
        return True, "ok"

    def webhook_serving(self) -> bool:
        return self.webhook is not None and self.webhook.serving

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    # ---- life cycle ------------------------------------------------------------------------

    async def run(self) -> int:
        """Run until stop() (exit 0) or until the Lease is lost (exit 1)."""
        if self.early is not None:
            self.api = self.early.api
        else:
            self.api = Api(load_config(self.options.kubeconfig), max_connections=self.options.max_connections)
        server = dashboard = None
        try:
            if self.options.metrics_port is not None:
                server = await serve_http(
                    self.options.metrics_address,
                    self.options.metrics_port,
                    self.metrics,
                    healthz=self._healthz,
                    readyz=self._readyz,
                )
                self.http_port = server.sockets[0].getsockname()[1]
            if self.options.dashboard_listen:
                from kai.k8s._dashboard import start_dashboard

                dashboard = await start_dashboard(self, self.options.dashboard_listen)
                self.dashboard_port = dashboard.sockets[0].getsockname()[1]
            # The informers sync while the Lease is being acquired (a standby keeps warm caches, as
            # kube-scheduler's are); nothing is written (PodGroups, events, binds) before the Lease is held.
            # Their lists go out first: the shard's node pool is read while the API server answers them
            # (the lists hold every object; the pool filters what the pod-grouper and the cycles see).
            syncing = asyncio.ensure_future(self._start_informers())
            try:
                self.partition = await resolve_partition(self.api, self.options.shard, self.options.nodepool_label_key)
                self._shard_read = True
            except BaseException:
                syncing.cancel()
                await asyncio.gather(syncing, return_exceptions=True)
                raise
            if self.options.webhook_listen is not None:  # served by a standby too
                self.supervisor.start("webhook", self._start_webhook)
            stopped = asyncio.ensure_future(self._stop.wait())
            hold: asyncio.Future[Any] | None = None
            if self.options.leader_elect:
                lease = self.options.lease
                if self.options.shard_lease:  # one Lease per node pool, as KAI names it
                    lease = dataclasses.replace(lease, name=lease_name(lease.name, self.partition))
                # The Lease on connections of its own: renewals never queue behind a burst of binds.
                lease_api = self.api.sibling(max_connections=2)
                self.leader = LeaderElector(lease_api, self.identity, lease, self.fence)
                acquired = asyncio.ensure_future(self.leader.acquire())
                await asyncio.wait({acquired, stopped}, return_when=asyncio.FIRST_COMPLETED)
                failed = acquired.exception() if acquired.done() else None  # LeaseNamespaceMissing
                if not acquired.done() or failed is not None:
                    acquired.cancel()
                    syncing.cancel()
                    await asyncio.gather(acquired, syncing, return_exceptions=True)
                    if failed is not None:
                        stopped.cancel()
                        raise failed
                    return EXIT_OK
                self.metrics.leader.set(1)
                # Renew the Lease from the moment it is held: a long first sync must not let it lapse.
                entry = self.supervisor.start("leader-election", self.leader.hold)
                hold = entry.task
            # the first burst of binds' connections, opened once leading, while kai waits for the API server's
            # lists: their TLS handshakes then cost neither side anything while the binds go out (opened before
            # the Lease is held, they delayed the shard's read and the Lease's requests behind 64 handshakes)
            self._warming = asyncio.ensure_future(self.api.warm(self.options.bind_concurrency))
            start = asyncio.ensure_future(self._start_writers(syncing))
            waits: set[asyncio.Future[Any]] = {start, stopped} | ({hold} if hold is not None else set())
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if start not in done:
                start.cancel()
                await asyncio.gather(start, return_exceptions=True)
            elif isinstance(start.exception(), Fenced):  # the Lease lapsed while the informers synced
                log.warning("writes fenced before the first cycle", extra={"error": str(start.exception())})
                self.metrics.leader.set(0)
                return EXIT_LOST_LEASE
            elif start.exception() is not None:
                raise start.exception()  # type: ignore[misc]
            else:
                waits.discard(start)
                done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if not stopped.done():
                stopped.cancel()
            if hold is not None and hold in done:
                self.metrics.leader.set(0)
                return EXIT_LOST_LEASE
            return EXIT_OK
        finally:
            if self.options.gc_paused_until_synced:
                gc.enable()  # stopped before the sync ended
            await self.supervisor.close()  # the Lease renewal last of all: it is one of them
            if self.grouper is not None:
                await self.grouper.close()
            if self.webhook is not None:
                await self.webhook.stop()
            if self.applier is not None:
                await self.applier.close()
            if self.applier is not None and self.applier.gpu_sharing is not None:
                await self.applier.gpu_sharing.close()
            if self.events is not None:
                if self.fence.current() is not None:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(self.events.flush(), timeout=2)
                await self.events.close()
            if self.leader is not None:
                await self.leader.release()
                await self.leader.api.close()
            for srv in (server, dashboard):
                if srv is not None:
                    srv.close()
            await self.api.close()

    async def _start_informers(self) -> float:
        """Start every informer (supervised) and wait until all have listed; the seconds the sync took."""
        assert self.api is not None
        api = self.api
        t0 = time.perf_counter()
        self.events = EventRecorder(api, self._resolve, self.metrics, instance=self.identity)

        def in_shard(labels: dict[str, str]) -> bool:  # the pool is read while the informers list (run)
            return self.partition is None or self.partition.matches(labels)

        self.grouper = PodGrouper(api, self.store, self.events.record, wake=self._wake_soon, in_shard=in_shard)

        def start(spec: KindSpec) -> None:
            inf = Informer(
                api,
                spec,
                self.store,
                on_change=self._on_change(spec.kind),
                on_invalid=self._on_invalid,
                watch_timeout_s=self.options.watch_timeout_s,
                progress_deadline_s=self.options.progress_deadline_s,
                early=self.early,
            )
            self.informers[spec.kind] = inf
            self.supervisor.start(f"informer/{spec.kind}", inf.run)

        for spec in KINDS:  # the PodDisruptionBudgets' API version is discovered while the others list
            if spec.kind != "PodDisruptionBudget":
                start(spec)
        # the engine's imports hold the GIL for ~0.2 s: they start once every informer has begun its list (the
        # connections' TLS handshakes would wait on them), not before the informers are even made
        asyncio.get_running_loop().call_soon(_preload_engine)
        pdb_spec = await self._pdb_spec()
        start(pdb_spec)
        self.applier = Applier(
            api,
            self.store,
            self.informers["Pod"],
            self.informers["PodGroup"],
            self.informers["Queue"],
            self.informers["PodDisruptionBudget"],
            self.events,
            self.metrics,
            fence=self.fence,
            bind_concurrency=self.options.bind_concurrency,
            pdb_api_version=pdb_spec.api_version,
            status_qps=self.options.status_qps,
            status_burst=self.options.status_burst,
        )
        self.applier.decided = self.grouper.decided
        self.grouper.quiet = self.applier.quiet
        self.applier.gpu_sharing = GpuSharingBinder(
            api,
            self.store,
            self.events,
            self.metrics,
            self.options.reservation,
            wake=self._wake_soon,
            supervisor=self.supervisor,
        )
        await asyncio.gather(*(i.synced.wait() for i in self.informers.values()))
        # The initial objects live for the process's life: frozen, the collector stops rescanning them.
        # Here, not once leading: a standby may wait for the Lease for days, its collector running.
        if self.options.gc_paused_until_synced:
            gc.freeze()  # nothing collected since the start: no 0.1 s full collection before the first cycle
            gc.enable()
        else:
            gc.collect()
            gc.freeze()
        return time.perf_counter() - t0

    async def _start_writers(self, syncing: asyncio.Future[float]) -> None:
        """Once leading: wait for the sync, then start the event writers, the pod-grouper and the cycle
        loop, all writing through the Fence for the term held now."""
        seconds = await syncing
        assert self.events is not None and self.grouper is not None and self.api is not None
        term = self.fence.current()
        if term is None:
            raise Fenced("the Lease was lost before the informers synced")
        writer = self.fence.api(self.api, term)
        self._started_sync = True
        assert self.applier is not None
        # gangs a deposed predecessor left bound in part: decided on at once (kai.k8s._assume, "adopt")
        if marked := self.applier.assumed.adopt(self.store, time.monotonic()):
            log.info(
                "gangs bound in part on taking the lead",
                extra={"count": len(marked), "podgroups": [f"{ns}/{n}" for ns, n in marked[:20]]},
            )
        self.events.start(self.supervisor, writer)
        if self.options.gc_paused_until_synced:
            gc.disable()  # until the first cycle ends (_loop): its groupings, snapshot and binds live on
            self._gc_paused_for_first_cycle = True
        # The PodGroups decided before the first cycle are created after its binds, as a later cycle's are: at a
        # start with thousands of bare pods, their creates would otherwise take kai's CPU while the first cycle
        # is decided and the API server's while its binds go out (the cycle loop sets it again).
        self.applier.idle.clear()
        self.grouper.start(self.supervisor, writer)
        log.info(
            "informers synced",
            extra={
                "seconds": round(seconds, 3),
                **{k.lower() + "s": self.store.count(k) for k in ("Node", "Pod", "Queue", "PodGroup")},
                "listed_early": sorted(k for k, i in self.informers.items() if i.listed_early),  # kai.k8s._early
            },
        )
        for pod in self.store.list("Pod"):
            if self.grouper.wants(pod):
                self.grouper.enqueue((pod.meta.namespace or "", pod.meta.name))
        # The first cycle waits for the first decisions (bare pods: microseconds each; owners: one GET
        # each): it then schedules every pod at once, and counts every bound pod to its queue, those whose
        # PodGroup a crash kept from being made included.
        with contextlib.suppress(TimeoutError):  # asyncio.timeout: a stop meanwhile is not dropped (3.11's wait_for)
            async with asyncio.timeout(FIRST_DECISIONS_WAIT_S):
                await self.grouper.drained()
        await self._reservation_image()
        self.usage = UsageFetcher(self.store, self.options.shard, self._pool(), self.metrics)
        self.supervisor.start("usage", self.usage.run)  # reads Prometheus only: no writer, no fence
        await self.usage.wait_first()  # a restarted scheduler's first cycle already knows the past
        self.supervisor.start("cycle-loop", self._loop)

    def _pool(self) -> str:
        return self.partition.pool if self.partition is not None else "default"

    async def _reservation_image(self) -> None:
        """Reservation pods run ``kai resource-reservation`` in kai's own image: without --reservation-image,
        the image of this pod's first container (POD_NAME and POD_NAMESPACE from the downward API)."""
        binder = self.applier.gpu_sharing if self.applier is not None else None
        name, ns = os.environ.get("POD_NAME", ""), os.environ.get("POD_NAMESPACE", "")
        if binder is None or binder.options.image or not name or not ns or self.api is None:
            if binder is not None and not binder.options.image:
                binder.options = dataclasses.replace(binder.options, image=DEFAULT_RESERVATION_IMAGE)
            return
        image = DEFAULT_RESERVATION_IMAGE
        try:
            me = await self.api.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
            image = ((me.get("spec") or {}).get("containers") or [{}])[0].get("image") or image
        except ApiError as e:
            log.warning("own pod not read; reservation pods use the default image", extra={"error": str(e)})
        binder.options = dataclasses.replace(binder.options, image=image)

    async def _start_webhook(self) -> None:
        """Serve the admission webhooks from a process of their own (kai.k8s._webhookproc), restarted if it
        exits, for as long as this one runs (a supervised task: a failure here starts the same process
        keeper again)."""
        from kai.k8s._webhookproc import WebhookConfig, WebhookProcess

        assert self.options.webhook_listen is not None
        host, port = self.options.webhook_listen
        if self.webhook is not None:
            await self.webhook.supervise()
            return
        self.webhook = WebhookProcess(
            WebhookConfig(
                kubeconfig=self.options.kubeconfig,
                host=host,
                port=port,
                cert_namespace=self.options.webhook_cert_namespace,
                gpu_fraction_runtime_class=self.options.gpu_fraction_runtime_class,
                metrics_port=self.options.webhook_metrics_port,
                refresh_s=self.options.webhook_refresh_s,
                log_level=logging.getLevelName(logging.getLogger("kai").getEffectiveLevel()).lower(),
            )
        )
        await self.webhook.supervise()

    async def _pdb_spec(self) -> KindSpec:
        """policy/v1 where served (1.21+), else policy/v1beta1 (Kubernetes 1.20)."""
        assert self.api is not None
        try:
            doc = await self.api.request("GET", "/apis/policy/v1")
            if any(r.get("name") == "poddisruptionbudgets" for r in doc.get("resources", [])):
                return next(k for k in KINDS if k.kind == "PodDisruptionBudget")
        except ApiError as e:
            if e.code not in (403, 404):
                log.warning("discovery failed; assuming policy/v1beta1", extra={"error": str(e)})
        return PDB_V1BETA1

    # ---- notifications ---------------------------------------------------------------------

    def _on_change(self, kind: str) -> Any:
        def changed(op: str, key: Key, obj: Any, old: Any) -> None:
            if not self._started_sync:
                return
            if kind == "Pod" and obj is not None:
                if self.grouper is not None and self.grouper.wants(obj):
                    self.grouper.enqueue(key)
                elif _schedulable(obj) and (old is None or not _schedulable(old)):
                    self._wake_soon()  # a new pending pod, or one the pod-grouper just grouped
            elif (
                kind == "PodGroup"
                and op == "ADDED"
                and (self.grouper is None or key not in self.grouper.decided.podgroups)
            ):
                self._wake_soon()  # (a decided PodGroup was taken by a cycle already: its create is news to no one)
            elif kind == "PodGroup" and op == "DELETED" and old is not None:
                self.metrics.forget_podgroup(old.meta.uid)
                if self.grouper is not None:
                    self.grouper.podgroup_deleted(key)

        return changed

    def _wake_soon(self) -> None:
        self._wake.set()

    def _on_invalid(self, spec: KindSpec, doc: dict[str, Any], err: ManifestError) -> None:
        meta = doc.get("metadata") or {}
        ns = meta.get("namespace") or ""
        name = meta.get("name", "")
        obj = f"{spec.kind}/{ns}/{name}" if ns else f"{spec.kind}/{name}"
        message = f"{spec.kind} {name} is ignored: {err.field}: {err.message}" if err.field else str(err)
        log.warning("invalid object", extra={"object": obj, "field": err.field, "error": err.message})
        if self.events is not None:
            regarding = {"apiVersion": spec.api_version, "kind": spec.kind, "name": name, "uid": meta.get("uid", "")}
            if ns:
                regarding["namespace"] = ns
            self.events.record_about(Event(obj, "Warning", "InvalidObject", message), regarding)

    def _resolve(self, ref: str) -> dict[str, str] | None:
        kind, _, rest = ref.partition("/")
        ns, _, name = rest.rpartition("/")
        api_version = {"Pod": "v1", "PodGroup": C.PODGROUP_API_VERSION, "Queue": C.QUEUE_API_VERSION}.get(kind)
        if api_version is None:
            return None
        obj = self.store.get(kind, (ns, name))
        if obj is None:
            return None
        out = {"apiVersion": api_version, "kind": kind, "name": name, "uid": obj.meta.uid}
        if ns:
            out["namespace"] = ns
        return out

    # ---- cycles ----------------------------------------------------------------------------

    async def _loop(self) -> None:
        period = self.options.schedule_period_s
        next_due = time.monotonic()
        while not self._stop.is_set():
            timeout = max(0.0, next_due - time.monotonic())
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=timeout)
            if self._stop.is_set():
                return
            if self._wake.is_set():
                self._wake.clear()
                if self.cycles_run:  # the first cycle comes once every pod listed is grouped: nothing to gather
                    await asyncio.sleep(NEW_POD_DEBOUNCE_S)
            next_due = time.monotonic() + period
            if not self.synced():  # a kind is re-listing, or its watch went quiet: decide nothing on stale data
                self._note_not_live()
                self._first_cycle_over()
                if self.applier is not None:
                    self.applier.idle.set()  # no cycle comes: the pod-grouper's writes need not wait for one
                continue
            if self._cycle_wanted_since is None:
                self._cycle_wanted_since = time.monotonic()
            if self.applier is not None:
                self.applier.idle.clear()  # the pod-grouper's writes wait for this cycle's binds (apply sets it)
            try:
                await self.cycle()
            except Fenced as e:  # the Lease is lost: nothing more to do here; run() returns and exits 1
                self.metrics.fenced.inc()
                log.warning("writes fenced: the Lease is not held", extra={"error": str(e)})
                return
            except Exception:  # a bug must not stop the scheduler: log it, try again next period
                log.exception("cycle failed")
            else:
                self._cycle_wanted_since = None
                self.last_cycle_end = time.monotonic()
            finally:
                self._first_cycle_over()
                if self.collector is not None:  # what the cycle left is frozen: no full walk every few seconds
                    self.collector.after_cycle()
                if self.applier is not None:
                    self.applier.idle.set()
            if self.last_cycle_end is not None:
                self.metrics.cycle_age.set(time.monotonic() - self.last_cycle_end)

    def _first_cycle_over(self) -> None:
        """Enable the cyclic collector _start_writers paused for the first cycle (a no-op after that).

        Why paused: at a start with thousands of pending pods, the groupings, the first snapshot and the
        first binds make ~10^5 objects that live on; the 200-odd collections they would trigger walk them
        and free nothing, ~5% of kai's CPU from the start to the first bind."""
        if self._gc_paused_for_first_cycle:
            self._gc_paused_for_first_cycle = False
            gc.enable()

    def _note_not_live(self) -> None:
        """Say once per change which kinds hold the cycles back."""
        missing = tuple(self.not_live())
        if missing != self._logged_not_live:
            log.warning("no cycle: informers not live", extra={"kinds": list(missing)})
        self._logged_not_live = missing

    def conf(self) -> SchedulerConf:
        from kai.scheduler.conf import ConfigError, SchedulerConf
        from kai.scheduler.plugins import check_conf

        shards = {s.meta.name: s for s in self.store.list("SchedulingShard")}
        shard = shards.get(self.options.shard)
        try:
            conf = check_conf(SchedulerConf.from_shard(shard, actions=self.options.actions))
            self._conf_error = ""
            return conf
        except ConfigError as e:
            if str(e) != self._conf_error:
                self._conf_error = str(e)
                log.error("bad SchedulingShard; using the defaults", extra={"error": str(e)})
            return SchedulerConf.from_shard(None, actions=self.options.actions)

    def view(self, now: float, mono: float) -> View:
        """The cluster as a cycle now would see it: the Store's objects of this scheduler's partition, with
        what kai did or decided and the watch does not show yet laid over them (a bind sent, a PodGroup
        decided and not written). The cycle decides on it, and the dashboard shows it, so a pod kai bound
        a moment ago is on the dashboard's map as it is in the next cycle. Reads only: on the loop thread."""
        assert self.applier is not None and self.grouper is not None
        # the Store's pods and PodGroups by key, with the overlays laid over them in place: each overlay costs
        # its own entries, not a walk of every pod (kai.k8s._assume)
        by_key, pg_by_key = self.store.by_key("Pod"), self.store.by_key("PodGroup")
        self.applier.assumed.lay_over(by_key, now, mono)
        # the pod-grouper's decisions not written yet: scheduled in this cycle (kai.k8s._decided)
        laid = self.grouper.decided.lay_over(by_key, pg_by_key)
        mine = partition_input(
            self.partition,
            nodes=self.store.list("Node"),
            pods=list(by_key.values()),
            podgroups=self.applier.assumed.podgroups(list(pg_by_key.values())),
            queues=self.store.list("Queue"),
        )
        return View(by_key, laid, mine)

    async def cycle(self) -> CycleRecord:
        """One cycle: snapshot, engine, apply."""
        from kai.scheduler.cycle import run_cycle
        from kai.scheduler.dra import dra_of
        from kai.scheduler.plugins import task_order_of
        from kai.scheduler.snapshot import SnapshotBuilder
        from kai.scheduler.storage import storage_of

        assert self.applier is not None and self.grouper is not None
        term = self.fence.current()  # the Lease term this cycle writes under, taken before it decides
        if term is None:
            raise Fenced("the Lease is not held")
        t0 = time.perf_counter()
        now = time.time()
        assumed = self.applier.assumed
        mono = time.monotonic()
        assumed.expire(self.store, mono, self.informers["Pod"].heard_since)
        self.grouper.expire()
        seen = self.view(now, mono)
        shared_groups = assumed.gpu_groups()  # as the snapshot shows them (Applier.apply: the reservation sync)
        by_key, laid, mine = seen.by_key, seen.laid, seen.mine
        conf = self.conf()
        if self.snapshot_builder is None:  # made here: the engine is imported off the start-up path
            self.snapshot_builder = SnapshotBuilder()  # each cycle patches the last one where the Store changed
        snap = self.snapshot_builder.build(
            nodes=mine.nodes,
            pods=mine.pods,
            podgroups=mine.podgroups,
            queues=mine.queues,
            priority_classes=self.store.list("PriorityClass"),
            now=now,
            pdbs=self.store.list("PodDisruptionBudget"),
            topologies=self.store.list("Topology"),
            task_order=task_order_of(conf),
            stuck_in_releasing_s=conf.stuck_in_releasing_threshold,
            namespaces=self.store.list("Namespace"),
            storage=storage_of(self.store),
            queue_usage=self.usage.current() if self.usage is not None else None,
            dra=dra_of(self.store, self.applier.claims.claims()),  # with claims written, not yet watched
            bare_pods_return=False,  # an evicted pod no controller owns is gone: consolidation leaves it be
        )
        self.metrics.record_capacity(self._pool(), snap.total)
        t1 = time.perf_counter()
        result = await asyncio.to_thread(run_cycle, snap, conf, self.memo, keep_memo=True)
        self.memo = result.memo
        t2 = time.perf_counter()
        stats = await self.applier.apply(result, by_key, term=term, gpu_groups_seen=shared_groups)
        self.grouper.settle(laid, set(self.applier.assumed.binds))
        t3 = time.perf_counter()
        self.last_result = result
        self.metrics.record_cycle(result, e2e_s=t3 - t0, snapshot_s=t1 - t0, apply_s=t3 - t2)
        for error in result.job_errors:  # a bug one job's shape triggers: logged whole, the job was left out
            log.error(
                "job left out of the cycle",
                extra={"podgroup": error.podgroup, "action": error.action, "error": error.message},
            )
        for action, message in result.action_errors:
            log.error("action undone", extra={"action": action, "error": message})
        for kind, inf in self.informers.items():  # lists after the first one: re-lists after 410 Gone
            gone = inf.relists - 1 - self._relists_counted.get(kind, 0)
            if gone > 0:
                self.metrics.relists.labels(kind).inc(gone)
                self._relists_counted[kind] = inf.relists - 1
        rec = CycleRecord(
            index=self.cycles_run,
            pods=len(snap.tasks),
            binds=stats.bound,
            evictions=stats.evicted,
            pipelined=len(result.pipelines),
            seconds=t3 - t0,
            engine_s=t2 - t1,
            repeated=bool(result.stats.get("cycle_repeated")),
        )
        self.cycles.append(rec)
        self.cycles_run += 1
        for listener in self.cycle_listeners:  # the dashboard's history; a failing listener costs only itself
            try:
                listener(result, rec)
            except Exception:
                log.exception("cycle listener failed")
        if result.binds or result.evictions or stats.bind_failed:
            log.info(
                "cycle",
                extra={
                    "cycle": rec.index,
                    "tasks": rec.pods,
                    "bound": stats.bound,
                    "already_bound": stats.already_bound,
                    "bind_failed": stats.bind_failed,
                    "evicted": stats.evicted,
                    "pipelined": rec.pipelined,
                    "status_writes": stats.status_writes,
                    "snapshot_s": round(t1 - t0, 3),
                    "engine_s": round(t2 - t1, 3),
                    "bind_s": round(stats.bind_s, 3),
                    "bind_cpu_s": round(stats.bind_cpu_s, 3),
                    "status_s": round(stats.status_s, 3),
                },
            )
        return rec


ENGINE_MODULES = ("kai.scheduler.snapshot", "kai.scheduler.cycle", "kai.scheduler.conf")


def _preload_engine() -> None:
    """Import the engine (NumPy, the actions, the plugins: ~0.2 s) in a thread while the informers
    wait for the API server's first lists, instead of before they start: nothing before the first
    cycle needs it, and the wait for a list of thousands of pods is time the process otherwise idles.
    ``cycle`` imports the same modules; Python's import lock makes it wait for a preload under way."""

    def load() -> None:
        for name in ENGINE_MODULES:
            importlib.import_module(name)

    threading.Thread(target=load, name="kai-preload-engine", daemon=True).start()


def _schedulable(pod: Any) -> bool:
    """A pending kai pod that names its PodGroup: the engine can consider it."""
    return (
        pod.scheduler_name == C.SCHEDULER_NAME
        and not pod.node_name
        and pod.meta.deletion_timestamp is None
        and C.ANNOTATION_POD_GROUP_NAME in pod.meta.annotations
    )


def run_scheduler(options: SchedulerOptions, *, event_loop: str = "uvloop", early: EarlyStart | None = None) -> int:
    """Run ``kai scheduler`` until SIGTERM/SIGINT (exit 0) or the Lease is lost (exit 1).

    *event_loop* ``uvloop`` (the default) runs on libuv: its transports and TLS cost less CPU per bind
    and per watch event than asyncio's, and on a busy machine the scheduler shares the CPU with the API
    server it waits for; ``asyncio`` is Python's own loop (the tests run in-process on it). *early* is the
    loop, API client and first lists ``kai.k8s._early.begin`` made before the imports (the CLI's way)."""
    import signal

    gc.disable()  # until the initial objects are frozen (SchedulerOptions.gc_paused_until_synced)
    options = dataclasses.replace(options, gc_paused_until_synced=True, pace_collector=True)

    async def main() -> int:
        s = KaiScheduler(options, early)
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, s.stop)
        return await s.run()

    if early is not None:
        with early.runner as runner:
            return runner.run(main())
    if event_loop == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(main())
    return asyncio.run(main())


def default_identity() -> str:
    """The Lease holder identity: the pod's name in a cluster (HOSTNAME), plus a random suffix."""
    return f"{os.environ.get('HOSTNAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"
