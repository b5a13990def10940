"""The embedded cluster's DRA controllers: what kube-controller-manager's resourceclaim controller and
kube-scheduler's DynamicResources PreBind do on a real cluster.

* A pod that names a ResourceClaimTemplate gets its claim made from the template: ``<pod>-<claim name>``
  (a real controller adds a random suffix), owned by the pod, recorded in the pod's
  ``status.resourceClaimStatuses``.
* A pod's Bind carries its claims' allocations (``kai.scheduler.decisions.ClaimAllocation``): the claim gets
  ``status.allocation`` (when kai chose its devices) and the pod is added to its ``status.reservedFor``,
  before the pod is bound.
* Consumers that are gone or done leave ``reservedFor``; a claim with no consumer left is deallocated; a claim
  made from a template goes with its pod.
"""

from __future__ import annotations

import dataclasses

from kai.api.dra import Consumer, ResourceClaim, allocation_doc, parse_allocation
from kai.api.objects import ObjectMeta, OwnerReference, Pod
from kai.scheduler.decisions import ClaimAllocation
from kai.store import Store, key_of

POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"  # annotation a claim made for a pod carries


def make_template_claims(store: Store, now: float) -> None:
    """Make the claims of pods that name a template and have none yet (see the module docstring)."""
    for pod in store.list("Pod"):
        if not pod.resource_claims or pod.meta.deletion_timestamp is not None:
            continue
        ns = pod.meta.namespace or ""
        made = dict(pod.claim_statuses)
        for pc in pod.resource_claims:
            if not pc.template or pc.name in made:
                continue
            template = store.get("ResourceClaimTemplate", (ns, pc.template))
            if template is None:
                continue  # the pod waits, and says so (the dynamicresources rule names the template)
            name = f"{pod.meta.name}-{pc.name}"
            claim = ResourceClaim(
                meta=ObjectMeta(
                    name,
                    ns,
                    f"ResourceClaim/{ns}/{name}",
                    labels=dict(template.claim_labels),
                    annotations={**template.claim_annotations, POD_CLAIM_NAME: pc.name},
                    creation_timestamp=now,
                    owner_references=(OwnerReference("v1", "Pod", pod.meta.name, pod.meta.uid, True),),
                ),
                spec=dataclasses.replace(template.spec),
            )
            store.put(claim)
            made[pc.name] = name
        if made != pod.claim_statuses:
            store.put(dataclasses.replace(pod, claim_statuses=made))  # a copy: a snapshot may hold the old one


def allocate_chosen(store: Store, pod: Pod, allocations: tuple[ClaimAllocation, ...]) -> None:
    """Write a pod's claim allocations and reservations before it is bound (see the module docstring)."""
    classes = {c.meta.name: c for c in store.list("DeviceClass")}
    for a in allocations:
        claim = store.get("ResourceClaim", (a.namespace, a.claim))
        if claim is None:
            continue
        allocation = claim.allocation
        if a.devices and allocation is None:
            allocation = parse_allocation(allocation_doc(claim, classes, a.devices, a.node))
        reserved = claim.reserved_for
        if all(c.name != pod.meta.name for c in reserved):
            reserved = (*reserved, Consumer(pod.meta.name, pod.meta.uid))
        store.put(dataclasses.replace(claim, allocation=allocation, reserved_for=reserved))


def release_pod(store: Store, pod: Pod) -> None:
    """*pod* is deleted: it leaves the ``reservedFor`` of its claims (a claim nobody uses is deallocated), and the
    claims made for it from templates go with it (the controller's work when a pod is gone)."""
    ns = pod.meta.namespace or ""
    for claim in store.list("ResourceClaim"):
        if (claim.meta.namespace or "") != ns:
            continue
        if any(o.kind == "Pod" and o.uid == pod.meta.uid for o in claim.meta.owner_references):
            store.delete("ResourceClaim", key_of(claim))
            continue
        live = tuple(c for c in claim.reserved_for if c.name != pod.meta.name)
        if live != claim.reserved_for:
            _reserve(store, claim, live)


def sync_claims(store: Store) -> None:
    """The resourceclaim controller: drop consumers that are gone or done, deallocate claims nobody uses, delete
    claims whose owning pod is gone."""
    pods = {(p.meta.namespace or "", p.meta.name): p for p in store.list("Pod")}
    for claim in store.list("ResourceClaim"):
        ns = claim.meta.namespace or ""
        owner = next((o for o in claim.meta.owner_references if o.kind == "Pod"), None)
        if owner is not None:
            pod = pods.get((ns, owner.name))
            if pod is None or pod.meta.uid != owner.uid:
                store.delete("ResourceClaim", key_of(claim))
                continue
        live = tuple(
            c
            for c in claim.reserved_for
            if (p := pods.get((ns, c.name))) is not None
            and (not c.uid or p.meta.uid == c.uid)
            and p.phase not in ("Succeeded", "Failed")
        )
        if live != claim.reserved_for:
            _reserve(store, claim, live)


def _reserve(store: Store, claim: ResourceClaim, consumers: tuple[Consumer, ...]) -> None:
    """Store a copy of *claim* reserved for *consumers*; with none left it is deallocated (the controller's rule)."""
    allocation = claim.allocation if consumers else None
    store.put(dataclasses.replace(claim, reserved_for=consumers, allocation=allocation))
