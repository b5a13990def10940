"""Benchmark of one allocate cycle with GPU sharing: 1,000 nodes x 8 GPUs, 20,000 pending fractional pods.

Run with ``.venv/bin/python benchmarks/bench_sharing.py [--runs N] [--replicas K] [--json] [--profile]``. The
target is one allocate cycle (open session + allocate + close session, ``run_cycle``) in at most 1 s. By default
the 20,000 pods are 20,000 single-pod jobs (the per-job machinery alone then costs about 0.9 s); ``--replicas 4``
makes them 5,000 gangs of 4 (figures for both in RESULTS.md).

The cluster: ``synth.generate`` makes the nodes (64 cores, 512Gi, 8 GPUs each) and eight team queues
under one department; 20,000 single-pod jobs are added, each asking for ``gpu-fraction`` 0.1-0.9
(uniform in steps of 0.1, seeded) plus 500m CPU and 2Gi. Fractions of 0.5 on average ask for about
10,000 GPUs of the 8,000 there are, so GPUs run out and the last jobs fail (as the check expects):
the cycle exercises packing onto shared GPUs, fresh GPUs and the failure path.

Each run builds a fresh Snapshot from the same objects (timed on its own) and runs the cycle; figures
are medians. The outcome (binds, GPU groups used, unschedulable jobs) must be the same on every run.
``decisions_digest`` hashes every bind (pod, node, GPU groups) and every PodGroup's conditions, in order;
``same_decisions`` compares it with ``REFERENCE_DIGESTS``, recorded from the code before the performance
work on this benchmark, so that a speed-up which changes a single decision shows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import statistics
import sys
from collections import Counter
from time import perf_counter, process_time

import numpy as np

from kai.api import constants as C
from kai.api.objects import ObjectMeta, Pod, PodGroup
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.snapshot import build_snapshot
from synth import NOW, ClusterSpec, generate

NODES, GPUS_PER_NODE, PODS, QUEUES = 1_000, 8, 20_000, 8
TARGET_CYCLE_S = 1.0
CONF = SchedulerConf(actions=("allocate",))
# decisions_digest per --replicas, from the code before the performance work (main at b6ac864)
REFERENCE_DIGESTS = {1: "ba5cb0653137e447", 4: "d5c484e9fe3d4c02"}


def decisions_digest(result: CycleResult) -> str:
    """A short hash of the cycle's decisions: each bind's pod, node and GPU groups, then each PodGroup's
    conditions, in the order the cycle produced them."""
    h = hashlib.sha256()
    for b in result.binds:
        h.update(repr((b.pod, b.node, b.gpu_groups)).encode())
    for pg in result.podgroups:
        h.update(repr((pg.namespace, pg.name, pg.conditions)).encode())
    return h.hexdigest()[:16]


def cluster(replicas: int = 1, seed: int = 7) -> dict:
    """Snapshot arguments: the synthetic nodes and queues plus PODS fractional pods, in jobs of *replicas*
    pods each (a gang: minMember = replicas; every pod of a job asks for the same fraction)."""
    base = generate(ClusterSpec(nodes=NODES, gpus_per_node=GPUS_PER_NODE, queues=QUEUES, jobs=0, seed=seed))
    rng = np.random.default_rng(seed)
    n_jobs = PODS // replicas
    tenths = rng.integers(1, 10, size=n_jobs)
    teams = rng.integers(0, QUEUES, size=n_jobs)
    podgroups, pods = [], []
    for j in range(n_jobs):
        ns, name = f"team-{int(teams[j]):02d}", f"infer-{j:06d}"
        created = NOW - n_jobs + j
        meta = ObjectMeta(name, ns, f"PodGroup/{ns}/{name}", creation_timestamp=created)
        podgroups.append(PodGroup(meta, min_member=replicas, queue=ns))
        annotations = {C.ANNOTATION_POD_GROUP_NAME: name, C.ANNOTATION_GPU_FRACTION: f"0.{int(tenths[j])}"}
        for k in range(replicas):
            pod_name = f"{name}-{k}"
            pods.append(
                Pod(
                    ObjectMeta(
                        pod_name, ns, f"Pod/{ns}/{pod_name}", annotations=dict(annotations), creation_timestamp=created
                    ),
                    requests={C.RESOURCE_CPU: 500, C.RESOURCE_MEMORY: 2 * 2**30, C.RESOURCE_PODS: 1},
                    scheduler_name=C.SCHEDULER_NAME,
                    container_names=("main",),
                )
            )
    args = base.snapshot_args()
    args.update(pods=pods, podgroups=podgroups)
    return args


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--replicas", type=int, default=1, help="pods per job (gangs); 1 = 20,000 single-pod jobs")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--profile", action="store_true", help="cProfile one cycle instead of timing")
    opts = parser.parse_args()
    args = cluster(opts.replicas)
    if opts.profile:
        import cProfile
        import pstats

        snap = build_snapshot(**args)
        prof = cProfile.Profile()
        prof.enable()
        run_cycle(snap, CONF)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
        return 0
    runs, outcomes = [], []
    for _ in range(opts.runs):
        t0 = perf_counter()
        snap = build_snapshot(**args)
        t1, c1 = perf_counter(), process_time()
        result = run_cycle(snap, CONF)
        t2, c2 = perf_counter(), process_time()
        runs.append(
            {
                "build_s": t1 - t0,
                "cycle_s": t2 - t1,
                "cycle_cpu_s": c2 - c1,
                "allocate_s": result.stats.get("action_allocate_s", float("nan")),
            }
        )
        groups = Counter((b.node, g) for b in result.binds for g in b.gpu_groups)
        outcomes.append(
            {
                "binds": len(result.binds),
                "gpu_groups": len(groups),
                "pods_per_group": round(sum(groups.values()) / max(len(groups), 1), 2),
                "unschedulable_jobs": sum(1 for pg in result.podgroups if pg.conditions),
                "decisions_digest": decisions_digest(result),
            }
        )
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    out = {
        "scenario": f"{NODES:,} nodes x {GPUS_PER_NODE} GPUs, {PODS:,} pending fractional pods (0.1-0.9), "
        f"{PODS // opts.replicas:,} jobs of {opts.replicas}",
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
        **{k: round(v, 4) for k, v in med.items()},
        **outcomes[-1],
        "deterministic": all(o == outcomes[0] for o in outcomes),
        "same_decisions": outcomes[-1]["decisions_digest"] == REFERENCE_DIGESTS.get(opts.replicas),
        "target_cycle_s": TARGET_CYCLE_S,
        "ok": med["cycle_s"] <= TARGET_CYCLE_S,
    }
    if opts.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
