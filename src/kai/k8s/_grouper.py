"""The pod-grouper in the scheduler process: a pending kai pod without a PodGroup gets one.

Rules: the decision is ``kai.podgrouper.group_pod``, the same pure code ``kai sim`` runs; this module
only does the I/O around it, as KAI's pod controller does: fetch the pod's owner chain from the API
server (each owner by its apiVersion and kind; the resource's plural comes from discovery; each owner
once, ``kai.k8s._owners``), decide, and make the decision known at once (``kai.k8s._decided``): the
next cycle schedules the pod in its decided PodGroup, its Binding carries the ``pod-group-name``
annotation, and the PodGroup is created once per PodGroup in the background (409 = it exists), binds
first. A pod a cycle leaves pending is annotated by a patch instead; a grouping with a subgroup label
(which a Binding cannot carry) is written before any bind: PodGroup, then the pod patch, as KAI does.
Creates and patches are sent ``write_concurrency`` at a time, as the binder sends binds. A bound pod
whose PodGroup is not there (a crash between its bind and the create) has it made again.

An owner kai may not read (RBAC 403) or that is gone (404) ends the chain, as a stand-in known only by
its reference, as in ``kai sim``. The walk is bounded: at most ``MAX_CHAIN`` owners, each nested at most
``MAX_OWNER_DEPTH`` levels deep (a CRD that keeps unknown fields lets a user store JSON thousands of
levels deep, which the decoders would meet with RecursionError); an owner past either bound is refused.
A ManifestError from the grouper (a bad label on the RayCluster, an owner refused) becomes a
``PodGrouperWarning`` event on the pod and the pod is left alone; an API error puts the pod back in the
queue with backoff; anything else (a bug) is logged with its traceback, reported on the pod the same
way, and costs only that pod: the worker goes on, and the workers themselves run under the
scheduler's supervisor. A PodGroup that exists but no longer matches what the grouper decides
(the workload was scaled or edited, and a new pod of it arrived) has its spec patched, as KAI's pod
controller updates it in place; fields kai does not manage (and the status) are left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping, Sequence
from typing import Any

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.objects import ObjectMeta, Pod, PodGroup, SubGroup, TopologyConstraint, parse_meta
from kai.api.workloads import WORKLOAD_KINDS, Workload, parse_workload, pod_as_owner, split_api_version
from kai.k8s._api import Api, ApiError, Backoff
from kai.k8s._decided import Decided
from kai.k8s._fence import Fenced
from kai.k8s._owners import OwnerCache
from kai.k8s._supervisor import Supervisor
from kai.podgrouper import group_pod
from kai.scheduler.decisions import Event
from kai.store import Key, Store

_GROUPER_BACKOFF = Backoff(initial=0.5, cap=30.0)
log = logging.getLogger("kai.k8s.podgrouper")
MAX_NAME = 253  # an object name's longest (a DNS subdomain)
MAX_CHAIN = 16  # owners followed up from a pod
MAX_OWNER_DEPTH = 100  # nesting levels of an owner object (a JobSet's pod template is about 20 deep)


def nesting_depth(doc: Any, limit: int) -> int:
    """How deep *doc* (decoded JSON) nests, without recursion; stops counting past *limit*."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(doc, 1)]
    while stack:
        obj, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if isinstance(obj, dict):
            stack.extend((v, depth + 1) for v in obj.values() if isinstance(v, dict | list))
        elif isinstance(obj, list):
            stack.extend((v, depth + 1) for v in obj if isinstance(v, dict | list))
    return deepest


def _too_deep(kind: str, ns: str, name: str) -> ManifestError:
    return ManifestError(
        f"owner {kind}/{name} is nested more than {MAX_OWNER_DEPTH} levels deep; kai does not read it",
        obj=f"{kind}/{ns}/{name}",
    )


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


