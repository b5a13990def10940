"""Status writes after a cycle: pod conditions, nominations, PodGroup and Queue status.

Rules:

* **Only meaningful changes are sent.** Each write is compared with what the watch last showed (or
  what kai wrote last, while the watch has not shown it yet). A condition whose status, reason or
  wording changed is written at once; one whose message changed only in its numbers ("3 nodes have
  2 free GPUs" → "3 nodes have 1 free GPU", singular and plural alike) is refreshed at most once
  every ``refresh_s`` per object, so a cluster with thousands of pending pods is not re-patched every
  cycle as other pods come and go.
* **Rate-limited.** Writes take tokens from a bucket (``qps``, ``burst``); what finds the bucket empty
  is left for a later cycle, which compares again (nothing is queued, so nothing goes stale). Order of
  precedence: nominations (a preemptor holding its room), Queue status, PodGroup conditions, pod
  conditions. The stale-gang timestamp annotation is never deferred: stale gang eviction times the
  grace period from it.
* Status goes through the status subresource; a 404 (the object went meanwhile) is not an error.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import time
from collections.abc import Awaitable, Callable, Collection
from typing import Any, NamedTuple

from kai.api import constants as C
from kai.api.objects import Pod, format_time
from kai.k8s._api import ApiError
from kai.k8s._decode import pod_scheduled_condition
from kai.k8s._informer import Informer
from kai.k8s._metrics import Metrics
from kai.scheduler.decisions import CycleResult, PodGroupStatus, QueueStatus
from kai.store import Key, Store

log = logging.getLogger("kai.k8s.status")

STRATEGIC = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"
REFRESH_S = 60.0
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_AGREEMENT = {"has": "have", "is": "are", "was": "were", "does": "do"}  # verbs that follow a count


Which = tuple[str, Key]  # ("pod" | "podgroup", object): whose conditions
Conds = list[tuple[str, ...]]  # (type, status, reason, message) per condition
Send = Callable[[], Awaitable[None]]  # makes one write's call when it is its turn to go out


class Write(NamedTuple):
    """One status write: *why* is "always" (never deferred), "change" (of meaning) or "refresh" (a
    numbers-only change); a write of conditions says whose (*which*) and what they become (*want*)."""

    why: str
    path: str
    body: Any
    content_type: str
    op: str
    which: Which | None = None
    want: Conds | None = None


def wording(message: str) -> str:
    """A message with its numbers blanked and singular and plural made one ("1 node has 1 free GPU" and
    "2 nodes have 3 free GPUs" read alike): two messages with the same wording say the same thing."""
    words = _NUMBER.sub("#", message).split()
    return " ".join(_AGREEMENT.get(w, w[:-1] if len(w) > 3 and w.endswith("s") else w) for w in words)


class TokenBucket:
    """``rate`` tokens a second, at most ``burst`` saved up."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate = rate
        self.burst = burst
        self._tokens = burst
        self._at = time.monotonic()

    def take(self) -> bool:
        now = time.monotonic()
        self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1:
            self._tokens -= 1
            return True
        return False


def _waiting(pod: Pod) -> bool:
    """One of kai's pods, not bound, that names a PodGroup: its PodGroup's conditions are written on it."""
    return (
        pod.scheduler_name == C.SCHEDULER_NAME
        and not pod.node_name
        and bool(pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME))
    )


