"""Benchmark of the incremental snapshot (issue 17): a cycle after a few pods changed, and the first build.

Run with ``.venv/bin/python benchmarks/bench_incremental.py`` (flags: ``--nodes``, ``--jobs``, ``--gang``,
``--changes``, ``--steps``, ``--first-runs``, ``--ref`` (a git revision for the "before" build, default
``main``), ``--json``).

The cluster: ``synth`` with 5,000 nodes x 8 GPUs and 10,000 gangs of 5 one-GPU pods (50,000 pods), held in a
real ``Store`` in the order a cluster adds them. One allocate cycle binds the first 40,000 (the cluster is
then full; 2,000 gangs stay pending and every later cycle tries them again), the binds are applied and the
pods turn Running (all but the last N/2, which the first step turns Running).

Measured:
* ``first build``: ``build_snapshot`` of the whole cluster, this tree against ``--ref``'s snapshot module
  (``git show REF:src/kai/scheduler/snapshot.py``, loaded beside this tree's), alternating, ``--first-runs``
  each, on the cluster before its first cycle.
* ``cycle after N changed``: per step, the cluster changes, then the timed part: ``SnapshotBuilder.build``
  (the update) + ``run_cycle`` (allocate). Three kinds of step, in turn in place, churn, in place, oldest:
  - ``in place``: N pods change where they are (N/2 running pods get a deletionTimestamp, as an eviction or
    a delete, and N/2 pods bound by the previous cycle turn Running);
  - ``churn``: N/2 running pods (N/10 gangs) finish and leave with their PodGroups (at random places in the
    Store's order), and N/2 new pods (N/10 new gangs) arrive;
  - ``oldest``: the same, but the gangs that finish are the oldest running ones, the first in the Store's
    order (a cluster's oldest jobs often finish first). In insertion order every task and job after them
    moved, the worst case; in the Store's slot order (a removed object's slot goes to the last one) only the
    moved ones do.
  After each step the cycle's binds are applied (they are the next step's in-place changes), and the
  snapshot is compared with a fresh ``build_snapshot`` (untimed): a figure of a wrong snapshot is a FAIL.
* ``recheck``: after the steps (the terminating pods are deleted first), nothing changes but the clock (10 s
  a recheck, as a scheduler's periodic cycle finds a saturated cluster): ``--rechecks`` updates + cycles
  handed the last cycle's memo (``run_cycle(snap, conf, memo, keep_memo=True)``, as both backends run), then
  as many without one (every action runs again), alternating. A repeat must decide what the run decides
  (FAIL otherwise).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import importlib.util
import json
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.objects import ObjectMeta, Pod, PodGroup
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.snapshot import SnapshotBuilder, build_snapshot
from kai.store import Store, key_of
from synth import ClusterSpec, fixed, generate

CONF = SchedulerConf(actions=("allocate",))
KINDS = ("in place", "churn", "in place", "oldest")  # the steps' kinds, in turn
KIND_NAMES = ("in place", "churn", "oldest")
ROOT = Path(__file__).resolve().parents[1]


def load_ref(ref: str) -> Any:
    """The snapshot module as it is at git revision *ref*, loaded as its own module beside this tree's."""
    text = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{ref}:src/kai/scheduler/snapshot.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "kai_snapshot_ref.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("kai_snapshot_ref", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kai_snapshot_ref"] = module  # dataclasses look their module up while the class is made
    spec.loader.exec_module(module)
    return module


def args_of(store: Store, now: float) -> dict[str, Any]:
    return {
        "nodes": store.list("Node"),
        "pods": store.list("Pod"),
        "podgroups": store.list("PodGroup"),
        "queues": store.list("Queue"),
        "priority_classes": store.list("PriorityClass"),
        "now": now,
    }


def store_of(cluster: Any) -> Store:
    """A real Store holding *cluster* (a ``synth`` cluster), in the order a cluster adds its objects."""
    store = Store()
    for obj in (*cluster.queues, *cluster.priority_classes, *cluster.nodes, *cluster.podgroups, *cluster.pods):
        store.put(obj)
    return store


def apply_binds(store: Store, result: Any) -> list[tuple[str, str]]:
    """The cycle's binds land: the pod has its node (still Pending: the kubelet starts it next step)."""
    out = []
    for b in result.binds:
        key = (b.pod.namespace, b.pod.name)
        pod = store.get("Pod", key)
        store.put(dataclasses.replace(pod, node_name=b.node))
        out.append(key)
    return out


