"""What this process did that the watch has not shown yet, laid over the Store for the next snapshots.

Rules, as kube-scheduler's assume cache (which since Kubernetes 1.23 never expires an assumed pod on
time alone, kubernetes#106361):

* A bind the API server answered 201 (or one read back bound after an unclear answer) counts as bound
  until the Store shows it bound, or shows the pod gone or replaced (another uid). A pod's nodeName
  never changes once set, so nothing else can refute it.
* An eviction answered 2xx counts as releasing until the Store shows the pod terminating or gone.
* A bind whose answer was lost and could not be read back is *in doubt*: it counts as bound on the
  node it was sent for (its room is not given away), until the Store shows it bound or gone, or the pod
  watch has been heard from ``doubt_s`` after the attempt with the pod still unbound (then it did not
  happen and the pod is planned again). A gang pod's bind refuted so has left its gang bound in part,
  as a failed bind does: the gang is marked broken (below).
* As a backstop against a bug leaking entries, an assumption older than ``ttl_s`` (counted from when
  its request finished) is dropped, but only if the pod watch has been heard from since then: a watch
  that is stalled or down never makes kai forget its own binds. ``ttl_s`` is longer than the informers'
  progress deadline.
* A gang whose binds partly failed is *broken*. The next cycle decides on its bound part alone: the
  pods whose bind failed are held back (left out of the snapshots) for a backoff, 1 s doubling to 10 s
  per consecutive failure as kube-scheduler backs a pod off, and the PodGroup is shown to the engine as
  stale since the epoch, so if the bound part no longer meets minMember the stale gang eviction
  evicts it at once instead of after the staleness grace. The mark goes when a cycle reports the gang
  not stale (its bound part suffices, or nothing of it is bound any more) and no pod of it was being
  deleted in the snapshot that cycle decided on, nor is now (a releasing pod counts towards minMember, so
  a gang evicted in part looks whole until its evicted pods are gone), or when the PodGroup is gone;
  the held-back pods come back when their backoff ends, and the gang is placed whole again.
* A replica that becomes leader knows nothing of its predecessor's binds. A gang it finds bound in part
  and not stamped stale was most likely left so mid-bind by that predecessor (deposed, killed, frozen
  past its Lease): a leader stamps a gang that lost a pod in its next cycle. So such gangs start out
  broken (``adopt``): the first cycle completes them if allocate can, and otherwise evicts their bound
  part at once rather than holding their GPUs through the staleness grace. The engine still decides
  what is stale; a gang wrongly suspected only loses its grace.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from kai.api import constants as C
from kai.api.copying import replace
from kai.api.gpugroups import gpu_group_labels, group_labels, is_gpu_group_label
from kai.api.objects import Pod, PodGroup
from kai.k8s._api import Backoff
from kai.scheduler.decisions import PodGroupStatus
from kai.store import Key, Store

ASSUME_TTL_S = 120.0
DOUBT_S = 5.0
HOLD_BACK = Backoff(initial=1.0, cap=10.0)
_DONE = ("Succeeded", "Failed")

HeardSince = Callable[[float], bool]  # the pod watch was heard from after monotonic time t


def gone_since(key: Key, pod: Pod | None, decided_on: Mapping[Key, Pod]) -> bool:
    """Whether the Store's *pod* (None: deleted) is not the pod *key* a cycle decided on (*decided_on*: the
    snapshot's pods by key): deleted, or made again under the same name (another uid) since the snapshot. A
    decision about it is not sent."""
    if pod is None:
        return True
    then = decided_on.get(key)
    return then is not None and then.meta.uid != pod.meta.uid


class AssumedBind(NamedTuple):
    uid: str
    node: str
    when: float  # monotonic, when the request finished
    gpu_groups: tuple[str, ...]
    doubt: bool = False  # the answer was lost: it may not have happened
    podgroup: str = ""  # the pod's PodGroup (a refuted doubt breaks its gang)


class AssumedEviction(NamedTuple):
    uid: str
    when: float


class HeldBack(NamedTuple):
    uid: str
    until: float  # monotonic
    failures: int  # consecutive failed binds (the backoff doubles with each)


@dataclass
class Assumed:
    """Binds, evictions and broken gangs the Store does not show yet."""

    binds: dict[Key, AssumedBind] = field(default_factory=dict)
    evictions: dict[Key, AssumedEviction] = field(default_factory=dict)
    broken: dict[Key, float] = field(default_factory=dict)  # PodGroup → monotonic time its binds partly failed
    held_back: dict[Key, HeldBack] = field(default_factory=dict)  # pods of broken gangs whose bind failed
    ttl_s: float = ASSUME_TTL_S
    doubt_s: float = DOUBT_S

    def hold_back(self, key: Key, uid: str, now: float) -> None:
        """Leave pod *key* (whose bind failed in a broken gang) out of the snapshots for a backoff."""
        old = self.held_back.get(key)
        failures = old.failures + 1 if old is not None and old.uid == uid else 1
        self.held_back[key] = HeldBack(uid, now + HOLD_BACK.delay(failures - 1), failures)

    def bound_ok(self, key: Key) -> None:
        """Pod *key* was bound: its backoff starts over."""
        self.held_back.pop(key, None)

    def expire(self, store: Store, now: float, heard_since: HeardSince) -> None:
        """Forget what the Store now confirms or refutes (module docstring)."""
        for key, b in list(self.binds.items()):
            pod = store.get("Pod", key)
            if pod is None or pod.meta.uid != b.uid or pod.node_name:
                del self.binds[key]
            elif b.doubt and heard_since(b.when + self.doubt_s):
                del self.binds[key]  # the watch is past the attempt and the pod is unbound: it did not happen
                if b.podgroup:  # its gang's other binds may have: the next cycle decides on the bound part
                    self.broken[(key[0], b.podgroup)] = now
            elif now - b.when > self.ttl_s and heard_since(b.when + self.ttl_s):
                del self.binds[key]
        for key, e in list(self.evictions.items()):
            pod = store.get("Pod", key)
            shown = pod is None or pod.meta.uid != e.uid or pod.meta.deletion_timestamp is not None
            if shown or (now - e.when > self.ttl_s and heard_since(e.when + self.ttl_s)):
                del self.evictions[key]
        for key in [k for k in self.broken if store.get("PodGroup", k) is None]:
            del self.broken[key]
        for key, h in list(self.held_back.items()):  # a pod bound or gone meanwhile needs no backoff
            pod = store.get("Pod", key)
            if pod is None or pod.meta.uid != h.uid or pod.node_name or now - h.until > HOLD_BACK.cap:
                del self.held_back[key]

    def adopt(self, store: Store, now: float) -> list[Key]:
        """Once leading, before the first cycle: mark broken the gangs bound in part and not stamped stale
        (module docstring). Those marked, for the log."""
        bound: dict[Key, int] = {}
        for pod in store.list("Pod"):
            name = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
            if name and pod.node_name and pod.meta.deletion_timestamp is None and pod.phase not in _DONE:
                key = (pod.meta.namespace or "", name)
                bound[key] = bound.get(key, 0) + 1
        marked = []
        for key, n in bound.items():
            pg = store.get("PodGroup", key)
            if pg is not None and pg.stale_since is None and n < pg.min_member:
                self.broken[key] = now
                marked.append(key)
        return marked

    def gpu_groups(self) -> set[str]:
        """The GPU groups of the binds assumed now (shared binds in flight included): their reservation pods are
        in use although no pod of the Store carries their label yet."""
        return {g for b in self.binds.values() for g in b.gpu_groups}

    def lay_over(self, pods: dict[Key, Pod], now: float, mono: float) -> None:
        """Lay the assumptions over *pods* (a copy of the Store's pods by key, changed here in place: a pod is
        replaced by a copy in its place; the Store is not changed) and leave out the pods held back. *now* is
        wall time, *mono* monotonic time. Costs the assumptions, not the Store's pods: this runs every cycle."""
        for key, h in self.held_back.items():
            pod = pods.get(key)
            if pod is not None and h.uid == pod.meta.uid and mono < h.until:
                del pods[key]
        for key, b in self.binds.items():
            pod = pods.get(key)
            if pod is None or b.uid != pod.meta.uid or pod.node_name:
                continue
            pod = replace(pod, node_name=b.node)
            if b.gpu_groups and set(group_labels(pod)) != set(b.gpu_groups):
                labels = {k: v for k, v in pod.meta.labels.items() if not is_gpu_group_label(k)}
                labels.update(gpu_group_labels(b.gpu_groups))
                pod = replace(pod, meta=replace(pod.meta, labels=labels))
            pods[key] = pod
        for key, ev in self.evictions.items():
            pod = pods.get(key)
            if pod is not None and ev.uid == pod.meta.uid and pod.meta.deletion_timestamp is None:
                pods[key] = replace(pod, meta=replace(pod.meta, deletion_timestamp=now))

    def podgroups(self, pgs: list[PodGroup]) -> list[PodGroup]:
        """*pgs* (the Store's PodGroups with the pod-grouper's decisions laid over), broken gangs shown stale
        since the epoch (evicted at once if still short)."""
        if not self.broken:
            return pgs
        return [
            dataclasses.replace(pg, stale_since=0.0) if (pg.meta.namespace or "", pg.meta.name) in self.broken else pg
            for pg in pgs
        ]

    def settle(self, statuses: list[PodGroupStatus], store: Store, decided_on: Mapping[Key, Pod]) -> None:
        """After a cycle: a broken gang the cycle found not stale (completed, or wholly pending) is whole,
        unless a pod of it was going in the snapshot the cycle decided on (*decided_on*, by key) or is going
        now. A releasing pod counts towards a gang's minimum (KAI's IsGangSatisfied), so a gang evicted in
        part looks whole while its evicted pods are still there; the mark stays until a cycle that did not
        see them judges what is left. Judged from the Store alone, a pod whose deletion ended between the
        snapshot and this call cleared the mark: the next cycle then found the gang short and unmarked, and
        its bound part waited out the whole staleness grace (a chaos run of the twenty-second session)."""
        if not self.broken:
            return
        whole = [key for st in statuses if (key := (st.namespace, st.name)) in self.broken and st.stale_since is None]
        if not whole:
            return
        going = self._going(store.list("Pod")) | self._going(decided_on.values())
        for key in whole:
            if key not in going:
                del self.broken[key]

    def _going(self, pods: Iterable[Pod]) -> set[Key]:
        """The gangs (PodGroup keys) with a pod of *pods* being deleted, or evicted by us."""
        out: set[Key] = set()
        for pod in pods:
            key = (pod.meta.namespace or "", pod.meta.name)
            ev = self.evictions.get(key)
            if pod.meta.deletion_timestamp is not None or (ev is not None and ev.uid == pod.meta.uid):
                name = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
                if name:
                    out.add((key[0], name))
        return out
