"""Workloads: the objects that own pods (Job, RayCluster, PyTorchJob, ...), kept as their manifests.

Rules: kai reads only a few fields of each owner kind (those the pod-grouper and the simulated
controllers use), so an owner is stored raw and each reader checks the fields it uses, through
``Fields``, which names the object and the field in every error. ``WORKLOAD_KINDS`` lists the
(apiVersion, kind) pairs kai accepts as owners: the kinds KAI's pod-grouper has a plugin for
(kai-behaviour §7), plus Knative's Configuration and Revision, which sit in a Knative Service's
owner chain.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kai.api._read import INT32
from kai.api.errors import ManifestError, OwnerSpecError
from kai.api.limits import check_shape
from kai.api.objects import ObjectMeta, Pod, object_ref, parse_go_int, parse_meta

# (apiVersion, kind) of every owner kind kai reads. The pod-grouper's registry and the simulated
# controllers are keyed by these; a unit test keeps the three in step.
WORKLOAD_KINDS: frozenset[tuple[str, str]] = frozenset(
    {
        ("apps/v1", "Deployment"),
        ("apps/v1", "ReplicaSet"),
        ("apps/v1", "StatefulSet"),
        ("batch/v1", "Job"),
        ("batch/v1", "CronJob"),
        ("kubeflow.org/v1", "PyTorchJob"),
        ("kubeflow.org/v1", "TFJob"),
        ("kubeflow.org/v1", "XGBoostJob"),
        ("kubeflow.org/v1", "JAXJob"),
        ("kubeflow.org/v1", "MPIJob"),
        ("kubeflow.org/v2beta1", "MPIJob"),
        ("kubeflow.org/v1beta1", "Notebook"),
        ("kubeflow.org/v1alpha1", "ScheduledWorkflow"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("ray.io/v1", "RayCluster"),
        ("ray.io/v1", "RayJob"),
        ("ray.io/v1", "RayService"),
        ("ray.io/v1alpha1", "RayCluster"),
        ("ray.io/v1alpha1", "RayJob"),
        ("ray.io/v1alpha1", "RayService"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet"),
        ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
        ("serving.knative.dev/v1", "Service"),
        ("serving.knative.dev/v1", "Configuration"),
        ("serving.knative.dev/v1", "Revision"),
        ("argoproj.io/v1alpha1", "Workflow"),
        ("machinelearning.seldon.io/v1", "SeldonDeployment"),
        ("machinelearning.seldon.io/v1alpha2", "SeldonDeployment"),
        ("kubevirt.io/v1", "VirtualMachineInstance"),
        ("workspace.devfile.io/v1alpha2", "DevWorkspace"),
        ("tekton.dev/v1", "PipelineRun"),
        ("tekton.dev/v1", "TaskRun"),
    }
)


def split_api_version(api_version: str) -> tuple[str, str]:
    """``ray.io/v1`` → (``ray.io``, ``v1``); ``v1`` → (``""``, ``v1``), as Kubernetes splits a GroupVersion."""
    group, _, version = api_version.rpartition("/")
    return group, version


@dataclass(slots=True)
class Workload:
    """An owner object as applied: its metadata parsed, the rest kept as the manifest (``doc``)."""

    meta: ObjectMeta
    api_version: str
    kind: str  # the Store files a Workload under its own kind ("RayCluster", "Job", ...)
    doc: dict[str, Any]

    @property
    def group(self) -> str:
        return split_api_version(self.api_version)[0]

    @property
    def ref(self) -> str:
        return object_ref(self.kind, self.meta.namespace, self.meta.name)

    def fields(self) -> Fields:
        return Fields(self.ref, self.doc)


def parse_workload(doc: dict[str, Any]) -> Workload:
    """A manifest of one of WORKLOAD_KINDS; only the metadata is checked here (readers check the rest)."""
    kind = str(doc.get("kind"))
    meta = parse_meta(doc, kind, namespaced=True)
    check_shape(doc)  # before the deep copy: an owner from the API server may nest arbitrarily (unknown fields)
    return Workload(meta=meta, api_version=str(doc.get("apiVersion")), kind=kind, doc=copy.deepcopy(doc))


def pod_as_owner(pod: Pod) -> Workload:
    """A pod seen as an owner: the top owner of a bare pod (KAI's podjob), or an LWS leader that owns its
    workers' StatefulSet. Only the metadata is known; the spec stays on the Pod."""
    return Workload(meta=pod.meta, api_version="v1", kind="Pod", doc={})


Path = tuple[str | int, ...]


def format_path(path: Path) -> str:
    """("spec", "workerGroupSpecs", 0, "replicas") → ``spec.workerGroupSpecs[0].replicas``."""
    out = ""
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else p)
    return out


