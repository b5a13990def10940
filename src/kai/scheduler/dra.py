"""The Dynamic Resource Allocation part of a Snapshot: DeviceClasses, the devices of the ResourceSlices, the
ResourceClaims and their templates, as kube-scheduler's DynamicResources plugin reads them.

Rules: read-only for the cycle. Devices are listed once, in a fixed order (node, driver, pool, name), so a
request's matching devices are one boolean array over them (``matching``), computed once per (class,
selectors) and kept: device attributes never change, so each CEL selector is evaluated once per device, here,
outside the placement loop. Which devices a claim gets is decided by the ``dynamicresources`` plugin's book
(``kai.scheduler.podrules._dra``) as pods are placed.

Of a pool published in several generations, only the newest counts (as kube-scheduler's allocator).
GPUs: as KAI counts them, devices of a driver whose name contains "gpu" add to their node's GPUs, and a pod's
claims of a GPU device class add to its GPU request (``kai.api.dra.claim_gpus``), so they count against queue
quotas and fair share.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kai.api.cel import CelSelector, device_value
from kai.api.dra import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice, claim_gpus, is_gpu_class
from kai.api.objects import Pod

ClaimKey = tuple[str, str]  # (namespace, name)
DeviceKey = tuple[str, str, str]  # (driver, pool, device)


@dataclass(frozen=True, slots=True)
class Dra:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    claims: dict[ClaimKey, ResourceClaim] = field(default_factory=dict)
    templates: dict[ClaimKey, ResourceClaimTemplate] = field(default_factory=dict)
    devices: tuple[DeviceKey, ...] = ()
    device_node: tuple[str, ...] = ()  # per device, its node's name
    _values: list[Any] = field(default_factory=list)  # per device, its CEL value
    _selected: dict[CelSelector, np.ndarray] = field(default_factory=dict)  # selector -> (devices,) bool
    _matching: dict[tuple[str, tuple[CelSelector, ...]], np.ndarray] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.claims or self.devices or self.templates)

    def selected(self, selector: CelSelector) -> np.ndarray:
        """(devices,) bool: devices *selector* matches (evaluated once per device, then kept)."""
        got = self._selected.get(selector)
        if got is None:
            got = np.fromiter((selector.matches(v) for v in self._values), dtype=bool, count=len(self._values))
            self._selected[selector] = got
        return got

    def matching(self, class_name: str, selectors: tuple[CelSelector, ...]) -> np.ndarray:
        """(devices,) bool: devices of class *class_name* (its selectors) that match *selectors* too. A class that
        does not exist matches nothing."""
        key = (class_name, selectors)
        got = self._matching.get(key)
        if got is None:
            cls = self.classes.get(class_name)
            got = np.zeros(len(self.devices), dtype=bool)
            if cls is not None:
                got = np.ones(len(self.devices), dtype=bool)
                for s in (*cls.selectors, *selectors):
                    got = got & self.selected(s)
            self._matching[key] = got
        return got

    def claim_name(self, pod: Pod, ref: str) -> str:
        """The claim a pod's ``spec.resourceClaims`` entry *ref* stands for ("" while a template's claim is not
        made yet)."""
        for c in pod.resource_claims:
            if c.name == ref:
                return c.claim or pod.claim_statuses.get(c.name, "")
        return ""

    def pod_gpus(self, pod: Pod) -> int:
        """GPUs the pod's claims count for (KAI's ExtractDRAGPUResourcesFromClaims); a template's claim not made
        yet counts by its template. An allocated claim shared by several pods counts for the first pod of its
        ``reservedFor`` only: the others use the same devices (KAI's DRASharedDeviceRefCount counts a device once
        per node, so a pod joining a shared GPU claim needs no free GPU; allocate_shared_dra_test.go)."""
        ns = pod.meta.namespace or ""
        total = 0
        for c in pod.resource_claims:
            name = c.claim or pod.claim_statuses.get(c.name, "")
            claim = self.claims.get((ns, name)) if name else None
            if claim is not None:
                if claim.allocation is not None and claim.reserved_for and claim.reserved_for[0].name != pod.meta.name:
                    continue
                total += claim_gpus(claim)
            elif c.template and (tpl := self.templates.get((ns, c.template))) is not None:
                total += claim_gpus(tpl)
        return total

    def node_gpus(self) -> dict[str, int]:
        """Per node, its DRA GPUs (KAI's populateDRAGPUs: devices of drivers whose name contains "gpu")."""
        out: dict[str, int] = {}
        for (driver, _, _), node in zip(self.devices, self.device_node):
            if is_gpu_class(driver):
                out[node] = out.get(node, 0) + 1
        return out


def build_dra(
    classes: Iterable[DeviceClass] = (),
    slices: Iterable[ResourceSlice] = (),
    claims: Iterable[ResourceClaim] = (),
    templates: Iterable[ResourceClaimTemplate] = (),
) -> Dra:
    slices = list(slices)
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        newest[s.driver, s.pool] = max(newest.get((s.driver, s.pool), 0), s.generation)
    rows = []
    seen: set[DeviceKey] = set()
    for s in sorted(slices, key=lambda s: (s.node_name, s.driver, s.pool, s.meta.name)):
        if s.generation != newest[s.driver, s.pool] or s.meta.deletion_timestamp is not None:
            continue
        for d in s.devices:
            key = (s.driver, s.pool, d.name)
            if key in seen:
                continue  # a device listed twice in one pool: the first counts
            seen.add(key)
            rows.append((s.node_name, key, device_value(s.driver, d.attributes, d.capacity)))
    rows.sort(key=lambda r: (r[0], r[1]))
    return Dra(
        classes={c.meta.name: c for c in classes},
        claims={(c.meta.namespace or "", c.meta.name): c for c in claims},
        templates={(t.meta.namespace or "", t.meta.name): t for t in templates},
        devices=tuple(r[1] for r in rows),
        device_node=tuple(r[0] for r in rows),
        _values=[r[2] for r in rows],
    )


def dra_of(store: Any, claims: Iterable[ResourceClaim] | None = None) -> Dra:
    """The DRA kinds of a Store (``kai.store.Store``: what the backends keep); *claims* in place of its
    ResourceClaims (the Kubernetes backend adds the ones it wrote that the watch has not delivered yet)."""
    return build_dra(
        store.list("DeviceClass"),
        store.list("ResourceSlice"),
        store.list("ResourceClaim") if claims is None else claims,
        store.list("ResourceClaimTemplate"),
    )


NO_DRA = Dra()
