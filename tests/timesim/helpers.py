"""Manifests for time-simulation tests, and a runner through the real embedded cluster."""

from __future__ import annotations

from typing import Any

import yaml

from kai.sim.timesim import Outcome, Overrides, load_input, simulate


def _doc(d: dict[str, Any]) -> str:
    return yaml.safe_dump(d, sort_keys=False)


def queue(name: str, gpu_quota: float, parent: str = "") -> str:
    spec: dict[str, Any] = {"parentQueue": parent} if parent else {}
    spec["resources"] = {
        "gpu": {"quota": gpu_quota, "limit": -1, "overQuotaWeight": 1},
        "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
    }
    return _doc({"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec})


def node(name: str, gpus: int) -> str:
    alloc = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": gpus, "pods": 110}
    return _doc({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {"allocatable": alloc}})


def pod(
    name: str, queue: str, gpus: int, *, duration: str | None = None, arrival: str | None = None, **annotations: str
) -> str:
    ann = {k.replace("_", "-"): v for k, v in annotations.items()}
    if duration is not None:
        ann["kai.sim/duration"] = duration
    if arrival is not None:
        ann["kai.sim/arrival"] = arrival
    resources: dict[str, Any] = {"requests": {"cpu": "1", "memory": "1Gi"}}
    if gpus:  # a pod without GPUs (or a shared one, by annotation) asks for none
        resources = {"requests": {**resources["requests"], "nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}
    return _doc(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": "default",
                "labels": {"kai.scheduler/queue": queue},
                "annotations": ann,
            },
            "spec": {"containers": [{"name": "main", "resources": resources}]},
        }
    )


def simulation(**spec: Any) -> str:
    return _doc({"apiVersion": "kai.sim/v1alpha1", "kind": "Simulation", "metadata": {"name": "t"}, "spec": spec})


def run(*docs: str, over: Overrides | None = None, actions: tuple[str, ...] | None = None) -> Outcome:
    objects, _, spec = load_input([("test.yaml", "---\n".join(docs))])
    return simulate(objects, spec, over, actions=actions)


def jobs(outcome: Outcome) -> dict[str, dict[str, Any]]:
    return {j["podGroup"]: j for j in outcome.metrics["jobs"]}
