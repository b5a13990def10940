"""Kubernetes events (``events.k8s.io/v1``) with the engine's reasons, written in the background.

Rules, as client-go's event broadcaster: recording never blocks scheduling. Events go into a bounded
queue that a few workers drain; when the queue is full, the event is dropped and counted. An event the
API server refuses, or that cannot even be encoded, is dropped and counted; the worker goes on. Events
are written through the fenced writer like every other write (``kai.k8s._fence``): a replica that lost
the Lease drops what it still had queued instead of writing it. An event
identical to one written less than ``dedup_s`` ago (same object, type, reason and message) is not
written again, so a job that stays pending does not add an event every cycle; the keys older than
``dedup_s`` are dropped each time the memory has doubled since it was last pruned (at least
``PRUNE_FLOOR`` keys), so it holds about twice the keys of the last ``dedup_s``, at an amortized constant
cost per event, and RSS levels off under churn (benchmarks/soak.py). ``kubectl describe``
shows them: the API server stores ``regarding`` as the core event's ``involvedObject``.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import os
import time
from collections.abc import Callable
from typing import Any

from kai.k8s._api import Api, ApiError
from kai.k8s._fence import Fenced
from kai.k8s._metrics import Metrics
from kai.k8s._supervisor import Supervisor
from kai.scheduler.decisions import Event

log = logging.getLogger("kai.k8s.events")

REPORTING_CONTROLLER = "kai.scheduler/scheduler"
NOTE_LIMIT = 1024  # events.k8s.io/v1 rejects a longer note
PRUNE_FLOOR = 1_000  # the dedup memory is never pruned below this many keys
ACTIONS = {  # reason → the event's action (what kai was doing)
    "Scheduled": "Binding",
    "FailedBinding": "Binding",
    "Evict": "Evicting",
    "EvictionRefused": "Evicting",
    "PodGrouperWarning": "Grouping",
    "UnknownOwnerKind": "Grouping",
    "InvalidObject": "Reading",
    "GpuReservationMissing": "Binding",
}

# "Kind/ns/name" or "Kind/name" → the regarding object reference (apiVersion, kind, namespace, name, uid),
# or None when the object is unknown (the event is then dropped).
Resolver = Callable[[str], dict[str, str] | None]


def _micro_time(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_body(e: Event, regarding: dict[str, str], instance: str, now: float) -> dict[str, Any]:
    """The events.k8s.io/v1 Event for *e* about *regarding*."""
    ns = regarding.get("namespace") or "default"
    note = e.message if len(e.message) <= NOTE_LIMIT else e.message[: NOTE_LIMIT - 3] + "..."
    name = f"{regarding['name']}.{int(now * 1e9):x}{os.urandom(2).hex()}"
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name[:253], "namespace": ns},
        "eventTime": _micro_time(now),
        "reportingController": REPORTING_CONTROLLER,
        "reportingInstance": instance[:128],
        "action": ACTIONS.get(e.reason, "Scheduling"),
        "reason": e.reason[:128],
        "note": note,
        "type": e.type if e.type in ("Normal", "Warning") else "Normal",
        "regarding": regarding,
    }


def core_event_body(e: Event, regarding: dict[str, str], instance: str, now: float) -> dict[str, Any]:
    """The core/v1 Event for *e* about a cluster-scoped object (a Queue): events.k8s.io/v1 requires the
    event's namespace to equal the object's, which a cluster-scoped object does not have; core/v1 files
    such events in ``default``, where ``kubectl describe`` looks for them."""
    body = event_body(e, regarding, instance, now)
    stamp = _dt.datetime.fromtimestamp(now, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": body["metadata"],
        "involvedObject": regarding,
        "reason": body["reason"],
        "message": body["note"],
        "type": body["type"],
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": REPORTING_CONTROLLER},
        "reportingComponent": REPORTING_CONTROLLER,
        "reportingInstance": body["reportingInstance"],
        "action": body["action"],
    }


class EventRecorder:
    """Queue events and write them with ``workers`` concurrent requests."""

    def __init__(
        self,
        api: Api,
        resolve: Resolver,
        metrics: Metrics,
        *,
        instance: str,
        workers: int = 4,
        queue_size: int = 10_000,
        dedup_s: float = 600.0,
    ) -> None:
        self.api = api
        self.resolve = resolve
        self.metrics = metrics
        self.instance = instance
        self.dedup_s = dedup_s
        self._queue: asyncio.Queue[tuple[Event, dict[str, str]]] = asyncio.Queue(queue_size)
        self._recent: dict[tuple[str, str, str, str], float] = {}
        self._prune_at = PRUNE_FLOOR  # the size of _recent at which its keys older than dedup_s go
        self._n_workers = workers
        self._workers: list[asyncio.Task[None]] = []
        self.written = 0

    def start(self, supervisor: Supervisor, api: Any = None) -> None:
        """Start writing, through *api* (the fenced writer; the recorder's own Api if None), with
        workers the *supervisor* restarts should one fail. Until then events only queue up: a standby
        replica records what it sees while its informers sync, and writes it once it leads."""
        if api is not None:
            self.api = api
        if not self._workers:
            entries = [supervisor.start("events", self._work) for _ in range(self._n_workers)]
            self._workers = [e.task for e in entries if e.task is not None]

    def _prune(self, now: float) -> None:
        """Drop the keys older than dedup_s once the memory has doubled since the last pruning (module
        docstring): before, it was pruned only past 50,000 keys, which under churn took half an hour to
        reach (about one key per pod) while RSS grew with it."""
        if len(self._recent) >= self._prune_at:
            self._recent = {k: t for k, t in self._recent.items() if now - t < self.dedup_s}
            self._prune_at = max(PRUNE_FLOOR, 2 * len(self._recent))

    def record(self, events: list[Event]) -> None:
        now = time.monotonic()
        self._prune(now)
        for e in events:
            key = (e.object, e.type, e.reason, e.message)
            last = self._recent.get(key)
            if last is not None and now - last < self.dedup_s:
                continue
            regarding = self.resolve(e.object)
            if regarding is None:
                continue
            try:
                self._queue.put_nowait((e, regarding))
                self._recent[key] = now
            except asyncio.QueueFull:
                self.metrics.events_dropped.inc()

    def record_about(self, e: Event, regarding: dict[str, str]) -> None:
        """Record *e* about an object the resolver cannot find (one kept out of the Store)."""
        key = (e.object, e.type, e.reason, e.message)
        now = time.monotonic()
        self._prune(now)
        last = self._recent.get(key)
        if last is not None and now - last < self.dedup_s:
            return
        try:
            self._queue.put_nowait((e, regarding))
            self._recent[key] = now
        except asyncio.QueueFull:
            self.metrics.events_dropped.inc()

    async def flush(self) -> None:
        """Wait until every queued event is written (tests, shutdown); nothing to wait for before start()."""
        if self._workers:
            await self._queue.join()

    async def close(self) -> None:
        for w in self._workers:
            w.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            e, regarding = await self._queue.get()
            try:
                if regarding.get("namespace"):
                    body = event_body(e, regarding, self.instance, time.time())
                    path = f"/apis/events.k8s.io/v1/namespaces/{body['metadata']['namespace']}/events"
                else:
                    body = core_event_body(e, regarding, self.instance, time.time())
                    path = "/api/v1/namespaces/default/events"
                await self.api.request("POST", path, body=body)
                self.written += 1
            except Fenced:
                self.metrics.fenced.inc()
                self.metrics.events_dropped.inc()
            except (TypeError, ValueError, KeyError, RecursionError, UnicodeError) as err:  # cannot be sent at all
                self.metrics.events_dropped.inc()
                log.warning("event not encodable: %s %s: %r", e.object, e.reason, err)
            except ApiError as err:
                self.metrics.events_dropped.inc()
                log.warning(
                    "event not written: %s %s: %s",
                    e.object,
                    e.reason,
                    err,
                    extra={"object": e.object, "reason": e.reason, "error": str(err)},
                )
            finally:
                self._queue.task_done()
