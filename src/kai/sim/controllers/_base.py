"""What every simulated controller shares: the view it reads, the result it returns, and the helpers that
build children the way Kubernetes controllers do (owner references, template labels, generated names).

Rules: a controller is a pure function ``reconcile(owner, view) -> Result``. It is level-triggered, like
the real ones: it compares what should exist (from the owner's spec) with the children it sees and asks
for the missing ones. It never mutates the view or the owner; the embedded cluster applies the Result.
Names are deterministic: where Kubernetes appends a random suffix (``generateName``), kai hashes the
prefix and a counter, and skips names that were ever used, so a replacement pod gets a new name.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kai.api import constants as C
from kai.api.objects import Pod
from kai.api.workloads import Fields, Workload

ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand: no vowels, no 0/1/3


class View(Protocol):
    """What a controller may read of the cluster."""

    @property
    def now(self) -> float: ...

    def children(self, owner: Workload | Pod) -> list[Workload | Pod]:
        """The objects whose first owner reference names *owner*, in creation order."""
        ...

    def taken(self, kind: str, namespace: str, name: str) -> bool:
        """Whether an object of *kind* ever had this name (so a generated name is never reused)."""
        ...


@dataclass(frozen=True, slots=True)
class Created:
    """A manifest the controller wants applied. ``maps`` says which part of the owner it was built from:
    (the child's field prefix, the owner's field prefix), so that an error in the child can be reported
    on the field the user wrote: ("", "spec.template") for a pod made from a pod template."""

    doc: dict[str, Any]
    maps: tuple[str, str] = ("", "")


@dataclass(slots=True)
class Result:
    create: list[Created] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)  # merged into the owner's status


Reconciler = Callable[[Workload, View], Result]


def active(pod: Pod) -> bool:
    """Counts toward the desired replicas: not finished and not being deleted (as ReplicaSets count)."""
    return pod.phase not in ("Succeeded", "Failed") and pod.meta.deletion_timestamp is None


def pods_of(view: View, owner: Workload | Pod) -> list[Pod]:
    return [c for c in view.children(owner) if isinstance(c, Pod)]


def workloads_of(view: View, owner: Workload | Pod, kind: str) -> list[Workload]:
    return [c for c in view.children(owner) if isinstance(c, Workload) and c.kind == kind]


def owner_reference(owner: Workload | Pod) -> dict[str, Any]:
    api_version = owner.api_version if isinstance(owner, Workload) else "v1"
    return {
        "apiVersion": api_version,
        "kind": owner.kind,
        "name": owner.meta.name,
        "uid": owner.meta.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def suffix(seed: str, length: int = 5) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(ALPHANUMS[b % len(ALPHANUMS)] for b in digest[:length])


def safe_hash(value: Any) -> str:
    """A pod-template-hash lookalike: Kubernetes writes the decimal digits of a 32-bit hash through
    SafeEncodeString; kai hashes the canonical repr of the template the same way."""
    digest = hashlib.sha256(repr(_canonical(value)).encode()).digest()
    number = str(int.from_bytes(digest[:4], "big"))
    return "".join(ALPHANUMS[ord(c) % len(ALPHANUMS)] for c in number)


def _canonical(value: Any) -> Any:
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), _canonical(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_canonical(v) for v in value)
    return value


class Names:
    """generateName for one reconcile: deterministic, never a name the view has seen or this call gave."""

    def __init__(self, view: View, namespace: str) -> None:
        self._view = view
        self._ns = namespace
        self._given: set[tuple[str, str]] = set()

    def generate(self, prefix: str, kind: str = "Pod") -> str:
        for i in itertools.count():
            name = prefix + suffix(f"{self._ns}/{prefix}#{i}")
            if (kind, name) not in self._given and not self._view.taken(kind, self._ns, name):
                self._given.add((kind, name))
                return name
        raise AssertionError("unreachable")


def namespace_of(owner: Workload) -> str:
    return owner.meta.namespace or "default"


def pod_manifest(
    owner: Workload | Pod,
    template: Fields,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    scheduler_name: str | None = None,
) -> dict[str, Any]:
    """A pod from a pod template, as controllers create them: the template's labels and annotations plus
    the controller's own, an owner reference, and the template's spec unchanged."""
    meta = template.at("metadata")
    spec = copy.deepcopy(template.mapping("spec"))
    if scheduler_name is not None:
        spec["schedulerName"] = scheduler_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": owner.meta.namespace or "default",
            "labels": {**meta.string_map("labels"), **(labels or {})},
            "annotations": {**meta.string_map("annotations"), **(annotations or {})},
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": spec,
    }


def object_manifest(
    api_version: str,
    kind: str,
    name: str,
    owner: Workload | Pod,
    spec: dict[str, Any],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A child workload (a Job, ReplicaSet, StatefulSet, RayCluster) owned by *owner*."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": owner.meta.namespace or "default",
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
            "ownerReferences": [owner_reference(owner)],
        },
        "spec": spec,
    }


def template_with(
    template: Fields, labels: Mapping[str, str], annotations: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A copy of a pod template with extra labels and annotations (as JobSet and LWS stamp theirs)."""
    out = copy.deepcopy(dict(template.doc))
    meta = dict(out.get("metadata") or {})
    meta["labels"] = {**template.at("metadata").string_map("labels"), **labels}
    if annotations or "annotations" in meta:
        meta["annotations"] = {**template.at("metadata").string_map("annotations"), **(annotations or {})}
    out["metadata"] = meta
    return out


def scheduler_labels(owner: Workload) -> dict[str, str]:
    """The queue label a batch-scheduler integration copies from the owner onto its pods (KubeRay's KAI
    plugin does this)."""
    queue = owner.meta.labels.get(C.LABEL_QUEUE)
    return {C.LABEL_QUEUE: queue} if queue is not None else {}
