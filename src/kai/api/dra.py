"""Dynamic Resource Allocation kinds (``resource.k8s.io/v1``): DeviceClass, ResourceSlice, ResourceClaim and
ResourceClaimTemplate, and a pod's ``spec.resourceClaims``.

Rules: only what kube-scheduler's DynamicResources plugin (and KAI's ``dynamicresources``) reads with
structured parameters, parsed strictly. What kai does not model is refused with a ManifestError naming the
field rather than accepted and ignored: a request's ``firstAvailable`` (prioritized lists), ``adminAccess``,
``tolerations``, a claim's ``constraints``, and ResourceSlices that are not local to one node
(``nodeSelector``, ``allNodes``, ``perDeviceNodeSelection``). Device selectors are CEL expressions
(``kai.api.cel``), compiled here: a selector that does not compile refuses its object, naming the field.
Opaque ``config`` entries are kept as they are: the scheduler copies them into the allocation, the driver
reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kai.api._read import _bool, _int, _items, _list, _map, _required, _str, _str_map
from kai.api.cel import CelSelector, compile_selector
from kai.api.errors import ManifestError
from kai.api.objects import ObjectMeta, SelectorTerm, parse_meta, parse_node_selector_terms
from kai.api.quantity import parse_quantity

API_VERSION = "resource.k8s.io/v1"
EXACT_COUNT, ALL = "ExactCount", "All"
MAX_REQUEST_COUNT = 128  # resource.k8s.io: AllocationResultsMaxSize (a request never gets more devices)
MAX_RESERVED_FOR = 256  # ResourceClaimReservedForMaxSize


@dataclass(frozen=True, slots=True)
class Device:
    """One device of a ResourceSlice: its attributes (qualified ``domain/name`` -> int | bool | str) and capacity
    (qualified name -> amount)."""

    name: str
    attributes: dict[str, int | bool | str] = field(default_factory=dict, hash=False, compare=False)
    capacity: dict[str, Fraction] = field(default_factory=dict, hash=False, compare=False)


@dataclass(slots=True)
class DeviceClass:
    meta: ObjectMeta
    selectors: tuple[CelSelector, ...] = ()
    config: tuple[dict[str, Any], ...] = ()  # opaque configs, copied into allocations (source FromClass)

    kind = "DeviceClass"


@dataclass(slots=True)
class ResourceSlice:
    meta: ObjectMeta
    driver: str
    pool: str
    generation: int
    node_name: str
    devices: tuple[Device, ...] = ()

    kind = "ResourceSlice"


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """``spec.devices.requests[]`` with ``exactly``: *count* devices of *device_class* matching every selector,
    or with mode All every such device of the node (at least one)."""

    name: str
    device_class: str
    selectors: tuple[CelSelector, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """``status.allocation.devices.results[]``: one device given to one request."""

    request: str
    driver: str
    pool: str
    device: str


@dataclass(frozen=True, slots=True)
class Consumer:
    """``status.reservedFor[]``: a pod using the claim."""

    name: str
    uid: str = ""
    resource: str = "pods"


@dataclass(frozen=True, slots=True)
class Allocation:
    results: tuple[DeviceResult, ...]
    node_selector: tuple[SelectorTerm, ...] = ()  # empty: any node
    config: tuple[dict[str, Any], ...] = ()


@dataclass(slots=True)
class ClaimSpec:
    requests: tuple[DeviceRequest, ...] = ()
    config: tuple[dict[str, Any], ...] = ()  # opaque configs of the claim (source FromClaim)


@dataclass(slots=True)
class ResourceClaim:
    meta: ObjectMeta
    spec: ClaimSpec
    allocation: Allocation | None = None
    reserved_for: tuple[Consumer, ...] = ()

    kind = "ResourceClaim"

    @property
    def ref(self) -> str:
        return f"{self.meta.namespace}/{self.meta.name}"


@dataclass(slots=True)
class ResourceClaimTemplate:
    meta: ObjectMeta
    spec: ClaimSpec
    claim_labels: dict[str, str] = field(default_factory=dict)
    claim_annotations: dict[str, str] = field(default_factory=dict)

    kind = "ResourceClaimTemplate"


DraObject = DeviceClass | ResourceSlice | ResourceClaim | ResourceClaimTemplate


# ---------------------------------------------------------------------------------------------


def _refuse(obj: dict[str, Any], key: str, path: str, why: str) -> None:
    if obj.get(key) not in (None, [], {}, False):
        raise ManifestError(f"kai does not model {why}", field=f"{path}.{key}")


def _selectors(obj: Any, path: str) -> tuple[CelSelector, ...]:
    out = []
    for p, s in _items(obj, path):
        cel = _map(s.get("cel"), f"{p}.cel")
        out.append(compile_selector(_required(cel.get("expression"), f"{p}.cel.expression"), f"{p}.cel.expression"))
    return tuple(out)


def _configs(obj: Any, path: str) -> tuple[dict[str, Any], ...]:
    out = []
    for p, c in _items(obj, path):
        opaque = _map(c.get("opaque"), f"{p}.opaque")
        _required(opaque.get("driver"), f"{p}.opaque.driver")
        out.append(c)
    return tuple(out)


def parse_device_class(doc: dict[str, Any]) -> DeviceClass:
    meta = parse_meta(doc, "DeviceClass", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    _refuse(spec, "extendedResourceName", "spec", "DRA-backed extended resources")
    return DeviceClass(
        meta, _selectors(spec.get("selectors"), "spec.selectors"), _configs(spec.get("config"), "spec.config")
    )


def _attribute(value: Any, path: str) -> int | bool | str:
    v = _map(value, path)
    if len(v) != 1:
        raise ManifestError("an attribute holds exactly one of int, bool, string, version", field=path)
    kind, got = next(iter(v.items()))
    if kind == "int":
        out = _int(got, f"{path}.int", None, (-(2**63), 2**63 - 1))
        assert out is not None
        return out
    if kind == "bool":
        return _bool(got, f"{path}.bool", False)
    if kind in ("string", "version"):
        return _str(got, f"{path}.{kind}")
    raise ManifestError(f"{kind!r} is not int, bool, string or version", field=path)


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def parse_resource_slice(doc: dict[str, Any]) -> ResourceSlice:
    meta = parse_meta(doc, "ResourceSlice", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    driver = _required(spec.get("driver"), "spec.driver")
    pool = _map(spec.get("pool"), "spec.pool")
    for key in ("nodeSelector", "allNodes", "perDeviceNodeSelection"):
        _refuse(spec, key, "spec", "devices that are not local to one node (only spec.nodeName)")
    _refuse(spec, "sharedCounters", "spec", "shared counters (partitionable devices)")
    node = _required(spec.get("nodeName"), "spec.nodeName")
    devices = []
    for p, d in _items(spec.get("devices"), "spec.devices"):
        for key in ("consumesCounters", "taints", "bindsToNode", "nodeName", "nodeSelector", "allNodes"):
            _refuse(d, key, p, f"device {key}")
        attrs = {
            _qualified(k, driver): _attribute(v, f"{p}.attributes.{k}")
            for k, v in _map(d.get("attributes"), f"{p}.attributes").items()
        }
        capacity = {}
        for k, v in _map(d.get("capacity"), f"{p}.capacity").items():
            value = _map(v, f"{p}.capacity.{k}").get("value")
            try:
                capacity[_qualified(k, driver)] = parse_quantity(value)
            except (ValueError, TypeError) as e:
                raise ManifestError(f"not a quantity: {value!r}", field=f"{p}.capacity.{k}.value") from e
        devices.append(Device(_required(d.get("name"), f"{p}.name"), attrs, capacity))
    names = [d.name for d in devices]
    if len(set(names)) != len(names):
        raise ManifestError("device names repeat", field="spec.devices")
    return ResourceSlice(
        meta,
        driver,
        _required(pool.get("name"), "spec.pool.name"),
        _int(pool.get("generation"), "spec.pool.generation", 0, (0, 2**63 - 1)) or 0,
        node,
        tuple(devices),
    )


def _request(r: dict[str, Any], p: str) -> DeviceRequest:
    name = _required(r.get("name"), f"{p}.name")
    _refuse(r, "firstAvailable", p, "prioritized lists of subrequests")
    ex = _map(r.get("exactly"), f"{p}.exactly")
    if not ex:
        raise ManifestError("a request needs exactly", field=f"{p}.exactly")
    e = f"{p}.exactly"
    _refuse(ex, "adminAccess", e, "admin access")
    _refuse(ex, "tolerations", e, "device taints and tolerations")
    _refuse(ex, "capacity", e, "consumable capacity requests")
    mode = _str(ex.get("allocationMode"), f"{e}.allocationMode", EXACT_COUNT) or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ManifestError(f"{mode!r} is not ExactCount or All", field=f"{e}.allocationMode")
    count = _int(ex.get("count"), f"{e}.count", 1, (1, MAX_REQUEST_COUNT)) or 1
    if mode == ALL and ex.get("count") is not None:
        raise ManifestError("count is only for allocationMode ExactCount", field=f"{e}.count")
    return DeviceRequest(
        name,
        _required(ex.get("deviceClassName"), f"{e}.deviceClassName"),
        _selectors(ex.get("selectors"), f"{e}.selectors"),
        mode,
        count,
    )


def parse_claim_spec(obj: Any, path: str) -> ClaimSpec:
    spec = _map(obj, path)
    devices = _map(spec.get("devices"), f"{path}.devices")
    _refuse(devices, "constraints", f"{path}.devices", "constraints across requests (matchAttribute)")
    requests = tuple(_request(r, p) for p, r in _items(devices.get("requests"), f"{path}.devices.requests"))
    names = [r.name for r in requests]
    if len(set(names)) != len(names):
        raise ManifestError("request names repeat", field=f"{path}.devices.requests")
    return ClaimSpec(requests, _configs(devices.get("config"), f"{path}.devices.config"))


def _allocation(obj: Any, path: str) -> Allocation | None:
    if obj is None:
        return None
    a = _map(obj, path)
    devices = _map(a.get("devices"), f"{path}.devices")
    results = tuple(
        DeviceResult(
            _required(r.get("request"), f"{p}.request"),
            _required(r.get("driver"), f"{p}.driver"),
            _required(r.get("pool"), f"{p}.pool"),
            _required(r.get("device"), f"{p}.device"),
        )
        for p, r in _items(devices.get("results"), f"{path}.devices.results")
    )
    ns = _map(a.get("nodeSelector"), f"{path}.nodeSelector")
    terms = parse_node_selector_terms(ns.get("nodeSelectorTerms"), f"{path}.nodeSelector.nodeSelectorTerms")
    return Allocation(results, terms, tuple(_list(devices.get("config"), f"{path}.devices.config")))


def parse_resource_claim(doc: dict[str, Any]) -> ResourceClaim:
    meta = parse_meta(doc, "ResourceClaim", namespaced=True)
    status = _map(doc.get("status"), "status")
    reserved = tuple(
        Consumer(
            _required(c.get("name"), f"{p}.name"),
            _str(c.get("uid"), f"{p}.uid"),
            _str(c.get("resource"), f"{p}.resource", "pods"),
        )
        for p, c in _items(status.get("reservedFor"), "status.reservedFor")
    )
    return ResourceClaim(
        meta,
        parse_claim_spec(doc.get("spec"), "spec"),
        _allocation(status.get("allocation"), "status.allocation"),
        reserved,
    )


def parse_resource_claim_template(doc: dict[str, Any]) -> ResourceClaimTemplate:
    meta = parse_meta(doc, "ResourceClaimTemplate", namespaced=True)
    spec = _map(doc.get("spec"), "spec")
    claim_meta = _map(spec.get("metadata"), "spec.metadata")
    return ResourceClaimTemplate(
        meta,
        parse_claim_spec(spec.get("spec"), "spec.spec"),
        _str_map(claim_meta.get("labels"), "spec.metadata.labels"),
        _str_map(claim_meta.get("annotations"), "spec.metadata.annotations"),
    )


def is_gpu_class(name: str) -> bool:
    """KAI's IsGPUDeviceClass: a device class (or a driver) whose name contains "gpu" hands out GPUs, which count
    against queue quotas and fair share like device-plugin GPUs."""
    return "gpu" in name.lower()


def claim_gpus(claim: ResourceClaim | ResourceClaimTemplate) -> int:
    """GPUs a claim counts for in queue accounting, as KAI's countGPUDevicesFromClaim: per request of a GPU class,
    its count (allocationMode All counts one: the number is only known once allocated)."""
    return sum((r.count if r.mode == EXACT_COUNT else 1) for r in claim.spec.requests if is_gpu_class(r.device_class))


def allocation_doc(
    claim: ResourceClaim, classes: dict[str, DeviceClass], devices: tuple[tuple[str, str, str, str], ...], node: str
) -> dict[str, Any]:
    """``status.allocation`` for *claim* given *devices* ((request, driver, pool, device) each) on *node*, as
    kube-scheduler writes it: the results, the configs of the requests' classes (source FromClass) then the
    claim's own (FromClaim), and a nodeSelector on the node's name (the devices are local to it)."""
    config: list[dict[str, Any]] = []
    for r in claim.spec.requests:
        cls = classes.get(r.device_class)
        for c in cls.config if cls is not None else ():
            config.append({"source": "FromClass", "requests": [r.name], "opaque": c.get("opaque")})
    for c in claim.spec.config:
        entry = {"source": "FromClaim", "opaque": c.get("opaque")}
        if c.get("requests"):
            entry["requests"] = list(c["requests"])
        config.append(entry)
    devices_doc: dict[str, Any] = {
        "results": [{"request": q, "driver": d, "pool": p, "device": n} for q, d, p, n in devices]
    }
    if config:
        devices_doc["config"] = config
    return {
        "devices": devices_doc,
        "nodeSelector": {
            "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
        },
    }


def parse_allocation(doc: Any, path: str = "status.allocation") -> Allocation | None:
    """An allocation as ``status.allocation`` holds it (what ``allocation_doc`` writes)."""
    return _allocation(doc, path)
