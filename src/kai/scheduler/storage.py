"""The storage part of a Snapshot: StorageClasses, PersistentVolumes, PersistentVolumeClaims and CSINodes, as
kube-scheduler's VolumeBinding and NodeVolumeLimits plugins read them.

Rules: read-only for the cycle, keyed for lookup. Which volume a claim gets and where is decided by the
volume rules (``kai.scheduler.podrules``) as pods are placed; nothing here changes during a cycle.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kai.api.storage import CSINode, PersistentVolume, PersistentVolumeClaim, StorageClass


@dataclass(frozen=True, slots=True)
class Storage:
    classes: dict[str, StorageClass] = field(default_factory=dict)
    volumes: dict[str, PersistentVolume] = field(default_factory=dict)
    claims: dict[tuple[str, str], PersistentVolumeClaim] = field(default_factory=dict)  # (namespace, name)
    attach_limits: dict[str, dict[str, int]] = field(default_factory=dict)  # node -> CSI driver -> volumes

    @property
    def default_class(self) -> StorageClass | None:
        """The class a claim without storageClassName gets (the newest default, as the admission plugin)."""
        defaults = [c for c in self.classes.values() if c.is_default]
        return max(defaults, key=lambda c: (c.meta.creation_timestamp or 0.0, c.meta.name)) if defaults else None

    def class_of(self, claim: PersistentVolumeClaim) -> str:
        """The claim's storage class name ("" for none)."""
        if claim.storage_class is not None:
            return claim.storage_class
        default = self.default_class
        return default.meta.name if default is not None else ""


def build_storage(
    classes: Iterable[StorageClass] = (),
    volumes: Iterable[PersistentVolume] = (),
    claims: Iterable[PersistentVolumeClaim] = (),
    csinodes: Iterable[CSINode] = (),
) -> Storage:
    return Storage(
        classes={c.meta.name: c for c in classes},
        volumes={v.meta.name: v for v in volumes},
        claims={(c.meta.namespace or "", c.meta.name): c for c in claims},
        attach_limits={
            n.meta.name: {d: limit for d, limit in n.limits.items() if limit is not None}
            for n in csinodes
            if any(limit is not None for limit in n.limits.values())
        },
    )


def storage_of(store: Any) -> Storage:
    """The storage kinds of a Store (``kai.store.Store``: what the backends keep)."""
    return build_storage(
        store.list("StorageClass"),
        store.list("PersistentVolume"),
        store.list("PersistentVolumeClaim"),
        store.list("CSINode"),
    )


NO_STORAGE = Storage()
