"""Leader election through a ``coordination.k8s.io/v1`` Lease, with client-go's rules and timings.

Theory of operation (client-go's leaderelection, LeaseLock):

* A candidate reads the Lease. It takes it when there is none (create), when it already holds it,
  or when the holder has not renewed it for ``lease_duration`` seconds *as observed locally*: the
  candidate notes the local monotonic time whenever the Lease's record changes, so clocks of
  different machines never matter. Taking and renewing are updates carrying the resourceVersion
  read, so two candidates cannot both win (the loser gets 409 and tries again).
* Candidates retry every ``retry_period``. The leader renews every ``retry_period`` too, and steps
  down when it could not renew within ``renew_deadline`` of sending its last successful renewal;
  ``run`` then returns and the process exits, as kube-scheduler does, so a replica that lost the
  lease never schedules again.
* Fencing (``kai.k8s._fence``): each successful take or renewal grants the Fence the Lease's term
  (``leaseTransitions``) until the send time of that request plus ``renew_deadline``; reading another
  holder, or passing that time without a renewal, closes the Fence at once, before ``hold`` returns.
* Anything unexpected while trying (a bug, an answer that is not a Lease) counts as a failed try: it
  is logged and tried again, and never ends the renewal loop early.
* Defaults: lease 15 s, renew deadline 10 s, retry 2 s (client-go's); flags shorten them for tests.
* A Lease namespace that does not exist is a set-up error, not a state to wait out: ``acquire``
  raises LeaseNamespaceMissing at the first attempt, and ``kai scheduler`` exits saying so
  (``kai install`` creates the namespace). Any other failure is retried.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import logging
import time
from dataclasses import dataclass
from typing import Any

from kai.k8s._api import Api, ApiError
from kai.k8s._fence import Fence

log = logging.getLogger("kai.k8s.leader")


class LeaseNamespaceMissing(RuntimeError):
    """The Lease's namespace does not exist, so no replica can ever lead; the message says what to do."""


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str = "kai-scheduler"
    name: str = "kai-scheduler"
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0


