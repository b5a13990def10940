"""The GPU-group labels KAI's binder writes on a shared-GPU pod, read and written.

A bound fractional pod records the GPUs it shares as labels: ``runai-gpu-group=<group>`` for one GPU,
``runai-gpu-group/<group>=<group>`` per GPU for a multi-device fraction. They are API conventions, not
scheduling: the snapshot reads them, the binder (embedded cluster or Kubernetes) writes them, and
neither needs the GPU-sharing engine to do so.
"""

from __future__ import annotations

from collections.abc import Mapping

from kai.api import constants as C
from kai.api.objects import Pod


def group_labels(pod: Pod) -> list[str]:
    """The GPU groups a bound pod names, the single-GPU label first, then the per-GPU labels sorted."""
    labels = pod.meta.labels
    groups = []
    single = labels.get(C.LABEL_GPU_GROUP)
    if single:
        groups.append(single)
    prefix = C.LABEL_GPU_GROUP + "/"
    groups += sorted(k[len(prefix) :] for k in labels if k.startswith(prefix) and k[len(prefix) :] not in groups)
    return groups


GROUP_LABEL_PREFIX = C.LABEL_GPU_GROUP + "/"  # a multi-GPU pod's labels: <label>/<index>


def is_gpu_group_label(key: str) -> bool:
    """Whether *key* is one of the labels ``gpu_group_labels`` writes (a pod moved or made again drops them)."""
    return key == C.LABEL_GPU_GROUP or key.startswith(GROUP_LABEL_PREFIX)


def has_gpu_group_label(labels: Mapping[str, str]) -> bool:
    """Whether any of *labels* is one ``gpu_group_labels`` writes. Asked of every Pod the watch puts: the usual
    pod is answered by one lookup, without a call per label."""
    return C.LABEL_GPU_GROUP in labels or any(k.startswith(GROUP_LABEL_PREFIX) for k in labels)


def gpu_group_labels(groups: tuple[str, ...]) -> dict[str, str]:
    """The labels that record *groups* on a pod (the inverse of ``group_labels``)."""
    if len(groups) == 1:
        return {C.LABEL_GPU_GROUP: groups[0]}
    return {f"{C.LABEL_GPU_GROUP}/{g}": g for g in groups}
