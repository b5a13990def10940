"""Typed objects parsed from Kubernetes manifests: the part of each object a scheduler reads.

Rules: parsing is strict about what kai uses and lenient about the rest (a Node's
images, a Pod's volumes). Every error is a ManifestError naming the field; the
caller adds the file and object. Amounts are integers in base units
(``kai.api.quantity``); times are POSIX seconds (float); durations are seconds.
"""

from __future__ import annotations

import datetime as _dt
import re
from dataclasses import dataclass, field
from typing import Any

from kai.api import constants as C
from kai.api._read import _bool, _duration, _int, _list, _map, _number, _required, _str, _str_map
from kai.api.errors import ManifestError
from kai.api.limits import MAX_NODE_GPUS
from kai.api.podspec import (
    HostPort,
    PodAffinity,
    PodClaim,
    SpreadConstraint,
    parse_claim_statuses,
    parse_claims,
    parse_host_ports,
    parse_pod_affinity,
    parse_pod_claims,
    parse_spread,
)
from kai.api.quantity import MAX_AMOUNT, QuantityError, parse_quantity, to_milli, to_units
from kai.api.queueaccess import parse_allowed_namespaces
from kai.api.selectors import SelectorRequirement, parse_requirement

Resources = dict[str, int]  # resource name -> amount in base units (cpu: millicores)


def parse_time(obj: Any, path: str) -> float | None:
    """RFC3339 (or a YAML timestamp, which PyYAML turns into a datetime) as POSIX seconds."""
    if obj is None:
        return None
    if isinstance(obj, _dt.datetime):
        dt = obj
    elif isinstance(obj, str):
        try:
            dt = _dt.datetime.fromisoformat(obj.replace("Z", "+00:00"))
        except ValueError:
            raise ManifestError(f"{obj!r} is not an RFC3339 time", field=path) from None
    else:
        raise ManifestError(f"{obj!r} is not an RFC3339 time", field=path)
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=_dt.UTC)
    return dt.timestamp()


