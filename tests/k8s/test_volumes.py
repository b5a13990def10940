"""Volumes on a real API server: kai binds a pod's volumes before the pod, as kube-scheduler's VolumeBinding does.

kube-controller-manager runs here (its PV controller completes a bind kai starts). A static local volume: kai
puts the pod where the volume is and sets the volume's claimRef; the PV controller binds the claim; then kai
binds the pod. A WaitForFirstConsumer claim of a class with an external provisioner: kai annotates the claim
with the node it chose (volume.kubernetes.io/selected-node) and waits; the test plays the external
provisioner (there is no CSI driver here): it makes a volume pinned to that node for the claim, the PV
controller binds it, and kai binds the pod there. Both as kai's ServiceAccount (deploy/rbac.yaml).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import PersistentVolume, PersistentVolumeClaim, Pod
from lightkube.resources.storage_v1 import StorageClass

from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import InProcess, options, wait_for

HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def with_controllers(scheduler_cluster: ControlPlane) -> ControlPlane:
    scheduler_cluster.start_controller_manager()
    return scheduler_cluster


def _pod(name: str, claim: str) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "labels": {"kai.scheduler/queue": "test"}},
            "spec": {
                "schedulerName": "kai-scheduler",
                "containers": [{"name": "c", "image": "none", "resources": {"requests": {"cpu": "1"}}}],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            },
        }
    )


def _claim(name: str, cls: str) -> PersistentVolumeClaim:
    return PersistentVolumeClaim.from_dict(
        {
            "metadata": {"name": name},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": cls,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )


def _volume(name: str, cls: str, node: str, claim_ref: dict[str, str] | None = None) -> PersistentVolume:
    pinned = {"matchExpressions": [{"key": HOST, "operator": "In", "values": [node]}]}
    spec: dict[str, Any] = {
        "capacity": {"storage": "2Gi"},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": cls,
        "hostPath": {"path": f"/tmp/{name}"},
        "nodeAffinity": {"required": {"nodeSelectorTerms": [pinned]}},
    }
    if claim_ref:
        spec["claimRef"] = claim_ref
    return PersistentVolume.from_dict({"metadata": {"name": name}, "spec": spec})


def _queue(admin: Client) -> None:
    from tests.k8s.sched import Queue

    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    res = {"gpu": unlimited, "cpu": unlimited, "memory": unlimited}
    for name, parent in (("test-root", None), ("test", "test-root")):
        spec: dict[str, Any] = {"resources": res}
        if parent:
            spec["parentQueue"] = parent
        with contextlib.suppress(ApiError):  # made by an earlier test of the module
            admin.create(Queue.from_dict({"metadata": {"name": name}, "spec": spec}))


def test_a_static_local_volume_is_bound_before_its_pod(
    with_controllers: ControlPlane, admin: Client, ns: str, nodes: Any, cluster_scoped: Callable[[Any], Any]
) -> None:
    _queue(admin)
    n1, n2 = nodes(f"{ns}-n1", cpu="8", gpus=0), nodes(f"{ns}-n2", cpu="8", gpus=0)
    cls, pv = f"{ns}-local", f"{ns}-pv-n2"
    cluster_scoped(
        StorageClass.from_dict(
            {
                "metadata": {"name": cls},
                "provisioner": "kubernetes.io/no-provisioner",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
    )
    cluster_scoped(_volume(pv, cls, n2))
    admin.create(_claim("data", cls), namespace=ns)
    with InProcess(options(with_controllers)):
        admin.create(_pod("db", "data"), namespace=ns)
        pod = wait_for(lambda: (p := admin.get(Pod, "db", namespace=ns)).spec.nodeName and p, "db to be bound")
    assert pod.spec.nodeName == n2 != n1  # n1 comes first by name: the volume decided
    claim = admin.get(PersistentVolumeClaim, "data", namespace=ns)
    volume = admin.get(PersistentVolume, pv)
    assert claim.spec.volumeName == pv and claim.status.phase == "Bound"
    assert volume.spec.claimRef.name == "data" and volume.spec.claimRef.uid == claim.metadata.uid


def test_a_provisioned_volume_is_asked_for_on_the_chosen_node(
    with_controllers: ControlPlane, admin: Client, ns: str, nodes: Any, cluster_scoped: Callable[[Any], Any]
) -> None:
    _queue(admin)
    nodes(f"{ns}-n1", cpu="8", gpus=0)
    nodes(f"{ns}-n2", cpu="8", gpus=0)
    cls = f"{ns}-fast"
    cluster_scoped(
        StorageClass.from_dict(
            {
                "metadata": {"name": cls},
                "provisioner": "fake.csi.example.com",
                "volumeBindingMode": "WaitForFirstConsumer",
            }
        )
    )
    admin.create(_claim("scratch", cls), namespace=ns)
    with InProcess(options(with_controllers)):
        admin.create(_pod("job", "scratch"), namespace=ns)

        def selected() -> str | None:
            claim = admin.get(PersistentVolumeClaim, "scratch", namespace=ns)
            return (claim.metadata.annotations or {}).get("volume.kubernetes.io/selected-node")

        node = wait_for(selected, "kai to select a node for the claim")
        assert not admin.get(Pod, "job", namespace=ns).spec.nodeName  # the pod waits for its volume
        claim = admin.get(PersistentVolumeClaim, "scratch", namespace=ns)
        # the external provisioner's part: a volume for the claim, pinned to the selected node
        ref = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "namespace": ns,
            "name": "scratch",
            "uid": claim.metadata.uid,
        }
        cluster_scoped(_volume(f"{ns}-provisioned", cls, node, ref))
        pod = wait_for(lambda: (p := admin.get(Pod, "job", namespace=ns)).spec.nodeName and p, "job to be bound")
    assert pod.spec.nodeName == node
    assert admin.get(PersistentVolumeClaim, "scratch", namespace=ns).status.phase == "Bound"
