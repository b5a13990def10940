"""Manifest pieces the property tests draw their clusters from."""

from __future__ import annotations

from typing import Any

NOW = "2026-01-01T00:00:00Z"
PRIORITIES = ["train", "build-preemptible", "build", "inference"]


def queue_doc(name: str, parent: str | None, quota: int, weight: int) -> dict[str, Any]:
    """A Queue with a GPU quota and over-quota weight; CPU and memory unlimited."""
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": quota, "limit": -1, "overQuotaWeight": weight},
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}
