"""Which of kai's pods name each PodGroup, kept from the Store's change feed.

Why: the embedded cluster's TTL controller (``EmbeddedCluster.collect_finished``) runs at every step of a
time simulation and looks for PodGroups whose every pod has Succeeded. Walking every pod for that at each step
was a few per cent of a saturated week. Kept per change instead, a step costs what changed: the groups with a
succeeded pod are the only candidates, and each is checked against its own members.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.objects import Pod
from kai.store import Change, Key, Store


def group_of(pod: Pod) -> Key | None:
    """The PodGroup a kai pod names, or None (another scheduler's pod, or one not grouped yet)."""
    name = pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME)
    if name is None or pod.scheduler_name != C.SCHEDULER_NAME:
        return None
    return (pod.meta.namespace or "", name)


class GroupMembers:
    """Per PodGroup, its pods (in the order they joined it) and how many of them have Succeeded."""

    def __init__(self, store: Store) -> None:
        self._members: dict[Key, dict[Key, Pod]] = {}
        self._group: dict[Key, Key] = {}  # pod -> the group it is a member of
        self._succeeded: dict[Key, int] = {}  # group -> its members that have Succeeded (only groups with one)
        for pod in store.list("Pod"):
            if (group := group_of(pod)) is not None:
                self._add((pod.meta.namespace or "", pod.meta.name), pod, group)
        store.subscribe(self._changed)

    def finished(self) -> list[Key]:
        """The groups whose every pod has Succeeded, sorted."""
        return sorted(g for g, n in self._succeeded.items() if n == len(self._members[g]))

    def pods(self, group: Key) -> list[Pod]:
        return list(self._members.get(group, {}).values())

    def _changed(self, change: Change) -> None:
        if change.kind != "Pod":
            return
        key = change.key
        old = self._group.get(key)
        new = group_of(change.obj) if change.op != "DELETED" else None
        if old is not None and old == new:  # changed in place: its place among the members stays
            members = self._members[old]
            self._count(old, members[key], -1)
            members[key] = change.obj
            self._count(old, change.obj, 1)
            return
        if old is not None:
            self._remove(key, old)
        if new is not None:
            self._add(key, change.obj, new)

    def _add(self, key: Key, pod: Pod, group: Key) -> None:
        self._members.setdefault(group, {})[key] = pod
        self._group[key] = group
        self._count(group, pod, 1)

    def _remove(self, key: Key, group: Key) -> None:
        del self._group[key]
        members = self._members[group]
        self._count(group, members.pop(key), -1)
        if not members:
            del self._members[group]

    def _count(self, group: Key, pod: Pod, sign: int) -> None:
        if pod.phase != "Succeeded":
            return
        n = self._succeeded.get(group, 0) + sign
        if n:
            self._succeeded[group] = n
        else:
            del self._succeeded[group]
