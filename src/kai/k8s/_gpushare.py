"""The binder's GPU-sharing steps for a shared-GPU bind (reference section 5; KAI's binder and its
resource-reservation service), and the reservation pods' upkeep.

Theory of operation. The engine decides a shared pod's node and GPU groups; the Applier hands the bind to
``GpuSharingBinder.submit``, which holds the pod as bound in the next snapshots (an assumed bind without
expiry) and does the rest in the background, so a reservation that takes seconds never delays a cycle:

1. Read the pod whole (the informers keep no env). A pod whose fraction container lacks the env the
   admission webhook injects (the webhook was down, with failurePolicy Ignore) is refused: bound, it
   would see every GPU of its node. A ``FailedBinding`` event says why, and the refusal is remembered
   for that pod (a pod's env cannot change).
2. Per GPU group, under a per-group lock: find the group's reservation pod ``gpu-reservation-<hash>`` in
   ``kai-resource-reservation`` (the Store has every pod) or create it, bound straight to the node with
   ``nvidia.com/gpu: 1``; then wait up to ``timeout_s`` for the UUID its container writes to
   ``run.ai/reserve_for_gpu_index``. A reservation that never answers is deleted (as KAI does) and the
   bind refused with an event naming it; the next cycle places the pod again.
3. Write the pod's ConfigMaps (owned by the pod): ``NVIDIA_VISIBLE_DEVICES`` (one UUID per device),
   ``GPU_PORTION`` and ``RUNAI_NUM_OF_GPUS``; label the pod with its group(s) and annotate it
   ``received-resource-type: Fraction`` (one patch, uid-guarded); then the Applier binds it.

``sync`` (after every cycle's binds) is KAI's SyncForPodsList: a reservation pod whose group has no
Pending or Running fraction pod (nor a bind under way, now or when the cycle's snapshot was taken: a bind
that failed meanwhile left its pod for the next cycle to plan again, into the same group) is deleted,
and a Running fraction pod whose group has no reservation pod is deleted (its GPU is no longer held for
it), with a Warning event.

Under the Lease (``kai.k8s._fence``): every write of a shared bind goes through the fenced writer of the
cycle that decided it, so a replica that lost the Lease stops mid-bind (``Fenced``: no event, nothing
retried; the new leader plans the pod). Each bind runs as a one-shot task of the scheduler's Supervisor
(a bug is logged and counted in ``kai_task_failures_total{task="gpu-sharing-bind"}``). A bind that fails
after the cycle that decided it has ended breaks its gang, as a failed bind within a cycle does
(``Applier.shared_bind_failed``): the next cycle completes the gang or evicts its bound part at once.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from kai.api import constants as C
from kai.api import sharedgpu
from kai.api.gpugroups import gpu_group_labels, group_labels, has_gpu_group_label, is_gpu_group_label
from kai.api.objects import Pod, object_ref
from kai.k8s._api import Api, ApiError
from kai.k8s._assume import AssumedBind
from kai.k8s._events import EventRecorder
from kai.k8s._fence import Fenced
from kai.k8s._metrics import Metrics
from kai.k8s._supervisor import Supervisor
from kai.scheduler.decisions import Bind, Event
from kai.store import Key, Store


class BindSender(Protocol):
    """What the binder needs of the Applier (kai.k8s._apply): its assumed binds, the bind call, and what
    to do when a bind fails after its cycle."""

    assumed: Any

    async def send_bind(
        self,
        b: Bind,
        pod: Pod,
        writer: Any,
        stats: Any = None,
        extra: list[Event] | None = None,
        *,
        labels: bool = True,
    ) -> bool: ...

    def shared_bind_failed(self, b: Bind) -> list[Event]: ...


log = logging.getLogger("kai.k8s.gpushare")
MERGE = "application/merge-patch+json"
POLL_S = 0.05
CREATED_GRACE_S = 30.0  # a reservation pod made here counts as existing until the watch shows it


@dataclass(frozen=True)
class ReservationOptions:
    namespace: str = C.RESERVATION_NAMESPACE
    service_account: str = C.RESERVATION_SERVICE_ACCOUNT
    image: str = ""  # "": kai scheduler's own image (its pod's), else kai:0.1.0
    runtime_class: str = ""  # KAI's binder --runtime-class-name: none by default
    timeout_s: float = 40.0  # KAI's --resource-reservation-allocation-timeout


class BindRefused(Exception):
    """The shared bind cannot go ahead; the message says why, for the pod's FailedBinding event."""


