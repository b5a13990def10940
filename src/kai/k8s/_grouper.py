"""The pod-grouper in the scheduler process: a pending kai pod without a PodGroup gets one.

Rules: the decision is ``kai.podgrouper.group_pod``, the same pure code ``kai sim`` runs; this module
only does the I/O around it, as KAI's pod controller does: fetch the pod's owner chain from the API
server (each owner by its apiVersion and kind; the resource's plural comes from discovery), create the
PodGroup the grouper decided (409 = it exists: another pod of the workload made it), then patch the
pod with the annotation ``pod-group-name`` and the label ``kai.scheduler/subgroup-name``.

An owner kai may not read (RBAC 403) or that is gone (404) ends the chain, as a stand-in known only by
its reference, as in ``kai sim``. A ManifestError from the grouper (a bad label on the RayCluster, say)
becomes a ``PodGrouperWarning`` event on the pod and the pod is left alone; an API error puts the pod
back in the queue with backoff. A PodGroup that exists but no longer matches what the grouper decides
(the workload was scaled or edited, and a new pod of it arrived) has its spec patched, as KAI's pod
controller updates it in place; fields kai does not manage (and the status) are left alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import ObjectMeta, Pod, PodGroup, SubGroup, TopologyConstraint, parse_meta
from kai.api.workloads import WORKLOAD_KINDS, Workload, parse_workload, pod_as_owner, split_api_version
from kai.k8s._api import Api, ApiError, Backoff
from kai.podgrouper import group_pod
from kai.scheduler.decisions import Event
from kai.store import Key, Store

_GROUPER_BACKOFF = Backoff(initial=0.5, cap=30.0)
log = logging.getLogger("kai.k8s.podgrouper")
MAX_CHAIN = 16


def _duration(seconds: float | None) -> str | None:
    return None if seconds is None else f"{seconds:g}s"


def _topology(t: TopologyConstraint | None) -> dict[str, str] | None:
    if t is None:
        return None
    out = {
        "topology": t.topology,
        "requiredTopologyLevel": t.required_level,
        "preferredTopologyLevel": t.preferred_level,
    }
    return {k: v for k, v in out.items() if v}


def _subgroup(s: SubGroup) -> dict[str, Any]:
    out: dict[str, Any] = {"name": s.name}
    if s.min_member is not None:
        out["minMember"] = s.min_member
    if s.min_subgroup is not None:
        out["minSubGroup"] = s.min_subgroup
    if s.parent is not None:
        out["parent"] = s.parent
    if (t := _topology(s.topology_constraint)) is not None:
        out["topologyConstraint"] = t
    return out


def podgroup_manifest(pg: PodGroup) -> dict[str, Any]:
    """The scheduling.run.ai/v2alpha2 PodGroup object for a PodGroup the grouper decided."""
    spec: dict[str, Any] = {"queue": pg.queue}
    if pg.min_subgroup is not None:
        spec["minSubGroup"] = pg.min_subgroup
    else:
        spec["minMember"] = pg.min_member
    if pg.priority_class_name:
        spec["priorityClassName"] = pg.priority_class_name
    if pg.preemptibility:
        spec["preemptibility"] = pg.preemptibility
    if pg.sub_groups:
        spec["subGroups"] = [_subgroup(s) for s in pg.sub_groups]
    if (t := _topology(pg.topology_constraint)) is not None:
        spec["topologyConstraint"] = t
    if (d := _duration(pg.preemption_delay)) is not None:
        spec["preemptionDelay"] = d
    if (d := _duration(pg.staleness_grace_period)) is not None:
        spec["stalenessGracePeriod"] = d
    meta: dict[str, Any] = {"name": pg.meta.name, "namespace": pg.meta.namespace}
    if pg.meta.labels:
        meta["labels"] = dict(pg.meta.labels)
    if pg.meta.annotations:
        meta["annotations"] = dict(pg.meta.annotations)
    meta["ownerReferences"] = [
        {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid} for o in pg.meta.owner_references
    ]
    return {"apiVersion": C.PODGROUP_API_VERSION, "kind": "PodGroup", "metadata": meta, "spec": spec}


def spec_patch(existing: PodGroup, decided: PodGroup) -> dict[str, Any] | None:
    """A merge patch taking *existing*'s spec to *decided*'s, or None when they already agree. A field
    the grouper sets no longer is removed (null); fields it never sets are not touched."""
    old = podgroup_manifest(existing)["spec"]
    new = podgroup_manifest(decided)["spec"]
    if old == new:
        return None
    patch: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
    patch.update({k: None for k in old if k not in new})
    return patch


class _View:
    """The grouper's ClusterView: owners fetched for this pod, pods from the Store."""

    def __init__(self, fetched: dict[tuple[str, str, str, str], Workload], store: Store) -> None:
        self._fetched = fetched
        self._store = store

    def get(self, api_version: str, kind: str, namespace: str, name: str) -> Workload | None:
        return self._fetched.get((api_version, kind, namespace, name)) or next(
            (w for (_, k, ns, n), w in self._fetched.items() if (k, ns, n) == (kind, namespace, name)), None
        )

    def pods(self, namespace: str, labels: Mapping[str, str]) -> Sequence[Pod]:
        return [
            p
            for p in self._store.list("Pod")
            if (p.meta.namespace or "") == namespace and all(p.meta.labels.get(k) == v for k, v in labels.items())
        ]


