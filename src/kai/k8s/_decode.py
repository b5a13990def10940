"""API server JSON → kai's typed objects, decoding only the fields the scheduler reads.

Rules: Pods and Nodes, the kinds that come by the thousand, are decoded into msgspec structs that name
only the fields kai uses (managedFields, container images, env, and volumes other than claims are skipped
by the C decoder without building Python objects). The structs are then turned into plain dicts and handed to the same
``kai.api`` parsers that read manifests, so a pod means the same thing in ``kai sim`` and on a cluster,
and a bad field is a ManifestError naming it. The few other kinds (Queues, PodGroups, PriorityClasses,
Topologies, PDBs, SchedulingShards, Namespaces and the storage kinds) are decoded whole.

``KINDS`` lists every kind the scheduler watches: its API path, and how an item becomes a kai object.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from kai.api.dra import API_VERSION as DRA_API
from kai.api.dra import parse_device_class, parse_resource_claim, parse_resource_claim_template, parse_resource_slice
from kai.api.objects import (
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
from kai.api.storage import parse_csinode, parse_persistent_volume, parse_persistent_volume_claim, parse_storage_class

Json = Any


class OwnerRef(msgspec.Struct, omit_defaults=True):
    apiVersion: str = ""
    kind: str = ""
    name: str = ""
    uid: str = ""
    controller: bool | None = None


class Meta(msgspec.Struct, omit_defaults=True):
    name: str = ""
    namespace: str | None = None
    uid: str = ""
    resourceVersion: str = ""
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    ownerReferences: list[OwnerRef] | None = None


class Resources(msgspec.Struct, omit_defaults=True):
    requests: dict[str, Json] | None = None
    limits: dict[str, Json] | None = None


class Container(msgspec.Struct, omit_defaults=True):
    name: str = ""
    resources: Resources | None = None
    restartPolicy: str | None = None
    ports: list[Json] | None = None  # hostPort / hostIP / protocol: host ports (NodePorts)


class Affinity(msgspec.Struct, omit_defaults=True):
    nodeAffinity: Json = None
    podAffinity: Json = None
    podAntiAffinity: Json = None


class Volume(msgspec.Struct, omit_defaults=True):
    """A pod volume: only the kinds that name a PersistentVolumeClaim are kept (secrets, config maps and
    projected volumes are skipped by the decoder)."""

    name: str = ""
    persistentVolumeClaim: Json = None
    ephemeral: Json = None


class PodSpec(msgspec.Struct, omit_defaults=True):
    nodeName: str | None = None
    schedulerName: str | None = None
    priorityClassName: str | None = None
    priority: int | None = None
    nodeSelector: dict[str, str] | None = None
    affinity: Affinity | None = None
    tolerations: list[Json] | None = None
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    overhead: dict[str, Json] | None = None
    schedulingGates: list[Json] | None = None
    topologySpreadConstraints: list[Json] | None = None
    volumes: list[Volume] | None = None
    resourceClaims: list[Json] | None = None  # DRA: the pod's claims (by name, or from a template)


class PodCondition(msgspec.Struct, omit_defaults=True):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None


class PodStatus(msgspec.Struct, omit_defaults=True):
    phase: str | None = None
    nominatedNodeName: str | None = None
    startTime: str | None = None
    conditions: list[PodCondition] | None = None
    resourceClaimStatuses: list[Json] | None = None  # DRA: the claims made for the pod from templates


class PodDoc(msgspec.Struct, omit_defaults=True):
    metadata: Meta
    spec: PodSpec | None = None
    status: PodStatus | None = None


class NodeSpec(msgspec.Struct, omit_defaults=True):
    taints: list[Json] | None = None
    unschedulable: bool | None = None


class NodeCondition(msgspec.Struct, omit_defaults=True):
    type: str = ""
    status: str = ""


class NodeStatus(msgspec.Struct, omit_defaults=True):
    allocatable: dict[str, Json] | None = None
    capacity: dict[str, Json] | None = None
    conditions: list[NodeCondition] | None = None


class NodeDoc(msgspec.Struct, omit_defaults=True):
    metadata: Meta
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class AnyDoc(msgspec.Struct):
    """A whole object, kept as a dict (the small kinds)."""

    metadata: Meta


class ListMeta(msgspec.Struct, omit_defaults=True):
    resourceVersion: str = ""
    # "continue" is a Python keyword: renamed
    cont: str = msgspec.field(default="", name="continue")


class WatchEvent(msgspec.Struct):
    type: str
    object: msgspec.Raw


@dataclass(frozen=True)
class Decoded:
    """One object off the wire: its API resourceVersion, a dict for the parser, and the raw status."""

    resource_version: str
    doc: dict[str, Any]
    status: Any


class KindCodec:
    """How one kind is decoded: a struct for the hot kinds, a plain dict for the rest."""

    def __init__(self, struct: type | None) -> None:
        self._struct = struct
        self._item = msgspec.json.Decoder(struct) if struct is not None else msgspec.json.Decoder()
        fields = struct if struct is not None else Any
        self._list = msgspec.json.Decoder(_list_type(fields))

    def decode_list(self, data: bytes) -> tuple[ListMeta, list[Decoded]]:
        """Raises msgspec.DecodeError (or ValidationError) for anything that is not a list of this kind."""
        try:
            lst = self._list.decode(data)
        except UnicodeDecodeError as e:  # not UTF-8: the same "not JSON" as any other garbage
            raise msgspec.DecodeError(str(e)) from None
        return lst.metadata, [self._decoded(x) for x in (lst.items or ())]

    def decode_item(self, raw: bytes) -> Decoded:
        """Raises msgspec.DecodeError (or ValidationError) for anything that is not one object of this kind."""
        try:
            item = self._item.decode(raw)
        except UnicodeDecodeError as e:
            raise msgspec.DecodeError(str(e)) from None
        return self._decoded(item)

    def _decoded(self, item: Any) -> Decoded:
        if self._struct is None:
            if not isinstance(item, dict) or not isinstance(item.get("metadata") or {}, dict):
                raise msgspec.ValidationError(f"expected an object with metadata, got {type(item).__name__}")
            doc = item
            meta = doc.get("metadata") or {}
            doc["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
            return Decoded(str(meta.get("resourceVersion", "")), doc, doc.get("status"))
        doc = msgspec.to_builtins(item)
        return Decoded(item.metadata.resourceVersion, doc, item.status)


_LIST_TYPES: dict[Any, type] = {}


def _list_type(item: Any) -> type:
    """A ``{metadata: ListMeta, items: [item]}`` struct for *item* (made once per item type)."""
    if item not in _LIST_TYPES:
        _LIST_TYPES[item] = msgspec.defstruct(
            f"List_{getattr(item, '__name__', 'any')}",
            [("metadata", ListMeta, msgspec.field(default_factory=ListMeta)), ("items", list[item] | None, None)],
        )
    return _LIST_TYPES[item]


@dataclass(frozen=True)
class KindSpec:
    """A kind the scheduler watches: where it is served and how an item becomes a kai object."""

    kind: str  # kai's kind name (Store collection)
    api_version: str
    plural: str
    parse: Callable[[dict[str, Any]], Any]
    codec: KindCodec
    namespaced: bool = False
    # A kind whose absence only narrows what kai can do (no Topologies: no topology-constrained pod
    # places): when RBAC forbids reading it, it is empty instead of blocking every cycle.
    optional: bool = False

    def path(self, namespace: str | None = None) -> str:
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if namespace:
            return f"{base}/namespaces/{namespace}/{self.plural}"
        return f"{base}/{self.plural}"


def _pdb_v1beta1(doc: dict[str, Any]) -> Any:
    return parse_pdb(doc)


KINDS: tuple[KindSpec, ...] = (
    KindSpec("Node", "v1", "nodes", parse_node, KindCodec(NodeDoc)),
    KindSpec("Pod", "v1", "pods", parse_pod, KindCodec(PodDoc), namespaced=True),
    KindSpec("Queue", "scheduling.run.ai/v2", "queues", parse_queue, KindCodec(None)),
    KindSpec("PodGroup", "scheduling.run.ai/v2alpha2", "podgroups", parse_podgroup, KindCodec(None), namespaced=True),
    KindSpec("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", parse_priority_class, KindCodec(None)),
    KindSpec("Topology", "kai.scheduler/v1alpha1", "topologies", parse_topology, KindCodec(None), optional=True),
    KindSpec("SchedulingShard", "kai.scheduler/v1", "schedulingshards", parse_shard, KindCodec(None), optional=True),
    KindSpec("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets", parse_pdb, KindCodec(None), namespaced=True),
    # what inter-pod affinity (namespaceSelector) and volumes read: without read access (an older RBAC), a
    # pod that needs them waits with the reason, every other pod is scheduled
    KindSpec("Namespace", "v1", "namespaces", parse_namespace, KindCodec(None), optional=True),
    KindSpec(
        "StorageClass", "storage.k8s.io/v1", "storageclasses", parse_storage_class, KindCodec(None), optional=True
    ),
    KindSpec("PersistentVolume", "v1", "persistentvolumes", parse_persistent_volume, KindCodec(None), optional=True),
    KindSpec(
        "PersistentVolumeClaim",
        "v1",
        "persistentvolumeclaims",
        parse_persistent_volume_claim,
        KindCodec(None),
        namespaced=True,
        optional=True,
    ),
    KindSpec("CSINode", "storage.k8s.io/v1", "csinodes", parse_csinode, KindCodec(None), optional=True),
    # Dynamic Resource Allocation (resource.k8s.io/v1, Kubernetes 1.34+; optional: older servers lack it)
    KindSpec("DeviceClass", DRA_API, "deviceclasses", parse_device_class, KindCodec(None), optional=True),
    KindSpec("ResourceSlice", DRA_API, "resourceslices", parse_resource_slice, KindCodec(None), optional=True),
    KindSpec(
        "ResourceClaim",
        DRA_API,
        "resourceclaims",
        parse_resource_claim,
        KindCodec(None),
        namespaced=True,
        optional=True,
    ),
    KindSpec(
        "ResourceClaimTemplate",
        DRA_API,
        "resourceclaimtemplates",
        parse_resource_claim_template,
        KindCodec(None),
        namespaced=True,
        optional=True,
    ),
)

# Kubernetes 1.20 serves PodDisruptionBudgets as policy/v1beta1 only (policy/v1 came with 1.21).
PDB_V1BETA1 = KindSpec(
    "PodDisruptionBudget", "policy/v1beta1", "poddisruptionbudgets", _pdb_v1beta1, KindCodec(None), namespaced=True
)


def pod_scheduled_condition(status: Any) -> tuple[str, str, str] | None:
    """(status, reason, message) of a decoded pod status's PodScheduled condition, if any."""
    if status is None or not status.conditions:
        return None
    for c in status.conditions:
        if c.type == "PodScheduled":
            return (c.status, c.reason or "", c.message or "")
    return None
