"""Reading manifests: YAML streams in, typed objects out, every error located.

Rules: each document is dispatched on ``apiVersion`` + ``kind``; ``v1 List`` is
expanded; the owner kinds the pod-grouper knows (``WORKLOAD_KINDS``: Job,
RayCluster, PyTorchJob, ...) are kept as Workloads, their manifests raw; kinds
that never affect scheduling (Secret, ConfigMap, ...) are returned as *ignored*
so the caller can say so rather than drop them silently. Anything else is a
ManifestError naming the file, the object and the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, ClassVar

import yaml

from kai.api import constants as C
from kai.api.dra import (
    API_VERSION as DRA_API_VERSION,
)
from kai.api.dra import (
    DraObject,
    parse_device_class,
    parse_resource_claim,
    parse_resource_claim_template,
    parse_resource_slice,
)
from kai.api.errors import ManifestError
from kai.api.limits import check_shape
from kai.api.objects import (
    ApiObject,
    object_ref,
    parse_namespace,
    parse_node,
    parse_pod,
    parse_podgroup,
    parse_priority_class,
    parse_queue,
    parse_shard,
    parse_topology,
)
from kai.api.pdb import parse_pdb
from kai.api.storage import (
    StorageObject,
    parse_csinode,
    parse_persistent_volume,
    parse_persistent_volume_claim,
    parse_storage_class,
)
from kai.api.workloads import WORKLOAD_KINDS, Workload, parse_workload

try:  # the C loader is ~10x faster on large manifests
    _Base: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Base = yaml.SafeLoader


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """YAML 1.1 without implicit timestamps: Kubernetes reads ``2026-01-01T00:00:00Z`` as a string, and so does
    kai, so that a bad date is an error naming its field (``parse_time``) rather than a YAML error."""

    yaml_implicit_resolvers: ClassVar[dict[str, list[tuple[str, Any]]]] = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in _Base.yaml_implicit_resolvers.items()
    }


PARSERS: dict[tuple[str, str], Callable[[dict[str, Any]], ApiObject]] = {
    ("v1", "Node"): parse_node,
    ("v1", "Pod"): parse_pod,
    (C.QUEUE_API_VERSION, "Queue"): parse_queue,
    (C.PODGROUP_API_VERSION, "PodGroup"): parse_podgroup,
    (C.PRIORITY_CLASS_API_VERSION, "PriorityClass"): parse_priority_class,
    (C.TOPOLOGY_API_VERSION, "Topology"): parse_topology,
    (C.SHARD_API_VERSION, "SchedulingShard"): parse_shard,
    ("policy/v1", "PodDisruptionBudget"): parse_pdb,
    ("v1", "Namespace"): parse_namespace,
    ("storage.k8s.io/v1", "StorageClass"): parse_storage_class,
    ("v1", "PersistentVolume"): parse_persistent_volume,
    ("v1", "PersistentVolumeClaim"): parse_persistent_volume_claim,
    ("storage.k8s.io/v1", "CSINode"): parse_csinode,
    (DRA_API_VERSION, "DeviceClass"): parse_device_class,
    (DRA_API_VERSION, "ResourceSlice"): parse_resource_slice,
    (DRA_API_VERSION, "ResourceClaim"): parse_resource_claim,
    (DRA_API_VERSION, "ResourceClaimTemplate"): parse_resource_claim_template,
}

NAMESPACED_KINDS = frozenset(
    {
        "Pod",
        "PodGroup",
        "PodDisruptionBudget",
        "PersistentVolumeClaim",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "Secret",
        "ConfigMap",
        "Service",
        "ServiceAccount",
    }
    | {k for _, k in WORKLOAD_KINDS}
)

ManifestObject = ApiObject | Workload | StorageObject | DraObject

# Kinds a user applies beside their workloads that carry nothing for a scheduler.
IGNORED_KINDS = frozenset({"Secret", "ConfigMap", "Service", "ServiceAccount"})


@dataclass(frozen=True, slots=True)
class Ignored:
    """A document kai read and deliberately does not use."""

    source: str
    kind: str
    name: str


def document_ref(doc: Any) -> str:
    """``Kind/ns/name`` or ``Kind/name`` for messages, as far as the document tells."""
    if not isinstance(doc, dict):
        return ""
    kind = str(doc.get("kind") or "?")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    name = str(meta.get("name") or "?")
    ns = meta.get("namespace") or ("default" if kind in NAMESPACED_KINDS else None)
    return object_ref(kind, ns, name)


def parse_document(doc: Any, source: str) -> ManifestObject | Ignored:
    """One decoded YAML document → a typed object."""
    if not isinstance(doc, dict):
        raise ManifestError(f"a manifest must be a mapping, got {type(doc).__name__}", source=source)
    ref = document_ref(doc)
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not kind:
        raise ManifestError("is required", source=source, obj=ref, field="kind")
    if not api_version:
        raise ManifestError("is required", source=source, obj=ref, field="apiVersion")
    for value, name in ((kind, "kind"), (api_version, "apiVersion")):
        if not isinstance(value, str):
            raise ManifestError(f"expected a string, got {type(value).__name__}", source=source, obj=ref, field=name)
    parser: Callable[[dict[str, Any]], ManifestObject] | None = PARSERS.get((str(api_version), str(kind)))
    if parser is None and (str(api_version), str(kind)) in WORKLOAD_KINDS:
        parser = parse_workload
    if parser is None:
        if api_version == "v1" and kind in IGNORED_KINDS:
            meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
            return Ignored(source, str(kind), str(meta.get("name", "")))
        versions = sorted(v for v, k in [*PARSERS, *WORKLOAD_KINDS] if k == kind)
        hint = f" (kai reads {kind} as {' or '.join(versions)})" if versions else ""
        raise ManifestError(f"unknown kind {api_version} {kind}{hint}", source=source, obj=ref, field="kind")
    try:
        return parser(doc)
    except ManifestError as e:
        raise e.located(source=source, obj=ref) from None


def iter_documents(text: str, source: str) -> Iterator[Any]:
    """The non-empty documents of a YAML stream, ``v1 List`` expanded."""
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark is not None else ""
        raise ManifestError(f"{where}malformed YAML: {getattr(e, 'problem', e)}", source=source) from None
    except (ValueError, TypeError, OverflowError) as e:  # a scalar PyYAML's constructors refuse (a 5,000-digit int)
        raise ManifestError(f"malformed YAML: {str(e)[:200]}", source=source) from None
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        try:
            check_shape(doc)
        except ManifestError as e:
            raise e.located(source=source, obj=document_ref(doc) or f"document {i + 1}") from None
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            yield from (d for d in doc["items"] if d is not None)
        else:
            yield doc


def load_manifests(
    texts: Iterable[tuple[str, str]],
) -> tuple[list[tuple[str, ManifestObject]], list[Ignored]]:
    """(source, text) pairs → (source, object) pairs in input order, and the ignored documents."""
    objects: list[tuple[str, ManifestObject]] = []
    ignored: list[Ignored] = []
    for source, text in texts:
        for doc in iter_documents(text, source):
            obj = parse_document(doc, source)
            if isinstance(obj, Ignored):
                ignored.append(obj)
            else:
                objects.append((source, obj))
    return objects, ignored
