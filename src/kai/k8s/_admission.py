"""kai's admission webhooks: what each one answers to an AdmissionRequest (reference section 1.2, admission).

Rules: pure functions of the request and the Store (no I/O; the HTTPS server in ``_webhook`` calls them on
the event loop, so each answers in well under a millisecond). Every refusal names the field, in the same
words kai uses when it reports the object after the fact. The pod and PodGroup checks never refuse a
write that leaves the checked fields as they were, so kai's own label and annotation patches (binder,
pod-grouper, stale-gang timestamp) are never blocked by a rule that changed meanwhile.

* ``/mutate--v1-pod`` (CREATE): a kai pod asking for a GPU fraction gets KAI's GPU-sharing env, the
  ConfigMap references and volume (``kai.api.sharedgpu``), and the runtime class when one is configured.
* ``/validate--v1-pod`` (CREATE, UPDATE): KAI's GPU-sharing annotation rules (kai's own parser, the one
  the scheduler uses), and kai's queue access rule for the ``kai.scheduler/queue`` label.
* ``/validate--v1-queue`` (CREATE, UPDATE, DELETE): the fields kai reads (an explicit limit below the
  quota among them), resources present, no parent cycle, no delete of a queue with children; KAI's warnings.
* ``/validate--v1-podgroup`` (CREATE, UPDATE): the subgroup tree (KAI's PodGroup webhook) and the queue
  access rule for ``spec.queue``.
* ``/validate-kai-scheduler-v1alpha1-topology`` (CREATE, UPDATE): the level rules, KAI's alias rules, and
  the nodeLabel sequence immutable (the CEL rule kai's 1.20-compatible CRD leaves out).
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kai.api import constants as C
from kai.api import sharedgpu
from kai.api.errors import ManifestError
from kai.api.objects import Queue, parse_pod, parse_podgroup, parse_queue, parse_topology
from kai.api.queueaccess import access_denied
from kai.scheduler.gpusharing import parse_share
from kai.store import Store

MUTATE_POD = "/mutate--v1-pod"
VALIDATE_POD = "/validate--v1-pod"
VALIDATE_QUEUE = "/validate--v1-queue"
VALIDATE_PODGROUP = "/validate--v1-podgroup"
VALIDATE_TOPOLOGY = "/validate-kai-scheduler-v1alpha1-topology"
PATHS = (MUTATE_POD, VALIDATE_POD, VALIDATE_QUEUE, VALIDATE_PODGROUP, VALIDATE_TOPOLOGY)

GPU_ANNOTATIONS = (
    C.ANNOTATION_GPU_FRACTION,
    C.ANNOTATION_GPU_MEMORY,
    C.ANNOTATION_GPU_FRACTION_NUM_DEVICES,
    C.ANNOTATION_GPU_FRACTION_CONTAINER_NAME,
    C.ANNOTATION_MPS,
)
SHARING_ENV = (C.ENV_NVIDIA_VISIBLE_DEVICES, C.ENV_RUNAI_NUM_OF_GPUS, C.ENV_GPU_PORTION)


@dataclass(frozen=True)
class AdmissionConfig:
    scheduler_name: str = C.SCHEDULER_NAME
    # runtimeClassName set on fraction pods that name none (KAI's admission.gpuFractionRuntimeClassName); "" = none
    gpu_fraction_runtime_class: str = C.DEFAULT_GPU_FRACTION_RUNTIME_CLASS


@dataclass
class Verdict:
    """What a webhook answers: allowed or not (with the reason), warnings, and a JSON patch."""

    allowed: bool = True
    message: str = ""
    warnings: list[str] | None = None
    patch: list[dict[str, Any]] | None = None

    def response(self, uid: str) -> dict[str, Any]:
        out: dict[str, Any] = {"uid": uid, "allowed": self.allowed}
        if not self.allowed:
            out["status"] = {"code": 403, "reason": "Forbidden", "message": self.message}
        if self.warnings:
            out["warnings"] = self.warnings
        if self.patch:
            out["patchType"] = "JSONPatch"
            out["patch"] = base64.b64encode(json.dumps(self.patch).encode()).decode()
        return out


def denied(message: str) -> Verdict:
    return Verdict(allowed=False, message=message)


def _error_text(e: ManifestError) -> str:
    return f"{e.field}: {e.message}" if e.field else e.message


class Admission:
    """The webhooks over one Store: ``review(path, request)`` → the AdmissionResponse."""

    def __init__(self, store: Store, config: AdmissionConfig | None = None) -> None:
        self.store = store
        self.config = config or AdmissionConfig()
        self._handlers: dict[str, Callable[[dict[str, Any]], Verdict]] = {
            MUTATE_POD: self.mutate_pod,
            VALIDATE_POD: self.validate_pod,
            VALIDATE_QUEUE: self.validate_queue,
            VALIDATE_PODGROUP: self.validate_podgroup,
            VALIDATE_TOPOLOGY: self.validate_topology,
        }

    def review(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
        """The ``response`` of an AdmissionReview for *request* sent to *path*."""
        uid = str(request.get("uid", ""))
        handler = self._handlers.get(path)
        if handler is None:
            return denied(f"kai serves no admission webhook at {path}").response(uid)
        try:
            verdict = handler(request)
        except Exception as e:  # a bug must not turn into a 500 the API server reads as "webhook down"
            verdict = denied(f"kai's admission webhook failed on this object: {type(e).__name__}: {e}")
        return verdict.response(uid)

    # ---- pods ------------------------------------------------------------------------------

    def _kai_pod(self, pod: dict[str, Any]) -> bool:
        return (pod.get("spec") or {}).get("schedulerName") == self.config.scheduler_name

    def mutate_pod(self, request: dict[str, Any]) -> Verdict:
        pod = request.get("object") or {}
        meta = pod.get("metadata") or {}
        annotations = dict(meta.get("annotations") or {})
        if request.get("operation") != "CREATE" or not self._kai_pod(pod):
            return Verdict()
        if not sharedgpu.requests_fraction(annotations) or not (pod.get("spec") or {}).get("containers"):
            return Verdict()
        ref = sharedgpu.fraction_container(pod)
        if ref is None:
            return Verdict()  # the validating webhook refuses the unknown container name
        return Verdict(patch=sharing_patch(pod, ref, self.config.gpu_fraction_runtime_class))

    def validate_pod(self, request: dict[str, Any]) -> Verdict:
        pod = request.get("object") or {}
        if not self._kai_pod(pod):
            return Verdict()
        namespace = (pod.get("metadata") or {}).get("namespace") or request.get("namespace") or ""
        old = request.get("oldObject") or {}
        annotations = (pod.get("metadata") or {}).get("annotations") or {}
        old_annotations = (old.get("metadata") or {}).get("annotations") or {}
        creating = request.get("operation") == "CREATE"
        if creating or any(annotations.get(k) != old_annotations.get(k) for k in GPU_ANNOTATIONS):
            try:
                parsed = parse_pod({**pod, "metadata": {**(pod.get("metadata") or {}), "name": _pod_name(pod)}})
            except ManifestError as e:
                return denied(_error_text(e))
            _, problem = parse_share(parsed)
            if problem:
                return denied(problem)
        labels = (pod.get("metadata") or {}).get("labels") or {}
        queue = labels.get(C.LABEL_QUEUE)
        old_queue = ((old.get("metadata") or {}).get("labels") or {}).get(C.LABEL_QUEUE)
        if queue and (creating or queue != old_queue):
            why = access_denied(self._queues(), queue, namespace)
            if why:
                return denied(f"metadata.labels.{C.LABEL_QUEUE}: {why}")
        return Verdict()

    # ---- queues ----------------------------------------------------------------------------

    def _queues(self) -> dict[str, Queue]:
        return {q.meta.name: q for q in self.store.list("Queue")}

    def validate_queue(self, request: dict[str, Any]) -> Verdict:
        queues = self._queues()
        if request.get("operation") == "DELETE":
            name = request.get("name") or ((request.get("oldObject") or {}).get("metadata") or {}).get("name", "")
            children = sorted(q.meta.name for q in queues.values() if q.parent == name)
            if children:
                return denied(f"cannot delete queue {name}: it has child queues {children}")
            return Verdict()
        doc = request.get("object") or {}
        try:
            queue = parse_queue(doc)
        except ManifestError as e:
            return denied(_error_text(e))
        spec = doc.get("spec") or {}
        if not isinstance(spec.get("resources"), dict):
            return denied("spec.resources: resources must be specified")
        queues[queue.meta.name] = queue
        seen: list[str] = []
        cur = queue.meta.name
        while cur in queues:
            if cur in seen:
                return denied(f"spec.parentQueue: parent queue cycle: {' -> '.join([*seen, cur])}")
            seen.append(cur)
            cur = queues[cur].parent
        return Verdict(warnings=_queue_warnings(queue, spec, queues) or None)

    # ---- podgroups -------------------------------------------------------------------------

    def validate_podgroup(self, request: dict[str, Any]) -> Verdict:
        doc = request.get("object") or {}
        try:
            pg = parse_podgroup(doc)
        except ManifestError as e:
            return denied(_error_text(e))
        creating = request.get("operation") == "CREATE"
        errors, warnings = _subgroup_rules(doc, creating)
        if errors:
            return denied("; ".join(errors))
        namespace = (doc.get("metadata") or {}).get("namespace") or request.get("namespace") or ""
        old_queue = ((request.get("oldObject") or {}).get("spec") or {}).get("queue")
        queues = self._queues()
        if pg.queue and (creating or pg.queue != old_queue):
            why = access_denied(queues, pg.queue, namespace)
            if why:
                return denied(f"spec.queue: {why}")
        if pg.queue and pg.queue not in queues:
            warnings.append(f"spec.queue: Queue '{pg.queue}' does not exist")
        return Verdict(warnings=warnings or None)

    # ---- topologies ------------------------------------------------------------------------

    def validate_topology(self, request: dict[str, Any]) -> Verdict:
        doc = request.get("object") or {}
        try:
            topo = parse_topology(doc)
        except ManifestError as e:
            return denied(_error_text(e))
        labels = {lv.node_label for lv in topo.levels}
        aliases = [lv.alias for lv in topo.levels if lv.alias]
        problems = []
        duplicated = sorted({a for a in aliases if aliases.count(a) > 1})
        if duplicated:
            problems.append(f"aliases must be unique within the topology; duplicated: {duplicated}")
        collisions = sorted({a for a in aliases if a in labels})
        if collisions:
            problems.append(f"an alias must not equal a nodeLabel; conflicting: {collisions}")
        if problems:
            return denied("spec.levels: invalid topology aliases: " + "; ".join(problems))
        if request.get("operation") == "UPDATE":
            old_levels = ((request.get("oldObject") or {}).get("spec") or {}).get("levels") or []
            before = [lv.get("nodeLabel") for lv in old_levels if isinstance(lv, dict)]
            if before != [lv.node_label for lv in topo.levels]:
                return denied("spec.levels: the sequence of nodeLabels is immutable; only aliases may change")
        return Verdict()


def _pod_name(pod: dict[str, Any]) -> str:
    """A name for parsing a pod that is being created with generateName (the API server names it later)."""
    meta = pod.get("metadata") or {}
    return meta.get("name") or (meta.get("generateName") or "pod") + "-new"


def sharing_patch(pod: dict[str, Any], ref: sharedgpu.ContainerRef, runtime_class: str) -> list[dict[str, Any]]:
    """The JSON patch that gives *pod*'s fraction container KAI's GPU-sharing env (KAI's gpusharing and
    runtimeenforcement admission plugins)."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    annotations = dict(meta.get("annotations") or {})
    prefix = annotations.get(C.ANNOTATION_SHARED_GPU_CONFIGMAP) or sharedgpu.configmap_prefix(pod, ref)
    annotations[C.ANNOTATION_SHARED_GPU_CONFIGMAP] = prefix
    capabilities = sharedgpu.capabilities_configmap(prefix, ref)
    evar = sharedgpu.env_configmap(prefix, ref)
    field = "initContainers" if ref.init else "containers"
    container = copy.deepcopy((spec.get(field) or [])[ref.index])
    env = [e for e in container.get("env") or [] if e.get("name") not in SHARING_ENV]
    env += [
        {"name": name, "valueFrom": {"configMapKeyRef": {"name": capabilities, "key": name}}} for name in SHARING_ENV
    ]
    env_from = list(container.get("envFrom") or [])
    if not any((e.get("configMapRef") or {}).get("name") == evar for e in env_from):
        env_from.append({"configMapRef": {"name": evar, "optional": False}})
    volume = sharedgpu.volume_name(capabilities)
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != volume]
    volumes.append({"name": volume, "configMap": {"name": capabilities}})
    base = f"/spec/{field}/{ref.index}"
    patch = [
        {"op": "add", "path": "/metadata/annotations", "value": annotations},
        {"op": "add", "path": f"{base}/env", "value": env},
        {"op": "add", "path": f"{base}/envFrom", "value": env_from},
        {"op": "add", "path": "/spec/volumes", "value": volumes},
    ]
    if runtime_class and not spec.get("runtimeClassName"):
        patch.append({"op": "add", "path": "/spec/runtimeClassName", "value": runtime_class})
    return patch


