"""Writing a pod's ResourceClaims before the pod is bound, as kube-scheduler's DynamicResources plugin does in
PreBind.

Rules: the engine decided which devices each claim gets (``Bind.claims``); this module only writes them. For
each claim: GET it, and, unless it is allocated already, set ``status.allocation`` (results, the configs of
the classes and of the claim, a nodeSelector on the node's name, built by ``kai.api.dra.allocation_doc``);
then add the pod to ``status.reservedFor`` (pods, name, uid). One PUT of ``/status`` does both, guarded by the
claim's resourceVersion, so a claim another scheduler allocated in between is never overwritten: a conflict,
a claim allocated elsewhere meanwhile, or a claim that is gone fails the pod's bind (a FailedBinding event) and
the next cycle plans the pod again with what was written.

A claim written is remembered (``claims``) until the informer's Store shows the write (allocated, reserved for
the pod), or the claim gone, or ``assume_ttl_s`` passes (a backstop as long as the binds' assume TTL,
``kai.k8s._assume.ASSUME_TTL_S``, well past the informers' progress deadline): a cycle that starts before
the watch delivers it still sees the claim allocated, so its devices are never given twice. The writes go
through the cycle's fenced writer (``kai.k8s._fence``), so a deposed leader writes no claim.
"""

from __future__ import annotations

import time
from typing import Any

from kai.api.dra import (
    API_VERSION,
    MAX_RESERVED_FOR,
    ResourceClaim,
    allocation_doc,
    parse_device_class,
    parse_resource_claim,
)
from kai.api.errors import ManifestError
from kai.k8s._api import Api, ApiError
from kai.k8s._assume import ASSUME_TTL_S
from kai.scheduler.decisions import Bind, ClaimAllocation
from kai.store import Key, key_of


class ClaimWriteError(ApiError):
    """A claim could not be written for a pod (code 0: not an HTTP answer of the pod's bind)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)

    def __str__(self) -> str:
        return f"resource claims: {self.message}"


class ClaimWriter:
    def __init__(self, api: Api, store: Any, *, assume_ttl_s: float = ASSUME_TTL_S) -> None:
        self.api = api
        self.store = store  # DeviceClasses come from the informers' Store (their configs go into allocations)
        self.assume_ttl_s = assume_ttl_s
        self._written: dict[Key, tuple[ResourceClaim, str, float]] = {}  # claim, pod reserved, deadline

    def claims(self) -> list[ResourceClaim]:
        """The Store's ResourceClaims, with the ones written but not yet seen on the watch as written."""
        claims = {key_of(c): c for c in self.store.list("ResourceClaim")}
        now = time.monotonic()
        for key, (claim, pod, deadline) in list(self._written.items()):
            seen = claims.get(key)
            caught_up = (
                seen is not None and seen.allocation is not None and any(c.name == pod for c in seen.reserved_for)
            )
            if seen is None or caught_up or now > deadline:
                del self._written[key]
            else:
                claims[key] = claim
        return list(claims.values())

    async def write(self, b: Bind, pod_uid: str, writer: Any = None) -> None:
        """Allocate and reserve *b*'s claims for its pod, through *writer* (the cycle's fenced Api) when
        given; raises ClaimWriteError (``Fenced`` passes through)."""
        w = writer if writer is not None else self.api
        try:
            for c in b.claims:
                await self._write(c, b.pod.name, pod_uid, w)
        except ClaimWriteError:
            raise
        except ApiError as e:
            raise ClaimWriteError(str(e)) from e

    def _path(self, c: ClaimAllocation) -> str:
        return f"/apis/{API_VERSION}/namespaces/{c.namespace}/resourceclaims/{c.claim}"

    async def _write(self, c: ClaimAllocation, pod: str, uid: str, w: Any) -> None:
        doc = await w.request("GET", self._path(c))
        status = doc.setdefault("status", {})
        reserved = status.setdefault("reservedFor", [])
        if any(r.get("name") == pod and r.get("uid") in (None, "", uid) for r in reserved):
            return  # written by an earlier attempt
        if len(reserved) >= MAX_RESERVED_FOR:
            raise ClaimWriteError(f"ResourceClaim {c.namespace}/{c.claim} has {MAX_RESERVED_FOR} consumers already")
        if status.get("allocation") is None:
            if not c.devices:
                raise ClaimWriteError(f"ResourceClaim {c.namespace}/{c.claim} was deallocated meanwhile")
            try:
                claim = parse_resource_claim(doc)
            except ManifestError as e:
                raise ClaimWriteError(f"ResourceClaim {c.namespace}/{c.claim}: {e}") from e
            classes = {}
            for r in claim.spec.requests:
                cls = self.store.get("DeviceClass", ("", r.device_class))
                if cls is None:
                    got = await w.request("GET", f"/apis/{API_VERSION}/deviceclasses/{r.device_class}")
                    cls = parse_device_class(got)
                classes[r.device_class] = cls
            status["allocation"] = allocation_doc(claim, classes, c.devices, c.node)
        elif c.devices:
            raise ClaimWriteError(f"ResourceClaim {c.namespace}/{c.claim} was allocated by another scheduler meanwhile")
        reserved.append({"resource": "pods", "name": pod, "uid": uid})
        written = await w.request("PUT", f"{self._path(c)}/status", body=doc)
        try:
            claim = parse_resource_claim(written)
        except ManifestError:
            return  # the Store keeps such a claim out anyway (the informer reports it)
        self._written[(c.namespace, c.claim)] = (claim, pod, time.monotonic() + self.assume_ttl_s)