def needs_group(pod: Pod) -> bool:
    """A pending kai pod that names no PodGroup yet."""
    return (
        pod.scheduler_name == C.SCHEDULER_NAME
        and not pod.node_name
        and pod.meta.deletion_timestamp is None
        and pod.phase == "Pending"
        and C.ANNOTATION_POD_GROUP_NAME not in pod.meta.annotations
    )


class PodGrouper:
    """Groups the pods put in its queue (``enqueue``), ``workers`` at a time."""

    def __init__(
        self,
        api: Api,
        store: Store,
        record: Callable[[list[Event]], None],
        *,
        workers: int = 8,
        backoff: Backoff = _GROUPER_BACKOFF,
        in_shard: Callable[[Mapping[str, str]], bool] | None = None,
    ) -> None:
        self.api = api
        self.store = store
        self.record = record
        self.backoff = backoff
        self.in_shard = in_shard  # a shard's grouper makes only its own pool's PodGroups (their labels tell)
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._plurals: dict[str, dict[str, str]] = {}  # apiVersion → kind → plural
        self._workers = [asyncio.ensure_future(self._work()) for _ in range(workers)]
        self.grouped = 0
        self.updated = 0  # PodGroups whose spec was patched to follow their workload

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def close(self) -> None:
        for w in self._workers:
            w.cancel()
        await asyncio.gather(*self._workers, return_exceptions=True)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            self._queued.discard(key)
            pod = self.store.get("Pod", key)
            if pod is None or not needs_group(pod):
                continue
            try:
                await self.group(pod)
                self._failures.pop(key, None)
            except ApiError as e:
                n = self._failures.get(key, 0)
                self._failures[key] = n + 1
                delay = self.backoff.delay(n)
                log.warning("grouping failed", extra={"pod": f"{key[0]}/{key[1]}", "error": str(e), "delay_s": delay})
                asyncio.get_running_loop().call_later(delay, self.enqueue, key)

    async def group(self, pod: Pod) -> None:
        """Group one pod: owner chain → PodGroup → pod patch."""
        ns = pod.meta.namespace or "default"
        ref = f"Pod/{ns}/{pod.meta.name}"
        fetched: dict[tuple[str, str, str, str], Workload] = {}
        chain = await self._owner_chain(pod, fetched)
        classes = {pc.meta.name for pc in self.store.list("PriorityClass")}
        try:
            grouping = group_pod(pod, chain, view=_View(fetched, self.store), priority_classes=classes)
        except ManifestError as e:
            located = e if e.obj else e.located(obj=ref)
            self.record([Event(ref, "Warning", "PodGrouperWarning", str(located))])
            return
        if grouping is None:
            return
        pg = grouping.podgroup
        if self.in_shard is not None and not self.in_shard(pg.meta.labels):
            return  # another shard's pod: its own scheduler groups it
        existing = self.store.get("PodGroup", (ns, pg.meta.name))
        if existing is None:
            try:
                await self.api.request(
                    "POST", f"/apis/{C.PODGROUP_API_VERSION}/namespaces/{ns}/podgroups", body=podgroup_manifest(pg)
                )
            except ApiError as e:
                if e.code != 409:
                    raise
        elif (patch := spec_patch(existing, pg)) is not None:
            await self._update(ns, existing, patch)
        if grouping.unknown_kind:
            self.record([Event(ref, "Normal", "UnknownOwnerKind", grouping.unknown_kind)])
        if grouping.warning is not None:  # the owner's spec contradicts itself: default grouping, and why
            self.record([Event(ref, "Warning", "PodGrouperWarning", str(grouping.warning))])
        meta: dict[str, Any] = {"annotations": {C.ANNOTATION_POD_GROUP_NAME: pg.meta.name}}
        if grouping.subgroup:
            meta["labels"] = {C.LABEL_SUBGROUP_NAME: grouping.subgroup}
        try:
            await self.api.request(
                "PATCH",
                f"/api/v1/namespaces/{ns}/pods/{pod.meta.name}",
                body={"metadata": {**meta, "uid": pod.meta.uid}},
                content_type="application/merge-patch+json",
            )
        except ApiError as e:
            if e.code not in (404, 409, 422):  # gone, or a new pod under the same name (uid differs)
                raise
            return
        self.grouped += 1

    async def _update(self, ns: str, existing: PodGroup, patch: dict[str, Any]) -> None:
        """Patch a PodGroup's spec to what the grouper now decides (uid precondition: never another one)."""
        name = existing.meta.name
        try:
            await self.api.request(
                "PATCH",
                f"/apis/{C.PODGROUP_API_VERSION}/namespaces/{ns}/podgroups/{name}",
                body={"metadata": {"uid": existing.meta.uid}, "spec": patch},
                content_type="application/merge-patch+json",
            )
        except ApiError as e:
            if e.code not in (404, 409):  # gone or replaced meanwhile: the next pod event decides again
                raise
            return
        log.info("podgroup updated", extra={"podgroup": f"{ns}/{name}", "spec": patch})
        self.updated += 1

    async def _owner_chain(self, pod: Pod, fetched: dict[tuple[str, str, str, str], Workload]) -> list[Workload]:
        chain: list[Workload] = []
        meta: ObjectMeta = pod.meta
        ns = pod.meta.namespace or "default"
        while meta.owner_references and len(chain) < MAX_CHAIN:
            ref = meta.owner_references[0]
            if any(w.kind == ref.kind and w.meta.name == ref.name for w in chain):
                break  # a cycle: stop here (the grouper works from what it has)
            owner = await self._fetch(ref.api_version, ref.kind, ns, ref.name)
            if owner is None:
                chain.append(
                    Workload(
                        ObjectMeta(ref.name, ns, ref.uid or f"{ref.kind}/{ns}/{ref.name}"),
                        ref.api_version,
                        ref.kind,
                        {},
                    )
                )
                break
            fetched[(ref.api_version, ref.kind, ns, ref.name)] = owner
            chain.append(owner)
            meta = owner.meta
        return chain

    async def _fetch(self, api_version: str, kind: str, ns: str, name: str) -> Workload | None:
        if (api_version, kind) == ("v1", "Pod"):
            pod = self.store.get("Pod", (ns, name))
            return pod_as_owner(pod) if pod is not None else None
        plural = await self._plural(api_version, kind)
        if plural is None:
            return None
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        try:
            doc = await self.api.request("GET", f"{base}/namespaces/{ns}/{plural}/{name}")
        except ApiError as e:
            if e.code in (403, 404):
                return None
            raise
        doc.get("metadata", {}).pop("managedFields", None)
        if (api_version, kind) in WORKLOAD_KINDS:
            return parse_workload(doc)
        try:
            meta = parse_meta(doc, kind, namespaced=True)
        except ManifestError:
            return None
        return Workload(meta=meta, api_version=api_version, kind=kind, doc=doc)

    async def _plural(self, api_version: str, kind: str) -> str | None:
        """The resource name of *kind* from discovery (cached; looked up again for a kind not yet served)."""
        known = self._plurals.get(api_version, {})
        if kind in known:
            return known[kind]
        group, version = split_api_version(api_version)
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            doc = await self.api.request("GET", path)
        except ApiError as e:
            if e.code in (403, 404):
                return None
            raise
        self._plurals[api_version] = {
            r["kind"]: r["name"] for r in doc.get("resources", []) if "/" not in r.get("name", "")
        }
        return self._plurals[api_version].get(kind)
