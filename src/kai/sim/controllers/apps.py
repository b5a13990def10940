"""apps/v1: Deployment → ReplicaSet → pods; StatefulSet → pods with ordinal names.

Simplifications: no rollouts (a Deployment keeps the ReplicaSet of its first template), no scale-down.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.workloads import Workload
from kai.sim.controllers._base import (
    Created,
    Names,
    Result,
    View,
    active,
    namespace_of,
    object_manifest,
    pod_manifest,
    pods_of,
    safe_hash,
    template_with,
    workloads_of,
)


def replicaset(owner: Workload, view: View) -> Result:
    """Keep ``spec.replicas`` (default 1) active pods, named ``<rs>-<5 chars>``; a pod that finished or was
    deleted is replaced by a new one."""
    spec = owner.fields().at("spec")
    replicas = spec.integer("replicas", default=1) or 0
    missing = replicas - sum(1 for p in pods_of(view, owner) if active(p))
    names = Names(view, namespace_of(owner))
    template = spec.at("template")
    return Result(
        [
            Created(pod_manifest(owner, template, names.generate(f"{owner.meta.name}-")), ("", "spec.template"))
            for _ in range(missing)
        ]
    )


def deployment(owner: Workload, view: View) -> Result:
    """One ReplicaSet ``<deployment>-<pod-template-hash>`` with the Deployment's replicas and template."""
    if workloads_of(view, owner, "ReplicaSet"):
        return Result()
    spec = owner.fields().at("spec")
    template = spec.at("template")
    hash_ = safe_hash(template.doc)
    labels = {**template.at("metadata").string_map("labels"), C.LABEL_POD_TEMPLATE_HASH: hash_}
    rs_spec = {
        "replicas": spec.integer("replicas", default=1),
        "selector": {"matchLabels": labels},
        "template": template_with(template, {C.LABEL_POD_TEMPLATE_HASH: hash_}),
    }
    doc = object_manifest(
        "apps/v1",
        "ReplicaSet",
        f"{owner.meta.name}-{hash_}",
        owner,
        rs_spec,
        labels=labels,
        annotations={"deployment.kubernetes.io/revision": "1"},
    )
    return Result([Created(doc, ("spec.template", "spec.template"))])


def statefulset(owner: Workload, view: View) -> Result:
    """Pods ``<sts>-<ordinal>`` for ordinals ``spec.ordinals.start`` (default 0) onward. With the default
    ``OrderedReady`` policy a pod is created only once every lower ordinal is Running; with ``Parallel`` all
    at once. A pod that finished or was deleted comes back under the same name."""
    spec = owner.fields().at("spec")
    replicas = spec.integer("replicas", default=1) or 0
    start = spec.integer("ordinals", "start", default=0) or 0
    ordered = spec.string("podManagementPolicy", default="OrderedReady") != "Parallel"
    by_name = {p.meta.name: p for p in pods_of(view, owner)}
    template = spec.at("template")
    revision = f"{owner.meta.name}-{safe_hash(template.doc)}"
    out = []
    for ordinal in range(start, start + replicas):
        name = f"{owner.meta.name}-{ordinal}"
        pod = by_name.get(name)
        if pod is not None and (active(pod) or pod.meta.deletion_timestamp is not None):
            if ordered and pod.phase != "Running":
                break
            continue
        labels = {
            C.LABEL_STATEFULSET_POD_NAME: name,
            C.LABEL_POD_INDEX: str(ordinal),
            C.LABEL_CONTROLLER_REVISION_HASH: revision,
        }
        out.append(Created(pod_manifest(owner, template, name, labels=labels), ("", "spec.template")))
        if ordered:
            break
    return Result(out)
