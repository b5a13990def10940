"""The embedded cluster's GPU-sharing delivery, as the Kubernetes backend's binder does it (kai.k8s._gpushare):
the reservation pod of each GPU group in use and each shared pod's device-visibility env.

Rules: a view over the cluster after a cycle, not objects in its Store (the engine's input and the sim
contract's ``pods`` stay as they were). A GPU group is in use while a pod that holds it is Binding, Running
or Releasing (KAI keeps a reservation while a fraction pod of the group is Pending-bound or Running; a
pipelined pod is not bound yet). Each GPU gets a stable symbolic UUID (``kai.api.sharedgpu.symbolic_uuid``)
in place of the one NVML would report.
"""

from __future__ import annotations

from typing import Any

from kai.api import constants as C
from kai.api import sharedgpu
from kai.scheduler.gpusharing import parse_share
from kai.sim.cluster import PodView

HOLDING = ("Binding", "Running", "Releasing")


def _memory(label: str) -> int:
    return int(label) if label.isdigit() and int(label) > 0 else C.DEFAULT_GPU_MEMORY_MIB


def gpu_env(view: PodView, node_gpu_memory: str) -> dict[str, str]:
    """NVIDIA_VISIBLE_DEVICES, GPU_PORTION and RUNAI_NUM_OF_GPUS of a bound shared pod ({} for any other)."""
    if view.status not in HOLDING or not view.gpu_groups:
        return {}
    share, _ = parse_share(view.pod)
    if share is None:
        return {}
    uuids = [sharedgpu.symbolic_uuid(view.node, g) for g in view.gpu_groups]
    portion = sharedgpu.gpu_portion(share.fraction_milli, share.memory_mib, _memory(node_gpu_memory))
    return sharedgpu.visibility_env(uuids, portion)


def reservations(views: list[PodView]) -> list[dict[str, Any]]:
    """One reservation pod per (node, GPU group) held by a bound shared pod, sorted by node and group."""
    held = sorted({(v.node, g) for v in views if v.status in HOLDING for g in v.gpu_groups})
    return [
        {
            "namespace": C.RESERVATION_NAMESPACE,
            "name": sharedgpu.reservation_pod_name(node, group),
            "node": node,
            "gpuGroup": group,
            "uuid": sharedgpu.symbolic_uuid(node, group),
        }
        for node, group in held
    ]
