"""leaderworkerset.x-k8s.io LeaderWorkerSet: a leader StatefulSet ``<lws>`` (one pod per group), and per
leader pod a worker StatefulSet ``<lws>-<group>`` owned by that leader, whose pods are
``<lws>-<group>-<1..size-1>``. Both StatefulSets create their pods in parallel.

``admit_pod`` plays LWS's pod webhook: it stamps ``group-index`` on leaders and ``worker-index`` on every
pod from the StatefulSet ordinal. With ``startupPolicy: LeaderReady`` a group's workers are created once
its leader runs. Simplification: a group is not restarted as a whole when one of its pods goes away (LWS's
``RecreateGroupOnPodRestart``); the lost pod alone comes back.
"""

from __future__ import annotations

from typing import Any

from kai.api import constants as C
from kai.api.workloads import Workload
from kai.sim.controllers._base import Created, Result, View, object_manifest, pods_of, template_with, workloads_of


def leaderworkerset(owner: Workload, view: View) -> Result:
    spec = owner.fields().at("spec")
    replicas = spec.integer("replicas", default=1) or 0
    size = spec.integer("leaderWorkerTemplate", "size", default=1) or 0
    leader_ready = spec.string("startupPolicy", default="LeaderCreated") == "LeaderReady"
    lwt = spec.at("leaderWorkerTemplate")
    worker_path = "spec.leaderWorkerTemplate.workerTemplate"
    leader_path = "spec.leaderWorkerTemplate.leaderTemplate" if lwt.has("leaderTemplate") else worker_path
    leader_template = lwt.at("leaderTemplate") if lwt.has("leaderTemplate") else lwt.at("workerTemplate")
    name = owner.meta.name
    size_note = {C.ANNOTATION_LWS_SIZE: str(size)}
    out = []
    leaders = workloads_of(view, owner, "StatefulSet")
    if not leaders:
        labels = {C.LABEL_LWS_NAME: name, C.LABEL_LWS_WORKER_INDEX: "0"}
        sts = _sts_spec(replicas, 0, template_with(leader_template, labels, size_note), {C.LABEL_LWS_NAME: name})
        doc = object_manifest("apps/v1", "StatefulSet", name, owner, sts, labels={C.LABEL_LWS_NAME: name})
        out.append(Created(doc, ("spec.template", leader_path)))
    if size <= 1:
        return Result(out)
    for leaders_sts in leaders:
        for leader in pods_of(view, leaders_sts):
            if leader.meta.deletion_timestamp is not None or workloads_of(view, leader, "StatefulSet"):
                continue
            if leader_ready and leader.phase != "Running":
                continue
            group = leader.meta.labels.get(C.LABEL_LWS_GROUP_INDEX, "0")
            labels = {C.LABEL_LWS_NAME: name, C.LABEL_LWS_GROUP_INDEX: group}
            annotations = {**size_note, C.ANNOTATION_LWS_LEADER_NAME: leader.meta.name}
            sts = _sts_spec(size - 1, 1, template_with(lwt.at("workerTemplate"), labels, annotations), labels)
            doc = object_manifest("apps/v1", "StatefulSet", f"{name}-{group}", leader, sts, labels=labels)
            out.append(Created(doc, ("spec.template", worker_path)))
    return Result(out)


def _sts_spec(replicas: int, start: int, template: dict[str, Any], selector: dict[str, str]) -> dict[str, Any]:
    return {
        "replicas": replicas,
        "ordinals": {"start": start},
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": selector},
        "template": template,
    }


def admit_pod(doc: dict[str, Any]) -> None:
    """LWS's pod webhook: a pod of an LWS StatefulSet gets its group index (leaders) and worker index from
    its ordinal."""
    labels = doc.get("metadata", {}).get("labels") or {}
    if C.LABEL_LWS_NAME not in labels or C.LABEL_POD_INDEX not in labels:
        return
    ordinal = labels[C.LABEL_POD_INDEX]
    labels.setdefault(C.LABEL_LWS_GROUP_INDEX, ordinal)
    labels.setdefault(C.LABEL_LWS_WORKER_INDEX, ordinal)