def _queue_warnings(queue: Queue, spec: dict[str, Any], queues: dict[str, Queue]) -> list[str]:
    """KAI's non-blocking advice: a missing parent, an unset limit (KAI reads it as a hard cap of 0), child
    quotas above the parent's (one child, or all children together)."""
    out = []
    if queue.parent and queue.parent not in queues:
        out.append(
            f"spec.parentQueue: parent queue '{queue.parent}' does not exist (yet): "
            "the queue and its jobs are left out until it does"
        )
    res_docs = spec.get("resources") or {}
    for r in ("gpu", "cpu", "memory"):
        if "limit" not in (res_docs.get(r) or {}):
            out.append(
                f"spec.resources.{r}.limit is not set: as in KAI, that is a limit of 0 "
                f"(no {r} may be allocated to this queue); write -1 for no limit"
            )
    parent = queues.get(queue.parent)
    if parent is not None:
        siblings = [q for q in queues.values() if q.parent == parent.meta.name]
        for r in ("gpu", "cpu", "memory"):
            mine = queue.resources[r].quota
            cap = parent.resources[r].quota
            if cap == -1:
                continue
            total = sum(max(q.resources[r].quota, 0) for q in siblings)
            theirs = f"parent queue {parent.meta.name} {r} quota ({cap:g})"
            if mine == -1 or mine > cap:
                out.append(f"child queue {r} quota ({mine:g}) exceeds {theirs}")
            elif total > cap:
                out.append(f"total children {r} quota ({total:g}) exceeds {theirs}")
    return out