class Churn:
    """Makes the steps' changes, seeded."""

    def __init__(self, store: Store, seed: int, gang: int) -> None:
        self.store = store
        self.rng = np.random.default_rng(seed)
        self.gang = gang
        self.serial = 0

    def in_place(self, n: int, bound_last: list[tuple[str, str]], now: float) -> int:
        s = self.store
        changed = 0
        for key in bound_last[: n // 2]:  # bound by the last cycle: Running now
            pod = s.get("Pod", key)
            s.put(dataclasses.replace(pod, phase="Running", start_time=now))
            changed += 1
        running = [p for p in s.list("Pod") if p.phase == "Running" and p.meta.deletion_timestamp is None]
        for i in self.rng.choice(len(running), size=n - changed, replace=False).tolist():
            pod = running[i]
            s.put(dataclasses.replace(pod, meta=dataclasses.replace(pod.meta, deletion_timestamp=now)))
            changed += 1
        return changed

    def churn(self, n: int, now: float, oldest: bool = False) -> int:
        """n/2 running pods finish (whole gangs, PodGroups too), n/2 new pods arrive (new gangs). The gangs that
        finish are drawn at random, or are the *oldest* running ones (the first in the Store's order)."""
        s = self.store
        gangs = n // 2 // self.gang
        by_group: dict[tuple[str, str], list[Pod]] = {}
        for p in s.list("Pod"):
            by_group.setdefault((p.meta.namespace or "", p.meta.annotations[C.ANNOTATION_POD_GROUP_NAME]), []).append(p)
        full = [k for k, ps in by_group.items() if all(p.phase == "Running" and p.node_name for p in ps)]
        changed = 0
        picked = range(gangs) if oldest else self.rng.choice(len(full), size=gangs, replace=False).tolist()
        for i in picked:
            key = full[i]
            for p in by_group[key]:
                s.delete("Pod", key_of(p))
                changed += 1
            s.delete("PodGroup", key)
        template = next(iter(s.list("Pod")))
        for _ in range(gangs):
            self.serial += 1
            name = f"new-{self.serial:06d}"
            ns = template.meta.namespace
            s.put(PodGroup(ObjectMeta(name, ns, f"uid-{name}", creation_timestamp=now), min_member=self.gang, queue=ns))
            for k in range(self.gang):
                meta = ObjectMeta(
                    f"{name}-{k}",
                    ns,
                    f"uid-{name}-{k}",
                    annotations={C.ANNOTATION_POD_GROUP_NAME: name},
                    creation_timestamp=now,
                )
                s.put(
                    Pod(
                        meta,
                        dict(template.requests),
                        scheduler_name=C.SCHEDULER_NAME,
                        container_names=("main",),
                    )
                )
                changed += 1
        return changed


def recheck(builder: SnapshotBuilder, store: Store, now: float, n: int) -> tuple[dict[str, list[float]], bool]:
    """*n* rechecks of the unchanged cluster with the last cycle's memo and *n* without, alternating: update +
    cycle CPU ms of each, and whether a repeat decided otherwise than the run beside it."""
    memo = run_cycle(builder.build(**args_of(store, now)), CONF, keep_memo=True).memo  # untimed: the memo
    out: dict[str, list[float]] = {"memo": [], "no memo": []}
    failed = False
    for _ in range(n):
        decided = []
        for kind in ("memo", "no memo"):
            now += 10.0
            args = args_of(store, now)
            gc.collect()
            c0 = process_time()
            snap = builder.build(**args)
            result = run_cycle(snap, CONF, memo, keep_memo=True) if kind == "memo" else run_cycle(snap, CONF)
            out[kind].append((process_time() - c0) * 1e3)
            if kind == "memo":
                failed |= not result.stats.get("cycle_repeated")  # the cluster did not change: a repeat
                memo = result.memo
            decided.append((result.binds, result.pipelines, result.evictions, result.podgroups, result.queues))
        failed |= decided[0] != decided[1]
    return out, failed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=5_000)
    ap.add_argument("--jobs", type=int, default=10_000)
    ap.add_argument("--gang", type=int, default=5)
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--first-runs", type=int, default=5)
    ap.add_argument("--rechecks", type=int, default=3)
    ap.add_argument("--ref", default="main")
    ap.add_argument("--json", action="store_true")
    opts = ap.parse_args()

    spec = ClusterSpec(
        nodes=opts.nodes, queues=16, jobs=opts.jobs, gang_size=fixed(opts.gang), gpus_per_pod=fixed(1), seed=3
    )
    cluster = generate(spec)
    ref = load_ref(opts.ref)
    gc.disable()  # as the cycle does; collected between runs
    first: dict[str, list[float]] = {"ref": [], "this": []}
    for _ in range(opts.first_runs):
        for name, fn in (("ref", ref.build_snapshot), ("this", build_snapshot)):
            gc.collect()
            t = perf_counter()
            fn(**cluster.snapshot_args())
            first[name].append(perf_counter() - t)

    store = store_of(cluster)
    now = cluster.now
    builder = SnapshotBuilder()
    snap = builder.build(**args_of(store, now))
    result = run_cycle(snap, CONF)
    bound_last = apply_binds(store, result)
    for key in bound_last[: -opts.changes // 2]:  # the kubelets start them; the last few are the first step's
        store.put(dataclasses.replace(store.get("Pod", key), phase="Running", start_time=now))
    bound_last = bound_last[-opts.changes // 2 :]
    builder.build(**args_of(store, now))  # untimed: the first cycle's 40,000 binds are not "a few changes"
    churn = Churn(store, seed=7, gang=opts.gang)
    steps: list[dict[str, Any]] = []
    failed = False
    for step in range(opts.steps):
        now += 10.0
        kind = KINDS[step % len(KINDS)]
        changed = (
            churn.in_place(opts.changes, bound_last, now)
            if kind == "in place"
            else churn.churn(opts.changes, now, oldest=kind == "oldest")
        )
        args = args_of(store, now)
        gc.collect()
        full_before = builder.full_builds
        t0, c0 = perf_counter(), process_time()
        snap = builder.build(**args)
        t1, c1 = perf_counter(), process_time()
        result = run_cycle(snap, CONF)
        t2, c2 = perf_counter(), process_time()
        from tests.property.snapshots import snapshot_diff  # untimed: the figure must be of a right snapshot

        diff = snapshot_diff(snap, build_snapshot(**args))
        failed |= bool(diff)
        bound_last = apply_binds(store, result)
        steps.append(
            {
                "kind": kind,
                "changed": changed,
                "update_ms": (t1 - t0) * 1e3,
                "cycle_ms": (t2 - t1) * 1e3,
                "total_ms": (t2 - t0) * 1e3,
                "total_cpu_ms": (c2 - c0) * 1e3,
                "update_cpu_ms": (c1 - c0) * 1e3,
                "cycle_cpu_ms": (c2 - c1) * 1e3,
                "binds": len(result.binds),
                "full_build": builder.full_builds > full_before,
                "equal_to_fresh": not diff,
            }
        )
    for pod in store.list("Pod"):  # the terminating pods finish (else the clock makes them StuckInReleasing)
        if pod.meta.deletion_timestamp is not None:
            store.delete("Pod", key_of(pod))
    rechecks, repeat_failed = recheck(builder, store, now, opts.rechecks)
    failed |= repeat_failed
    out = {
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "pods": len(cluster.pods),
        "nodes": len(cluster.nodes),
        "first_build_s": {k: [round(x, 4) for x in v] for k, v in first.items()},
        "first_build_median_s": {k: round(statistics.median(v), 4) for k, v in first.items()},
        "steps": steps,
        "median_total_cpu_ms": {
            kind: round(statistics.median(s["total_cpu_ms"] for s in steps if s["kind"] == kind), 1)
            for kind in KIND_NAMES
            if any(s["kind"] == kind for s in steps)
        },
        "median_total_ms": {
            kind: round(statistics.median(s["total_ms"] for s in steps if s["kind"] == kind), 1)
            for kind in KIND_NAMES
            if any(s["kind"] == kind for s in steps)
        },
        "recheck_cpu_ms": rechecks,
        "median_recheck_cpu_ms": {k: round(statistics.median(v), 1) for k, v in rechecks.items() if v},
    }
    if opts.json:
        print(json.dumps(out, indent=2))
    else:
        print(f"{out['machine']}; {out['nodes']} nodes, {out['pods']} pods; ref {opts.ref}")
        for k, v in out["first_build_s"].items():
            runs = ", ".join(f"{x * 1e3:.0f}" for x in v)
            print(f"first build {k:5s}: {runs} ms; median {statistics.median(v) * 1e3:.0f} ms")
        for s in steps:
            notes = ("; FULL BUILD" if s["full_build"] else "") + (
                "" if s["equal_to_fresh"] else "; FAIL: differs from a fresh build"
            )
            print(
                f"{s['kind']:9s} {s['changed']:4d} changed: update {s['update_ms']:6.1f} ms"
                f" + cycle {s['cycle_ms']:6.1f} ms = {s['total_ms']:6.1f} ms"
                f" (CPU {s['update_cpu_ms']:5.1f} + {s['cycle_cpu_ms']:5.1f} = {s['total_cpu_ms']:6.1f});"
                f" binds {s['binds']}{notes}"
            )
        print("median update + cycle, wall:", out["median_total_ms"], "CPU:", out["median_total_cpu_ms"])
        for k, v in rechecks.items():
            print(f"recheck, {k:7s}: update + cycle CPU {', '.join(f'{x:.1f}' for x in v)} ms")
    if failed:
        print("FAIL: an updated snapshot differs from a fresh build", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
