"""GPU sharing delivered to the pods on a real API server: the admission webhook (served by ``kai scheduler
--webhook-listen``, registered by ``kai install --webhook-url``), reservation pods and device visibility.

kai runs in-process as its ServiceAccount (deploy/rbac.yaml). The test plays what has no stand-in here
(tests/k8s/gpushare.py): the kubelet (pods Running, terminations finished), the device plugin (a GPU of
the node's list for each reservation pod) and the reservation pod's container, which is the real ``kai
resource-reservation`` command run against a fake NVML library that shows it its one GPU.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Event, Pod

from kai.k8s._gpushare import ReservationOptions
from kai.k8s.envtest import ControlPlane
from tests.k8s.gpushare import (
    GpuNode,
    configmap_value,
    fake_nvml,  # noqa: F401
    gpu_uuids,
    install_webhooks,
    nvidia_runtime_class,
    remove_webhooks,
    reservation_pods,
    visible_devices,
    webhook_port,  # noqa: F401
)
from tests.k8s.sched import DATA, InProcess, Kubelet, Queue, options, wait_for

WALK = DATA / "walkthrough"


@pytest.fixture(scope="module", autouse=True)
def gpu_cluster(scheduler_cluster: ControlPlane) -> ControlPlane:
    nvidia_runtime_class(scheduler_cluster)
    scheduler_cluster.kubectl("apply", "-f", str(WALK / "00-queues.yaml"))
    return scheduler_cluster


def sharing_options(cp: ControlPlane, port: int, **kw: Any) -> Any:
    return options(cp, webhook_listen=("127.0.0.1", port), reservation=ReservationOptions(timeout_s=20), **kw)


def fraction_pod(name: str, ns: str, fraction: str = "0.5", queue: str = "team-a", **annotations: str) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"kai.scheduler/queue": queue},
                "annotations": {"gpu-fraction": fraction, **annotations},
            },
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
        }
    )


def _a10_node(nodes: Any) -> str:
    doc = yaml.safe_load((WALK / "node-a10g.yaml").read_text())
    alloc = doc["status"]["allocatable"]
    return nodes(
        doc["metadata"]["name"],
        labels=doc["metadata"]["labels"],
        cpu=alloc["cpu"],
        memory=alloc["memory"],
        gpus=int(alloc["nvidia.com/gpu"]),
        capacity=doc["status"]["capacity"],
    )


def _bound(client: Client, ns: str, names: list[str]) -> list[Pod]:
    pods = [client.get(Pod, n, namespace=ns) for n in names]
    return pods if all(p.spec.nodeName for p in pods) else []


def test_the_walkthrough_gpu_memory_pods_share_one_gpu_and_see_its_uuid(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, webhook_port: int, fake_nvml: Any
) -> None:
    cp = gpu_cluster
    node = _a10_node(nodes)
    (gpu,) = gpu_uuids(node, 1)
    with InProcess(sharing_options(cp, webhook_port)), GpuNode(admin, cp, node, [gpu], fake_nvml):
        cp.kubectl("apply", "-n", ns, "-f", str(DATA / "gpu-memory-pods.yaml"))
        pods = wait_for(lambda: _bound(admin, ns, ["gpu-memory-a", "gpu-memory-b"]), "both pods to be bound", 60)
        assert {p.spec.nodeName for p in pods} == {node}
        groups = {p.metadata.labels["runai-gpu-group"] for p in pods}
        assert groups == {f"{node}-gpu0"}  # one shared GPU
        (res,) = reservation_pods(admin, node)
        assert res.metadata.labels == {"app": "kai-resource-reservation", "runai-gpu-group": f"{node}-gpu0"}
        assert res.metadata.annotations["run.ai/reserve_for_gpu_index"] == gpu
        assert res.spec.serviceAccountName == "kai-resource-reservation"
        assert res.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
        for p in pods:
            # the webhook's env, filled at bind: both see the one GPU; 20 MiB of 23028 is 0.01 of it
            assert visible_devices(admin, p) == gpu
            assert configmap_value(admin, p, "GPU_PORTION") == "0.01"
            assert configmap_value(admin, p, "RUNAI_NUM_OF_GPUS") == "0.01"
            assert p.spec.runtimeClassName == "nvidia"
            assert p.metadata.annotations["received-resource-type"] == "Fraction"
