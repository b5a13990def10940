"""Benchmark: one allocate cycle of pods claiming DRA GPUs, against the same pods asking for nvidia.com/gpu.

Run with ``.venv/bin/python benchmarks/bench_dra.py`` (``--runs N``, default 3; ``--nodes``, ``--pods``).

The cluster: ``--nodes`` nodes (default 1,000) of 64 CPUs, each with 8 GPUs published by a DRA driver
(``gpu.example.com``: one ResourceSlice per node, half the nodes' GPUs model A100, half H100, 80Gi each).
``--pods`` (default 3,000) pending single-pod jobs, each with its own ResourceClaim (as a template makes them)
asking for 2 devices of the class with a CEL selector on the model and the memory capacity: every pod is placed
on an A100 node, 4 per node while devices last (checked: no device given twice, counts match).

``plain``: the same cluster and pods with ``nvidia.com/gpu: 8`` on the A100 nodes only and ``nvidia.com/gpu: 2``
requests: the engine's floor for the same placements. ``build`` is ``build_snapshot`` (for DRA it includes
listing the devices; CEL is evaluated at the first request of each selector, inside the cycle's first
placement), ``cycle`` is ``run_cycle(snap, allocate only)``. Medians over the runs.
"""

from __future__ import annotations

import argparse
import platform
import statistics
from time import perf_counter, process_time
from typing import Any

from kai.api.dra import parse_device_class, parse_resource_claim, parse_resource_slice
from kai.api.objects import parse_node, parse_pod, parse_podgroup, parse_queue
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.dra import build_dra
from kai.scheduler.snapshot import build_snapshot

NOW = 1_767_225_600.0
UNLIMITED = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
RESOURCES = {"gpu": UNLIMITED, "cpu": UNLIMITED, "memory": UNLIMITED}
DRIVER = "gpu.example.com"
SELECTOR = (
    f'device.attributes["{DRIVER}"].model == "A100" && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
)


def _model(i: int) -> str:
    return "A100" if i % 2 == 0 else "H100"


def cluster(nodes: int, pods: int, dra: bool) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {"nodes": [], "pods": [], "groups": [], "slices": [], "claims": []}
    for i in range(nodes):
        name = f"node-{i:05d}"
        alloc: dict[str, Any] = {"cpu": "64", "memory": "512Gi", "pods": "110"}
        if not dra and _model(i) == "A100":
            alloc["nvidia.com/gpu"] = "8"
        out["nodes"].append(parse_node({"metadata": {"name": name}, "status": {"allocatable": alloc}}))
        if dra:
            devices = [
                {
                    "name": f"gpu-{g}",
                    "attributes": {"model": {"string": _model(i)}},
                    "capacity": {"memory": {"value": "80Gi"}},
                }
                for g in range(8)
            ]
            spec = {"driver": DRIVER, "nodeName": name, "pool": {"name": name, "generation": 1}, "devices": devices}
            out["slices"].append(parse_resource_slice({"metadata": {"name": f"{name}-gpus"}, "spec": spec}))
    for j in range(pods):
        name = f"p-{j:05d}"
        pg = {"metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": 1, "queue": "q"}}
        out["groups"].append(parse_podgroup(pg))
        requests: dict[str, Any] = {"cpu": "1"}
        spec: dict[str, Any] = {"schedulerName": "kai-scheduler"}
        if dra:
            spec["resourceClaims"] = [{"name": "gpus", "resourceClaimName": f"{name}-gpus"}]
            exactly = {"deviceClassName": DRIVER, "count": 2, "selectors": [{"cel": {"expression": SELECTOR}}]}
            claim = {
                "metadata": {"name": f"{name}-gpus", "namespace": "default", "labels": {"kai.scheduler/queue": "q"}},
                "spec": {"devices": {"requests": [{"name": "gpus", "exactly": exactly}]}},
            }
            out["claims"].append(parse_resource_claim(claim))
        else:
            requests["nvidia.com/gpu"] = "2"
        spec["containers"] = [{"name": "c", "resources": {"requests": requests}}]
        meta = {"name": name, "namespace": "default", "annotations": {"pod-group-name": name}}
        out["pods"].append(parse_pod({"metadata": meta, "spec": spec}))
    return out


def run(nodes: int, pods: int, dra: bool) -> tuple[float, float, float, int]:
    c = cluster(nodes, pods, dra)
    queues = [
        parse_queue({"metadata": {"name": "root"}, "spec": {"resources": RESOURCES}}),
        parse_queue({"metadata": {"name": "q"}, "spec": {"parentQueue": "root", "resources": RESOURCES}}),
    ]
    cls = parse_device_class({"metadata": {"name": DRIVER}, "spec": {}})
    t0 = perf_counter()
    snap = build_snapshot(
        nodes=c["nodes"],
        pods=c["pods"],
        podgroups=c["groups"],
        queues=queues,
        priority_classes=[],
        now=NOW,
        dra=build_dra([cls], c["slices"], c["claims"]) if dra else build_dra(),
    )
    t1, cpu0 = perf_counter(), process_time()
    result = run_cycle(snap, SchedulerConf(actions=("allocate",)))
    t2, cpu1 = perf_counter(), process_time()
    if dra:  # no device given twice; every pod on an A100 node
        used = [(a.node, d[3]) for b in result.binds for a in b.claims for d in a.devices]
        assert len(used) == len(set(used)) == 2 * len(result.binds)
        assert all(int(b.node.split("-")[1]) % 2 == 0 for b in result.binds)
    return t1 - t0, t2 - t1, cpu1 - cpu0, len(result.binds)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=1_000)
    ap.add_argument("--pods", type=int, default=3_000)
    args = ap.parse_args()
    print(f"python {platform.python_version()}, {args.nodes} nodes, {args.pods} pods, {args.runs} runs (alternating)")
    rows: dict[str, list[tuple[float, float, float, int]]] = {"dra": [], "plain": []}
    for _ in range(args.runs):
        for name in ("dra", "plain"):
            rows[name].append(run(args.nodes, args.pods, name == "dra"))
    for name, runs in rows.items():
        binds = {r[3] for r in runs}
        print(
            f"{name:6s} binds {sorted(binds)}  build {statistics.median(r[0] for r in runs) * 1e3:7.0f} ms  "
            f"cycle {statistics.median(r[1] for r in runs) * 1e3:7.0f} ms "
            f"(runs {' / '.join(f'{r[1] * 1e3:.0f}' for r in runs)})  "
            f"CPU {statistics.median(r[2] for r in runs) * 1e3:7.0f} ms"
        )


if __name__ == "__main__":
    main()
