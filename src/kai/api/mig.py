"""MIG (Multi-Instance GPU) resource names, as KAI reads them.

A MIG instance is an extended resource ``nvidia.com/mig-<g>g.<mem>gb`` (``mig-1g.10gb``); KAI counts each
instance as ``g`` GPUs in queue accounting and fair share (``resources.ExtractGpuAndMemoryFromMigResourceName``,
``ResourceVector.TotalGPUs``). A *legacy* MIG pod names its instances in annotations of the same names
instead of requesting them (KAI's ``updateLegacyMigResourceRequestFromAnnotations``): KAI never schedules
one, counts what it names as its request, and places no new MIG pod on a node where one runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

MIG_PREFIX = "nvidia.com/mig-"
_PROFILE = re.compile(r"^nvidia\.com/mig-(\d+)g\.(\d+)gb$")


def mig_gpus(resource: str) -> int | None:
    """GPUs one instance of MIG resource *resource* counts as (``mig-3g.20gb`` -> 3); None if it is not one."""
    m = _PROFILE.match(resource)
    return int(m.group(1)) if m else None


def legacy_mig_request(annotations: Mapping[str, str]) -> dict[str, int]:
    """The MIG instances a legacy MIG pod names in its annotations (values that are not integers are
    skipped, as KAI skips them); empty for any other pod."""
    out: dict[str, int] = {}
    for key, value in annotations.items():
        if key.startswith(MIG_PREFIX):
            try:
                out[key] = int(value)
            except ValueError:
                continue
    return out


def requests_mig(requests: Mapping[str, int]) -> bool:
    """The pod asks for MIG instances (KAI's RequestTypeMigInstance)."""
    return any(key.startswith(MIG_PREFIX) for key in requests)