def _micro_time(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate. ``await acquire()`` returns once this identity holds the Lease; ``await hold()``
    renews it and returns when leadership is lost."""

    def __init__(self, api: Api, identity: str, config: LeaseConfig, fence: Fence | None = None) -> None:
        self.api = api
        self.identity = identity
        self.config = config
        self.fence = fence if fence is not None else Fence()
        self._observed: tuple[Any, ...] | None = None  # (holder, renewTime, transitions) last seen
        self._observed_at = 0.0  # local monotonic time of the last change of the record
        self._term = -1  # leaseTransitions of the Lease as this replica last wrote it
        self._led = False
        self._renew_until = 0.0  # monotonic: a renewal is not sent after this (the Fence's deadline)
        self._path = f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        self._namespace_missing = False  # the last create of the Lease was refused for that reason

    @property
    def is_leader(self) -> bool:
        """This replica holds the Lease now, with margin (its Fence is open)."""
        return self._led and self.fence.current() is not None

    async def acquire(self) -> None:
        """Return once this identity holds the Lease; LeaseNamespaceMissing if its namespace does not exist."""
        logged = False
        while True:
            sent = time.monotonic()
            if await self._attempt():
                self._led = True
                self.fence.grant(self._term, sent + self.config.renew_deadline_s)
                log.info("became leader", extra={"identity": self.identity, "lease": self._path, "term": self._term})
                return
            if self._namespace_missing:
                ns = self.config.namespace
                raise LeaseNamespaceMissing(
                    f'the leader-election Lease cannot be created: namespace "{ns}" does not exist. '
                    f"Create it (`kai install` does, or `kubectl create namespace {ns}`), "
                    "or name another with --leader-elect-namespace"
                )
            if not logged:
                log.info("waiting for the lease", extra={"identity": self.identity, "holder": self._holder()})
                logged = True
            await asyncio.sleep(self.config.retry_period_s)

    async def hold(self) -> None:
        """Renew every retry period; return (with the Fence closed) once leadership is lost: another
        holder read in the Lease, or no successful renewal sent within renew_deadline of the last."""
        valid_until = time.monotonic() + self.fence.remaining()  # as granted by acquire()
        while True:
            await asyncio.sleep(self.config.retry_period_s)
            sent = time.monotonic()
            left = valid_until - sent
            ok = False
            self._renew_until = valid_until
            if left > 0:
                # asyncio.timeout, not wait_for: Python 3.11's wait_for returns the result, dropping the
                # cancellation, when it is cancelled as the renewal completes; the loop then renewed for ever
                # and the scheduler's stop never ended (seen in CI under load)
                try:
                    async with asyncio.timeout(left):
                        ok = await self._attempt()
                except TimeoutError:
                    ok = False
            if ok:
                valid_until = sent + self.config.renew_deadline_s
                self.fence.grant(self._term, valid_until)
                continue
            holder = self._holder()
            if (holder and holder != self.identity) or time.monotonic() >= valid_until:
                self.fence.revoke()
                self._led = False
                log.error("lost the lease", extra={"identity": self.identity, "holder": holder})
                return

    async def _attempt(self) -> bool:
        """One try; anything unexpected is a failed try (logged), never the end of the loop. Reading
        another holder while leading closes the Fence at once."""
        try:
            ok = await self._try()
        except (ApiError, TimeoutError):
            ok = False
        except Exception:
            log.exception("lease try failed", extra={"identity": self.identity})
            ok = False
        holder = self._holder()
        if not ok and self._led and holder and holder != self.identity:
            self.fence.revoke()
        return ok

    async def release(self) -> None:
        """Give the lease up at a clean shutdown, so another replica need not wait for it to expire.
        The Fence closes first: nothing is written after the Lease is given up."""
        if not self.is_leader:
            return
        self.fence.revoke()
        try:
            lease = await self.api.request("GET", self._path)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") == self.identity:
                spec["holderIdentity"] = ""
                spec["leaseDurationSeconds"] = 1
                await self.api.request("PUT", self._path, body=lease)
        except ApiError as e:
            log.info("lease not released", extra={"error": str(e)})
        self._led = False

    def _holder(self) -> str:
        return str(self._observed[0]) if self._observed else ""

    async def _try(self) -> bool:
        now = time.time()
        spec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.config.lease_duration_s)),
            "acquireTime": _micro_time(now),
            "renewTime": _micro_time(now),
            "leaseTransitions": 0,
        }
        try:
            lease = await self.api.request("GET", self._path)
        except ApiError as e:
            if e.code != 404:
                log.warning("lease read failed", extra={"error": str(e)})
                return False
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.config.name, "namespace": self.config.namespace},
                "spec": spec,
            }
            try:
                await self.api.request(
                    "POST", f"/apis/coordination.k8s.io/v1/namespaces/{self.config.namespace}/leases", body=body
                )
            except ApiError as e2:
                # A create into a collection is 404 only when its namespace is missing.
                self._namespace_missing = e2.code == 404
                if e2.code == 409:
                    log.info("lease create lost", extra={"error": str(e2)})
                else:  # e.g. the namespace does not exist, or RBAC refuses: say so, keep trying
                    log.warning("cannot create the lease %s: %s", self._path, e2, extra={"error": str(e2)})
                return False
            self._observe((self.identity, spec["renewTime"], 0))
            self._term = 0
            return True
        old = lease.get("spec") or {}
        record = (old.get("holderIdentity") or "", old.get("renewTime"), old.get("leaseTransitions") or 0)
        self._observe(record)
        holder = record[0]
        mine = holder == self.identity
        if holder and not mine:
            duration = float(old.get("leaseDurationSeconds") or self.config.lease_duration_s)
            if time.monotonic() - self._observed_at < duration:
                return False  # held by someone who renewed recently
        if mine:
            spec["acquireTime"] = old.get("acquireTime") or spec["acquireTime"]
            spec["leaseTransitions"] = record[2]
            if self._led and time.monotonic() >= self._renew_until:
                return False  # past the deadline (the process froze mid-renewal, say): leadership is over
        else:
            spec["leaseTransitions"] = record[2] + 1
        lease["spec"] = spec
        try:
            await self.api.request("PUT", self._path, body=lease)
        except ApiError as e:
            log.info("lease update lost", extra={"error": str(e)})
            return False
        self._observe((self.identity, spec["renewTime"], spec["leaseTransitions"]))
        self._term = int(spec["leaseTransitions"])
        return True

    def _observe(self, record: tuple[Any, ...]) -> None:
        if record != self._observed:
            self._observed = record
            self._observed_at = time.monotonic()
