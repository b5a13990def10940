"""Binding a pod's volumes before the pod, as kube-scheduler's VolumeBinding plugin does in PreBind.

Rules: the engine decided which claim gets which volume (``Bind.volumes``); this module only writes it and
waits. For a static volume, its ``spec.claimRef`` is set to the claim (with the claim's uid, and the
``pv.kubernetes.io/bound-by-controller`` annotation), guarded by the volume's resourceVersion so a volume
another writer took in between is never overwritten; for a WaitForFirstConsumer claim to provision, the
claim is annotated ``volume.kubernetes.io/selected-node: <node>``. The PV controller (and, for provisioning,
the external provisioner) then binds the claim; the pod is bound only once every claim is Bound, so it
never lands on a node whose volume does not exist. A volume that cannot be written or is not bound within
``timeout_s`` fails the pod's bind (a FailedBinding event); the next cycle plans the pod again and sees what
was done.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kai.api import constants as C
from kai.k8s._api import Api, ApiError
from kai.scheduler.decisions import Bind, VolumeBinding

MERGE = "application/merge-patch+json"


class VolumeBindError(ApiError):
    """A volume could not be bound for a pod (code 0: not an HTTP answer of the pod's bind)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, message)

    def __str__(self) -> str:
        return f"volumes: {self.message}"


class VolumeBinder:
    def __init__(self, api: Api, *, timeout_s: float = 120.0, poll_s: float = 0.2) -> None:
        self.api = api
        self.timeout_s = timeout_s
        self.poll_s = poll_s

    async def bind(self, b: Bind, writer: Any = None) -> None:
        """Bind *b*'s volumes and wait until every claim is Bound; raises VolumeBindError (an API error on the
        way is one too: a 409 here is a volume taken meanwhile, never "the pod is bound already"). The writes
        go through *writer* (the cycle's fenced Api, ``kai.k8s._fence``) when given; reads through ``api``."""
        w = writer if writer is not None else self.api
        try:
            for v in b.volumes:
                if v.volume:
                    await self._claim_volume(v, w)
                else:
                    await self._select_node(v, w)
            deadline = time.monotonic() + self.timeout_s
            for v in b.volumes:
                await self._wait_bound(v, deadline)
        except VolumeBindError:
            raise
        except ApiError as e:
            raise VolumeBindError(str(e)) from e

    def _claim_path(self, v: VolumeBinding) -> str:
        return f"/api/v1/namespaces/{v.namespace}/persistentvolumeclaims/{v.claim}"

    async def _claim_volume(self, v: VolumeBinding, w: Any) -> None:
        claim = await self.api.request("GET", self._claim_path(v))
        if (claim.get("spec") or {}).get("volumeName") == v.volume:
            return  # bound (or pre-bound) to it already
        pv = await self.api.request("GET", f"/api/v1/persistentvolumes/{v.volume}")
        ref = (pv.get("spec") or {}).get("claimRef")
        uid = (claim.get("metadata") or {}).get("uid", "")
        if ref:
            if (ref.get("namespace"), ref.get("name")) == (v.namespace, v.claim) and ref.get("uid") in (None, "", uid):
                return
            raise VolumeBindError(
                f"PersistentVolume {v.volume} was taken by claim {ref.get('namespace')}/{ref.get('name')} meanwhile"
            )
        body: dict[str, Any] = {
            "metadata": {
                "resourceVersion": (pv.get("metadata") or {}).get("resourceVersion", ""),
                "annotations": {C.ANNOTATION_BOUND_BY_CONTROLLER: "yes"},
            },
            "spec": {
                "claimRef": {
                    "apiVersion": "v1",
                    "kind": "PersistentVolumeClaim",
                    "namespace": v.namespace,
                    "name": v.claim,
                    "uid": uid,
                }
            },
        }
        await w.request("PATCH", f"/api/v1/persistentvolumes/{v.volume}", body=body, content_type=MERGE)

    async def _select_node(self, v: VolumeBinding, w: Any) -> None:
        claim = await self.api.request("GET", self._claim_path(v))
        selected = ((claim.get("metadata") or {}).get("annotations") or {}).get(C.ANNOTATION_SELECTED_NODE)
        if selected == v.node or (claim.get("spec") or {}).get("volumeName"):
            return
        if selected:
            raise VolumeBindError(f"claim {v.namespace}/{v.claim} is being provisioned for node {selected}")
        body = {"metadata": {"annotations": {C.ANNOTATION_SELECTED_NODE: v.node}}}
        await w.request("PATCH", self._claim_path(v), body=body, content_type=MERGE)

    async def _wait_bound(self, v: VolumeBinding, deadline: float) -> None:
        while True:
            claim = await self.api.request("GET", self._claim_path(v))
            spec, status = claim.get("spec") or {}, claim.get("status") or {}
            if spec.get("volumeName") and status.get("phase") == "Bound":
                if v.volume and spec["volumeName"] != v.volume:
                    raise VolumeBindError(f"claim {v.namespace}/{v.claim} was bound to {spec['volumeName']}")
                return
            if time.monotonic() >= deadline:
                what = f"PersistentVolume {v.volume}" if v.volume else f"a volume provisioned for node {v.node}"
                raise VolumeBindError(f"claim {v.namespace}/{v.claim} not bound to {what} within {self.timeout_s:g} s")
            await asyncio.sleep(self.poll_s)