class StatusWriter:
    """Decides which status writes a cycle needs, and makes them (module docstring)."""

    def __init__(
        self,
        store: Store,
        pods: Informer,
        podgroups: Informer,
        queues: Informer,
        metrics: Metrics,
        *,
        qps: float = 100.0,
        burst: float = 500.0,
        refresh_s: float = REFRESH_S,
    ) -> None:
        self.store = store
        self.pods = pods
        self.podgroups = podgroups
        self.queues = queues
        self.metrics = metrics
        self.bucket = TokenBucket(qps, burst)
        self.refresh_s = refresh_s
        self._sent: dict[Which, tuple[Conds, float]] = {}  # the conditions last written, and when
        # the pods that name a nominated node, kept by the Store as they change (few: a walk of every pod each
        # cycle to find them cost as much as the rest of the status writes in a stream of pods)
        self._nominated = store.index("Pod", lambda pod: bool(pod.nominated_node_name))
        self._waiting = store.index("Pod", _waiting)  # kai's unbound pods that name a PodGroup (the same reason)
        self.api: Any = None  # the cycle's writer, set by writes()

    def writes(
        self, result: CycleResult, bound: set[Key], api: Any, quiet: Collection[Key] = ()
    ) -> tuple[list[Send], list[Send]]:
        """The writes *result* calls for, in order of precedence, within the rate limit: those the next cycle
        reads back (nominations and the stale-gang timestamp: the engine decides from them), and the rest
        (conditions and Queue status: they only report). The conditions of the PodGroups in *quiet* (broken
        gangs, some of whose pods are held back from the cycle) and of their pods are left as they are: the
        cycle saw only part of them.

        Each write is returned as a function that makes its call, not as the call's coroutine: a coroutine made
        and never run (the writes abandoned at shutdown) is reported "never awaited" when collected."""
        self.api = api
        now = time.monotonic()
        self._forget_old(now)
        read: list[Send] = []
        out: list[Send] = []
        deferred = 0
        statuses = result.podgroups
        if quiet:
            statuses = [st._replace(conditions=()) if (st.namespace, st.name) in quiet else st for st in statuses]
            result = dataclasses.replace(result, podgroups=statuses)
        for w in self._wanted(result, bound, now, quiet):
            if w.why == "always" or self.bucket.take():
                (read if w.why == "always" or w.op == "nominate" else out).append(self._patch(w, now))
            else:
                deferred += 1
        if deferred:
            self.metrics.status_deferred.inc(deferred)
        return read, out

    def _forget_old(self, now: float) -> None:
        if len(self._sent) > 10_000:
            self._sent = {k: v for k, v in self._sent.items() if now - v[1] < self.refresh_s}

    def _wanted(self, result: CycleResult, bound: set[Key], now: float, quiet: Collection[Key]) -> list[Write]:
        """Every write *result* calls for, in order of precedence."""
        out: list[Write] = []
        out += self._nominations(result)
        out += self._queues(result.queues)
        pg_writes, pod_writes = self._podgroups(result.podgroups, bound, now, quiet)
        return out + pg_writes + pod_writes

    # ---- the writes ----------------------------------------------------------------------------

    def _patch(self, w: Write, now: float) -> Send:
        """The write; once it succeeded, its conditions count as what the object says (``_compare``). It goes out
        through the writer of the cycle that made it (fenced to that cycle's Lease term), whenever it is sent."""
        api = self.api

        async def call() -> None:
            try:
                await api.request("PATCH", w.path, body=w.body, content_type=w.content_type)
            except ApiError as e:
                if e.code != 404:
                    self.metrics.api_errors.labels(w.op).inc()
                    log.info("status write failed", extra={"path": w.path, "error": str(e)})
                return
            if w.which is not None and w.want is not None:
                self._sent[w.which] = (w.want, now)

        return call

    def _nominations(self, result: CycleResult) -> list[Write]:
        """status.nominatedNodeName as the cycle wants it: the node of each pod pipelined there by an eviction,
        none on any other of kai's pending pods (only pods held, or holding a node now, can differ)."""
        held = {(p.pod.namespace, p.pod.name): p.node for p in result.pipelines if p.nominated}
        out = []
        keys = list(held) + [key for key in self._nominated if key not in held]
        for key in keys:
            pod = self.store.get("Pod", key)
            if pod is None or pod.scheduler_name != C.SCHEDULER_NAME or pod.node_name:
                continue
            want = held.get(key, "")
            if pod.nominated_node_name != want:
                path = f"/api/v1/namespaces/{key[0]}/pods/{key[1]}/status"
                body = {"status": {"nominatedNodeName": want or None}}
                out.append(Write("change", path, body, STRATEGIC, "nominate"))
        return out

    def _queues(self, queues: list[QueueStatus]) -> list[Write]:
        out = []
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
            out.append(Write("change", path, {"status": new}, MERGE, "queue"))
        return out

    def _podgroups(
        self, statuses: list[PodGroupStatus], bound: set[Key], now: float, quiet: Collection[Key]
    ) -> tuple[list[Write], list[Write]]:
        stamp = format_time(time.time())
        pg_out: list[Write] = []
        pod_out: list[Write] = []
        members: dict[Key, list[Pod]] = {}
        for pod in self._waiting.values():
            pg = pod.meta.annotations[C.ANNOTATION_POD_GROUP_NAME]
            members.setdefault((pod.meta.namespace or "", pg), []).append(pod)
        pg_statuses = self.podgroups.statuses
        for st in statuses:
            key = (st.namespace, st.name)
            old = (pg_statuses.get(key) or {}).get("schedulingConditions") or []
            if not st.conditions and not old and not st.stale_changed:
                continue  # most jobs of a busy cluster, every cycle: nothing to say, nothing said (no write below)
            pg = self.store.get("PodGroup", key)
            if pg is None:
                continue
            path = f"/apis/{C.PODGROUP_API_VERSION}/namespaces/{st.namespace}/podgroups/{st.name}"
            new = [
                {
                    "type": c.type,
                    "nodePool": pg.meta.labels.get(C.LABEL_NODE_POOL, "default"),
                    "reason": c.reason,
                    "message": c.message,
                    "status": c.status,
                    "transitionID": "0",
                    "lastTransitionTime": stamp,
                }
                for c in st.conditions
            ]
            want = _conditions_key(new)
            why = None if key in quiet else self._compare(_conditions_key(old), want, ("podgroup", key), now)
            if why is not None:
                body = {"status": {"schedulingConditions": new}}
                pg_out.append(Write(why, f"{path}/status", body, MERGE, "podgroup", ("podgroup", key), want))
            if st.stale_changed:
                value = None if st.stale_since is None else format_time(st.stale_since)
                if pg.meta.annotations.get(C.ANNOTATION_STALE_TIMESTAMP) != value:
                    body = {"metadata": {"annotations": {C.ANNOTATION_STALE_TIMESTAMP: value}}}
                    pg_out.append(Write("always", path, body, MERGE, "podgroup"))
            if pg.mark_unschedulable:
                cond = next((c for c in st.conditions if c.status == "True"), None)
                if cond is None:
                    continue
                for pod in members.get(key, ()):
                    pkey = (pod.meta.namespace or "", pod.meta.name)
                    if pkey in bound:
                        continue
                    want = [("PodScheduled", "False", "Unschedulable", cond.message)]
                    have = pod_scheduled_condition(self.pods.statuses.get(pkey))
                    why = self._compare([("PodScheduled", *have)] if have else [], want, ("pod", pkey), now)
                    if why is None:
                        continue
                    body = {
                        "status": {
                            "conditions": [
                                {
                                    "type": "PodScheduled",
                                    "status": "False",
                                    "reason": "Unschedulable",
                                    "message": cond.message,
                                    "lastTransitionTime": stamp,
                                }
                            ]
                        }
                    }
                    path_p = f"/api/v1/namespaces/{pkey[0]}/pods/{pkey[1]}/status"
                    pod_out.append(Write(why, path_p, body, STRATEGIC, "pod-condition", ("pod", pkey), want))
        return pg_out, pod_out

    def _compare(self, have: Conds, want: Conds, which: Which, now: float) -> str | None:
        """None when nothing needs writing; "change" for a change of meaning; "refresh" for a
        numbers-only change of *which*'s message whose refresh is due. What kai wrote last counts as
        what the object says until the watch shows something else (it may simply lag behind)."""
        sent = self._sent.get(which)
        base = have
        if sent is not None and now - sent[1] < self.refresh_s:
            base = sent[0]
        if have == want or base == want:
            return None
        if [(*c[:-1], wording(c[-1])) for c in base] != [(*c[:-1], wording(c[-1])) for c in want]:
            return "change"
        if sent is None or now - sent[1] >= self.refresh_s:
            return "refresh"
        return None


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


def _conditions_key(conds: list[dict[str, Any]]) -> list[tuple[str, ...]]:
    return [(c.get("type", ""), c.get("status", ""), c.get("reason", ""), c.get("message", "")) for c in conds]
