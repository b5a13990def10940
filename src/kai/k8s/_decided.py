"""The pod-grouper's decisions the Store does not show yet, laid over each cycle's snapshot.

Why: a bare pod costs a PodGroup create, an annotation and a bind. Written one after the other, the
grouping alone takes two of the API server's writes per pod before the scheduler may consider it, and
on a full queue of 4,000 pods that is 8,000 writes (about 5.5 s here) before the first bind. So the
pod-grouper records what it decided here the moment it decides, and the next cycle's snapshot takes
the pod as a member of its decided PodGroup (and the PodGroup as if it were written): the engine
schedules the pod in the same cycle that decides its group. The bind then carries the
``pod-group-name`` annotation in the Binding's metadata (the API server copies a Binding's
annotations onto the pod, in the same write that sets ``spec.nodeName``), and the PodGroup is
created after, at a lower priority than binds (docs/cluster.md, "What precedes a bind").

Only groupings that need nothing on the pod but the annotation are laid over: a pod the grouper puts
in a subgroup needs the ``kai.scheduler/subgroup-name`` label, which a Binding cannot carry, so it is
written (PodGroup, then pod patch) before the pod is scheduled, as KAI does.

An entry leaves as soon as the Store shows what it stands for: a pod entry once the Store's pod
carries an annotation (the patch or the bind landed; or the pod is gone or was recreated), a PodGroup
entry once the Store has the PodGroup, or once a watch event says it was deleted and no decided pod
names it (it may come and go between two cycles).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kai.api import constants as C
from kai.api.copying import replace
from kai.api.objects import Pod, PodGroup
from kai.store import Key, Store


@dataclass
class Decided:
    """Decisions not yet visible in the Store: pod → (uid, PodGroup name), PodGroup key → PodGroup."""

    pods: dict[Key, tuple[str, str]] = field(default_factory=dict)
    podgroups: dict[Key, PodGroup] = field(default_factory=dict)

    def add(self, pod: Pod, pg: PodGroup) -> None:
        ns = pod.meta.namespace or ""
        self.pods[(ns, pod.meta.name)] = (pod.meta.uid, pg.meta.name)
        self.podgroups.setdefault((pg.meta.namespace or "", pg.meta.name), pg)

    def add_podgroup(self, pg: PodGroup) -> None:
        """A PodGroup an already annotated pod names (a bind that outran its PodGroup's create)."""
        self.podgroups.setdefault((pg.meta.namespace or "", pg.meta.name), pg)

    def podgroup_deleted(self, key: Key) -> bool:
        """PodGroup *key* was deleted (seen in a watch event): its entry leaves unless a decided pod still
        names it, since ``expire`` alone misses a PodGroup that came and went between two cycles (a pod
        deleted seconds after its group was made, then collected), and such an entry would otherwise be
        kept, and laid over every snapshot, for ever. Whether it left."""
        if key not in self.podgroups or any(
            pod_key[0] == key[0] and name == key[1] for pod_key, (_, name) in self.pods.items()
        ):
            return False
        del self.podgroups[key]
        return True

    def annotation(self, key: Key, uid: str) -> str | None:
        """The PodGroup name decided for the pod *key* (of *uid*), for its Binding to carry; None if none."""
        entry = self.pods.get(key)
        return entry[1] if entry is not None and entry[0] == uid else None

    def expire(self, store: Store) -> None:
        """Forget what the Store now shows."""
        for key, (uid, _) in list(self.pods.items()):
            pod = store.get("Pod", key)
            if pod is None or pod.meta.uid != uid or C.ANNOTATION_POD_GROUP_NAME in pod.meta.annotations:
                del self.pods[key]
        for key in [k for k in self.podgroups if store.get("PodGroup", k) is not None]:
            del self.podgroups[key]

    def lay_over(self, pods: dict[Key, Pod], podgroups: dict[Key, PodGroup]) -> set[Key]:
        """Lay the decisions over *pods* and *podgroups* (copies of the Store's, by key, changed here in place): a
        decided pod is replaced by a copy with its annotation, in its place (the Store's pod is untouched), and a
        decided PodGroup not written yet is added after the Store's. The keys of the pods given an annotation
        here. Costs what is decided, not the Store's pods: in a stream of pods this runs every cycle."""
        laid: set[Key] = set()
        for key, (uid, name) in self.pods.items():
            pod = pods.get(key)
            if pod is None or pod.meta.uid != uid or C.ANNOTATION_POD_GROUP_NAME in pod.meta.annotations:
                continue
            annotations = {**pod.meta.annotations, C.ANNOTATION_POD_GROUP_NAME: name}
            pods[key] = replace(pod, meta=replace(pod.meta, annotations=annotations))
            laid.add(key)
        for key, pg in self.podgroups.items():
            podgroups.setdefault(key, pg)
        return laid
