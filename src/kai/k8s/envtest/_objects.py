"""Nodes and running pods without kubelets.

A control plane without kubelets has no node that reports itself Ready and no container
that starts. These helpers write what a kubelet would: a Node's status (Ready, capacity,
allocatable incl. ``nvidia.com/gpu``) with the ``node.kubernetes.io/not-ready`` taint that
the API server's admission adds at creation removed, and a pod's status Running.

The bodies are plain dicts built by pure functions (``node_manifest``, ``node_status``,
``running_pod_status``), so an async client (benchmarks) can send them too; the ``create_node``
and ``mark_pod_running`` helpers send them with a synchronous lightkube Client.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Mapping
from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Node, NodeStatus, Pod, PodStatus
from lightkube.types import PatchType

GPU_RESOURCE = "nvidia.com/gpu"  # as kai.api.constants; kept here so kai.k8s needs no engine import
NOT_READY_TAINT = "node.kubernetes.io/not-ready"


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_manifest(
    name: str, labels: Mapping[str, str] | None = None, taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    """The Node object to create. Capacity goes in with the status patch (the API server
    ignores status on create)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {"taints": list(taints or [])},
    }


def node_status(
    *,
    cpu: str = "64",
    memory: str = "512Gi",
    gpus: int = 8,
    pods: int = 110,
    extra: Mapping[str, str] | None = None,
    ready: bool = True,
    capacity: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A kubelet-like Node status: allocatable from the arguments, capacity the same unless
    CAPACITY is given (a real kubelet reserves some: capacity cpu 16, allocatable 15), and a
    Ready condition."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods), **(extra or {})}
    if gpus:
        resources[GPU_RESOURCE] = str(gpus)
    now = _now()
    return {
        "capacity": dict(capacity) if capacity is not None else dict(resources),
        "allocatable": dict(resources),
        "conditions": [
            {
                "type": "Ready",
                "status": "True" if ready else "False",
                "reason": "KubeletReady" if ready else "KubeletNotReady",
                "message": "set by kai.k8s.envtest (no kubelet)",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }
        ],
        "phase": "Running",
    }


def running_pod_status(node_ip: str = "127.0.0.1", pod_ip: str = "127.0.0.1") -> dict[str, Any]:
    """What a kubelet writes once all containers started: phase Running, Ready conditions."""
    now = _now()
    conditions = [
        {"type": t, "status": "True", "lastTransitionTime": now}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
    ]
    return {
        "phase": "Running",
        "conditions": conditions,
        "hostIP": node_ip,
        "podIP": pod_ip,
        "startTime": now,
    }


def create_node(
    client: Client,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    **status: Any,
) -> Node:
    """Create a Ready node NAME (``status`` as node_status's keywords: cpu, memory, gpus, ...).

    Create, status patch, then drop_not_ready_taint. Returns the final Node.
    """
    client.create(Node.from_dict(node_manifest(name, labels, taints)))
    client.patch(NodeStatus, name, {"status": node_status(**status)}, patch_type=PatchType.MERGE)
    return drop_not_ready_taint(client, name)


def drop_not_ready_taint(client: Client, name: str, attempts: int = 20) -> Node:
    """Remove the not-ready taint the TaintNodesByCondition admission plugin put on node NAME at
    creation, keeping every other taint; the Node afterwards.

    A JSON patch with a test of the resourceVersion: it fails (422) instead of clobbering a change
    someone made meanwhile (kube-controller-manager annotates new nodes, say), and is tried again on
    the node as it is then.
    """
    for _ in range(attempts):
        node = client.get(Node, name)
        kept = [t.to_dict() for t in (node.spec.taints or []) if t.key != NOT_READY_TAINT]
        patch = [
            {"op": "test", "path": "/metadata/resourceVersion", "value": node.metadata.resourceVersion},
            {"op": "replace" if node.spec.taints is not None else "add", "path": "/spec/taints", "value": kept},
        ]
        try:
            return client.patch(Node, name, patch, patch_type=PatchType.JSON)
        except ApiError as e:
            if e.status.code != 422:
                raise
            time.sleep(0.05)
    raise RuntimeError(f"could not remove the not-ready taint of node {name}: it kept changing")


def mark_pod_running(client: Client, name: str, namespace: str) -> Pod:
    """Patch pod NAMESPACE/NAME's status to Running, as its kubelet would once it started."""
    client.patch(PodStatus, name, {"status": running_pod_status()}, namespace=namespace, patch_type=PatchType.MERGE)
    return client.get(Pod, name, namespace=namespace)
