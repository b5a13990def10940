"""``kai resource-reservation``: the program inside a GPU reservation pod (KAI's resourcereservation binary).

The binder creates one reservation pod per shared GPU group, requesting ``nvidia.com/gpu: 1``; the device
plugin gives its container exactly one GPU. This program asks NVML (through nvidia-ml-py, the maintained
binding) which GPU that is and writes its UUID to the pod's own annotation ``run.ai/reserve_for_gpu_index``,
where the binder reads it to set the fraction pods' ``NVIDIA_VISIBLE_DEVICES``. Then it stays running: the
pod holds the GPU for as long as it lives.

Rules, as KAI's: the pod is named by ``POD_NAME`` and ``POD_NAMESPACE`` (the downward API); a pod that is
already annotated (the container restarted) is left as it is; NVML must see exactly one device. Every
failure is a DiscoveryError whose message says what is missing, never a traceback.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any

from kai.api import constants as C

LIBRARY = "libnvidia-ml.so.1"


class DiscoveryError(RuntimeError):
    """Discovery could not finish; the message says why in words."""


def gpu_uuid() -> str:
    """The UUID of the one GPU NVML shows this container. DiscoveryError when NVML cannot be loaded or
    started, or when it shows no GPU or more than one."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as e:
        if e.value == pynvml.NVML_ERROR_LIBRARY_NOT_FOUND:
            raise DiscoveryError(
                f"no GPU is visible: the NVML library ({LIBRARY}) is not in this container; run it with the "
                "NVIDIA container runtime (runtimeClassName) on a node with the NVIDIA driver"
            ) from e
        raise DiscoveryError(f"no GPU is visible: NVML did not start: {_nvml_text(e)}") from e
    try:
        count = pynvml.nvmlDeviceGetCount()
        if count != 1:
            what = "no GPU is visible" if count == 0 else "more than one GPU is visible"
            raise DiscoveryError(
                f"{what}: NVML found {count} devices, 1 was expected (the pod requests nvidia.com/gpu: 1)"
            )
        uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
        return uuid.decode() if isinstance(uuid, bytes) else str(uuid)
    except pynvml.NVMLError as e:
        raise DiscoveryError(f"NVML: {_nvml_text(e)}") from e
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()


def _nvml_text(e: Any) -> str:
    try:
        return str(e)
    except Exception:  # the binding asks the library for the text; it may be the part that is broken
        return f"NVML error {getattr(e, 'value', '?')}"


def reserve(client: Any, namespace: str, name: str) -> str:
    """Annotate pod *namespace*/*name* with its GPU's UUID unless it already is; the UUID. *client* is a
    lightkube Client."""
    from lightkube import ApiError
    from lightkube.resources.core_v1 import Pod
    from lightkube.types import PatchType

    try:
        pod = client.get(Pod, name, namespace=namespace)
    except ApiError as e:
        raise DiscoveryError(f"cannot read my pod {namespace}/{name}: {e.status.message or e}") from e
    have = (pod.metadata.annotations or {}).get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX)
    if have:
        return have
    uuid = gpu_uuid()
    patch = {"metadata": {"annotations": {C.ANNOTATION_RESERVE_FOR_GPU_INDEX: uuid}}}
    try:
        client.patch(Pod, name, patch, namespace=namespace, patch_type=PatchType.MERGE)
    except ApiError as e:
        raise DiscoveryError(f"cannot annotate my pod {namespace}/{name}: {e.status.message or e}") from e
    return uuid


def hold_until_terminated() -> None:
    """Block until SIGTERM or SIGINT: the reservation pod holds its GPU while it runs."""
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    while not stop.wait(3600):
        pass