def reservation_pod(node: str, group: str, options: ReservationOptions, tolerations: list[Any]) -> dict[str, Any]:
    """The reservation pod of *group* on *node* (KAI's createResourceReservationPod)."""
    env = [
        {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}
        for name, path in (("POD_NAME", "metadata.name"), ("POD_NAMESPACE", "metadata.namespace"))
    ]
    spec: dict[str, Any] = {
        "nodeName": node,
        "tolerations": tolerations,
        "serviceAccountName": options.service_account,
        "containers": [
            {
                "name": C.RESERVATION_CONTAINER,
                "image": options.image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["kai", "resource-reservation"],
                "resources": {"limits": {C.RESOURCE_GPU: "1"}, "requests": {C.RESOURCE_GPU: "1"}},
                "env": env,
            }
        ],
    }
    if options.runtime_class:
        spec["runtimeClassName"] = options.runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": sharedgpu.reservation_pod_name(node, group),
            "namespace": options.namespace,
            "labels": {C.LABEL_APP: C.RESERVATION_APP, C.LABEL_GPU_GROUP: group},
            "annotations": {C.ANNOTATION_DO_NOT_DISRUPT: "true"},
        },
        "spec": spec,
    }


def _has_sharing_env(pod: dict[str, Any], ref: sharedgpu.ContainerRef | None, configmap: str) -> bool:
    """Whether the fraction container's NVIDIA_VISIBLE_DEVICES comes from *configmap* (the webhook's env)."""
    if ref is None:
        return False
    field = "initContainers" if ref.init else "containers"
    container = ((pod.get("spec") or {}).get(field) or [])[ref.index]
    for e in container.get("env") or []:
        key_ref = (e.get("valueFrom") or {}).get("configMapKeyRef") or {}
        if e.get("name") == C.ENV_NVIDIA_VISIBLE_DEVICES and key_ref.get("name") == configmap:
            return True
    return False


