"""Time-based fair share on a cluster: each queue's historical usage, read from Prometheus.

Theory of operation (KAI's ``usagedb``: a Prometheus client and a lister that caches its answer):

* kai exports what each queue holds after every cycle (``kai_queue_allocated_gpus``,
  ``kai_queue_allocated_cpu_cores``, ``kai_queue_allocated_memory_bytes``, KAI's default metric names)
  and its node pool's capacity (``kai_nodepool_capacity{nodepool,resource}``). Prometheus scrapes them and
  keeps the history, so a restarted kai knows the past at once.
* ``UsageFetcher.run`` asks Prometheus every ``fetchInterval`` with KAI's query shape, a subquery over the
  shard's window at ``queryResolution`` steps, decayed by ``0.5^((now - time()) / halfLife)``:
  ``sum_over_time((alloc * decay)[window:resolution])``. It divides by what the pool could have given
  over the whole window, ``avg_over_time(capacity[window:resolution]) * window / resolution``: the
  arithmetic of ``kai.scheduler.usage.UsageLedger``, which ``kai sim`` runs on its simulated clock, so a
  cluster and the simulator give a queue the same usage for the same history (KAI divides by the
  decayed capacity of the covered samples instead; docs/differences.md).
* The scheduling cycle reads ``current()``: a cached value, never I/O. Usage older than
  ``stalenessPeriod`` is not used; a Prometheus that is down costs only fairness: a warning when it starts
  failing, ``kai_usage_fetch_errors_total``, and the last good value until it is stale, then none (the
  over-quota split by weights alone), never a cycle.
* Before its first cycle the scheduler waits up to ``waitTimeout`` for a first answer (KAI's
  ``WaitForCacheSync``), so a restart does not schedule one cycle blind.

The query text and the arithmetic are pure functions (``usage_queries``, ``normalize``), tested without a
network; the fetcher only does the HTTP around them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode, urlsplit

from kai.api.duration import parse_duration
from kai.api.objects import SchedulingShard
from kai.k8s._fasthttp import FastHttp, HttpError
from kai.k8s._metrics import Metrics
from kai.store import Store

if TYPE_CHECKING:  # the engine's module (NumPy) stays off the start-up path
    from kai.scheduler.usage import Vector

log = logging.getLogger("kai.k8s.usage")

RESOURCES = ("gpu", "cpu", "memory")
ALLOCATION_METRICS = {  # KAI's defaults, and the extraParams keys that replace them
    "gpu": ("gpuAllocationMetric", "kai_queue_allocated_gpus"),
    "cpu": ("cpuAllocationMetric", "kai_queue_allocated_cpu_cores"),
    "memory": ("memoryAllocationMetric", "kai_queue_allocated_memory_bytes"),
}
CAPACITY_KEYS = {"gpu": "gpuCapacityMetric", "cpu": "cpuCapacityMetric", "memory": "memoryCapacityMetric"}
QUEUE_LABEL = "queue_name"


@dataclass(frozen=True, slots=True)
class UsageQuery:
    """Everything one fetch needs, from the shard (``usageDBConfig``) and the pool this process serves."""

    address: str
    window: float  # seconds
    half_life: float | None
    resolution: float  # seconds between the subquery's steps (extraParams.queryResolution, KAI's 1m)
    timeout: float  # seconds (extraParams.usageQueryTimeout, KAI's 10s)
    fetch_interval: float
    staleness_period: float
    wait_timeout: float
    allocation: Mapping[str, str]  # resource → PromQL of the per-queue allocation (label queue_name)
    capacity: Mapping[str, str]  # resource → PromQL of the pool's capacity (one series)


def usage_query_of(shard: SchedulingShard, pool: str, env: Mapping[str, str]) -> UsageQuery | str:
    """The query for *shard*, or why there is none (words for a warning)."""
    db = shard.usage_db
    if db is None or shard.usage_window is None:
        return "the SchedulingShard has no usageDBConfig"
    if db.client_type != "prometheus":
        return f"spec.usageDBConfig.clientType: {db.client_type!r} is not supported (kai reads Prometheus)"
    if db.connection_string and db.connection_string_env_var:
        return "spec.usageDBConfig: connectionString and connectionStringEnvVar are both set; set one"
    address = db.connection_string or env.get(db.connection_string_env_var, "")
    if not address:
        what = f"${db.connection_string_env_var} is empty" if db.connection_string_env_var else "no connectionString"
        return f"spec.usageDBConfig: {what}"
    extra = db.extra_params

    def seconds(key: str, default: float) -> float:
        try:  # KAI falls back to the default for a value it cannot parse; so does kai
            value = parse_duration(extra[key]) if key in extra else default
        except ValueError:
            return default
        return value if value > 0 else default

    capacity_default = 'max(kai_nodepool_capacity{{nodepool="{pool}",resource="{r}"}})'
    return UsageQuery(
        address=address.rstrip("/"),
        window=shard.usage_window,
        half_life=shard.usage_half_life,
        resolution=seconds("queryResolution", 60.0),
        timeout=seconds("usageQueryTimeout", 10.0),
        fetch_interval=db.fetch_interval,
        staleness_period=db.staleness_period,
        wait_timeout=db.wait_timeout,
        allocation={r: extra.get(key, default) for r, (key, default) in ALLOCATION_METRICS.items()},
        capacity={r: extra.get(CAPACITY_KEYS[r], capacity_default.format(pool=pool, r=r)) for r in RESOURCES},
    )


def _client(address: str) -> FastHttp:
    """A keep-alive client for Prometheus at *address* (http or https, no auth)."""
    url = urlsplit(address)
    https = url.scheme == "https"
    if url.hostname is None or url.scheme not in ("http", "https"):
        raise UsageError(f"{address!r} is not an http(s) URL")
    ctx = ssl.create_default_context() if https else None
    return FastHttp(url.hostname, url.port or (443 if https else 80), ctx, lambda _refresh: None, max_connections=2)


def _ms(seconds: float) -> str:
    return f"{max(1, round(seconds * 1000))}ms"


def usage_queries(q: UsageQuery, now: float) -> dict[str, tuple[str, str]]:
    """resource → (allocation query, capacity query), evaluated at *now* (unix seconds)."""
    span = f"[{_ms(q.window)}:{_ms(q.resolution)}]"
    out = {}
    for r in RESOURCES:
        alloc = q.allocation[r]
        if q.half_life is not None:  # KAI's getExponentialDecayQuery
            alloc = f"(({alloc}) * (0.5^(({now:.3f} - time()) / {q.half_life:g})))"
        # summed by queue: a queue's series from two scheduler replicas (a fail-over) are one history
        used = f"sum by ({QUEUE_LABEL}) (sum_over_time(({alloc}){span}))"
        capacity = f"avg_over_time(({q.capacity[r]}){span})"
        out[r] = (used, capacity)
    return out


def normalize(
    used: Mapping[str, Mapping[str, float]], capacity: Mapping[str, float], q: UsageQuery
) -> dict[str, Vector]:
    """Per queue, its usage over what the pool could have given in the window (``UsageLedger``'s rule):
    *used*[resource][queue] is a sum of samples, *capacity*[resource] their pool's mean capacity."""
    steps = q.window / q.resolution
    out: dict[str, list[float]] = {}
    for i, r in enumerate(RESOURCES):
        scale = capacity.get(r, 0.0) * steps
        for queue, value in used.get(r, {}).items():
            acc = out.setdefault(queue, [0.0, 0.0, 0.0])
            acc[i] = value / scale if scale > 0 else 0.0
    return {name: (v[0], v[1], v[2]) for name, v in out.items()}


class UsageError(Exception):
    """Prometheus did not answer, or answered something that is not a vector."""


def _vector(doc: Any) -> list[tuple[dict[str, str], float]]:
    if not isinstance(doc, dict) or doc.get("status") != "success":
        raise UsageError(f"query failed: {str(doc)[:200]}")
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise UsageError(f"expected a vector, got {data.get('resultType')!r}")
    out = []
    for sample in data.get("result") or []:
        try:
            value = float(sample["value"][1])
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise UsageError(f"bad sample {str(sample)[:100]}") from e
        if value == value and abs(value) != float("inf"):  # NaN/inf (an empty pool's 0/0) count as nothing
            out.append((dict(sample.get("metric") or {}), value))
    return out


class UsageFetcher:
    """Keeps the shard's usage fresh in the background; ``current()`` is what a cycle uses."""

    def __init__(
        self,
        store: Store,
        shard: str,
        pool: str,
        metrics: Metrics,
        *,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.shard = shard
        self.pool = pool
        self.metrics = metrics
        self.env = os.environ if env is None else env
        self.clock = clock
        self.fetches = 0  # successful ones
        self._value: dict[str, Vector] | None = None
        self._fetched_at: float | None = None  # monotonic
        self._staleness = 0.0
        self._problem = ""  # the last reason for no usage, logged once per change
        self._first = asyncio.Event()  # a first answer, or no usage configured

    def current(self) -> dict[str, Vector] | None:
        """The last good usage while younger than the staleness period; None otherwise (no usage)."""
        if self._fetched_at is None or time.monotonic() - self._fetched_at > self._staleness:
            return None
        return self._value

    async def wait_first(self) -> None:
        """Wait for the first answer, at most the shard's waitTimeout (no wait without usageDBConfig)."""
        q = self._query()
        if isinstance(q, str):
            return
        try:
            async with asyncio.timeout(q.wait_timeout):
                await self._first.wait()
        except TimeoutError:
            log.warning("no historical usage yet; scheduling without it", extra={"waited_s": q.wait_timeout})

    async def run(self) -> None:
        """Fetch every fetchInterval for as long as the scheduler runs; never raises for Prometheus' sake."""
        clients: dict[str, FastHttp] = {}
        try:
            while True:
                q = self._query()
                if isinstance(q, str):
                    self._note(q, warn=self._fetched_at is not None)
                    self._value, self._fetched_at = None, None
                    self._first.set()
                    await asyncio.sleep(10.0)  # the shard may get a usageDBConfig later
                    continue
                try:
                    client = clients.get(q.address) or clients.setdefault(q.address, _client(q.address))
                    async with asyncio.timeout(q.timeout):
                        value = await self.fetch(client, q)
                except (UsageError, HttpError, OSError, TimeoutError) as e:
                    self.metrics.usage_errors.inc()
                    self._note(f"Prometheus at {q.address}: {type(e).__name__}: {e}", warn=True)
                else:
                    self._set(value, q)
                await asyncio.sleep(q.fetch_interval)
        finally:
            for c in clients.values():
                await c.close()

    async def fetch(self, client: FastHttp, q: UsageQuery) -> dict[str, Vector]:
        """One round of queries (three resources, usage and capacity); UsageError if any fails."""
        now = self.clock()
        used: dict[str, dict[str, float]] = {}
        capacity: dict[str, float] = {}
        for r, (used_q, capacity_q) in usage_queries(q, now).items():
            samples = await self._query_vector(client, q, used_q, now)
            used[r] = {m[QUEUE_LABEL]: v for m, v in samples if m.get(QUEUE_LABEL)}
            cap = await self._query_vector(client, q, capacity_q, now)
            if cap:
                capacity[r] = cap[0][1]
        return normalize(used, capacity, q)

    async def _query_vector(
        self, client: FastHttp, q: UsageQuery, promql: str, now: float
    ) -> list[tuple[dict[str, str], float]]:
        path = urlsplit(q.address).path.rstrip("/") + "/api/v1/query"
        body = urlencode({"query": promql, "time": f"{now:.3f}"}).encode()
        status, data = await client.request("POST", path, body, "application/x-www-form-urlencoded")
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise UsageError(f"HTTP {status}: {data[:200]!r}") from e
        return _vector(doc)

    def _query(self) -> UsageQuery | str:
        shard = self.store.get("SchedulingShard", ("", self.shard))
        if shard is None:
            return f"no SchedulingShard {self.shard!r}"
        return usage_query_of(shard, self.pool, self.env)

    def _set(self, value: dict[str, Vector], q: UsageQuery) -> None:
        self._value, self._fetched_at, self._staleness = value, time.monotonic(), q.staleness_period
        self.fetches += 1
        self.metrics.usage_fetched.set(self.clock())
        for name, vec in value.items():
            for r, v in zip(RESOURCES, vec):
                self.metrics.queue_usage.labels(name, r).set(v)
        if self._problem:
            log.info("historical usage read again", extra={"queues": len(value)})
            self._problem = ""
        self._first.set()

    def _note(self, problem: str, *, warn: bool) -> None:
        if problem != self._problem:
            (log.warning if warn else log.info)("no historical usage: %s", problem, extra={"reason": problem})
            self._problem = problem
