"""The parts of a pod spec that tie its placement to other pods and to storage: inter-pod affinity and
anti-affinity, topology spread constraints, host ports and PersistentVolumeClaims.

Rules: parsed strictly, as the API server validates them (an unknown selector operator, ``maxSkew`` 0, a
``hostPort`` out of range, a weight outside 1..100 are ManifestErrors naming the field). ``matchLabelKeys``
and ``mismatchLabelKeys`` are merged into the selector here with the pod's own label values, as the API
server does when the pod is created (merging a selector the API server already merged changes nothing),
so the engine only ever sees plain selectors. Absent selectors stay ``None`` (they match no pod).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kai.api._read import _int, _items, _list, _map, _required, _str
from kai.api.errors import ManifestError
from kai.api.selectors import LabelSelector, _hash_slot, cached_hash, parse_label_selector

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
WHEN_UNSATISFIABLE = (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)
INCLUSION_POLICIES = ("Honor", "Ignore")
PROTOCOLS = ("TCP", "UDP", "SCTP")
ANY_HOST_IP = "0.0.0.0"  # a hostPort without hostIP binds every address (kube-scheduler's DefaultBindAllHostIP)
MAX_PORT = 65535


@dataclass(frozen=True, slots=True)
class PodAffinityTerm:
    """One (anti-)affinity term: pods matching *selector* in *namespaces* (or in the namespaces whose labels
    match *namespace_selector*), counted per domain of *topology_key*. With neither namespaces nor a
    namespace selector, the pod's own namespace (filled in by the parser)."""

    selector: LabelSelector | None  # None: matches no pod
    topology_key: str
    namespaces: tuple[str, ...] = ()
    namespace_selector: LabelSelector | None = None  # None: not set; the empty selector: every namespace
    _hash: int = _hash_slot()

    __hash__ = cached_hash

    def describe(self) -> str:
        who = "no pod" if self.selector is None else self.selector.describe()
        return f"{who} on {self.topology_key}"


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int  # 1..100
    term: PodAffinityTerm
    _hash: int = _hash_slot()

    __hash__ = cached_hash


