"""``kai snapshot``: a live cluster's scheduling state as one YAML file that ``kai sim`` reads unchanged.

Rules: pure (documents in, text out). The documents are the ones ``kai scheduler``'s decoders keep
(``kai.k8s._decode``: only the fields kai reads), trimmed further to what ``kai sim`` needs to reach the
decisions the live scheduler's next cycle would:

* kai's pods that the scheduler does not consider yet (no PodGroup, or a PodGroup that does not exist)
  are left out, as the scheduler's snapshot leaves them out; so are finished pods;
* other schedulers' pods only take room: pending ones are left out, and bound ones are written with
  ``schedulerName: kube-default-scheduler`` when they had ``default-scheduler`` (``kai sim`` schedules
  pods of ``default-scheduler`` itself);
* owner references are dropped (``kai sim`` would otherwise play the owners' controllers), and so are
  statuses the scheduler writes (Queue, PodGroup) and metadata no parser reads.

``anonymize`` replaces namespaces, names of pods, PodGroups, queues, nodes and PDBs, and label values that
are not kai's, NVIDIA's or Kubernetes' well-known ones, by ordinal stand-ins (``node-0003``), the same
value for the same name everywhere (selectors still select what they selected), keeps uids (opaque, and
they break ties in the job and queue order, so decisions do not change) and only kai's annotations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

from kai.api import constants as C
from kai.api.objects import format_time

KIND_ORDER = ("PriorityClass", "Queue", "Topology", "SchedulingShard", "Node", "PodGroup", "PodDisruptionBudget", "Pod")
API_VERSION = {
    "Node": "v1",
    "Pod": "v1",
    "Queue": C.QUEUE_API_VERSION,
    "PodGroup": C.PODGROUP_API_VERSION,
    "PriorityClass": "scheduling.k8s.io/v1",
    "Topology": C.TOPOLOGY_API_VERSION,
    "SchedulingShard": "kai.scheduler/v1",
    "PodDisruptionBudget": "policy/v1",
}
OTHER_SCHEDULER = "kube-default-scheduler"
_META_KEPT = ("name", "namespace", "uid", "labels", "annotations", "creationTimestamp", "deletionTimestamp")
_KEEP_LABEL_PREFIXES = ("nvidia.com/", "kai.scheduler/", "scheduling.run.ai/", "node-role.kubernetes.io/")
_KEEP_LABELS = {"kubernetes.io/arch", "kubernetes.io/os", "node.kubernetes.io/instance-type"}
_KAI_ANNOTATIONS = ("kai.scheduler/", "kai.sim/", "scheduling.run.ai/", "gpu-", "pod-group-name", "runai")


def _meta(doc: dict[str, Any]) -> dict[str, Any]:
    meta = doc.get("metadata") or {}
    return {k: meta[k] for k in _META_KEPT if meta.get(k) not in (None, {}, "")}


def _trim(kind: str, doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"apiVersion": API_VERSION[kind], "kind": kind, "metadata": _meta(doc)}
    if kind == "PriorityClass":
        for k in ("value", "globalDefault"):
            if k in doc:
                out[k] = doc[k]
        return out
    if doc.get("spec") is not None:
        out["spec"] = doc["spec"]
    status = doc.get("status")
    if kind == "Node" and status:
        out["status"] = {k: v for k, v in status.items() if k in ("allocatable", "capacity")}
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        if ready:
            out["status"]["conditions"] = [{"type": "Ready", "status": ready[0].get("status", "")}]
    if kind == "Pod" and status:
        out["status"] = {k: v for k, v in status.items() if k in ("phase", "nominatedNodeName", "startTime")}
        ready = [c for c in status.get("conditions") or [] if c.get("type") == "Ready"]
        if ready:
            out["status"]["conditions"] = [{"type": "Ready", "status": ready[0].get("status", "")}]
    return out


def select(docs: dict[str, list[dict[str, Any]]]) -> tuple[list[dict[str, Any]], list[str]]:
    """The documents to write, in apply order, and notes on what was left out or changed."""
    groups = {((d["metadata"].get("namespace") or ""), d["metadata"]["name"]) for d in docs.get("PodGroup", [])}
    out: list[dict[str, Any]] = []
    left = {"ungrouped": 0, "finished": 0, "other-pending": 0}
    renamed = 0
    for kind in KIND_ORDER:
        for doc in docs.get(kind, []):
            if kind == "Pod":
                spec, status = doc.get("spec") or {}, doc.get("status") or {}
                if status.get("phase") in ("Succeeded", "Failed"):
                    left["finished"] += 1
                    continue
                sched = spec.get("schedulerName") or "default-scheduler"
                if sched == C.SCHEDULER_NAME:
                    meta = doc["metadata"]
                    pg = (meta.get("annotations") or {}).get(C.ANNOTATION_POD_GROUP_NAME)
                    if pg is None or ((meta.get("namespace") or ""), pg) not in groups:
                        left["ungrouped"] += 1
                        continue
                elif not spec.get("nodeName"):
                    left["other-pending"] += 1
                    continue
                elif sched == "default-scheduler":
                    doc = {**doc, "spec": {**spec, "schedulerName": OTHER_SCHEDULER}}
                    renamed += 1
            out.append(_trim(kind, doc))
    notes = []
    if left["ungrouped"]:
        notes.append(
            f"{left['ungrouped']} kai pods without an existing PodGroup left out (the scheduler skips them too)"
        )
    if left["finished"]:
        notes.append(f"{left['finished']} finished pods left out")
    if left["other-pending"]:
        notes.append(f"{left['other-pending']} pending pods of other schedulers left out")
    if renamed:
        notes.append(f"{renamed} bound pods of default-scheduler written with schedulerName {OTHER_SCHEDULER}")
    return out, notes


class Anonymizer:
    """Ordinal stand-ins per kind of name (``node-0001``), stable within one snapshot."""

    def __init__(self) -> None:
        self._maps: dict[str, dict[str, str]] = {}

    def name(self, kind: str, value: str) -> str:
        m = self._maps.setdefault(kind, {})
        if value not in m:
            m[value] = f"{kind}-{len(m) + 1:04d}"
        return m[value]

    def label(self, key: str, value: str) -> str:
        if key == C.LABEL_QUEUE:
            return self.name("queue", value)
        if key == "kubernetes.io/hostname":
            return self.name("node", value)
        if key in _KEEP_LABELS or key.startswith(_KEEP_LABEL_PREFIXES) or key.startswith(C.LABEL_GPU_GROUP):
            return value
        return self.name("v", f"{key}={value}")


def anonymize(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    a = Anonymizer()
    # names first, sorted, so that the stand-ins do not depend on the API's order
    for kind, word in (("Node", "node"), ("Queue", "queue")):
        for name in sorted(d["metadata"]["name"] for d in docs if d["kind"] == kind):
            a.name(word, name)
    return [_anon(d, a) for d in docs]


def _labels(labels: dict[str, str] | None, a: Anonymizer) -> dict[str, str]:
    return {k: a.label(k, v) for k, v in (labels or {}).items()}


def _anon(doc: dict[str, Any], a: Anonymizer) -> dict[str, Any]:
    kind = doc["kind"]
    doc = _copy(doc)
    meta = doc["metadata"]
    ns = meta.get("namespace")
    if ns:
        meta["namespace"] = a.name("ns", ns)
    word = {"Node": "node", "Queue": "queue", "Pod": "pod", "PodGroup": "pg", "PodDisruptionBudget": "pdb"}.get(kind)
    if word:
        meta["name"] = a.name(word, meta["name"] if kind in ("Node", "Queue") else f"{ns}/{meta['name']}")
    # uids are kept: they are opaque, and they break ties in the job and queue order (renaming must not
    # change a decision)
    meta["labels"] = _labels(meta.get("labels"), a)
    ann = {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith(_KAI_ANNOTATIONS)}
    if C.ANNOTATION_POD_GROUP_NAME in ann:
        ann[C.ANNOTATION_POD_GROUP_NAME] = a.name("pg", f"{ns}/{ann[C.ANNOTATION_POD_GROUP_NAME]}")
    meta["annotations"] = ann
    spec = doc.get("spec") or {}
    if kind == "Queue" and spec.get("parentQueue"):
        spec["parentQueue"] = a.name("queue", spec["parentQueue"])
    if kind == "PodGroup" and spec.get("queue"):
        spec["queue"] = a.name("queue", spec["queue"])
    if kind == "Pod":
        for k in ("nodeName",):
            if spec.get(k):
                spec[k] = a.name("node", spec[k])
        st = doc.get("status") or {}
        if st.get("nominatedNodeName"):
            st["nominatedNodeName"] = a.name("node", st["nominatedNodeName"])
        if spec.get("nodeSelector"):
            spec["nodeSelector"] = _labels(spec["nodeSelector"], a)
        _walk_expressions(spec.get("affinity"), a.label)
    if kind == "PodDisruptionBudget":
        sel = spec.get("selector") or {}
        if sel.get("matchLabels"):
            sel["matchLabels"] = _labels(sel["matchLabels"], a)
        _walk_expressions(sel, a.label)
    return doc


def _walk_expressions(obj: Any, label: Callable[[str, str], str]) -> None:
    """Map the values of every {key, operator, values} requirement found under *obj*, in place."""
    if isinstance(obj, dict):
        if "key" in obj and isinstance(obj.get("values"), list) and obj.get("operator") in ("In", "NotIn"):
            obj["values"] = [label(obj["key"], str(v)) for v in obj["values"]]
        for v in obj.values():
            _walk_expressions(v, label)
    elif isinstance(obj, list):
        for v in obj:
            _walk_expressions(v, label)


def _copy(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {k: _copy(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_copy(v) for v in obj]
    return obj


def dump_yaml(docs: dict[str, list[dict[str, Any]]], *, now: float, anonymize: bool = False) -> tuple[str, list[str]]:
    """(YAML text, notes). The header says when it was taken and how to run it in ``kai sim``."""
    chosen, notes = select(docs)
    if anonymize:
        chosen = globals()["anonymize"](chosen)
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump_all(chosen, Dumper=dumper, sort_keys=False, default_flow_style=False)
    when = format_time(now)
    head = f"# kai snapshot taken at {when}\n# what if: kai sim THIS_FILE --now {when} --at 1:myjob.yaml\n"
    return head + body, notes
