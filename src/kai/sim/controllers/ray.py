"""KubeRay with its KAI batch-scheduler plugin (``--batch-scheduler=kai-scheduler``): RayCluster → head and
worker pods; RayService and RayJob → a RayCluster.

Pods are named as KubeRay's generateName does (``<cluster>-head-<5>``, ``<cluster>-<group>-worker-<5>``)
and labelled ``ray.io/cluster``, ``ray.io/node-type``, ``ray.io/group`` (``headgroup`` for the head),
``ray.io/identifier``, ``ray.io/is-ray-node``. The KAI plugin sets ``schedulerName: kai-scheduler`` and
copies the cluster's ``kai.scheduler/queue`` label onto every pod. KubeRay does not copy the cluster's
other labels (priorityClassName included) to pods; KAI's pod-grouper reads them from the top owner.

Simplifications: no autoscaling (a worker group keeps its replicas clamped to [minReplicas, maxReplicas]);
a finished pod is not replaced; a RayJob's submitter Job is not simulated (put ``kai.sim/duration`` on the
RayJob for how long its cluster runs); a RayService's cluster stays the pending one.
"""

from __future__ import annotations

import copy

from kai.api import constants as C
from kai.api.workloads import Fields, Workload
from kai.sim.controllers._base import (
    Created,
    Names,
    Result,
    View,
    namespace_of,
    object_manifest,
    pod_manifest,
    pods_of,
    scheduler_labels,
    workloads_of,
)

MAX_PREFIX = 50  # KubeRay's PodGenerateName truncates the prefix so the name fits 63 characters


def desired_workers(group: Fields) -> int:
    """GetWorkerGroupDesiredReplicas: replicas clamped to [minReplicas, maxReplicas], × numOfHosts."""
    if group.flag("suspend") or group.flag("suspended"):
        return 0
    replicas = group.integer("replicas")
    lo = group.integer("minReplicas", default=0) or 0
    hi = group.integer("maxReplicas", default=2**31 - 1) or 0
    if lo > hi:
        n = hi
    elif replicas is None or replicas < lo:
        n = lo
    else:
        n = min(replicas, hi)
    return n * (group.integer("numOfHosts", default=1) or 0)


def _ray_labels(cluster: Workload, node_type: str, group: str) -> dict[str, str]:
    name = cluster.meta.name
    return {
        C.LABEL_RAY_CLUSTER: name,
        C.LABEL_RAY_NODE_TYPE: node_type,
        C.LABEL_RAY_GROUP: group,
        C.LABEL_RAY_IDENTIFIER: f"{name}-{node_type}",
        C.LABEL_RAY_IS_RAY_NODE: "yes",
        "app.kubernetes.io/name": "kuberay",
        "app.kubernetes.io/created-by": "kuberay-operator",
        **scheduler_labels(cluster),
    }


def raycluster(owner: Workload, view: View) -> Result:
    spec = owner.fields().at("spec")
    if spec.flag("suspend"):
        return Result()
    pods = [p for p in pods_of(view, owner) if p.phase != "Failed" and p.meta.deletion_timestamp is None]
    names = Names(view, namespace_of(owner))
    out = []

    def make(template: Fields, path: str, node_type: str, group: str) -> None:
        prefix = f"{owner.meta.name}-{group}" if node_type == "worker" else owner.meta.name
        name = names.generate(f"{prefix[:MAX_PREFIX]}-{node_type}-".lower())
        labels = _ray_labels(owner, node_type, group)
        doc = pod_manifest(owner, template, name, labels=labels, scheduler_name=C.SCHEDULER_NAME)
        out.append(Created(doc, ("", path)))

    if not any(p.meta.labels.get(C.LABEL_RAY_NODE_TYPE) == "head" for p in pods):
        make(spec.at("headGroupSpec", "template"), "spec.headGroupSpec.template", "head", C.RAY_HEAD_GROUP)
    for i, group in enumerate(spec.items("workerGroupSpecs")):
        group_name = group.string("groupName")
        if not group_name:
            raise group.error("is required", "groupName")
        have = sum(
            1
            for p in pods
            if p.meta.labels.get(C.LABEL_RAY_NODE_TYPE) == "worker"
            and p.meta.labels.get(C.LABEL_RAY_GROUP) == group_name
        )
        for _ in range(desired_workers(group) - have):
            make(group.at("template"), f"spec.workerGroupSpecs[{i}].template", "worker", group_name)
    return Result(out)


def _cluster_for(owner: Workload, view: View, spec_field: str, crd: str) -> Created | None:
    """The RayCluster a RayService or RayJob creates, ``<owner>-<5 chars>``, with the owner's labels and
    annotations (so the KAI plugin finds the queue label on the cluster), or None if it exists."""
    if workloads_of(view, owner, "RayCluster"):
        return None
    spec = copy.deepcopy(owner.fields().mapping("spec", spec_field))
    labels = {
        **owner.meta.labels,
        C.LABEL_RAY_ORIGINATED_FROM_CR_NAME: owner.meta.name,
        C.LABEL_RAY_ORIGINATED_FROM_CRD: crd,
    }
    name = Names(view, namespace_of(owner)).generate(f"{owner.meta.name}-", kind="RayCluster")
    doc = object_manifest(
        owner.api_version, "RayCluster", name, owner, spec, labels=labels, annotations=owner.meta.annotations
    )
    return Created(doc, ("spec", f"spec.{spec_field}"))


def rayservice(owner: Workload, view: View) -> Result:
    made = _cluster_for(owner, view, "rayClusterConfig", "RayService")
    if made is None:
        return Result()
    name = made.doc["metadata"]["name"]
    return Result([made], {"pendingServiceStatus": {"rayClusterName": name}})


def rayjob(owner: Workload, view: View) -> Result:
    spec = owner.fields().at("spec")
    if spec.flag("suspend") or spec.mapping("clusterSelector"):
        return Result()  # a RayJob with a clusterSelector runs on an existing cluster
    made = _cluster_for(owner, view, "rayClusterSpec", "RayJob")
    if made is None:
        return Result()
    return Result([made], {"rayClusterName": made.doc["metadata"]["name"]})