@dataclass(frozen=True, slots=True)
class PodAffinity:
    """spec.affinity.podAffinity and podAntiAffinity, required and preferred."""

    required: tuple[PodAffinityTerm, ...] = ()
    anti_required: tuple[PodAffinityTerm, ...] = ()
    preferred: tuple[WeightedTerm, ...] = ()
    anti_preferred: tuple[WeightedTerm, ...] = ()
    _hash: int = _hash_slot()

    __hash__ = cached_hash


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """One topologySpreadConstraint (selector merged with matchLabelKeys)."""

    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule (filters) | ScheduleAnyway (scores)
    selector: LabelSelector | None  # None: counts no pod
    min_domains: int | None = None
    node_affinity_policy: str = "Honor"  # Honor: only nodes the pod's nodeSelector/affinity allow are domains
    node_taints_policy: str = "Ignore"  # Honor: only nodes whose taints the pod tolerates are domains
    _hash: int = _hash_slot()

    __hash__ = cached_hash

    @property
    def hard(self) -> bool:
        return self.when_unsatisfiable == DO_NOT_SCHEDULE

    def describe(self) -> str:
        who = "no pod" if self.selector is None else self.selector.describe()
        return f"maxSkew {self.max_skew} of {who} over {self.topology_key}"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A (hostIP, protocol, hostPort) a container binds on its node."""

    host_ip: str
    protocol: str
    port: int
    _hash: int = _hash_slot()

    __hash__ = cached_hash

    def conflicts(self, other: HostPort) -> bool:
        """kube-scheduler's HostPortInfo.CheckConflict: same protocol and port, and the addresses overlap
        (equal, or either binds every address)."""
        return (
            self.port == other.port
            and self.protocol == other.protocol
            and (self.host_ip == other.host_ip or ANY_HOST_IP in (self.host_ip, other.host_ip))
        )

    def describe(self) -> str:
        ip = "" if self.host_ip == ANY_HOST_IP else f"{self.host_ip}:"
        return f"{ip}{self.port}/{self.protocol}"


def _label_keys(obj: Any, path: str) -> tuple[str, ...]:
    keys = tuple(_str(k, f"{path}[{i}]") for i, k in enumerate(_list(obj, path)))
    for i, k in enumerate(keys):
        if not k:
            raise ManifestError("a label key is required", field=f"{path}[{i}]")
    return keys


def _merge_keys(
    selector: LabelSelector | None,
    labels: dict[str, str],
    match: tuple[str, ...],
    mismatch: tuple[str, ...],
    path: str,
) -> LabelSelector | None:
    if not match and not mismatch:
        return selector
    if selector is None:
        raise ManifestError("matchLabelKeys and mismatchLabelKeys need a labelSelector", field=f"{path}.labelSelector")
    both = sorted(set(match) & set(mismatch))
    if both:
        raise ManifestError(
            f"{both[0]!r} is in both matchLabelKeys and mismatchLabelKeys", field=f"{path}.matchLabelKeys"
        )
    # keys the pod does not carry are left out (as the API server does)
    return selector.merged(
        {k: labels[k] for k in match if k in labels}, {k: labels[k] for k in mismatch if k in labels}
    )


def _affinity_term(obj: Any, path: str, namespace: str, labels: dict[str, str]) -> PodAffinityTerm:
    t = _map(obj, path)
    key = _str(t.get("topologyKey"), f"{path}.topologyKey")
    if not key:
        raise ManifestError("is required (a node label, e.g. kubernetes.io/hostname)", field=f"{path}.topologyKey")
    selector = parse_label_selector(t.get("labelSelector"), f"{path}.labelSelector")
    selector = _merge_keys(
        selector,
        labels,
        _label_keys(t.get("matchLabelKeys"), f"{path}.matchLabelKeys"),
        _label_keys(t.get("mismatchLabelKeys"), f"{path}.mismatchLabelKeys"),
        path,
    )
    namespaces = tuple(
        _str(n, f"{path}.namespaces[{i}]") for i, n in enumerate(_list(t.get("namespaces"), f"{path}.namespaces"))
    )
    ns_selector = parse_label_selector(t.get("namespaceSelector"), f"{path}.namespaceSelector")
    if not namespaces and ns_selector is None:
        namespaces = (namespace,)
    return PodAffinityTerm(selector, key, tuple(sorted(set(namespaces))), ns_selector)


def _terms(obj: Any, path: str, namespace: str, labels: dict[str, str]) -> tuple[PodAffinityTerm, ...]:
    return tuple(_affinity_term(t, f"{path}[{i}]", namespace, labels) for i, t in enumerate(_list(obj, path)))


def _weighted(obj: Any, path: str, namespace: str, labels: dict[str, str]) -> tuple[WeightedTerm, ...]:
    out = []
    for p, w in _items(obj, path):
        weight = _int(w.get("weight"), f"{p}.weight", None)
        if weight is None or not 1 <= weight <= 100:
            raise ManifestError(f"{w.get('weight')!r} is not a weight from 1 to 100", field=f"{p}.weight")
        term = _affinity_term(w.get("podAffinityTerm"), f"{p}.podAffinityTerm", namespace, labels)
        out.append(WeightedTerm(weight, term))
    return tuple(out)


def parse_pod_affinity(affinity: dict[str, Any], namespace: str, labels: dict[str, str]) -> PodAffinity | None:
    """spec.affinity's podAffinity and podAntiAffinity (None when the pod has neither)."""
    pa = _map(affinity.get("podAffinity"), "spec.affinity.podAffinity")
    paa = _map(affinity.get("podAntiAffinity"), "spec.affinity.podAntiAffinity")
    if not pa and not paa:
        return None
    req, pref = "requiredDuringSchedulingIgnoredDuringExecution", "preferredDuringSchedulingIgnoredDuringExecution"
    base, anti = "spec.affinity.podAffinity", "spec.affinity.podAntiAffinity"
    out = PodAffinity(
        required=_terms(pa.get(req), f"{base}.{req}", namespace, labels),
        anti_required=_terms(paa.get(req), f"{anti}.{req}", namespace, labels),
        preferred=_weighted(pa.get(pref), f"{base}.{pref}", namespace, labels),
        anti_preferred=_weighted(paa.get(pref), f"{anti}.{pref}", namespace, labels),
    )
    return out if (out.required or out.anti_required or out.preferred or out.anti_preferred) else None