def _subgroup_rules(doc: dict[str, Any], creating: bool) -> tuple[list[str], list[str]]:
    """KAI's PodGroup webhook rules beyond the tree kai's parser checks: minSubGroup on a leaf (error),
    minMember on a mid-level subgroup (error on create, warning on update), minSubGroup above the number of
    children (warning). (errors, warnings)."""
    spec = doc.get("spec") or {}
    groups = [g for g in spec.get("subGroups") or [] if isinstance(g, dict)]
    children: dict[str | None, list[str]] = {}
    for g in groups:
        children.setdefault(g.get("parent"), []).append(str(g.get("name")))
    errors: list[str] = []
    warnings: list[str] = []
    for i, g in enumerate(groups):
        kids = children.get(str(g.get("name")), [])
        where = f"spec.subGroups[{i}]"
        if not kids and g.get("minSubGroup") is not None:
            errors.append(
                f"{where}.minSubGroup: subgroup {g.get('name')!r}: minSubGroup cannot be set on a leaf SubGroup"
            )
        if kids and g.get("minMember") is not None:
            text = (
                f"{where}.minMember: subgroup {g.get('name')!r}: minMember cannot be set on a mid-level SubGroup "
                "(has child SubGroups); use minSubGroup instead"
            )
            (errors if creating else warnings).append(text)
        if kids and g.get("minSubGroup") is not None and int(g["minSubGroup"]) > len(kids):
            warnings.append(
                f"{where}.minSubGroup: subgroup {g.get('name')!r}: minSubGroup ({g['minSubGroup']}) exceeds "
                f"the number of direct child SubGroups ({len(kids)})"
            )
    roots = len(children.get(None, []))
    if groups and spec.get("minSubGroup") is not None and int(spec["minSubGroup"]) > roots:
        warnings.append(
            f"spec.minSubGroup: minSubGroup ({spec['minSubGroup']}) exceeds the number of direct child "
            f"SubGroups ({roots})"
        )
    return errors, warnings