def format_time(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_extended_resource(name: str) -> bool:
    """A resource outside Kubernetes' own (``nvidia.com/gpu``, ``example.com/foo``): the API server takes only
    whole numbers of these (apimachinery's IsExtendedResourceName)."""
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def parse_resources(obj: Any, path: str, oversize: list[str] | None = None) -> Resources:
    """A ResourceList (``{cpu: 500m, memory: 1Gi, nvidia.com/gpu: 1}``) in base units.

    An amount above ``MAX_AMOUNT`` (which the API server accepts: ``cpu: 1e16``) is saturated at it and its
    field appended to *oversize*, so the caller can report it while the object keeps counting as what it is
    (a bound pod that asks for everything fills its node). Without *oversize* such an amount is an error."""
    out: Resources = {}
    for name, value in _map(obj, path).items():
        name = str(name)
        field_path = f"{path}.{name}"
        try:
            if is_extended_resource(name) and parse_quantity(value).denominator != 1:
                raise ManifestError(
                    f"{value!r} is not a whole number: extended resources are counted in whole units"
                    + (" (ask for part of a GPU with the gpu-fraction annotation)" if name == C.RESOURCE_GPU else ""),
                    field=field_path,
                )
            amount = to_milli(value) if name == C.RESOURCE_CPU else to_units(value)
        except QuantityError as e:
            raise ManifestError(str(e), field=field_path) from None
        if amount < 0:
            raise ManifestError(f"{value!r} is negative", field=field_path)
        if amount > MAX_AMOUNT:
            if oversize is None:
                raise ManifestError(oversize_message(value), field=field_path)
            oversize.append(f"{field_path}: {oversize_message(value)}")
            amount = MAX_AMOUNT
        out[name] = amount
    return out


def oversize_message(value: Any) -> str:
    return f"{str(value)[:40]!r} is more than kai can account for (at most 2^50 base units: bytes, millicores, counts)"


def _add(into: Resources, other: Resources) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max_into(into: Resources, other: Resources) -> None:
    for k, v in other.items():
        into[k] = max(into.get(k, 0), v)


# ---------------------------------------------------------------------------------------------
# Metadata
# ---------------------------------------------------------------------------------------------


def object_ref(kind: str, namespace: str | None, name: str) -> str:
    """``Kind/namespace/name`` (``Kind/name`` for a cluster-scoped object): how events, errors and
    messages name an object, in both backends and ``kai sim``."""
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


@dataclass(frozen=True, slots=True)
class OwnerReference:
    api_version: str
    kind: str
    name: str
    uid: str
    controller: bool = False


@dataclass(slots=True)
class ObjectMeta:
    name: str
    namespace: str | None  # None for cluster-scoped objects
    uid: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    creation_timestamp: float | None = None
    deletion_timestamp: float | None = None
    owner_references: tuple[OwnerReference, ...] = ()


MAX_NAME = 253  # a DNS subdomain, the longest name the API server accepts for any kind


def parse_meta(doc: dict[str, Any], kind: str, *, namespaced: bool) -> ObjectMeta:
    m = _map(doc.get("metadata"), "metadata")
    name = _str(m.get("name"), "metadata.name")
    if not name:
        raise ManifestError("is required", field="metadata.name")
    if len(name) > MAX_NAME:
        raise ManifestError(f"{name[:40]!r}... is longer than {MAX_NAME} characters", field="metadata.name")
    ns = _str(m.get("namespace"), "metadata.namespace", "default") if namespaced else None
    owners = []
    for i, o in enumerate(_list(m.get("ownerReferences"), "metadata.ownerReferences")):
        p = f"metadata.ownerReferences[{i}]"
        o = _map(o, p)
        owners.append(
            OwnerReference(
                api_version=_str(o.get("apiVersion"), f"{p}.apiVersion"),
                kind=_str(o.get("kind"), f"{p}.kind"),
                name=_str(o.get("name"), f"{p}.name"),
                uid=_str(o.get("uid"), f"{p}.uid"),
                controller=_bool(o.get("controller"), f"{p}.controller", False),
            )
        )
    uid = _str(m.get("uid"), "metadata.uid") or f"{kind}/{ns + '/' if ns else ''}{name}"
    return ObjectMeta(
        name=name,
        namespace=ns,
        uid=uid,
        labels=_str_map(m.get("labels"), "metadata.labels"),
        annotations=_str_map(m.get("annotations"), "metadata.annotations"),
        creation_timestamp=parse_time(m.get("creationTimestamp"), "metadata.creationTimestamp"),
        deletion_timestamp=parse_time(m.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        owner_references=tuple(owners),
    )


# ---------------------------------------------------------------------------------------------
# Node
# ---------------------------------------------------------------------------------------------

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(slots=True)
class Node:
    meta: ObjectMeta
    allocatable: Resources
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = True
    oversize: tuple[str, ...] = ()  # "field: message" of amounts saturated at MAX_AMOUNT (parse_resources)

    kind = "Node"


def parse_node(doc: dict[str, Any]) -> Node:
    meta = parse_meta(doc, "Node", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    status = _map(doc.get("status"), "status")
    alloc_src = status.get("allocatable")
    alloc_path = "status.allocatable"
    if alloc_src is None:  # kubelet copies capacity when allocatable is absent
        alloc_src, alloc_path = status.get("capacity"), "status.capacity"
    oversize: list[str] = []
    allocatable = parse_resources(alloc_src, alloc_path, oversize)
    allocatable.setdefault(C.RESOURCE_PODS, 110)
    gpus = allocatable.get(C.RESOURCE_GPU, 0)
    if gpus > MAX_NODE_GPUS:
        raise ManifestError(
            f"{gpus} GPUs on one node: kai models at most {MAX_NODE_GPUS}", field=f"{alloc_path}.{C.RESOURCE_GPU}"
        )
    taints = []
    for i, t in enumerate(_list(spec.get("taints"), "spec.taints")):
        p = f"spec.taints[{i}]"
        t = _map(t, p)
        effect = _str(t.get("effect"), f"{p}.effect")
        if effect not in TAINT_EFFECTS:
            raise ManifestError(f"{effect!r} is not one of {', '.join(TAINT_EFFECTS)}", field=f"{p}.effect")
        taints.append(Taint(_str(t.get("key"), f"{p}.key"), _str(t.get("value"), f"{p}.value"), effect))
    ready = True
    for i, c in enumerate(_list(status.get("conditions"), "status.conditions")):
        c = _map(c, f"status.conditions[{i}]")
        if c.get("type") == "Ready":
            ready = _str(c.get("status"), f"status.conditions[{i}].status") == "True"
    return Node(
        meta=meta,
        allocatable=allocatable,
        taints=tuple(taints),
        unschedulable=_bool(spec.get("unschedulable"), "spec.unschedulable", False),
        ready=ready,
        oversize=tuple(oversize),
    )


# ---------------------------------------------------------------------------------------------
# Pod
# ---------------------------------------------------------------------------------------------

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
TOLERATION_OPERATORS = ("Equal", "Exists")


@dataclass(frozen=True, slots=True)
class SelectorTerm:
    """One nodeSelectorTerm: all its requirements must hold (the terms are ORed)."""

    match_expressions: tuple[SelectorRequirement, ...]
    match_fields: tuple[SelectorRequirement, ...] = ()


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str
    value: str
    effect: str  # "" tolerates every effect


@dataclass(slots=True)
class Pod:
    meta: ObjectMeta
    requests: Resources  # effective request (containers, init containers, overhead)
    node_name: str = ""
    scheduler_name: str = "default-scheduler"
    priority_class_name: str = ""
    priority: int | None = None
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity_terms: tuple[SelectorTerm, ...] = ()  # required node affinity; empty = none
    tolerations: tuple[Toleration, ...] = ()
    phase: str = "Pending"
    scheduling_gated: bool = False
    nominated_node_name: str = ""
    container_names: tuple[str, ...] = ()
    init_container_names: tuple[str, ...] = ()  # gpu-fraction-container-name may name one of these too
    start_time: float | None = None  # status.startTime: when the pod last started (min runtime counts from it)
    # status.conditions' Ready: None when the pod has no such condition (a manifest for kai sim)
    ready_condition: bool | None = None
    # "field: message" of requests saturated at MAX_AMOUNT (parse_resources): such a pod is never placed by kai,
    # and a bound one counts as asking for everything
    oversize: tuple[str, ...] = ()
    # placement rules that tie the pod to other pods and to storage (kai.api.podspec)
    pod_affinity: PodAffinity | None = None  # inter-pod affinity and anti-affinity
    spread: tuple[SpreadConstraint, ...] = ()  # topologySpreadConstraints
    host_ports: tuple[HostPort, ...] = ()
    claims: tuple[str, ...] = ()  # PersistentVolumeClaims of its volumes, in its namespace
    # DRA: spec.resourceClaims, and status.resourceClaimStatuses (pod claim name -> the claim made from a template)
    resource_claims: tuple[PodClaim, ...] = ()
    claim_statuses: dict[str, str] = field(default_factory=dict)

    kind = "Pod"

    @property
    def placement_rules(self) -> bool:
        """The pod's place depends on other pods or on storage (affinity, spread, host ports, claims)."""
        return bool(self.pod_affinity or self.spread or self.host_ports or self.claims)

    @property
    def healthy(self) -> bool:
        """Counts as healthy for a PodDisruptionBudget, as Kubernetes' disruption controller counts: Ready
        (a Running pod whose manifest carries no Ready condition counts as Ready), and not terminating."""
        ready = self.phase == "Running" if self.ready_condition is None else self.ready_condition
        return ready and self.meta.deletion_timestamp is None

    @property
    def best_effort(self) -> bool:
        return not any(v for k, v in self.requests.items() if k != C.RESOURCE_PODS)


_GO_INT = re.compile(r"^[+-]?\d+$")


def parse_go_int(text: str) -> int | None:
    """An integer as Go's strconv.ParseInt reads it (no spaces, no underscores), exact; None if not one."""
    if not _GO_INT.match(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _parse_requirement(r: Any, p: str) -> SelectorRequirement:
    """A node selector requirement: a label requirement, or Gt/Lt with one integer value."""
    req = parse_requirement(r, p, SELECTOR_OPERATORS, _str)  # node label values may be written unquoted
    if req.operator in ("Gt", "Lt"):
        if len(req.values) != 1:
            raise ManifestError(f"operator {req.operator} needs exactly one value", field=f"{p}.values")
        if parse_go_int(req.values[0]) is None:
            raise ManifestError(f"{req.values[0]!r} is not an integer", field=f"{p}.values[0]")
    return req


def parse_node_selector_terms(obj: Any, path: str) -> tuple[SelectorTerm, ...]:
    """``nodeSelectorTerms`` (ORed; each term's requirements ANDed) of a node affinity or a PV's nodeAffinity."""
    terms: list[SelectorTerm] = []
    for i, t in enumerate(_list(obj, path)):
        p = f"{path}[{i}]"
        t = _map(t, p)
        exprs = tuple(
            _parse_requirement(r, f"{p}.matchExpressions[{j}]")
            for j, r in enumerate(_list(t.get("matchExpressions"), f"{p}.matchExpressions"))
        )
        fields = tuple(
            _parse_requirement(r, f"{p}.matchFields[{j}]")
            for j, r in enumerate(_list(t.get("matchFields"), f"{p}.matchFields"))
        )
        for j, f in enumerate(fields):
            if f.key != "metadata.name":
                raise ManifestError("only metadata.name is supported", field=f"{p}.matchFields[{j}].key")
        terms.append(SelectorTerm(exprs, fields))
    return tuple(terms)


def _container_requests(c: dict[str, Any], p: str, oversize: list[str] | None) -> Resources:
    """requests, with limits standing in for a missing request (as the API server defaults)."""
    res = _map(c.get("resources"), f"{p}.resources")
    req = parse_resources(res.get("requests"), f"{p}.resources.requests", oversize)
    for k, v in parse_resources(res.get("limits"), f"{p}.resources.limits", oversize).items():
        req.setdefault(k, v)
    return req


def effective_requests(
    spec: dict[str, Any], prefix: str = "spec", oversize: list[str] | None = None
) -> tuple[Resources, tuple[str, ...]]:
    """The pod's request as kube-scheduler computes it.

    max(sum of app containers + sidecars, each init container + the sidecars started before it),
    plus the pod overhead, plus one ``pods`` slot. A total above MAX_AMOUNT is saturated and reported in
    *oversize* like a single amount (``parse_resources``).
    """
    total: Resources = {}
    names = []
    for i, c in enumerate(_list(spec.get("containers"), f"{prefix}.containers")):
        p = f"{prefix}.containers[{i}]"
        c = _map(c, p)
        names.append(_str(c.get("name"), f"{p}.name"))
        _add(total, _container_requests(c, p, oversize))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for i, c in enumerate(_list(spec.get("initContainers"), f"{prefix}.initContainers")):
        p = f"{prefix}.initContainers[{i}]"
        c = _map(c, p)
        req = _container_requests(c, p, oversize)
        if c.get("restartPolicy") == "Always":  # a sidecar runs for the pod's whole life
            _add(sidecars, req)
            _max_into(init_peak, sidecars)
        else:
            step = dict(sidecars)
            _add(step, req)
            _max_into(init_peak, step)
    _add(total, sidecars)
    _max_into(total, init_peak)
    _add(total, parse_resources(spec.get("overhead"), f"{prefix}.overhead", oversize))
    total[C.RESOURCE_PODS] = total.get(C.RESOURCE_PODS, 0) + 1
    for name, amount in total.items():
        if amount > MAX_AMOUNT:
            if oversize is None:
                raise ManifestError(oversize_message(amount), field=f"{prefix}.containers[*].resources ({name})")
            if not oversize:  # each amount was in range; their sum is not
                oversize.append(f"{prefix}.containers[*].resources ({name}): {oversize_message(amount)}")
            total[name] = MAX_AMOUNT
    return total, tuple(names)


# A Job's pods, a Deployment's replicas and a watch's echo of each bind repeat one container list thousands
# of times, and its request (quantities parsed as exact fractions) is half of a pod's parse: it is computed
# once per distinct list, keyed by the lists' repr. For what JSON and YAML make (dicts, lists, strings,
# numbers, booleans, None, dates) an equal repr is an equal input: 1 and 1.0, "1" and 1, True and 1, a date
# and its text all print apart. A list that raises is parsed each time, so its error is reported every time.
_REQUESTS_MEMO: dict[str, tuple[Resources, tuple[str, ...], tuple[str, ...]]] = {}
REQUESTS_MEMO_SIZE = 4096
# On a cluster the decoder keeps a container's name, resources, restartPolicy and ports: a few hundred
# characters. A manifest's containers (kai sim) come whole; past this many characters one is not kept, so
# the memo holds at most ~16 MiB.
REQUESTS_MEMO_KEY_MAX = 4096


def _pod_requests(spec: dict[str, Any], oversize: list[str]) -> tuple[Resources, tuple[str, ...]]:
    """``effective_requests(spec)`` through the memo; *oversize* gets the same notes it would."""
    key = repr((spec.get("containers"), spec.get("initContainers"), spec.get("overhead")))
    hit = _REQUESTS_MEMO.get(key)
    if hit is None:
        notes: list[str] = []
        requests, names = effective_requests(spec, oversize=notes)
        hit = (requests, names, tuple(notes))
        if len(key) <= REQUESTS_MEMO_KEY_MAX:  # a manifest's whole containers (env, args) are not kept
            if len(_REQUESTS_MEMO) >= REQUESTS_MEMO_SIZE:
                _REQUESTS_MEMO.clear()  # a new set of workloads: start again rather than keep an order
            _REQUESTS_MEMO[key] = hit
    oversize.extend(hit[2])
    return dict(hit[0]), hit[1]  # a dict of the pod's own: the memo's is never handed out


# The tolerations pods carry, each made once: nearly every pod has the API server's two defaults (not-ready and
# unreachable, 300 s). A Toleration is frozen, so pods share them.
_TOLERATIONS: dict[tuple[str, str, str, str], Toleration] = {}
TOLERATIONS_MEMO_SIZE = 1024


def parse_tolerations(raw: Any) -> tuple[Toleration, ...]:
    """``spec.tolerations``. Well-formed lists (strings where strings belong, known operators and effects) take
    a path that builds no field paths: those were a sixth of a pod's parse, made for errors that never came.
    Anything else is read by ``_parse_tolerations``, which names the field at fault."""
    if raw is None:
        return ()
    if type(raw) is list:
        out = []
        for t in raw:
            if type(t) is not dict:
                break
            key, op, value, effect = t.get("key"), t.get("operator"), t.get("value"), t.get("effect")
            key = "" if key is None else key
            op = "Equal" if op is None else op
            value = "" if value is None else value
            effect = "" if effect is None else effect
            if type(key) is not str or type(op) is not str or type(value) is not str or type(effect) is not str:
                break
            if op not in TOLERATION_OPERATORS or (effect and effect not in TAINT_EFFECTS):
                break
            fields = (key, op, value, effect)
            toleration = _TOLERATIONS.get(fields)
            if toleration is None:
                if len(_TOLERATIONS) >= TOLERATIONS_MEMO_SIZE:
                    _TOLERATIONS.clear()
                toleration = _TOLERATIONS[fields] = Toleration(*fields)
            out.append(toleration)
        else:
            return tuple(out)
    return _parse_tolerations(raw)


def _parse_tolerations(raw: Any) -> tuple[Toleration, ...]:
    tolerations = []
    for i, t in enumerate(_list(raw, "spec.tolerations")):
        p = f"spec.tolerations[{i}]"
        t = _map(t, p)
        op = _str(t.get("operator"), f"{p}.operator", "Equal")
        if op not in TOLERATION_OPERATORS:
            raise ManifestError(f"{op!r} is not Equal or Exists", field=f"{p}.operator")
        effect = _str(t.get("effect"), f"{p}.effect")
        if effect and effect not in TAINT_EFFECTS:
            raise ManifestError(f"{effect!r} is not one of {', '.join(TAINT_EFFECTS)}", field=f"{p}.effect")
        tolerations.append(Toleration(_str(t.get("key"), f"{p}.key"), op, _str(t.get("value"), f"{p}.value"), effect))
    return tuple(tolerations)


def parse_pod(doc: dict[str, Any]) -> Pod:
    meta = parse_meta(doc, "Pod", namespaced=True)
    spec = _map(doc.get("spec"), "spec")
    status = _map(doc.get("status"), "status")
    oversize: list[str] = []
    requests, names = _pod_requests(spec, oversize)
    affinity = _map(spec.get("affinity"), "spec.affinity")
    namespace = meta.namespace or "default"
    pod_affinity = parse_pod_affinity(affinity, namespace, meta.labels)
    na = _map(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    req_path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    required = _map(na.get("requiredDuringSchedulingIgnoredDuringExecution"), req_path)
    terms = parse_node_selector_terms(required.get("nodeSelectorTerms"), f"{req_path}.nodeSelectorTerms")
    tolerations = parse_tolerations(spec.get("tolerations"))
    phase = _str(status.get("phase"), "status.phase", "Pending")
    if phase not in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
        raise ManifestError(f"{phase!r} is not a pod phase", field="status.phase")
    ready: bool | None = None
    for i, c in enumerate(_list(status.get("conditions"), "status.conditions")):
        c = _map(c, f"status.conditions[{i}]")
        if c.get("type") == "Ready":
            ready = _str(c.get("status"), f"status.conditions[{i}].status") == "True"
    return Pod(
        meta=meta,
        requests=requests,
        node_name=_str(spec.get("nodeName"), "spec.nodeName"),
        scheduler_name=_str(spec.get("schedulerName"), "spec.schedulerName", "default-scheduler"),
        priority_class_name=_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        priority=_int(spec.get("priority"), "spec.priority", None),
        node_selector=_str_map(spec.get("nodeSelector"), "spec.nodeSelector"),
        affinity_terms=tuple(terms),
        tolerations=tolerations,
        phase=phase,
        scheduling_gated=bool(_list(spec.get("schedulingGates"), "spec.schedulingGates")),
        nominated_node_name=_str(status.get("nominatedNodeName"), "status.nominatedNodeName"),
        start_time=parse_time(status.get("startTime"), "status.startTime"),
        ready_condition=ready,
        oversize=tuple(oversize),
        pod_affinity=pod_affinity,
        spread=parse_spread(spec.get("topologySpreadConstraints"), meta.labels),
        host_ports=parse_host_ports(spec),
        claims=parse_claims(spec, meta.name),
        resource_claims=parse_pod_claims(spec),
        claim_statuses=parse_claim_statuses(status),
        container_names=names,
        init_container_names=tuple(
            _str(_map(c, f"spec.initContainers[{i}]").get("name"), f"spec.initContainers[{i}].name")
            for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers"))
        ),
    )


# ---------------------------------------------------------------------------------------------
# Namespace
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Namespace:
    """Only its labels matter to a scheduler: an affinity term's namespaceSelector matches them."""

    meta: ObjectMeta

    kind = "Namespace"

    @property
    def labels(self) -> dict[str, str]:
        """Its labels, with the one the API server always sets (kubernetes.io/metadata.name)."""
        return {**self.meta.labels, C.LABEL_NAMESPACE_NAME: self.meta.name}


def parse_namespace(doc: dict[str, Any]) -> Namespace:
    return Namespace(parse_meta(doc, "Namespace", namespaced=False))


def namespace_labels(name: str) -> dict[str, str]:
    """The labels of a namespace kai has not seen: the one the API server sets on every namespace."""
    return {C.LABEL_NAMESPACE_NAME: name}


# ---------------------------------------------------------------------------------------------
# Queue
# ---------------------------------------------------------------------------------------------

QUEUE_RESOURCES = ("gpu", "cpu", "memory")  # CRD units: GPUs, millicores, MB (10^6 bytes)


@dataclass(frozen=True, slots=True)
class QueueResource:
    quota: float = 0.0  # -1 = unlimited deserved; 0/unset = none
    limit: float = 0.0  # -1 = no limit; 0/unset = a hard cap of 0 (as KAI's code)
    over_quota_weight: float = 0.0


@dataclass(slots=True)
class Queue:
    meta: ObjectMeta
    parent: str = ""
    priority: int = C.DEFAULT_QUEUE_PRIORITY
    display_name: str = ""
    resources: dict[str, QueueResource] = field(default_factory=dict)  # keys: gpu, cpu, memory
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None
    # kai's queue access rule (kai.api.queueaccess): namespace patterns that may use it; None = any
    allowed_namespaces: tuple[str, ...] | None = None

    kind = "Queue"


def parse_queue(doc: dict[str, Any]) -> Queue:
    meta = parse_meta(doc, "Queue", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    res_doc = _map(spec.get("resources"), "spec.resources")
    for extra in sorted(set(res_doc) - set(QUEUE_RESOURCES)):
        raise ManifestError("unknown resource (expected gpu, cpu, memory)", field=f"spec.resources.{extra}")
    resources = {}
    for r in QUEUE_RESOURCES:
        p = f"spec.resources.{r}"
        rd = _map(res_doc.get(r), p)
        q = QueueResource(
            quota=_number(rd.get("quota"), f"{p}.quota", 0.0),
            limit=_number(rd.get("limit"), f"{p}.limit", 0.0),
            over_quota_weight=_number(rd.get("overQuotaWeight"), f"{p}.overQuotaWeight", 0.0),
        )
        if q.quota < 0 and q.quota != -1:
            raise ManifestError(f"{q.quota:g} is negative (use -1 for unlimited)", field=f"{p}.quota")
        if q.limit < 0 and q.limit != -1:
            raise ManifestError(f"{q.limit:g} is negative (use -1 for no limit)", field=f"{p}.limit")
        if q.over_quota_weight < 0:
            raise ManifestError(f"{q.over_quota_weight:g} is negative", field=f"{p}.overQuotaWeight")
        if rd.get("limit") is not None and q.quota >= 0 and q.limit >= 0 and q.limit < q.quota:  # explicit only:
            raise ManifestError(
                # an unset limit keeps KAI's meaning (a hard cap of 0) for manifests written for KAI
                f"{q.limit:g} is below the quota {q.quota:g} (a limit caps what the queue may hold; use -1 for none)",
                field=f"{p}.limit",
            )
        for extra in set(rd) - {"quota", "limit", "overQuotaWeight"}:
            raise ManifestError("unknown field (expected quota, limit, overQuotaWeight)", field=f"{p}.{extra}")
        resources[r] = q
    parent = _str(spec.get("parentQueue"), "spec.parentQueue")
    if parent == meta.name:
        raise ManifestError("a queue cannot be its own parent", field="spec.parentQueue")
    pmr = _duration(spec.get("preemptMinRuntime"), "spec.preemptMinRuntime")
    rmr = _duration(spec.get("reclaimMinRuntime"), "spec.reclaimMinRuntime")
    for value, p in ((pmr, "spec.preemptMinRuntime"), (rmr, "spec.reclaimMinRuntime")):
        if value is not None and value < 0:
            raise ManifestError("must not be negative", field=p)
    return Queue(
        meta=meta,
        parent=parent,
        priority=_int(spec.get("priority"), "spec.priority", C.DEFAULT_QUEUE_PRIORITY) or 0,
        display_name=_str(spec.get("displayName"), "spec.displayName"),
        resources=resources,
        preempt_min_runtime=pmr,
        reclaim_min_runtime=rmr,
        allowed_namespaces=parse_allowed_namespaces(meta.annotations.get(C.ANNOTATION_QUEUE_ALLOWED_NAMESPACES)),
    )


# ---------------------------------------------------------------------------------------------
# PodGroup
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    topology: str = ""
    required_level: str = ""
    preferred_level: str = ""


@dataclass(frozen=True, slots=True)
class SubGroup:
    name: str
    min_member: int | None = None
    min_subgroup: int | None = None
    parent: str | None = None
    topology_constraint: TopologyConstraint | None = None


@dataclass(slots=True)
class PodGroup:
    meta: ObjectMeta
    min_member: int = 1
    queue: str = ""
    priority_class_name: str = ""
    preemptibility: str = ""  # "", preemptible, non-preemptible
    min_subgroup: int | None = None
    sub_groups: tuple[SubGroup, ...] = ()
    topology_constraint: TopologyConstraint | None = None
    mark_unschedulable: bool = True
    # spec.schedulingBackoff: -1 (default, no backoff) or 1; with 1, KAI prefixes the unschedulable messages with
    # the node pool ("Node-Pool 'default': ..."), as kai does
    scheduling_backoff: int = -1
    preemption_delay: float | None = None
    staleness_grace_period: float | None = None
    stale_since: float | None = None  # annotation kai.scheduler/stale-podgroup-timestamp (set by stale gang eviction)
    generated: bool = False  # made by kai for a pod without one, not applied by a user

    kind = "PodGroup"


def _topology_constraint(obj: Any, p: str) -> TopologyConstraint | None:
    if obj is None:
        return None
    t = _map(obj, p)
    return TopologyConstraint(
        topology=_str(t.get("topology"), f"{p}.topology"),
        required_level=_str(t.get("requiredTopologyLevel"), f"{p}.requiredTopologyLevel"),
        preferred_level=_str(t.get("preferredTopologyLevel"), f"{p}.preferredTopologyLevel"),
    )


def _preemptibility(value: str, path: str) -> str:
    if value not in ("", C.PREEMPTIBLE, C.NON_PREEMPTIBLE):
        raise ManifestError(f"{value!r} is not preemptible or non-preemptible", field=path)
    return value


def _validate_subgroups(groups: list[SubGroup], base: str) -> None:
    """The PodGroup webhook's rules: unique names, existing parents, no cycles, leaves with minMember."""
    names = [g.name for g in groups]
    for i, g in enumerate(groups):
        p = f"{base}[{i}]"
        if not g.name:
            raise ManifestError("is required", field=f"{p}.name")
        if names.count(g.name) > 1:
            raise ManifestError(f"duplicate subgroup name {g.name!r}", field=f"{p}.name")
        if g.parent is not None and g.parent not in names:
            raise ManifestError(f"parent {g.parent!r} is not a subgroup of this PodGroup", field=f"{p}.parent")
        if g.min_member is not None and g.min_subgroup is not None:
            raise ManifestError("minMember and minSubGroup are mutually exclusive", field=p)
        if g.min_member is not None and g.min_member < 0:
            raise ManifestError("must not be negative", field=f"{p}.minMember")
    parent_of = {g.name: g.parent for g in groups}
    children = {g.parent for g in groups if g.parent is not None}
    for i, g in enumerate(groups):
        seen, cur = set(), g.name
        while cur is not None:
            if cur in seen:
                raise ManifestError(f"subgroup {g.name!r} is part of a parent cycle", field=f"{base}[{i}].parent")
            seen.add(cur)
            cur = parent_of.get(cur)
        if g.name not in children and g.min_member is None:
            raise ManifestError("a leaf subgroup needs minMember", field=f"{base}[{i}].minMember")


def _scheduling_backoff(value: Any) -> int:
    backoff = _int(value, "spec.schedulingBackoff", -1)
    if backoff not in (-1, 1):
        raise ManifestError(f"{backoff} is not supported (KAI supports 1 and -1)", field="spec.schedulingBackoff")
    return backoff if backoff is not None else -1


def parse_podgroup(doc: dict[str, Any]) -> PodGroup:
    meta = parse_meta(doc, "PodGroup", namespaced=True)
    spec = _map(doc.get("spec"), "spec")
    min_member = _int(spec.get("minMember"), "spec.minMember", None)
    min_subgroup = _int(spec.get("minSubGroup"), "spec.minSubGroup", None)
    if min_member is not None and min_subgroup is not None:
        raise ManifestError("minMember and minSubGroup are mutually exclusive", field="spec.minMember")
    if min_member is not None and min_member < 0:
        raise ManifestError("must not be negative", field="spec.minMember")
    subgroups = []
    for i, s in enumerate(_list(spec.get("subGroups"), "spec.subGroups")):
        p = f"spec.subGroups[{i}]"
        s = _map(s, p)
        parent = s.get("parent")
        subgroups.append(
            SubGroup(
                name=_str(s.get("name"), f"{p}.name"),
                min_member=_int(s.get("minMember"), f"{p}.minMember", None),
                min_subgroup=_int(s.get("minSubGroup"), f"{p}.minSubGroup", None),
                parent=None if parent is None else _str(parent, f"{p}.parent"),
                topology_constraint=_topology_constraint(s.get("topologyConstraint"), f"{p}.topologyConstraint"),
            )
        )
    _validate_subgroups(subgroups, "spec.subGroups")
    delay = _duration(spec.get("preemptionDelay"), "spec.preemptionDelay")
    if delay is not None and delay < 0:
        raise ManifestError("must not be negative", field="spec.preemptionDelay")
    return PodGroup(
        meta=meta,
        min_member=1 if min_member is None else min_member,
        queue=_str(spec.get("queue"), "spec.queue"),
        priority_class_name=_str(spec.get("priorityClassName"), "spec.priorityClassName"),
        preemptibility=_preemptibility(_str(spec.get("preemptibility"), "spec.preemptibility"), "spec.preemptibility"),
        min_subgroup=min_subgroup,
        sub_groups=tuple(subgroups),
        topology_constraint=_topology_constraint(spec.get("topologyConstraint"), "spec.topologyConstraint"),
        mark_unschedulable=_bool(spec.get("markUnschedulable"), "spec.markUnschedulable", True),
        scheduling_backoff=_scheduling_backoff(spec.get("schedulingBackoff")),
        preemption_delay=delay,
        staleness_grace_period=_duration(spec.get("stalenessGracePeriod"), "spec.stalenessGracePeriod"),
        stale_since=parse_time(
            meta.annotations.get(C.ANNOTATION_STALE_TIMESTAMP),
            f"metadata.annotations[{C.ANNOTATION_STALE_TIMESTAMP}]",
        ),
    )


# ---------------------------------------------------------------------------------------------
# PriorityClass, Topology, SchedulingShard
# ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class PriorityClass:
    meta: ObjectMeta
    value: int
    global_default: bool = False
    preemptibility: str = ""  # from the kai.scheduler/preemptibility label, if any

    kind = "PriorityClass"


def parse_priority_class(doc: dict[str, Any]) -> PriorityClass:
    meta = parse_meta(doc, "PriorityClass", namespaced=False)
    if "value" not in doc:
        raise ManifestError("is required", field="value")
    value = _int(doc.get("value"), "value", 0) or 0
    return PriorityClass(
        meta=meta,
        value=value,
        global_default=_bool(doc.get("globalDefault"), "globalDefault", False),
        preemptibility=_preemptibility(
            meta.labels.get(C.LABEL_PREEMPTIBILITY, ""), f"metadata.labels.{C.LABEL_PREEMPTIBILITY}"
        ),
    )


@dataclass(frozen=True, slots=True)
class TopologyLevel:
    node_label: str
    alias: str = ""


@dataclass(slots=True)
class Topology:
    meta: ObjectMeta
    levels: tuple[TopologyLevel, ...]

    kind = "Topology"


def parse_topology(doc: dict[str, Any]) -> Topology:
    meta = parse_meta(doc, "Topology", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    levels = []
    for i, lv in enumerate(_list(spec.get("levels"), "spec.levels")):
        p = f"spec.levels[{i}]"
        lv = _map(lv, p)
        label = _required(lv.get("nodeLabel"), f"{p}.nodeLabel")
        levels.append(TopologyLevel(label, _str(lv.get("alias"), f"{p}.alias")))
    if not 1 <= len(levels) <= 16:
        raise ManifestError("needs 1 to 16 levels", field="spec.levels")
    labels = [lv.node_label for lv in levels]
    if len(set(labels)) != len(labels):
        raise ManifestError("nodeLabels must be unique", field="spec.levels")
    if C.LABEL_HOSTNAME in labels[:-1]:
        raise ManifestError(f"{C.LABEL_HOSTNAME} may only be the last level", field="spec.levels")
    return Topology(meta=meta, levels=tuple(levels))


PLACEMENT_STRATEGIES = ("binpack", "spread")
# kai extension: spec.placementStrategy.gpu may also name one of kai's GPU placement policies
# (kai.scheduler.gpupolicy; a test keeps this list equal to its names, binpack being KAI's own).
GPU_POLICIES = ("fragmentation", "bestfit", "fgd", "gpupacking", "gpuclustering", "dotprod", "random")


@dataclass(frozen=True, slots=True)
class UsageDB:
    """``spec.usageDBConfig`` as a cluster reads it (KAI's UsageDBConfig and UsageParams defaults): where
    Prometheus is and how often to ask it. ``kai sim`` needs none of it (it keeps usage itself)."""

    client_type: str = "prometheus"
    connection_string: str = ""
    connection_string_env_var: str = ""
    fetch_interval: float = 60.0  # seconds (usageParams.fetchInterval)
    staleness_period: float = 300.0  # seconds (usageParams.stalenessPeriod): older usage is not used
    wait_timeout: float = 60.0  # seconds (usageParams.waitTimeout): the first cycle waits this long for usage
    extra_params: dict[str, str] = field(default_factory=dict)  # usageParams.extraParams (KAI's keys)


@dataclass(slots=True)
class SchedulingShard:
    meta: ObjectMeta
    placement_gpu: str = "binpack"  # binpack | spread | one of GPU_POLICIES (kai)
    placement_cpu: str = "binpack"
    partition_label_value: str = ""
    k_value: float = 1.0
    queue_depth_per_action: dict[str, int] = field(default_factory=dict)
    actions: dict[str, dict[str, Any]] = field(default_factory=dict)
    plugins: dict[str, dict[str, Any]] = field(default_factory=dict)
    args: dict[str, str] = field(default_factory=dict)
    preempt_min_runtime: float | None = None
    reclaim_min_runtime: float | None = None
    usage_window: float | None = None  # usageDBConfig.usageParams.windowSize; None = no time-based fair share
    usage_half_life: float | None = None  # usageDBConfig.usageParams.halfLifePeriod; None = no decay
    usage_db: UsageDB | None = None  # usageDBConfig's client settings (kai.k8s._usage); None = no usageDBConfig
    # spec.stuckInReleasingThreshold (seconds); None = KAI's default 2m. Like KAI, 0 or less keeps the default.
    stuck_in_releasing_threshold: float | None = None

    kind = "SchedulingShard"


def parse_shard(doc: dict[str, Any]) -> SchedulingShard:
    meta = parse_meta(doc, "SchedulingShard", namespaced=False)
    spec = _map(doc.get("spec"), "spec")
    ps = _map(spec.get("placementStrategy"), "spec.placementStrategy")
    strategies = {}
    for r in ("gpu", "cpu"):
        v = _str(ps.get(r), f"spec.placementStrategy.{r}", "binpack")
        accepted = PLACEMENT_STRATEGIES + GPU_POLICIES if r == "gpu" else PLACEMENT_STRATEGIES
        if v not in accepted:
            what = "binpack or spread" if r == "cpu" else f"one of {', '.join(accepted)}"
            raise ManifestError(f"{v!r} is not {what}", field=f"spec.placementStrategy.{r}")
        strategies[r] = v
    depth = {}
    for k, v in _map(spec.get("queueDepthPerAction"), "spec.queueDepthPerAction").items():
        n = _int(v, f"spec.queueDepthPerAction.{k}", None)
        if n is None or n < 0:
            raise ManifestError("must be a non-negative integer", field=f"spec.queueDepthPerAction.{k}")
        depth[str(k)] = n
    mr = _map(spec.get("minRuntime"), "spec.minRuntime")
    k_value = _number(spec.get("kValue"), "spec.kValue", 1.0)
    if k_value < 0:
        raise ManifestError("must not be negative", field="spec.kValue")
    return SchedulingShard(
        meta=meta,
        placement_gpu=strategies["gpu"],
        placement_cpu=strategies["cpu"],
        partition_label_value=_str(spec.get("partitionLabelValue"), "spec.partitionLabelValue"),
        k_value=k_value,
        queue_depth_per_action=depth,
        actions={str(k): _map(v, f"spec.actions.{k}") for k, v in _map(spec.get("actions"), "spec.actions").items()},
        plugins={str(k): _map(v, f"spec.plugins.{k}") for k, v in _map(spec.get("plugins"), "spec.plugins").items()},
        args=_str_map(spec.get("args"), "spec.args"),
        preempt_min_runtime=_duration(mr.get("preemptMinRuntime"), "spec.minRuntime.preemptMinRuntime"),
        reclaim_min_runtime=_duration(mr.get("reclaimMinRuntime"), "spec.minRuntime.reclaimMinRuntime"),
        stuck_in_releasing_threshold=_duration(spec.get("stuckInReleasingThreshold"), "spec.stuckInReleasingThreshold"),
        **_usage_params(spec),
    )


def _usage_params(spec: dict[str, Any]) -> dict[str, Any]:
    """Time-based fair share is on when ``spec.usageDBConfig`` is present (KAI: a Prometheus client)."""
    if spec.get("usageDBConfig") is None:
        return {}
    db = _map(spec.get("usageDBConfig"), "spec.usageDBConfig")
    params = _map(db.get("usageParams"), "spec.usageDBConfig.usageParams")
    window_type = _str(params.get("windowType"), "spec.usageDBConfig.usageParams.windowType", "sliding")
    if window_type != "sliding":  # tumbling and cron windows reset usage on a schedule kai does not model
        raise ManifestError(
            f"{window_type!r}: kai computes usage over a sliding window only",
            field="spec.usageDBConfig.usageParams.windowType",
        )
    window = _duration(params.get("windowSize"), "spec.usageDBConfig.usageParams.windowSize")
    half_life = _duration(params.get("halfLifePeriod"), "spec.usageDBConfig.usageParams.halfLifePeriod")
    window = 7 * 24 * 3600.0 if window is None else window  # KAI's default window: one week
    if window <= 0:
        raise ManifestError("must be positive", field="spec.usageDBConfig.usageParams.windowSize")
    if half_life is not None and half_life <= 0:
        raise ManifestError("must be positive", field="spec.usageDBConfig.usageParams.halfLifePeriod")
    where = "spec.usageDBConfig.usageParams"
    fetch = _duration(params.get("fetchInterval"), f"{where}.fetchInterval")
    stale = _duration(params.get("stalenessPeriod"), f"{where}.stalenessPeriod")
    wait = _duration(params.get("waitTimeout"), f"{where}.waitTimeout")
    for name, value in (("fetchInterval", fetch), ("stalenessPeriod", stale), ("waitTimeout", wait)):
        if value is not None and value <= 0:
            raise ManifestError("must be positive", field=f"{where}.{name}")
    fetch = 60.0 if fetch is None else fetch
    db_conf = UsageDB(
        client_type=_str(db.get("clientType"), "spec.usageDBConfig.clientType", "prometheus"),
        connection_string=_str(db.get("connectionString"), "spec.usageDBConfig.connectionString"),
        connection_string_env_var=_str(db.get("connectionStringEnvVar"), "spec.usageDBConfig.connectionStringEnvVar"),
        fetch_interval=fetch,
        staleness_period=max(fetch, 5 * 60.0 if stale is None else stale),  # KAI: never below the fetch interval
        wait_timeout=60.0 if wait is None else wait,
        extra_params=_str_map(params.get("extraParams"), f"{where}.extraParams"),
    )
    return {"usage_window": window, "usage_half_life": half_life, "usage_db": db_conf}


ApiObject = Node | Pod | Queue | PodGroup | PriorityClass | Topology | SchedulingShard | Namespace