def _policy(obj: Any, path: str, default: str) -> str:
    value = _str(obj, path, default)
    if value not in INCLUSION_POLICIES:
        raise ManifestError(f"{value!r} is not Honor or Ignore", field=path)
    return value


def parse_spread(obj: Any, labels: dict[str, str]) -> tuple[SpreadConstraint, ...]:
    """spec.topologySpreadConstraints."""
    path = "spec.topologySpreadConstraints"
    out: list[SpreadConstraint] = []
    seen: set[tuple[str, str]] = set()
    for p, c in _items(obj, path):
        skew = _int(c.get("maxSkew"), f"{p}.maxSkew", None)
        if skew is None or skew < 1:
            raise ManifestError(f"{c.get('maxSkew')!r}: must be greater than zero", field=f"{p}.maxSkew")
        key = _str(c.get("topologyKey"), f"{p}.topologyKey")
        if not key:
            raise ManifestError(
                "is required (a node label, e.g. topology.kubernetes.io/zone)", field=f"{p}.topologyKey"
            )
        when = _str(c.get("whenUnsatisfiable"), f"{p}.whenUnsatisfiable")
        if when not in WHEN_UNSATISFIABLE:
            raise ManifestError(f"{when!r} is not DoNotSchedule or ScheduleAnyway", field=f"{p}.whenUnsatisfiable")
        if (key, when) in seen:
            raise ManifestError(f"a second constraint on {key} with {when}", field=p)
        seen.add((key, when))
        min_domains = _int(c.get("minDomains"), f"{p}.minDomains", None)
        if min_domains is not None:
            if min_domains < 1:
                raise ManifestError(f"{min_domains}: must be greater than zero", field=f"{p}.minDomains")
            if when != DO_NOT_SCHEDULE:
                raise ManifestError("may only be set with whenUnsatisfiable DoNotSchedule", field=f"{p}.minDomains")
        selector = parse_label_selector(c.get("labelSelector"), f"{p}.labelSelector")
        keys = _label_keys(c.get("matchLabelKeys"), f"{p}.matchLabelKeys")
        selector = _merge_keys(selector, labels, keys, (), p)
        out.append(
            SpreadConstraint(
                max_skew=skew,
                topology_key=key,
                when_unsatisfiable=when,
                selector=selector,
                min_domains=min_domains,
                node_affinity_policy=_policy(c.get("nodeAffinityPolicy"), f"{p}.nodeAffinityPolicy", "Honor"),
                node_taints_policy=_policy(c.get("nodeTaintsPolicy"), f"{p}.nodeTaintsPolicy", "Ignore"),
            )
        )
    return tuple(out)


