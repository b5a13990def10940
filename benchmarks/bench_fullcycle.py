"""Benchmark of a full cycle (every default action) on a big saturated cluster, and of its stale-gang pass.

Run with ``.venv/bin/python benchmarks/bench_fullcycle.py`` (flags: ``--jobs``, ``--gang``, ``--runs``,
``--json``). The cluster: ``synth`` with ``--jobs`` gangs of ``--gang`` one-GPU pods on jobs x gang / 10 nodes
of 8 GPUs, so 80% of the pods fit: one allocate cycle binds them, they turn Running, and the rest stay pending.
Then, on that one snapshot, medians of ``--runs`` (CPU ms):

* ``stalegang``: ``StaleGangEviction.execute`` on a fresh Session (every job is whole: nothing is stamped);
* ``cycle``: ``run_cycle`` with the default SchedulerConf (allocate, consolidation, reclaim, preempt,
  stalegangeviction), no memo: most of its time is the pending jobs' attempts and the passes over every job.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import platform
import statistics
import sys
from time import process_time

from bench_incremental import CONF, apply_binds, args_of, store_of
from kai.scheduler.actions.stalegang import StaleGangEviction
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import open_session, run_cycle
from kai.scheduler.snapshot import SnapshotBuilder
from synth import ClusterSpec, fixed, generate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=20_000)
    ap.add_argument("--gang", type=int, default=1)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()
    nodes = max(1, opts.jobs * opts.gang // 10)
    spec = ClusterSpec(
        nodes=nodes, queues=16, jobs=opts.jobs, gang_size=fixed(opts.gang), gpus_per_pod=fixed(1), seed=3
    )
    cluster = generate(spec)
    store = store_of(cluster)
    builder = SnapshotBuilder()
    first = run_cycle(builder.build(**args_of(store, cluster.now)), CONF)
    for key in apply_binds(store, first):
        store.put(dataclasses.replace(store.get("Pod", key), phase="Running", start_time=cluster.now))
    snap = builder.build(**args_of(store, cluster.now + 10.0))
    conf = SchedulerConf()
    gc.disable()  # as the scheduler's cycle runs; collected between runs
    stale, cycle = [], []
    for _ in range(opts.runs):
        gc.collect()
        ssn = open_session(snap, conf)
        c0 = process_time()
        StaleGangEviction().execute(ssn)
        stale.append((process_time() - c0) * 1e3)
        gc.collect()
        c0 = process_time()
        run_cycle(snap, conf)
        cycle.append((process_time() - c0) * 1e3)
    out = {
        "machine": f"{platform.machine()}, CPython {platform.python_version()}",
        "nodes": nodes,
        "pods": len(snap.tasks),
        "jobs": len(snap.jobs),
        "running": len(first.binds),
        "stalegang_ms": [round(x, 1) for x in stale],
        "cycle_ms": [round(x, 1) for x in cycle],
        "stalegang_median_ms": round(statistics.median(stale), 1),
        "cycle_median_ms": round(statistics.median(cycle), 1),
    }
    if opts.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{out['machine']}; {nodes} nodes, {out['pods']} pods in {out['jobs']} jobs, {out['running']} running")
        print(f"stalegang: median {out['stalegang_median_ms']} ms of CPU ({out['stalegang_ms']})")
        print(f"cycle    : median {out['cycle_median_ms']} ms of CPU ({out['cycle_ms']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
