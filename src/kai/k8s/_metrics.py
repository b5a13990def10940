"""Prometheus metrics with KAI's names (prefix ``kai_``, kai-behaviour §8) and the HTTP endpoints
``/metrics``, ``/healthz`` and ``/readyz``.

Rules: one registry per process object (tests run several schedulers in one interpreter); the engine
never touches metrics: the scheduler loop records what a CycleResult and the API calls say.
Latencies of the last cycle are gauges in milliseconds, as KAI exports them; bind latency is a
histogram (5 ms to 2560 ms buckets, as KAI's ``task_bind_latency_milliseconds``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from kai.k8s._httpd import Answer, serve
from kai.scheduler.decisions import CycleResult

log = logging.getLogger("kai.k8s.metrics")
PREFIX = "kai"
_BUCKETS_MS = tuple(5.0 * 2**i for i in range(10))  # 5 ms .. 2560 ms
_QUEUE_LABELS = ("queue_name", "queue_metadata_name", "queue_display_name")
MAX_EVICTED_PODGROUPS = 1000  # PodGroups with a kai_pod_group_evicted_pods_total series at most


class Metrics:
    """Every metric kai scheduler exports."""

    def __init__(self) -> None:
        r = self.registry = CollectorRegistry()
        ms = "milliseconds"
        self.e2e = Gauge("e2e_scheduling_latency", "Last cycle, end to end.", unit=ms, namespace=PREFIX, registry=r)
        self.open_session = Gauge(
            "open_session_latency", "Last cycle: snapshot and session set-up.", unit=ms, namespace=PREFIX, registry=r
        )
        self.close_session = Gauge(
            "close_session_latency", "Last cycle: applying decisions.", unit=ms, namespace=PREFIX, registry=r
        )
        self.action = Gauge(
            "action_scheduling_latency", "Last cycle, per action.", ["action"], unit=ms, namespace=PREFIX, registry=r
        )
        self.bind_latency = Histogram(
            "task_bind_latency", "One bind call.", unit=ms, namespace=PREFIX, registry=r, buckets=_BUCKETS_MS
        )
        self.scheduled = Counter(
            "podgroups_scheduled_by_action", "Pods bound, by action.", ["action"], namespace=PREFIX, registry=r
        )
        self.evicted = Counter(
            "pod_group_evicted_pods",
            "Pods evicted.",
            ["podgroup", "uid", "nodepool", "action"],
            namespace=PREFIX,
            registry=r,
        )
        self.fair_share_gpu = Gauge(
            "queue_fair_share_gpu", "Fair share, GPUs.", _QUEUE_LABELS, namespace=PREFIX, registry=r
        )
        self.fair_share_cpu = Gauge(
            "queue_fair_share_cpu_cores", "Fair share, CPU cores.", _QUEUE_LABELS, namespace=PREFIX, registry=r
        )
        self.fair_share_mem = Gauge(
            "queue_fair_share_memory_gb", "Fair share, memory GB.", _QUEUE_LABELS, namespace=PREFIX, registry=r
        )
        self.gpu_usage = Gauge("queue_gpu_usage", "Allocated GPUs.", _QUEUE_LABELS, namespace=PREFIX, registry=r)
        self.cpu_usage = Gauge("queue_cpu_usage", "Allocated CPU cores.", _QUEUE_LABELS, namespace=PREFIX, registry=r)
        self.mem_usage = Gauge(
            "queue_memory_usage", "Allocated memory GB.", _QUEUE_LABELS, namespace=PREFIX, registry=r
        )
        self.allocated_gpus = Gauge(
            "queue_allocated_gpus", "Allocated GPUs.", ["queue_name"], namespace=PREFIX, registry=r
        )
        self.deserved_gpus = Gauge(
            "queue_deserved_gpus", "Queue GPU quota.", ["queue_name"], namespace=PREFIX, registry=r
        )
        # Time-based fair share (kai.k8s._usage): what Prometheus records and kai asks back for, under the
        # names KAI's usage client queries by default; the capacity of the shard's node pool is kai's own.
        self.allocated_cpu = Gauge(
            "queue_allocated_cpu_cores", "Allocated CPU cores.", ["queue_name"], namespace=PREFIX, registry=r
        )
        self.allocated_memory = Gauge(
            "queue_allocated_memory_bytes", "Allocated memory bytes.", ["queue_name"], namespace=PREFIX, registry=r
        )
        self.capacity = Gauge(
            "nodepool_capacity",
            "Allocatable of the node pool's schedulable nodes (GPUs, CPU cores, memory bytes).",
            ["nodepool", "resource"],
            namespace=PREFIX,
            registry=r,
        )
        self.usage_errors = Counter(
            "usage_fetch_errors", "Failed queries for historical usage.", namespace=PREFIX, registry=r
        )
        self.usage_fetched = Gauge(
            "usage_last_fetch_timestamp_seconds", "When historical usage was last read.", namespace=PREFIX, registry=r
        )
        self.queue_usage = Gauge(
            "queue_historical_usage",
            "Normalized historical usage the fair share uses (0: none, 1: the whole pool over the window).",
            ["queue_name", "resource"],
            namespace=PREFIX,
            registry=r,
        )
        # kai's own
        self.cycles = Counter("scheduler_cycles", "Cycles run.", namespace=PREFIX, registry=r)
        self.binds = Counter("binds", "Bind calls by result.", ["result"], namespace=PREFIX, registry=r)
        self.api_errors = Counter("api_errors", "Failed API calls by operation.", ["op"], namespace=PREFIX, registry=r)
        self.events_dropped = Counter(
            "events_dropped", "Events not written (queue full or refused).", namespace=PREFIX, registry=r
        )
        self.relists = Counter("informer_relists", "Re-lists after 410 Gone.", ["kind"], namespace=PREFIX, registry=r)
        self.leader = Gauge("is_leader", "1 while this replica holds the lease.", namespace=PREFIX, registry=r)
        self.task_failures = Counter(
            "task_failures", "Background tasks that failed and were restarted.", ["task"], namespace=PREFIX, registry=r
        )
        self.status_deferred = Counter(
            "status_writes_deferred",
            "Status writes left for a later cycle by the rate limit.",
            namespace=PREFIX,
            registry=r,
        )
        self.fenced = Counter(
            "writes_fenced", "Writes not sent because the Lease was not held.", namespace=PREFIX, registry=r
        )
        self.cycle_age = Gauge(
            "seconds_since_last_cycle", "Seconds since the last cycle completed.", namespace=PREFIX, registry=r
        )
        self.job_errors = Counter(  # labelled by action only: bounded, whatever the number of jobs
            "cycle_job_errors",
            "Jobs left out of a cycle because scheduling them raised (each costs only itself).",
            ["action"],
            namespace=PREFIX,
            registry=r,
        )
        self.admission_latency = Histogram(
            "admission_latency",
            "One admission webhook request, read to answer written.",
            unit=ms,
            namespace=PREFIX,
            registry=r,
            buckets=(0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0),
        )
        self.admission_requests = Counter(
            "admission_requests", "Admission webhook requests.", ["webhook", "allowed"], namespace=PREFIX, registry=r
        )
        self.reservations = Counter(
            "gpu_reservations", "GPU reservation pod changes.", ["op"], namespace=PREFIX, registry=r
        )
        self._evicted_series: OrderedDict[str, list[tuple[str, ...]]] = OrderedDict()  # PodGroup uid → label sets
        self._queues: dict[str, tuple[str, str, str]] = {}  # queue → its labels now

    def count_eviction(self, podgroup: str, uid: str, nodepool: str, action: str) -> None:
        """One pod evicted. The series lives while its PodGroup does (``forget_podgroup``), and at most
        MAX_EVICTED_PODGROUPS PodGroups keep one: the oldest goes first."""
        labels = (podgroup, uid, nodepool, action)
        self.evicted.labels(*labels).inc()
        key = uid or podgroup
        seen = self._evicted_series.setdefault(key, [])
        if labels not in seen:
            seen.append(labels)
        self._evicted_series.move_to_end(key)
        while len(self._evicted_series) > MAX_EVICTED_PODGROUPS:
            _, old = self._evicted_series.popitem(last=False)
            self._remove(self.evicted, old)

    def forget_podgroup(self, uid: str) -> None:
        """The PodGroup is gone: its eviction series go too (a counter that reappears starts from 0)."""
        self._remove(self.evicted, self._evicted_series.pop(uid, []))

    @staticmethod
    def _remove(metric: Counter | Gauge, series: list[tuple[str, ...]]) -> None:
        for labels in series:
            with contextlib.suppress(KeyError):
                metric.remove(*labels)

    def record_cycle(self, result: CycleResult, *, e2e_s: float, snapshot_s: float, apply_s: float) -> None:
        self.cycles.inc()
        for error in result.job_errors:
            self.job_errors.labels(error.action).inc()
        for action, _ in result.action_errors:
            self.job_errors.labels(action).inc()
        self.e2e.set(e2e_s * 1000)
        self.open_session.set((snapshot_s + result.stats.get("open_session_s", 0.0)) * 1000)
        self.close_session.set(apply_s * 1000)
        for k, v in result.stats.items():
            if k.startswith("action_") and k.endswith("_s"):
                self.action.labels(k[len("action_") : -2]).set(v * 1000)
        # KAI's labels: name, metadata name, display name. A deleted (or renamed) queue's series go with it.
        now = {q.name: (q.name, q.name, q.display_name or q.name) for q in result.queues}
        for gone, labels in self._queues.items():
            if now.get(gone) == labels:
                continue
            for m in (self.fair_share_gpu, self.fair_share_cpu, self.fair_share_mem, self.gpu_usage, self.cpu_usage):
                self._remove(m, [labels])
            self._remove(self.mem_usage, [labels])
            if gone not in now:
                for m in (self.allocated_gpus, self.deserved_gpus):
                    self._remove(m, [(gone,)])
        self._queues = now
        for q in result.queues:
            labels = now[q.name]
            self.fair_share_gpu.labels(*labels).set(max(q.fair_share["gpu"], 0))
            self.fair_share_cpu.labels(*labels).set(q.fair_share["cpu"] / 1000)
            self.fair_share_mem.labels(*labels).set(q.fair_share["memory"] / 1e9)
            self.gpu_usage.labels(*labels).set(q.allocated["gpu"])
            self.cpu_usage.labels(*labels).set(q.allocated["cpu"] / 1000)
            self.mem_usage.labels(*labels).set(q.allocated["memory"] / 1e9)
            self.allocated_gpus.labels(q.name).set(q.allocated["gpu"])
            self.allocated_cpu.labels(q.name).set(q.allocated["cpu"] / 1000)
            self.allocated_memory.labels(q.name).set(q.allocated["memory"])
            self.deserved_gpus.labels(q.name).set(q.deserved["gpu"])

    def record_capacity(self, pool: str, total: Sequence[float]) -> None:
        """The pool's capacity, *total* as a Snapshot's (milli-GPUs, millicores, bytes)."""
        for resource, value in zip(("gpu", "cpu", "memory"), (total[0] / 1000, total[1] / 1000, total[2])):
            self.capacity.labels(pool, resource).set(value)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


Probe = Callable[[], tuple[bool, str]]


async def serve_http(host: str, port: int, metrics: Metrics, *, healthz: Probe, readyz: Probe) -> asyncio.Server:
    """A minimal HTTP/1.1 server for the three endpoints (one request per connection)."""

    async def route(method: str, path: str) -> Answer:
        if path == "/metrics":
            return 200, CONTENT_TYPE_LATEST, metrics.exposition(), {}
        if path in ("/healthz", "/readyz"):
            ok, text = (healthz if path == "/healthz" else readyz)()
            return (200 if ok else 503), "text/plain; charset=utf-8", text.encode(), {}
        return 404, "text/plain; charset=utf-8", b"not found", {}

    return await serve(host, port, route)
