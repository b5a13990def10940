"""The API conventions of a shared-GPU pod that KAI's admission webhook and binder write (reference
section 5, "How the pod learns its GPU"), as pure functions of JSON documents: the reservation pod's name,
the per-pod ConfigMap names, the env vars and what goes in them.

Theory of operation (KAI's, kept so a cluster that ran KAI can switch):

1. Admission: a kai pod asking for a fraction gets the annotation ``runai/shared-gpu-configmap=<prefix>``
   (``<owner-or-pod>-<7 random>-shared-gpu``). Its fraction container (``gpu-fraction-container-name``,
   else the first) gets env ``NVIDIA_VISIBLE_DEVICES``, ``RUNAI_NUM_OF_GPUS`` and ``GPU_PORTION`` from
   keys of ConfigMap ``<prefix>-<idx>`` (``-i<idx>`` for an init container), an ``envFrom`` of
   ``<prefix>-<idx>-evar``, and a volume of ``<prefix>-<idx>``.
2. Bind: per GPU group, a reservation pod ``gpu-reservation-<sha256(node/group)[:8] hex>`` holds the
   physical GPU towards the device plugin; its container learns the GPU's UUID through NVML and writes
   it to its own annotation ``run.ai/reserve_for_gpu_index``. The binder then writes the ConfigMaps
   (owned by the pod): ``NVIDIA_VISIBLE_DEVICES=<uuid[,uuid...]>`` and ``GPU_PORTION=<portion %.2f>``
   (and the deprecated ``RUNAI_NUM_OF_GPUS``), labels the pod with its group(s) and binds it.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import string
import uuid
from dataclasses import dataclass
from typing import Any

from kai.api import constants as C

CONFIGMAP_SUFFIX = "shared-gpu"
_MAX_VOLUME_NAME = 63
_RANDOM_CHARS = 7
_ALPHANUM = string.ascii_lowercase + string.digits
_NOT_DNS_LABEL = re.compile(r"[^a-z0-9-]+")


def reservation_pod_name(node: str, group: str) -> str:
    """KAI's deterministic name for the reservation pod of *group* on *node*: concurrent or repeated
    creates for one group collide on one object (AlreadyExists) instead of holding a second GPU."""
    digest = hashlib.sha256(f"{node}/{group}".encode()).digest()
    return f"{C.RESERVATION_POD_PREFIX}-{digest[:8].hex()}"


def is_reservation_pod(labels: dict[str, str]) -> bool:
    return labels.get(C.LABEL_APP) == C.RESERVATION_APP


def requests_fraction(annotations: dict[str, str]) -> bool:
    """KAI's RequestsGPUFraction: a gpu-fraction or gpu-memory annotation, whatever its value."""
    return C.ANNOTATION_GPU_FRACTION in annotations or C.ANNOTATION_GPU_MEMORY in annotations


@dataclass(frozen=True, slots=True)
class ContainerRef:
    """The container that receives the GPU: its index in ``containers`` or ``initContainers``."""

    index: int
    init: bool
    name: str

    @property
    def suffix(self) -> str:
        return f"i{self.index}" if self.init else str(self.index)


def fraction_container(pod: dict[str, Any]) -> ContainerRef | None:
    """KAI's GetFractionContainerRef: the container named by ``gpu-fraction-container-name`` (init
    containers first), else container 0; None when the name matches no container or there is none."""
    spec = pod.get("spec") or {}
    name = ((pod.get("metadata") or {}).get("annotations") or {}).get(C.ANNOTATION_GPU_FRACTION_CONTAINER_NAME)
    containers = spec.get("containers") or []
    if name is None:
        return ContainerRef(0, False, containers[0].get("name", "")) if containers else None
    for init, items in ((True, spec.get("initContainers") or []), (False, containers)):
        for i, c in enumerate(items):
            if c.get("name") == name:
                return ContainerRef(i, init, name)
    return None


def configmap_prefix(pod: dict[str, Any], ref: ContainerRef, random_part: str | None = None) -> str:
    """A new ``runai/shared-gpu-configmap`` value: ``<owner-or-pod>-<7 random>-shared-gpu``, the base cut
    so that the volume name ``<prefix>-<idx>-evar-vol`` stays within 63 characters (KAI's arithmetic)."""
    meta = pod.get("metadata") or {}
    owners = meta.get("ownerReferences") or []
    base = (owners[0].get("name") if owners else "") or meta.get("name") or (meta.get("generateName") or "pod")
    room = _MAX_VOLUME_NAME - (_RANDOM_CHARS + 6) - len(CONFIGMAP_SUFFIX) - len(str(ref.index)) - 1 - 5
    base = base[:room].rstrip(".-") or "pod"
    rand = random_part if random_part is not None else "".join(secrets.choice(_ALPHANUM) for _ in range(_RANDOM_CHARS))
    return f"{base}-{rand}-{CONFIGMAP_SUFFIX}"


def capabilities_configmap(prefix: str, ref: ContainerRef) -> str:
    """``<prefix>-<idx>``: GPU_PORTION, RUNAI_NUM_OF_GPUS and (webhook-injected env) NVIDIA_VISIBLE_DEVICES."""
    return f"{prefix}-{ref.suffix}"


def env_configmap(prefix: str, ref: ContainerRef) -> str:
    """``<prefix>-<idx>-evar``: the container's ``envFrom`` ConfigMap."""
    return f"{capabilities_configmap(prefix, ref)}-evar"


def volume_name(configmap: str) -> str:
    """KAI's GetConfigVolumeName: ConfigMap names may be DNS subdomains, volume names must be labels."""
    return _NOT_DNS_LABEL.sub("-", f"{configmap}-vol".lower()).strip("-")


def gpu_portion(fraction_milli: int, memory_mib: int, node_gpu_memory_mib: int) -> str:
    """GPU_PORTION as KAI's BindRequest carries it (``%.2f`` of one device): the fraction, or gpu-memory as a
    share of the node's GPU memory (``nvidia.com/gpu.memory``) rounded up to 0.01, at most 1."""
    if fraction_milli:
        return f"{fraction_milli / 1000:.2f}"
    hundredths = min(-(-memory_mib * 100 // max(node_gpu_memory_mib, 1)), 100)
    return f"{hundredths / 100:.2f}"


def visibility_env(uuids: list[str], portion: str) -> dict[str, str]:
    """What a fraction container's ConfigMaps carry once its GPU(s) are reserved."""
    return {
        C.ENV_NVIDIA_VISIBLE_DEVICES: ",".join(uuids),
        C.ENV_GPU_PORTION: portion,
        C.ENV_RUNAI_NUM_OF_GPUS: portion,
    }


_SIM_UUIDS = uuid.UUID("6b61692d-7369-6d2d-6770-752d75756964")  # a fixed namespace for kai sim's GPUs


def symbolic_uuid(node: str, group: str) -> str:
    """The embedded cluster's stand-in for a GPU's NVML UUID: ``GPU-<uuid5(node/group)>``, the same for the
    same GPU group in every cycle and every run."""
    return f"GPU-{uuid.uuid5(_SIM_UUIDS, f'{node}/{group}')}"