class GpuSharingBinder:
    """Reservation pods, ConfigMaps and labels of shared-GPU binds; see the module docstring."""

    def __init__(
        self,
        api: Api,
        store: Store,
        events: EventRecorder,
        metrics: Metrics,
        options: ReservationOptions | None = None,
        *,
        wake: Callable[[], None] = lambda: None,
        supervisor: Supervisor | None = None,
    ) -> None:
        self.api = api
        self.store = store
        self.events = events
        self.metrics = metrics
        self.options = options or ReservationOptions()
        self.wake = wake
        self.supervisor = supervisor if supervisor is not None else Supervisor()
        self._locks: dict[str, asyncio.Lock] = {}
        self._inflight: dict[Key, tuple[str, ...]] = {}  # pod -> groups of a bind under way
        self._created: dict[str, float] = {}  # group -> when its reservation pod was made here
        self._refused: set[str] = set()  # uids of pods without the webhook's env
        self._tasks: set[asyncio.Task[None]] = set()
        # the pods ``sync`` reads, kept by the Store as they change: a walk of every pod each cycle cost 4.5% of
        # kai's time in a stream of 12,000 pods, on clusters with no shared GPU at all
        self._sharing = store.index("Pod", self._reads)

    # ---- binds -----------------------------------------------------------------------------

    def submit(self, b: Bind, pod: Pod, applier: BindSender, writer: Any) -> None:
        """Start the shared bind of *pod* in the background, writing through *writer* (the deciding cycle's
        fenced Api); it counts as bound until it fails."""
        key = (b.pod.namespace, b.pod.name)
        if key in self._inflight:
            return  # already under way (a later cycle decided the same again)
        self._inflight[key] = tuple(b.gpu_groups)
        applier.assumed.binds[key] = AssumedBind(pod.meta.uid, b.node, math.inf, tuple(b.gpu_groups))
        task = self.supervisor.spawn("gpu-sharing-bind", lambda: self._run(b, pod, applier, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for t in list(self._tasks):
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _run(self, b: Bind, pod: Pod, applier: BindSender, writer: Any) -> None:
        """One shared bind. A bug raises on to the Supervisor (logged, counted) once this pod is let go:
        it costs this pod only, and the next cycle plans it again."""
        key = (b.pod.namespace, b.pod.name)
        extra: list[Event] = []
        ok = fenced = False
        try:
            await self.prepare(b, pod, writer)
            ok = await applier.send_bind(b, pod, writer, extra=extra, labels=False)
        except BindRefused as e:
            message = f"Failed to bind pod {b.pod} to node {b.node}: {e}"
            extra.append(Event(f"Pod/{b.pod}", "Warning", "FailedBinding", message))
            log.warning(f"shared bind refused: {e}", extra={"pod": str(b.pod), "node": b.node, "error": str(e)})
        except Fenced:  # the Lease is lost: nothing more is written here; the next leader plans the pod
            fenced = True
        finally:
            self._inflight.pop(key, None)
            held = applier.assumed.binds.get(key)
            if held is not None and held.when == math.inf:
                del applier.assumed.binds[key]  # not bound: the pod is pending again for the next cycle
            if not ok and not fenced:
                extra += applier.shared_bind_failed(b)
            if extra:
                self.events.record(extra)
            if not ok:
                self.wake()

    async def prepare(self, b: Bind, pod: Pod, writer: Any) -> None:
        """Steps 1-3 of the module docstring, up to the bind itself, writing through *writer*. BindRefused
        says why it cannot."""
        ns, name = b.pod.namespace, b.pod.name
        if pod.meta.uid in self._refused:
            raise BindRefused(self._no_env_text(pod))
        try:
            full = await self.api.request("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        except ApiError as e:
            raise BindRefused(f"cannot read the pod: {e}") from e
        meta = full.get("metadata") or {}
        if meta.get("uid") != pod.meta.uid:
            raise BindRefused("the pod was replaced by another of the same name")
        ref = sharedgpu.fraction_container(full)
        prefix = (meta.get("annotations") or {}).get(C.ANNOTATION_SHARED_GPU_CONFIGMAP, "")
        cm = sharedgpu.capabilities_configmap(prefix, ref) if ref is not None else ""
        if ref is None or not prefix or not _has_sharing_env(full, ref, cm):
            self._refused.add(pod.meta.uid)
            raise BindRefused(self._no_env_text(pod))
        tolerations = (full.get("spec") or {}).get("tolerations") or []
        uuids = [await self.reserve(b.node, g, tolerations, writer) for g in b.gpu_groups]
        from kai.scheduler.gpusharing import parse_share  # the engine's module: off the start-up path (NumPy)

        share, _ = parse_share(pod)
        node = self.store.get("Node", ("", b.node))
        label = node.meta.labels.get(C.LABEL_GPU_MEMORY, "") if node is not None else ""
        memory = int(label) if label.isdigit() and int(label) > 0 else C.DEFAULT_GPU_MEMORY_MIB
        portion = sharedgpu.gpu_portion(share.fraction_milli, share.memory_mib, memory) if share else "1.00"
        owner = [{"apiVersion": "v1", "kind": "Pod", "name": name, "uid": pod.meta.uid}]
        env = sharedgpu.visibility_env(uuids, portion)
        await self._upsert_configmap(writer, ns, sharedgpu.capabilities_configmap(prefix, ref), owner, env)
        await self._upsert_configmap(writer, ns, sharedgpu.env_configmap(prefix, ref), owner, {})
        labels: dict[str, str | None] = {k: None for k in pod.meta.labels if is_gpu_group_label(k)}
        labels.update(gpu_group_labels(tuple(b.gpu_groups)))
        body = {
            "metadata": {
                "uid": pod.meta.uid,
                "labels": labels,
                "annotations": {C.ANNOTATION_RECEIVED_RESOURCE_TYPE: C.RECEIVED_TYPE_FRACTION},
            }
        }
        try:
            await writer.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}", body=body, content_type=MERGE)
        except ApiError as e:
            raise BindRefused(f"cannot label the pod with its GPU group: {e}") from e

    def _no_env_text(self, pod: Pod) -> str:
        return (
            f"the pod asks for a GPU fraction but has no GPU-sharing env ({C.ENV_NVIDIA_VISIBLE_DEVICES} from "
            f"its {C.ANNOTATION_SHARED_GPU_CONFIGMAP} ConfigMap): kai's admission webhook did not see it when it "
            "was created (was the webhook down, with failurePolicy Ignore?). Bound, it would see every GPU of "
            "the node; delete it and create it again"
        )

    async def _upsert_configmap(
        self, writer: Any, ns: str, name: str, owner: list[dict[str, Any]], data: dict[str, str]
    ) -> None:
        meta = {"name": name, "namespace": ns, "ownerReferences": owner}
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
        try:
            await writer.request("POST", f"/api/v1/namespaces/{ns}/configmaps", body=body)
            return
        except ApiError as e:
            if e.code != 409:
                raise BindRefused(f"cannot create ConfigMap {ns}/{name}: {e}") from e
        patch: dict[str, Any] = {"metadata": {"ownerReferences": owner}}
        if data:
            patch["data"] = data
        path = f"/api/v1/namespaces/{ns}/configmaps/{name}"
        try:
            await writer.request("PATCH", path, body=patch, content_type=MERGE)
        except ApiError as e:
            raise BindRefused(f"cannot update ConfigMap {ns}/{name}: {e}") from e

    # ---- reservations ----------------------------------------------------------------------

    async def reserve(self, node: str, group: str, tolerations: list[Any], writer: Any) -> str:
        """The UUID of *group*'s GPU, from its reservation pod (made when missing). BindRefused on timeout."""
        lock = self._locks.setdefault(group, asyncio.Lock())
        async with lock:
            ns = self.options.namespace
            name = sharedgpu.reservation_pod_name(node, group)
            deadline = time.monotonic() + self.options.timeout_s
            made = False
            while True:
                res = self.store.get("Pod", (ns, name))
                if res is not None and res.meta.deletion_timestamp is None:
                    uuid = res.meta.annotations.get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX)
                    if uuid:
                        self._created.pop(group, None)
                        return uuid
                elif res is None and not made:
                    await self._create_reservation(node, group, tolerations, writer)
                    made = True
                if time.monotonic() > deadline:
                    await self._delete_reservation(writer, name, "timeout")
                    raise BindRefused(
                        f"GPU reservation pod {ns}/{name} for GPU group {group} did not report its GPU "
                        f"({C.ANNOTATION_RESERVE_FOR_GPU_INDEX}) within {self.options.timeout_s:g} s; it was "
                        "deleted. Is it running (image, runtime class, device plugin)? `kubectl -n "
                        f"{ns} describe pod {name}` tells"
                    )
                await asyncio.sleep(POLL_S)

    async def _create_reservation(self, node: str, group: str, tolerations: list[Any], writer: Any) -> None:
        doc = reservation_pod(node, group, self.options, tolerations)
        try:
            await writer.request("POST", f"/api/v1/namespaces/{self.options.namespace}/pods", body=doc)
            self.metrics.reservations.labels("created").inc()
            made = {"pod": doc["metadata"]["name"], "group": group, "node": node}
            log.info("reservation pod created", extra=made)
        except ApiError as e:
            if e.code != 409:  # 409: made already (by an earlier run of kai): the same pod, reused
                raise BindRefused(f"cannot create GPU reservation pod for GPU group {group}: {e}") from e
        self._created[group] = time.monotonic()

    async def _delete_reservation(self, writer: Any, name: str, why: str) -> None:
        path = f"/api/v1/namespaces/{self.options.namespace}/pods/{name}"
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0}
        try:
            await writer.request("DELETE", path, body=body)
            self.metrics.reservations.labels(f"deleted-{why}").inc()
        except ApiError as e:
            if e.code != 404:
                log.warning("reservation pod not deleted", extra={"pod": name, "error": str(e)})

    def _reads(self, pod: Pod) -> bool:
        """Whether ``sync`` reads *pod*: a reservation pod in the reservation namespace, or a pod elsewhere with a
        GPU-group label."""
        labels = pod.meta.labels
        if not labels:
            return False
        if (pod.meta.namespace or "") == self.options.namespace:
            return sharedgpu.is_reservation_pod(labels)
        return has_gpu_group_label(labels)

    async def sync(self, assumed_groups: set[str], writer: Any) -> None:
        """KAI's SyncForPodsList over the Store, writing through *writer*; see the module docstring."""
        ns = self.options.namespace
        now = time.monotonic()
        used: set[str] = set(assumed_groups)
        for groups in self._inflight.values():
            used.update(groups)
        reservations: dict[str, Pod] = {}
        running: list[tuple[Pod, list[str]]] = []
        for pod in self._sharing.values():  # no await in this loop: the Store does not change under it
            if (pod.meta.namespace or "") == ns:
                if sharedgpu.is_reservation_pod(pod.meta.labels):
                    group = pod.meta.labels.get(C.LABEL_GPU_GROUP)
                    if group:
                        reservations[group] = pod
                continue
            groups = group_labels(pod)
            if not groups or pod.phase not in ("Pending", "Running"):
                continue
            used.update(groups)
            if pod.phase == "Running" and pod.meta.deletion_timestamp is None:
                running.append((pod, groups))
        for group, res in reservations.items():
            if group not in used and res.meta.deletion_timestamp is None:
                log.info("deleting the reservation pod of an empty GPU group", extra={"group": group})
                await self._delete_reservation(writer, res.meta.name, "empty")
        for group, t in list(self._created.items()):
            if now - t > CREATED_GRACE_S:
                del self._created[group]
        gone: list[Event] = []
        held = set(reservations) | set(self._created) | self._inflight_groups()
        for pod, groups in running:
            missing = [g for g in groups if g not in held]
            if not missing:
                continue
            path = f"/api/v1/namespaces/{pod.meta.namespace}/pods/{pod.meta.name}"
            body = {"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": pod.meta.uid}}
            try:
                await writer.request("DELETE", path, body=body)
            except ApiError as e:
                if e.code not in (404, 409):
                    why = {"pod": pod.meta.name, "error": str(e)}
                    log.warning("fraction pod without reservation not deleted", extra=why)
                continue
            text = (
                f"Pod {pod.meta.namespace}/{pod.meta.name} runs on GPU group {missing[0]} of node {pod.node_name}, "
                "which has no GPU reservation pod (its GPU is no longer held for it): deleted, as KAI's binder does"
            )
            ref = object_ref("Pod", pod.meta.namespace, pod.meta.name)
            gone.append(Event(ref, "Warning", "GpuReservationMissing", text))
        if gone:
            self.events.record(gone)

    def _inflight_groups(self) -> set[str]:
        return {g for groups in self._inflight.values() for g in groups}
