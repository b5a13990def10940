"""The embedded cluster's storage controllers: what the PV controller and a provisioner do on a real cluster.

* A pod's Bind carries its volume choices (``kai.scheduler.decisions.VolumeBinding``): a static volume gets
  the claim (``claimRef``), a WaitForFirstConsumer claim to provision gets a new volume made for the chosen
  node, pinned to it (to the node's values of the class's ``allowedTopologies`` keys, else to its
  hostname); either way the claim is Bound before the pod runs, as on a cluster where kai binds volumes
  first.
* A claim whose class binds ``Immediate`` (or that has no class) is bound as soon as it exists, as the PV
  controller does: the smallest free volume that fits it, else (a class with a provisioner) a new volume,
  pinned to the class's first allowed topology if it has any. A claim that nothing can satisfy stays Pending.
"""

from __future__ import annotations

import dataclasses

from kai.api import constants as C
from kai.api.objects import Node, ObjectMeta, SelectorTerm
from kai.api.selectors import SelectorRequirement
from kai.api.storage import WAIT_FOR_FIRST_CONSUMER, ClaimRef, PersistentVolume, PersistentVolumeClaim
from kai.scheduler.decisions import VolumeBinding
from kai.scheduler.storage import storage_of
from kai.store import Store


def _bind(store: Store, claim: PersistentVolumeClaim, volume: PersistentVolume, now: float) -> None:
    ref = ClaimRef(claim.meta.namespace or "", claim.meta.name, claim.meta.uid)
    store.put(dataclasses.replace(volume, claim_ref=ref, phase="Bound"))
    store.put(dataclasses.replace(claim, volume_name=volume.meta.name, phase="Bound"))


def _provisioned(
    claim: PersistentVolumeClaim, class_name: str, pinned: tuple[SelectorTerm, ...], now: float
) -> PersistentVolume:
    name = f"pvc-{claim.meta.namespace}-{claim.meta.name}"
    return PersistentVolume(
        meta=ObjectMeta(name, None, f"PersistentVolume/{name}", creation_timestamp=now),
        capacity=claim.request,
        access_modes=claim.access_modes,
        storage_class=class_name,
        node_affinity=pinned,
        volume_mode=claim.volume_mode,
    )


def bind_chosen(store: Store, bindings: tuple[VolumeBinding, ...], now: float) -> None:
    """Carry out a pod's volume choices before it is bound (see the module docstring)."""
    storage = storage_of(store)
    for v in bindings:
        claim = storage.claims.get((v.namespace, v.claim))
        if claim is None or claim.bound:
            continue
        if v.volume:
            volume = storage.volumes.get(v.volume)
            if volume is not None:
                _bind(store, claim, volume, now)
            continue
        class_name = storage.class_of(claim)
        cls = storage.classes.get(class_name)
        node = store.get("Node", ("", v.node))
        keys = [r.key for t in cls.allowed_topologies for r in t.match_expressions] if cls is not None else []
        _bind(store, claim, _provisioned(claim, class_name, _pinned(node, keys or [C.LABEL_HOSTNAME]), now), now)


def _pinned(node: Node | None, keys: list[str]) -> tuple[SelectorTerm, ...]:
    if node is None:
        return ()
    labels = node.meta.labels
    reqs = tuple(SelectorRequirement(k, "In", (labels[k],)) for k in dict.fromkeys(keys) if k in labels)
    return (SelectorTerm(reqs),) if reqs else ()


def bind_immediate(store: Store, now: float) -> None:
    """The PV controller: bind every pending claim that does not wait for its first consumer."""
    storage = storage_of(store)
    taken = {v.meta.name for v in storage.volumes.values() if v.claim_ref is not None}
    for (ns, name), claim in sorted(storage.claims.items()):
        if claim.bound or claim.meta.deletion_timestamp is not None:
            continue
        class_name = storage.class_of(claim)
        cls = storage.classes.get(class_name)
        if cls is not None and cls.binding_mode == WAIT_FOR_FIRST_CONSUMER:
            continue
        if class_name and cls is None:
            continue  # a class that does not exist: the claim stays Pending (and says so to its pods)
        fits = [
            v
            for v in storage.volumes.values()
            if (v.meta.name not in taken or (v.claim_ref and (v.claim_ref.namespace, v.claim_ref.name) == (ns, name)))
            and v.storage_class == class_name
            and v.capacity >= claim.request
            and set(claim.access_modes) <= set(v.access_modes)
            and v.volume_mode == claim.volume_mode
            and (claim.selector is None or claim.selector.matches(v.meta.labels))
            and v.meta.deletion_timestamp is None
        ]
        if claim.volume_name:
            fits = [v for v in fits if v.meta.name == claim.volume_name]
        if fits:
            volume = min(fits, key=lambda v: (v.capacity, v.meta.name))
            taken.add(volume.meta.name)
            _bind(store, claim, volume, now)
        elif cls is not None and cls.provisions and claim.selector is None:
            pinned = cls.allowed_topologies[:1]
            _bind(store, claim, _provisioned(claim, class_name, pinned, now), now)