def parse_owner(api_version: str, kind: str, doc: dict[str, Any]) -> Workload | None:
    """An owner as read from the API server (a GET or a watch event); None if its metadata is unusable.
    An owner nested deeper than ``MAX_OWNER_DEPTH`` is refused (ManifestError) before any decoder
    recurses into it."""
    if nesting_depth(doc, MAX_OWNER_DEPTH) > MAX_OWNER_DEPTH:
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        raise _too_deep(kind, str(meta.get("namespace", "")), str(meta.get("name", "")))
    doc.get("metadata", {}).pop("managedFields", None)
    if (api_version, kind) in WORKLOAD_KINDS:
        return parse_workload(doc)
    try:
        meta = parse_meta(doc, kind, namespaced=True)
    except ManifestError:
        return None
    return Workload(meta=meta, api_version=api_version, kind=kind, doc=doc)


class PodGrouper:
    """Groups the pods put in its queue (``enqueue``), ``workers`` at a time; writes ``write_concurrency``
    at a time (see docs/cluster.md, "What precedes a bind")."""

    def __init__(
        self,
        api: Api,
        store: Store,
        record: Callable[[list[Event]], None],
        *,
        workers: int = 64,
        write_concurrency: int = 64,
        backoff: Backoff = _GROUPER_BACKOFF,
        wake: Callable[[], None] | None = None,
        quiet: Callable[[], Awaitable[None]] | None = None,
        in_shard: Callable[[Mapping[str, str]], bool] | None = None,
    ) -> None:
        self.api = api
        self.store = store
        self.record = record
        self.backoff = backoff
        self.wake = wake  # a decision was laid over: a cycle can take the pod
        self.quiet = quiet  # waits while binds are in flight: PodGroup creates and patches yield to them
        self.decided = Decided()
        self.owners = OwnerCache(api, self._fetch, parse_owner)
        self.in_shard = in_shard  # a shard's grouper makes only its own pool's PodGroups (their labels tell)
        self._queue: asyncio.Queue[Key] = asyncio.Queue()
        self._queued: set[Key] = set()
        self._failures: dict[Key, int] = {}
        self._plurals: dict[str, dict[str, str]] = {}  # apiVersion → kind → plural
        self._creates: dict[Key, asyncio.Future[bool]] = {}  # PodGroup → its create's outcome, once per PodGroup
        self._to_create: asyncio.Queue[tuple[PodGroup, asyncio.Future[bool]]] = asyncio.Queue()
        self._n_creators = write_concurrency
        self._creators: list[asyncio.Task[None]] = []
        self._patching: set[Key] = set()
        self._refusals: dict[Key, str] = {}  # PodGroups the API server refused (why): written before any bind now
        self._background: set[asyncio.Task[Any]] = set()
        self._slots = asyncio.Semaphore(write_concurrency)
        self._n_workers = workers
        self._workers: list[asyncio.Task[None]] = []
        self.grouped = 0  # pods given their PodGroup (decided and laid over, or patched)
        self.updated = 0  # PodGroups whose spec was patched to follow their workload
        self.created = 0  # PodGroups created
        self.patched = 0  # pods annotated by a patch (the others by their Binding)
        self.errors = 0  # pods a bug kept from being grouped
        self.peak_writes = 0  # the most creates and patches in flight at once
        self._in_flight = 0

    def start(self, supervisor: Supervisor, api: Any = None) -> None:
        """Start the workers under *supervisor*, writing through *api* (the fenced writer of the term
        this replica leads; reads pass through it too). Pods enqueued before wait for this: a standby
        decides and writes nothing."""
        if api is not None:
            self.api = api
        if not self._workers:
            entries = [supervisor.start("podgrouper", self._work) for _ in range(self._n_workers)]
            self._workers = [e.task for e in entries if e.task is not None]
            entries = [supervisor.start("podgroup-creator", self._creator) for _ in range(self._n_creators)]
            self._creators = [e.task for e in entries if e.task is not None]

    def enqueue(self, key: Key) -> None:
        if key not in self._queued:
            self._queued.add(key)
            self._queue.put_nowait(key)

    async def drained(self) -> None:
        """Until every pod enqueued so far was decided once (or failed once)."""
        await self._queue.join()

    async def close(self) -> None:
        creates = list(self._creates.values())  # Tasks (written before a bind) and the creators' Futures
        tasks = [*self._workers, *self._creators, *self._background, *creates]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.owners.close()

    def wants(self, pod: Pod) -> bool:
        """Whether *pod* is the grouper's to look at: a pending kai pod without a PodGroup and not decided
        yet, or a bound pod whose PodGroup is not there (its create was lost: a crash after the bind)."""
        key = (pod.meta.namespace or "", pod.meta.name)
        if needs_group(pod):
            return self.decided.annotation(key, pod.meta.uid) is None
        return self._lost_podgroup(pod)

    def _lost_podgroup(self, pod: Pod) -> bool:
        name = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
        if not name or not pod.node_name or pod.scheduler_name != C.SCHEDULER_NAME:
            return False
        if pod.phase in ("Succeeded", "Failed") or pod.meta.deletion_timestamp is not None:
            return False
        pg_key = (pod.meta.namespace or "", name)
        return self.store.get("PodGroup", pg_key) is None and pg_key not in self.decided.podgroups

    def expire(self) -> None:
        """Forget decisions and creates the Store now shows (called before each snapshot)."""
        self.decided.expire(self.store)
        self._patching.intersection_update(self.decided.pods)
        for key in [k for k, t in self._creates.items() if t.done() and self.store.get("PodGroup", k) is not None]:
            del self._creates[key]

    def podgroup_deleted(self, key: Key) -> None:
        """PodGroup *key* was deleted: its decision and its sent create are let go (``Decided.podgroup_deleted``)."""
        if self.decided.podgroup_deleted(key) or key not in self.decided.podgroups:
            task = self._creates.get(key)
            if task is not None and task.done():
                del self._creates[key]

    def settle(self, laid: set[Key], bound: set[Key]) -> None:
        """After a cycle: pods it took from a decision but did not bind get their annotation by a patch
        (the bound ones got it from their Binding)."""
        for key in laid - bound:
            entry = self.decided.pods.get(key)
            if entry is None or key in self._patching:
                continue
            pod = self.store.get("Pod", key)
            if pod is None or pod.meta.uid != entry[0]:
                continue
            self._patching.add(key)
            self._spawn(self._annotate(pod, entry[1], None, key))

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._finished)

    def _finished(self, task: asyncio.Task[Any]) -> None:
        """A background write ended: a Lease lost (``Fenced``) ends it quietly, a bug is logged."""
        self._background.discard(task)
        if task.cancelled():
            return
        e = task.exception()
        if e is not None and not isinstance(e, Fenced):
            self.errors += 1
            log.error("podgrouper background write failed", exc_info=e)

    async def _work(self) -> None:
        while True:
            key = await self._queue.get()
            try:
                self._queued.discard(key)
                pod = self.store.get("Pod", key)
                if pod is None or not self.wants(pod):
                    continue
                await self.group(pod)
                self._failures.pop(key, None)
            except ApiError as e:
                n = self._failures.get(key, 0)
                self._failures[key] = n + 1
                delay = self.backoff.delay(n)
                log.warning("grouping failed", extra={"pod": f"{key[0]}/{key[1]}", "error": str(e), "delay_s": delay})
                asyncio.get_running_loop().call_later(delay, self.enqueue, key)
            except Fenced:
                return  # the Lease is lost: this replica groups nothing more (the next leader will)
            except Exception as e:  # a bug costs this pod only: said on the pod, the worker goes on
                self.errors += 1
                self._failures.pop(key, None)
                log.exception("grouping failed with an internal error", extra={"pod": f"{key[0]}/{key[1]}"})
                ref = f"Pod/{key[0] or 'default'}/{key[1]}"
                message = f"kai could not group this pod (internal error {type(e).__name__}: {str(e)[:200]})"
                self.record([Event(ref, "Warning", "PodGrouperWarning", message)])
            finally:
                self._queue.task_done()

    async def group(self, pod: Pod) -> None:
        """Decide one pod's PodGroup (owner chain → ``group_pod``) and make it known: laid over the next
        snapshots at once, the PodGroup created in the background, the pod annotated by its Binding (or
        by a patch if a cycle leaves it pending). A grouping with a subgroup label is written first."""
        ns = pod.meta.namespace or "default"
        ref = f"Pod/{ns}/{pod.meta.name}"
        fetched: dict[tuple[str, str, str, str], Workload] = {}
        classes = {pc.meta.name for pc in self.store.list("PriorityClass")}
        try:
            chain = await self._owner_chain(pod, fetched)
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
        named = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
        if named is not None:  # bound, its PodGroup lost: made again if it is the one the grouper makes
            if named == pg.meta.name:
                self.decided.add_podgroup(pg)
                self._create(pg)
            return
        existing = self.store.get("PodGroup", (ns, pg.meta.name))
        if existing is not None and (patch := spec_patch(existing, pg)) is not None:
            await self._update(ns, existing, patch)
        if grouping.unknown_kind:
            self.record([Event(ref, "Normal", "UnknownOwnerKind", grouping.unknown_kind)])
        if grouping.warning is not None:  # the owner's spec contradicts itself: default grouping, and why
            self.record([Event(ref, "Warning", "PodGrouperWarning", str(grouping.warning))])
        # A name the API server will refuse (over 253 characters: a bare pod's name near the limit plus
        # KAI's pg-...-<uid>) is not laid over: the create's refusal must come before any bind.
        refused = (pg.meta.namespace or "", pg.meta.name) in self._refusals or len(pg.meta.name) > MAX_NAME
        if grouping.subgroup or refused:
            # a label the Binding cannot carry, or a PodGroup the API server refused before: KAI's order,
            # the PodGroup and then the patch before any bind
            if existing is None and not await self._create(pg, before_bind=True):
                why = self._refusals.get((pg.meta.namespace or "", pg.meta.name), "refused")
                self.record([Event(ref, "Warning", "PodGrouperWarning", why)])
                return
            await self._annotate(pod, pg.meta.name, grouping.subgroup, None)
            return
        self.decided.add(pod, pg)
        if existing is None:
            self._create(pg)
        self.grouped += 1
        if self.wake is not None:
            self.wake()

    @contextlib.asynccontextmanager
    async def _write_slot(self, *, before_bind: bool = False) -> AsyncIterator[None]:
        """One of ``write_concurrency`` slots, taken once no bind is in flight; at once for a write a bind
        waits for (a subgroup's PodGroup and label, a PodGroup known to be refused)."""
        async with self._slots:
            if self.quiet is not None and not before_bind:
                await self.quiet()
            self._in_flight += 1
            self.peak_writes = max(self.peak_writes, self._in_flight)
            try:
                yield
            finally:
                self._in_flight -= 1

    def _create(self, pg: PodGroup, *, before_bind: bool = False) -> asyncio.Future[bool]:
        """The create of *pg*, sent once however many pods name it (in the background, retried): a Future of
        whether the API server took it. It is queued for the ``write_concurrency`` creators: a Future per
        PodGroup, where a Task each made 16,000 bare pods 16,000 Tasks waiting on one semaphore. A create a
        bind waits for (*before_bind*) is a Task of its own: queued, it would wait behind creates that wait
        for the binds to end."""
        key = (pg.meta.namespace or "", pg.meta.name)
        made = self._creates.get(key)
        if made is None or (made.done() and not made.cancelled() and made.result() is False):  # refused: again
            if before_bind:
                made = asyncio.ensure_future(self._send_create(pg, before_bind))
            else:
                made = asyncio.get_running_loop().create_future()
                self._to_create.put_nowait((pg, made))
            self._creates[key] = made
        return made

    async def _creator(self) -> None:
        """Send the queued creates one after another (``write_concurrency`` creators run)."""
        while True:
            pg, made = await self._to_create.get()
            if made.done():  # cancelled (at close)
                continue
            try:
                ok = await self._send_create(pg)
            except asyncio.CancelledError:
                made.cancel()
                raise
            except Exception:  # a bug costs this PodGroup's create (tried again when a pod asks), not the creator
                self.errors += 1
                log.exception("podgroup create failed with an internal error", extra={"podgroup": pg.meta.name})
                ok = False
            if not made.done():
                made.set_result(ok)

    async def _send_create(self, pg: PodGroup, before_bind: bool = False) -> bool:
        ns = pg.meta.namespace or "default"
        key = (pg.meta.namespace or "", pg.meta.name)
        attempt = 0
        while True:
            try:
                async with self._write_slot(before_bind=before_bind):
                    await self.api.request(
                        "POST", f"/apis/{C.PODGROUP_API_VERSION}/namespaces/{ns}/podgroups", body=podgroup_manifest(pg)
                    )
                self.created += 1
                self._refusals.pop(key, None)
                return True
            except Fenced:
                return False  # the Lease is lost: the next leader makes it (its pods' watch events ask again)
            except ApiError as e:
                if e.code == 409:
                    return True  # it exists: another replica or an earlier attempt made it
                if e.code in (400, 403, 422):
                    log.error("podgroup create refused", extra={"podgroup": f"{ns}/{pg.meta.name}", "error": str(e)})
                    self._refused(pg, e)
                    return False
                delay = self.backoff.delay(attempt)
                attempt += 1
                log.warning("podgroup create failed", extra={"podgroup": f"{ns}/{pg.meta.name}", "error": str(e)})
                await asyncio.sleep(delay)

    def _refused(self, pg: PodGroup, err: ApiError) -> None:
        """The API server refuses *pg*: its pods are no longer scheduled from the decision (a pod bound
        meanwhile keeps its node); each gets a ``PodGrouperWarning`` saying why."""
        ns = pg.meta.namespace or ""
        message = f"the API server refused PodGroup {pg.meta.name}: {err}"
        self._refusals[(ns, pg.meta.name)] = message
        self.decided.podgroups.pop((ns, pg.meta.name), None)
        pods = [k for k, (_, name) in self.decided.pods.items() if k[0] == ns and name == pg.meta.name]
        for key in pods:
            del self.decided.pods[key]
            self.record([Event(f"Pod/{ns or 'default'}/{key[1]}", "Warning", "PodGrouperWarning", message)])

    async def _annotate(self, pod: Pod, name: str, subgroup: str | None, settling: Key | None) -> None:
        """Patch *pod* with its PodGroup's name (and subgroup label), once that PodGroup's create was sent."""
        ns = pod.meta.namespace or "default"
        try:
            task = self._creates.get((ns, name))
            if task is not None and not await task:
                return
            meta: dict[str, Any] = {"annotations": {C.ANNOTATION_POD_GROUP_NAME: name}}
            if subgroup:
                meta["labels"] = {C.LABEL_SUBGROUP_NAME: subgroup}
            async with self._write_slot(before_bind=settling is None):
                await self.api.request(
                    "PATCH",
                    f"/api/v1/namespaces/{ns}/pods/{pod.meta.name}",
                    body={"metadata": {**meta, "uid": pod.meta.uid}},
                    content_type="application/merge-patch+json",
                )
            self.patched += 1
            if settling is None:
                self.grouped += 1
        except ApiError as e:
            if e.code in (404, 409, 422):  # gone, or a new pod under the same name (uid differs)
                return
            if settling is None:
                raise
            log.warning(f"pod annotation failed: {e}", extra={"pod": f"{ns}/{pod.meta.name}", "error": str(e)})
        else:
            return  # patched: *settling* stays in _patching until the watch shows the annotation (expire)
        if settling is not None:
            self._patching.discard(settling)  # a failed patch is tried again after the next cycle

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
            base = await self._base(ref.api_version, ref.kind)
            owner = await self.owners.get(ref.api_version, ref.kind, ns, ref.name, base)
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

    async def _base(self, api_version: str, kind: str) -> str | None:
        """The cluster-wide path of *kind*'s resource (what the owner cache watches); None for a pod (the
        Store has those) or a kind not served."""
        if (api_version, kind) == ("v1", "Pod"):
            return None
        plural = await self._plural(api_version, kind)
        if plural is None:
            return None
        return f"/api/v1/{plural}" if api_version == "v1" else f"/apis/{api_version}/{plural}"

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
            if e.reason == "Undecodable":  # deeper than the JSON decoder recurses
                raise _too_deep(kind, ns, name) from e
            raise
        if not isinstance(doc, dict):
            return None
        return parse_owner(api_version, kind, doc)

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
