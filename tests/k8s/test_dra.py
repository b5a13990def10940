"""Dynamic Resource Allocation on a real API server (resource.k8s.io/v1, served by default since 1.34: the
fixture passes no feature gate or runtime-config for it).

There is no DRA driver and no kubelet here: the test plays the driver and publishes its ResourceSlices (one
pool per node, as a node-local driver does). kai, as its ServiceAccount (deploy/rbac.yaml), allocates the
devices: it writes the claim's ``status.allocation`` and ``reservedFor`` before it binds the pod, as
kube-scheduler's DynamicResources plugin does. With kube-controller-manager running, a pod's
ResourceClaimTemplate becomes a claim made by its resourceclaim controller, which kai then allocates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from lightkube import Client
from lightkube.resources.core_v1 import Pod
from lightkube.resources.resource_v1 import DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice

from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import InProcess, options, wait_for
from tests.k8s.test_volumes import _queue

pytestmark = pytest.mark.k8s_min("1.34")

DRIVER = "gpu.example.com"  # a GPU driver by KAI's rule (its name contains "gpu")


def _slice(node: str, models: list[str]) -> ResourceSlice:
    """The driver's part: the node's devices, published as one pool named after the node."""
    return ResourceSlice.from_dict(
        {
            "metadata": {"name": f"{node}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {"model": {"string": m}},
                        "capacity": {"memory": {"value": "80Gi"}},
                    }
                    for i, m in enumerate(models)
                ],
            },
        }
    )


def _class(name: str) -> DeviceClass:
    return DeviceClass.from_dict(
        {"metadata": {"name": name}, "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]}}
    )


def _claim_spec(cls: str, count: int) -> dict[str, Any]:
    selector = {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "A100"'}}
    return {
        "devices": {
            "requests": [{"name": "gpus", "exactly": {"deviceClassName": cls, "count": count, "selectors": [selector]}}]
        }
    }


def _pod(name: str, claim: dict[str, str]) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": "test"}},
            "spec": {
                "schedulerName": "kai-scheduler",
                "resourceClaims": [{"name": "gpus", **claim}],
                "containers": [
                    {
                        "name": "c",
                        "image": "none",
                        "resources": {"requests": {"cpu": "1"}, "claims": [{"name": "gpus"}]},
                    }
                ],
            },
        }
    )


def _bound(admin: Client, name: str, ns: str) -> Callable[[], Pod | None]:
    return lambda: (p := admin.get(Pod, name, namespace=ns)).spec.nodeName and p


def test_a_claim_is_allocated_and_reserved_before_its_pod_is_bound(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, cluster_scoped: Callable[[Any], Any]
) -> None:
    _queue(admin)
    n1, n2 = nodes(f"{ns}-n1", cpu="8", gpus=0), nodes(f"{ns}-n2", cpu="8", gpus=0)
    cls = f"{ns}-gpu"
    cluster_scoped(_class(cls))
    cluster_scoped(_slice(n1, ["T4", "T4"]))  # n1 first by name, but no A100
    cluster_scoped(_slice(n2, ["A100", "A100", "A100"]))
    # a claim named by the pod (shareable): KAI requires the queue label on a GPU claim of this kind
    admin.create(
        ResourceClaim.from_dict(
            {"metadata": {"name": "two-a100", "labels": {"kai.scheduler/queue": "test"}}, "spec": _claim_spec(cls, 2)}
        ),
        namespace=ns,
    )
    with InProcess(options(scheduler_cluster)):
        admin.create(_pod("train", {"resourceClaimName": "two-a100"}), namespace=ns)
        pod = wait_for(_bound(admin, "train", ns), "train to be bound")
    claim = admin.get(ResourceClaim, "two-a100", namespace=ns)
    assert pod.spec.nodeName == n2
    alloc = claim.status.allocation
    assert alloc is not None, "the claim is allocated before the pod is bound"
    got = sorted((r.driver, r.pool, r.device, r.request) for r in alloc.devices.results)
    assert got == [(DRIVER, n2, "gpu-0", "gpus"), (DRIVER, n2, "gpu-1", "gpus")]
    terms = alloc.nodeSelector.nodeSelectorTerms
    assert [(f.key, f.operator, f.values) for f in terms[0].matchFields] == [("metadata.name", "In", [n2])]
    assert [(r.resource, r.name, r.uid) for r in claim.status.reservedFor] == [("pods", "train", pod.metadata.uid)]


def test_a_shared_gpu_claim_without_the_queue_label_waits_naming_it(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, cluster_scoped: Callable[[Any], Any]
) -> None:
    _queue(admin)
    n1 = nodes(f"{ns}-n1", cpu="8", gpus=0)
    cls = f"{ns}-gpu"
    cluster_scoped(_class(cls))
    cluster_scoped(_slice(n1, ["A100"]))
    admin.create(
        ResourceClaim.from_dict({"metadata": {"name": "unlabelled"}, "spec": _claim_spec(cls, 1)}), namespace=ns
    )
    with InProcess(options(scheduler_cluster)):
        admin.create(_pod("train", {"resourceClaimName": "unlabelled"}), namespace=ns)

        def refused() -> str | None:
            conds = admin.get(Pod, "train", namespace=ns).status.conditions or []
            return next((c.message for c in conds if c.type == "PodScheduled" and c.status == "False"), None)

        message = wait_for(refused, "train to be marked unschedulable")
    assert f"ResourceClaim {ns}/unlabelled is a shared GPU claim with no kai.scheduler/queue label" in message
    assert admin.get(ResourceClaim, "unlabelled", namespace=ns).status.allocation is None
    assert not admin.get(Pod, "train", namespace=ns).spec.nodeName


def test_a_template_claim_made_by_the_controller_is_allocated(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, cluster_scoped: Callable[[Any], Any]
) -> None:
    scheduler_cluster.start_controller_manager()  # its resourceclaim controller makes the pod's claim
    _queue(admin)
    n1 = nodes(f"{ns}-n1", cpu="8", gpus=0)
    cls = f"{ns}-gpu"
    cluster_scoped(_class(cls))
    cluster_scoped(_slice(n1, ["A100", "A100"]))
    admin.create(
        ResourceClaimTemplate.from_dict({"metadata": {"name": "one-a100"}, "spec": {"spec": _claim_spec(cls, 1)}}),
        namespace=ns,
    )
    with InProcess(options(scheduler_cluster)):
        admin.create(_pod("infer", {"resourceClaimTemplateName": "one-a100"}), namespace=ns)
        pod = wait_for(_bound(admin, "infer", ns), "infer to be bound")
    made = pod.status.resourceClaimStatuses[0].resourceClaimName
    claim = admin.get(ResourceClaim, made, namespace=ns)
    assert pod.spec.nodeName == n1
    assert [r.device for r in claim.status.allocation.devices.results] == ["gpu-0"]
    assert [r.name for r in claim.status.reservedFor] == ["infer"]