def parse_host_ports(spec: dict[str, Any]) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the sidecars (init containers with restartPolicy Always, which
    run as long as the pod): what kube-scheduler's NodePorts counts."""
    out: list[HostPort] = []
    seen: set[HostPort] = set()
    for group in ("containers", "initContainers"):
        listed = spec.get(group)
        if type(listed) is list and all(type(c) is dict and c.get("ports") is None for c in listed):
            continue  # no ports (nearly every pod): no field paths made for each container
        for i, c in enumerate(_list(listed, f"spec.{group}")):
            c = _map(c, f"spec.{group}[{i}]")
            counted = group == "containers" or c.get("restartPolicy") == "Always"  # a sidecar runs all along
            for j, port in enumerate(_list(c.get("ports"), f"spec.{group}[{i}].ports")):
                p = f"spec.{group}[{i}].ports[{j}]"
                port = _map(port, p)
                container = _int(port.get("containerPort"), f"{p}.containerPort", None)
                if container is None or not 1 <= container <= MAX_PORT:
                    raise ManifestError(
                        f"{port.get('containerPort')!r} is not a port from 1 to {MAX_PORT}", field=f"{p}.containerPort"
                    )
                host = _int(port.get("hostPort"), f"{p}.hostPort", 0) or 0
                if not 0 <= host <= MAX_PORT:
                    raise ManifestError(
                        f"{host} is not a port from 1 to {MAX_PORT} (or 0 for none)", field=f"{p}.hostPort"
                    )
                protocol = _str(port.get("protocol"), f"{p}.protocol", "TCP") or "TCP"
                if protocol not in PROTOCOLS:
                    raise ManifestError(f"{protocol!r} is not one of {', '.join(PROTOCOLS)}", field=f"{p}.protocol")
                if host == 0 or not counted:
                    continue
                hp = HostPort(_str(port.get("hostIP"), f"{p}.hostIP") or ANY_HOST_IP, protocol, host)
                if hp in seen:
                    raise ManifestError(f"hostPort {hp.describe()} is listed twice in the pod", field=f"{p}.hostPort")
                seen.add(hp)
                out.append(hp)
    return tuple(out)


def parse_claims(spec: dict[str, Any], pod_name: str) -> tuple[str, ...]:
    """Names of the PersistentVolumeClaims the pod's volumes use: ``persistentVolumeClaim.claimName``, and for a
    generic ephemeral volume the claim its controller makes, ``<pod name>-<volume name>``."""
    out: list[str] = []
    for p, v in _items(spec.get("volumes"), "spec.volumes"):
        if v.get("persistentVolumeClaim") is not None:
            pvc = _map(v.get("persistentVolumeClaim"), f"{p}.persistentVolumeClaim")
            out.append(_required(pvc.get("claimName"), f"{p}.persistentVolumeClaim.claimName"))
        elif v.get("ephemeral") is not None:
            out.append(f"{pod_name}-{_required(v.get('name'), f'{p}.name')}")
    return tuple(dict.fromkeys(out))


@dataclass(frozen=True, slots=True)
class PodClaim:
    """``spec.resourceClaims[]`` of a pod: a claim by name, or one made for the pod from a template."""

    name: str
    claim: str = ""  # resourceClaimName
    template: str = ""  # resourceClaimTemplateName


def parse_pod_claims(spec: dict[str, Any]) -> tuple[PodClaim, ...]:
    """A pod's ``spec.resourceClaims``: each names exactly one of resourceClaimName, resourceClaimTemplateName."""
    out = []
    for p, c in _items(spec.get("resourceClaims"), "spec.resourceClaims"):
        name = _required(c.get("name"), f"{p}.name")
        claim = _str(c.get("resourceClaimName"), f"{p}.resourceClaimName")
        template = _str(c.get("resourceClaimTemplateName"), f"{p}.resourceClaimTemplateName")
        if bool(claim) == bool(template):
            raise ManifestError("exactly one of resourceClaimName, resourceClaimTemplateName", field=p)
        out.append(PodClaim(name, claim, template))
    names = [c.name for c in out]
    if len(set(names)) != len(names):
        raise ManifestError("claim names repeat", field="spec.resourceClaims")
    return tuple(out)


def parse_claim_statuses(status: dict[str, Any]) -> dict[str, str]:
    """``status.resourceClaimStatuses``: per pod claim name, the claim made for it from its template."""
    out = {}
    for p, s in _items(status.get("resourceClaimStatuses"), "status.resourceClaimStatuses"):
        made = _str(s.get("resourceClaimName"), f"{p}.resourceClaimName")
        if made:
            out[_required(s.get("name"), f"{p}.name")] = made
    return out
