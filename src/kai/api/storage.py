"""Storage kinds a scheduler reads: StorageClass, PersistentVolume, PersistentVolumeClaim and CSINode.

Rules: only what kube-scheduler's VolumeBinding and NodeVolumeLimits plugins read, parsed strictly (an
unknown access mode or binding mode, a bad size, an attach limit below zero are ManifestErrors naming the
field). Sizes are bytes. A claim's ``storageClassName`` keeps the difference between unset (``None``: the
cluster's default class applies) and ``""`` (explicitly no class: static volumes without a class).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kai.api import constants as C
from kai.api._read import _int, _items, _list, _map, _required, _str
from kai.api.errors import ManifestError
from kai.api.objects import ObjectMeta, SelectorTerm, parse_meta, parse_node_selector_terms, parse_resources
from kai.api.selectors import LabelSelector, SelectorRequirement, parse_label_selector

ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
VOLUME_MODES = ("Filesystem", "Block")
WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"


@dataclass(slots=True)
class StorageClass:
    meta: ObjectMeta
    provisioner: str
    binding_mode: str = "Immediate"
    # allowedTopologies: nodes a provisioned volume may be reachable from (terms ORed, requirements ANDed);
    # empty = anywhere
    allowed_topologies: tuple[SelectorTerm, ...] = ()

    kind = "StorageClass"

    @property
    def is_default(self) -> bool:
        return self.meta.annotations.get(C.ANNOTATION_DEFAULT_STORAGE_CLASS) == "true"

    @property
    def provisions(self) -> bool:
        """It can make volumes on demand (kubernetes.io/no-provisioner classes only bind existing ones)."""
        return self.provisioner != C.NO_PROVISIONER


@dataclass(frozen=True, slots=True)
class ClaimRef:
    namespace: str
    name: str
    uid: str = ""


@dataclass(slots=True)
class PersistentVolume:
    meta: ObjectMeta
    capacity: int  # bytes
    access_modes: tuple[str, ...]
    storage_class: str = ""
    claim_ref: ClaimRef | None = None
    node_affinity: tuple[SelectorTerm, ...] = ()  # spec.nodeAffinity.required; empty = any node
    volume_mode: str = "Filesystem"
    csi_driver: str = ""  # spec.csi.driver (attach limits count per driver)
    phase: str = "Available"

    kind = "PersistentVolume"


@dataclass(slots=True)
class PersistentVolumeClaim:
    meta: ObjectMeta
    access_modes: tuple[str, ...]
    request: int = 0  # bytes (spec.resources.requests.storage)
    storage_class: str | None = None  # None: unset (the default class); "": no class
    volume_name: str = ""  # spec.volumeName: the PV it is bound (or pre-bound) to
    selector: LabelSelector | None = None  # which PVs it accepts, by their labels
    volume_mode: str = "Filesystem"
    phase: str = "Pending"

    kind = "PersistentVolumeClaim"

    @property
    def ref(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"

    @property
    def selected_node(self) -> str:
        """The node a WaitForFirstConsumer claim is being provisioned for (the scheduler's choice), if any."""
        return self.meta.annotations.get(C.ANNOTATION_SELECTED_NODE, "")

    @property
    def bound(self) -> bool:
        return bool(self.volume_name) and self.phase == "Bound"


@dataclass(slots=True)
class CSINode:
    """Per CSI driver on one node (named like the node), how many volumes it can attach (None: no limit)."""

    meta: ObjectMeta
    limits: dict[str, int | None] = field(default_factory=dict)

    kind = "CSINode"


def _modes(obj: Any, path: str, accepted: tuple[str, ...]) -> tuple[str, ...]:
    out = []
    for i, m in enumerate(_list(obj, path)):
        m = _str(m, f"{path}[{i}]")
        if m not in accepted:
            raise ManifestError(f"{m!r} is not one of {', '.join(accepted)}", field=f"{path}[{i}]")
        out.append(m)
    return tuple(out)


def _one_of(obj: Any, path: str, accepted: tuple[str, ...], default: str) -> str:
    value = _str(obj, path, default) or default
    if value not in accepted:
        raise ManifestError(f"{value!r} is not one of {', '.join(accepted)}", field=path)
    return value


def _storage(obj: Any, path: str) -> int:
    """``{storage: 10Gi}`` → bytes (0 when absent)."""
    return parse_resources(obj, path).get("storage", 0)


def parse_storage_class(doc: dict[str, Any]) -> StorageClass:
    meta = parse_meta(doc, "StorageClass", namespaced=False)
    provisioner = _required(doc.get("provisioner"), "provisioner")
    terms = []
    for p, t in _items(doc.get("allowedTopologies"), "allowedTopologies"):
        reqs = []
        for q, e in _items(t.get("matchLabelExpressions"), f"{p}.matchLabelExpressions"):
            key = _required(e.get("key"), f"{q}.key")
            values = tuple(_str(v, f"{q}.values[{k}]") for k, v in enumerate(_list(e.get("values"), f"{q}.values")))
            if not values:
                raise ManifestError("needs at least one value", field=f"{q}.values")
            reqs.append(SelectorRequirement(key, "In", values))
        terms.append(SelectorTerm(tuple(reqs)))
    return StorageClass(
        meta=meta,
        provisioner=provisioner,
        binding_mode=_one_of(doc.get("volumeBindingMode"), "volumeBindingMode", BINDING_MODES, "Immediate"),
        allowed_topologies=tuple(terms),
    )


def _claim_ref(obj: Any, path: str) -> ClaimRef | None:
    if obj is None:
        return None
    r = _map(obj, path)
    name = _required(r.get("name"), f"{path}.name")
    return ClaimRef(
        _str(r.get("namespace"), f"{path}.namespace", "default") or "default", name, _str(r.get("uid"), f"{path}.uid")
    )


def parse_persistent_volume(doc: dict[str, Any]) -> PersistentVolume:
    meta = parse_meta(doc, "PersistentVolume", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    status = _map(doc.get("status"), "status")
    na = _map(spec.get("nodeAffinity"), "spec.nodeAffinity")
    required = _map(na.get("required"), "spec.nodeAffinity.required")
    claim_ref = _claim_ref(spec.get("claimRef"), "spec.claimRef")
    return PersistentVolume(
        meta=meta,
        capacity=_storage(spec.get("capacity"), "spec.capacity"),
        access_modes=_modes(spec.get("accessModes"), "spec.accessModes", ACCESS_MODES),
        storage_class=_str(spec.get("storageClassName"), "spec.storageClassName"),
        claim_ref=claim_ref,
        node_affinity=parse_node_selector_terms(
            required.get("nodeSelectorTerms"), "spec.nodeAffinity.required.nodeSelectorTerms"
        ),
        volume_mode=_one_of(spec.get("volumeMode"), "spec.volumeMode", VOLUME_MODES, "Filesystem"),
        csi_driver=_str(_map(spec.get("csi"), "spec.csi").get("driver"), "spec.csi.driver"),
        phase=_str(status.get("phase"), "status.phase", "Bound" if claim_ref is not None else "Available"),
    )


def parse_persistent_volume_claim(doc: dict[str, Any]) -> PersistentVolumeClaim:
    meta = parse_meta(doc, "PersistentVolumeClaim", namespaced=True)
    spec = _map(doc.get("spec"), "spec")
    status = _map(doc.get("status"), "status")
    resources = _map(spec.get("resources"), "spec.resources")
    cls = spec.get("storageClassName")
    volume_name = _str(spec.get("volumeName"), "spec.volumeName")
    return PersistentVolumeClaim(
        meta=meta,
        access_modes=_modes(spec.get("accessModes"), "spec.accessModes", ACCESS_MODES),
        request=_storage(resources.get("requests"), "spec.resources.requests"),
        storage_class=None if cls is None else _str(cls, "spec.storageClassName"),
        volume_name=volume_name,
        selector=parse_label_selector(spec.get("selector"), "spec.selector"),
        volume_mode=_one_of(spec.get("volumeMode"), "spec.volumeMode", VOLUME_MODES, "Filesystem"),
        phase=_str(status.get("phase"), "status.phase", "Bound" if volume_name else "Pending"),
    )


def parse_csinode(doc: dict[str, Any]) -> CSINode:
    meta = parse_meta(doc, "CSINode", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    limits: dict[str, int | None] = {}
    for p, d in _items(spec.get("drivers"), "spec.drivers"):
        name = _required(d.get("name"), f"{p}.name")
        count = _int(_map(d.get("allocatable"), f"{p}.allocatable").get("count"), f"{p}.allocatable.count", None)
        if count is not None and count < 0:
            raise ManifestError("must not be negative", field=f"{p}.allocatable.count")
        limits[name] = count
    return CSINode(meta=meta, limits=limits)


StorageObject = StorageClass | PersistentVolume | PersistentVolumeClaim | CSINode