@dataclass(frozen=True, slots=True)
class Fields:
    """Typed reads of a raw manifest (or a part of one at ``base``); errors name the object and field.

    A missing field reads as the default; a field of the wrong type is a ManifestError, as the API
    server's schema would reject it (KAI's unstructured.Nested* calls fail the same way)."""

    ref: str
    doc: Mapping[str, Any]
    base: Path = ()

    def error(self, message: str, *path: str | int) -> ManifestError:
        return ManifestError(message, obj=self.ref, field=format_path(self.base + path))

    def inconsistent(self, message: str, *path: str | int) -> OwnerSpecError:
        """A well-formed value that contradicts the rest of the spec (see OwnerSpecError)."""
        return OwnerSpecError(message, obj=self.ref, field=format_path(self.base + path))

    def get(self, *path: str | int) -> Any:
        cur: Any = self.doc
        for i, p in enumerate(path):
            if cur is None:
                return None
            if isinstance(p, int):
                if not isinstance(cur, list):
                    raise self.error(f"expected a list, got {type(cur).__name__}", *path[:i])
                cur = cur[p] if p < len(cur) else None
            else:
                if not isinstance(cur, Mapping):
                    raise self.error(f"expected a mapping, got {type(cur).__name__}", *path[:i])
                cur = cur.get(p)
        return cur

    def has(self, *path: str | int) -> bool:
        return self.get(*path) is not None

    def integer(self, *path: str | int, default: int | None = None) -> int | None:
        v = self.get(*path)
        if v is None:
            return default
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.error(f"{str(v)[:40]!r} is not an integer", *path)
        if not INT32[0] <= v <= INT32[1]:  # Kubernetes' counts are int32
            raise self.error(f"{v} is out of range ({INT32[0]} to {INT32[1]})", *path)
        return v

    def string(self, *path: str | int, default: str = "") -> str:
        v = self.get(*path)
        if v is None:
            return default
        if not isinstance(v, str):
            raise self.error(f"{v!r} is not a string", *path)
        return v

    def flag(self, *path: str | int, default: bool = False) -> bool:
        v = self.get(*path)
        if v is None:
            return default
        if not isinstance(v, bool):
            raise self.error(f"{v!r} is not a boolean", *path)
        return v

    def mapping(self, *path: str | int) -> dict[str, Any]:
        v = self.get(*path)
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise self.error(f"expected a mapping, got {type(v).__name__}", *path)
        return dict(v)

    def string_map(self, *path: str | int) -> dict[str, str]:
        """A labels/annotations map; values must be strings (Kubernetes rejects numbers there)."""
        out = {}
        for k, v in self.mapping(*path).items():
            if not isinstance(v, str):
                raise self.error(f"{v!r} is not a string (quote it)", *path, str(k))
            out[str(k)] = v
        return out

    def at(self, *path: str | int) -> Fields:
        """The mapping at *path* (empty if missing) as Fields whose errors carry the full path."""
        return Fields(self.ref, self.mapping(*path), self.base + path)

    def items(self, *path: str | int) -> list[Fields]:
        """The list of mappings at *path*, each as Fields."""
        v = self.get(*path)
        if v is None:
            return []
        if not isinstance(v, list):
            raise self.error(f"expected a list, got {type(v).__name__}", *path)
        out = []
        for i, item in enumerate(v):
            if not isinstance(item, Mapping):
                raise self.error(f"expected a mapping, got {type(item).__name__}", *path, i)
            out.append(Fields(self.ref, item, (*self.base, *path, i)))
        return out


def annotation_int(
    ref: str, annotations: Mapping[str, str], key: str, *, where: str = "metadata.annotations"
) -> int | None:
    """An integer annotation as Go's strconv.ParseInt(s, 10, 32) reads it; None when absent."""
    text = annotations.get(key)
    if text is None:
        return None
    value = parse_go_int(text)
    if value is None or not -(2**31) <= value < 2**31:
        raise ManifestError(f"{text!r} is not an integer", obj=ref, field=f"{where}.{key}")
    return value
