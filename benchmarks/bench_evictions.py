"""Benchmark of the eviction actions (reclaim, consolidation, and the full five-action cycle) on synthetic clusters.

Run with ``.venv/bin/python benchmarks/bench_evictions.py``. Flags, as in ``bench_allocate.py``:
``--scenario NAME`` (repeatable; a group such as ``reclaim-gang-2000`` selects all its variants;
default all), ``--runs N`` (default 3, median reported), ``--json``, ``--save PATH`` (also write
the JSON), ``--profile cprofile|pyinstrument`` (profile one cycle in this process instead).

Each scenario runs in its own subprocess so that its peak RSS is its own (see bench_allocate.py).
Every run builds a fresh Snapshot from the same generated objects and times
``run_cycle(snap, SchedulerConf(actions=...))``; the target applies to that cycle's wall time.

Every scenario also checks the *shape* of its result (for example: exactly one eviction, and the
arriving job pipelined). A figure for a cycle that decided the wrong thing means nothing, so a
failed check is printed as FAIL next to the figures and makes the command exit non-zero.

Scenarios
---------
* ``reclaim-1gpu``: 500 nodes x 8 GPUs, all 4,000 GPUs used by 4,000 one-GPU train (preemptible)
  jobs of team-00..team-02 (about 1,333 each); team-03 runs nothing. Four leaf queues under one
  department, quota 1,000 GPUs each, so team-00..02 are a third over quota and team-03 is starved.
  A 1-GPU train job arrives in team-03. Expected: exactly one eviction, the job pipelined.
  Timed with ``("reclaim",)`` (target 0.2 s) and with all five actions (``/all``).
* ``reclaim-gang-2000``: the same full cluster, but quotas 600/600/600/2,200 so that team-03's quota
  covers a 2,000-GPU gang, which arrives as 250 pods x 8 GPUs (``/250x8``) or 2,000 pods x 1 GPU
  (``/2000x1``). Expected: the whole gang pipelined and exactly 2,000 pods evicted (the cluster is
  full, so every GPU has to come from an eviction, and no pod needs to move). Target 2 s.
  Running pods sit on nodes in creation order (oldest on node-00000, eight per node), as a binpack
  scheduler leaves them when jobs arrive one after another; ``/250x8-scattered`` (beyond the issue's
  list) shuffles them over the nodes, as churn leaves a real cluster: the victim order (newest first,
  queues taking turns) then no longer lines up with whole nodes.
* ``consolidation-41``: a fragmented cluster, 500 nodes x 8 GPUs, each node running six one-GPU train
  pods placed at random (seeded), so 1,000 GPUs are free but only two per node. 41 train jobs arrive
  that need whole nodes: 41 single pods of 8 GPUs (``/1x8``) or 41 gangs of 2 pods x 8 GPUs
  (``/2x8``, 12 moves per gang, within the default ``max_consolidation_preemptees`` of 16).
  Actions ``("consolidation",)``. Expected: all 41 jobs placed (pipelined), every evicted pod moved
  (pipelined elsewhere, none killed), at most 16 moves per job. Target 2 s.
* ``full-cycle-medium``: bench_allocate.py's ``medium`` cluster (1,000 nodes x 8 GPUs, 5,000 pending
  single-pod jobs, nothing running) with the default five actions. Expected: no eviction (nothing
  ran before the cycle, so nothing may be evicted) and no pipeline. No target: the figures show what
  the eviction actions add to an allocate-heavy cycle.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import numpy as np

from bench_allocate import (
    MAX_RUN_S,
    RunTooLong,
    _deadline,
    _ms,
    _peak_rss_mib,
    _rss_mib,
    _verdict,
    run_and_report,
)
from bench_allocate import SCENARIOS as ALLOCATE_SCENARIOS
from kai.api import constants as C
from kai.api.objects import ObjectMeta, Pod, PodGroup, Queue, QueueResource
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.snapshot import build_snapshot
from kai.sim.cluster import default_priority_classes
from synth import DEPARTMENT, NOW, Cluster, ClusterSpec, _gang, _nodes, generate

ALL_ACTIONS = C.DEFAULT_ACTIONS
ACTION_COLUMNS = ("allocate", "consolidation", "reclaim", "preempt", "stalegangeviction")


# ---------------------------------------------------------------------------------------------
# Clusters
# ---------------------------------------------------------------------------------------------


def _queues(quotas: list[float]) -> list[Queue]:
    """``dept`` (quota: the sum) and leaves ``team-00``... with the given GPU quotas; no limits, weight 1."""
    unlimited = QueueResource(quota=-1.0, limit=-1.0, over_quota_weight=1.0)
    out = [
        Queue(
            ObjectMeta(DEPARTMENT, None, f"Queue/{DEPARTMENT}", creation_timestamp=0.0),
            resources={
                "gpu": QueueResource(quota=float(sum(quotas)), limit=-1.0, over_quota_weight=1.0),
                "cpu": unlimited,
                "memory": unlimited,
            },
        )
    ]
    for i, quota in enumerate(quotas):
        name = f"team-{i:02d}"
        out.append(
            Queue(
                ObjectMeta(name, None, f"Queue/{name}", creation_timestamp=float(i + 1)),
                parent=DEPARTMENT,
                resources={
                    "gpu": QueueResource(quota=float(quota), limit=-1.0, over_quota_weight=1.0),
                    "cpu": unlimited,
                    "memory": unlimited,
                },
            )
        )
    return out


def _running_one_gpu(spec: ClusterSpec, node_of: list[int], teams: list[int], node_names: list[str]):
    """One-GPU train jobs ``run-NNNNNN``, job j of team ``teams[j]`` running on node row ``node_of[j]``;
    job j was created j seconds after the first, ten days ago."""
    podgroups: list[PodGroup] = []
    pods: list[Pod] = []
    for j, (row, team) in enumerate(zip(node_of, teams)):
        pg, gang_pods = _gang(
            spec,
            name=f"run-{j:06d}",
            team=team,
            size=1,
            gpus=1,
            priority_class=C.PRIORITY_TRAIN,
            created=NOW - 10 * 86_400 + j,
            nodes=[node_names[row]],
        )
        podgroups.append(pg)
        pods.extend(gang_pods)
    return podgroups, pods


def _pending(spec: ClusterSpec, *, name: str, team: int, size: int, gpus: int, created: float):
    return _gang(spec, name=name, team=team, size=size, gpus=gpus, priority_class=C.PRIORITY_TRAIN, created=created)


def full_cluster(quotas: list[float], arriving: list[tuple[str, int, int, int]], *, scattered: bool = False) -> Cluster:
    """500 x 8 GPUs filled by 4,000 one-GPU jobs of team-00..02 (round robin), 8 per node: in creation
    order (job j on node j // 8), or *scattered* (nodes shuffled against creation order, seeded);
    *arriving*: (name, team, pods, GPUs per pod) pending train jobs, created now."""
    spec = ClusterSpec(nodes=500, gpus_per_node=8, queues=len(quotas), jobs=0, seed=0)
    rng = np.random.default_rng(spec.seed)
    nodes = _nodes(spec, rng)
    names = [n.meta.name for n in nodes]
    slots = np.repeat(np.arange(spec.nodes), spec.gpus_per_node)
    if scattered:
        rng.shuffle(slots)
    teams = [j % 3 for j in range(len(slots))]
    podgroups, pods = _running_one_gpu(spec, [int(r) for r in slots], teams, names)
    for name, team, size, gpus in arriving:
        pg, gang_pods = _pending(spec, name=name, team=team, size=size, gpus=gpus, created=NOW)
        podgroups.append(pg)
        pods.extend(gang_pods)
    return Cluster(spec, nodes, pods, podgroups, _queues(quotas), default_priority_classes())


def fragmented_cluster(jobs: int, size: int, per_node: int = 6, seed: int = 41) -> Cluster:
    """500 x 8 GPUs, *per_node* one-GPU jobs on every node, nodes shuffled (seeded) against creation order,
    teams round robin over 4 queues of quota 1,000; *jobs* pending train jobs of *size* pods x 8 GPUs."""
    spec = ClusterSpec(nodes=500, gpus_per_node=8, queues=4, jobs=jobs, seed=seed)
    rng = np.random.default_rng(seed)
    nodes = _nodes(spec, rng)
    names = [n.meta.name for n in nodes]
    slots = np.repeat(np.arange(spec.nodes), per_node)
    rng.shuffle(slots)
    n_running = len(slots)
    podgroups, pods = _running_one_gpu(spec, [int(r) for r in slots], [j % 4 for j in range(n_running)], names)
    for j in range(jobs):
        pg, gang_pods = _pending(spec, name=f"job-{j:06d}", team=j % 4, size=size, gpus=8, created=NOW - jobs + j)
        podgroups.append(pg)
        pods.extend(gang_pods)
    return Cluster(spec, nodes, pods, podgroups, _queues([1000.0] * 4), default_priority_classes())


# ---------------------------------------------------------------------------------------------
# What a cycle decided, and whether it is the expected shape
# ---------------------------------------------------------------------------------------------


def outcome(result: CycleResult, cluster: Cluster) -> dict[str, Any]:
    """Counts of the cycle's decisions (identical on every run, or the engine is not deterministic)."""
    pending_pods: dict[str, list[str]] = {}
    for p in cluster.pods:
        if not p.node_name:
            pending_pods.setdefault(p.meta.annotations[C.ANNOTATION_POD_GROUP_NAME], []).append(p.meta.name)
    min_member = {pg.meta.name: pg.min_member for pg in cluster.podgroups}
    placed = Counter(d.podgroup for d in [*result.binds, *result.pipelines] if d.podgroup in pending_pods)
    pipelined = {d.pod for d in result.pipelines}
    moved = [e for e in result.evictions if e.pod in pipelined]  # evicted here, waiting on another node
    return {
        "binds": len(result.binds),
        "pipelines": len(result.pipelines),
        "evictions": len(result.evictions),
        "evictions_by_action": dict(sorted(Counter(e.action for e in result.evictions).items())),
        "moved": len(moved),
        "moved_by_action": dict(sorted(Counter(e.action for e in moved).items())),
        "killed": len(result.evictions) - len(moved),
        "pending_jobs": len(pending_pods),
        "pending_pods": sum(len(v) for v in pending_pods.values()),
        "jobs_placed": sum(1 for pg, n in placed.items() if n >= min_member[pg]),
        "pending_pods_placed": sum(placed.values()),
        "pending_pods_pipelined": sum(1 for d in result.pipelines if d.podgroup in pending_pods),
    }


Check = Callable[[dict[str, Any]], list[str]]  # the problems with an outcome; empty when it has the expected shape


def _expect(o: dict[str, Any], **want: int) -> list[str]:
    return [f"{k} = {o[k]:,}, expected {v:,}" for k, v in want.items() if o[k] != v]


def check_reclaim_1gpu(o: dict[str, Any]) -> list[str]:
    return _expect(o, evictions=1, killed=1, moved=0, jobs_placed=1, pending_pods_pipelined=1, binds=0)


def check_gang_2000(o: dict[str, Any]) -> list[str]:
    gang = o["pending_pods"]
    return _expect(o, jobs_placed=1, pending_pods_pipelined=gang, pipelines=gang, evictions=2000, killed=2000, binds=0)


def check_consolidation(per_job_moves: int) -> Check:
    def check(o: dict[str, Any]) -> list[str]:
        problems = _expect(o, jobs_placed=41, killed=0, binds=0)
        if o["moved"] > 41 * per_job_moves:
            problems.append(f"moved = {o['moved']:,}, more than 41 x {per_job_moves}")
        return problems

    return check


def check_no_evictions(o: dict[str, Any]) -> list[str]:
    return _expect(o, evictions=0, pipelines=0)


# ---------------------------------------------------------------------------------------------
# Scenarios
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scenario:
    """A cluster, the actions of the cycle timed on it, the shape its result must have and its time budget."""

    make: Callable[[], Cluster]
    actions: tuple[str, ...]
    check: Check
    target_cycle_s: float | None
    about: str = ""


GANG_QUOTAS = [600.0, 600.0, 600.0, 2200.0]

SCENARIOS: dict[str, Scenario] = {
    "reclaim-1gpu/reclaim": Scenario(
        lambda: full_cluster([1000.0] * 4, [("arriving", 3, 1, 1)]),
        ("reclaim",),
        check_reclaim_1gpu,
        target_cycle_s=0.2,
        about="full 500 x 8 cluster (4,000 x 1-GPU jobs, teams 0-2); 1-GPU job arrives in starved team-03",
    ),
    "reclaim-1gpu/all": Scenario(
        lambda: full_cluster([1000.0] * 4, [("arriving", 3, 1, 1)]),
        ALL_ACTIONS,
        check_reclaim_1gpu,
        target_cycle_s=None,
        about="the same, all five actions",
    ),
    "reclaim-gang-2000/250x8": Scenario(
        lambda: full_cluster(GANG_QUOTAS, [("gang", 3, 250, 8)]),
        ("reclaim",),
        check_gang_2000,
        target_cycle_s=2.0,
        about="the same full cluster, quotas 600/600/600/2,200; a 250 x 8-GPU gang arrives in team-03",
    ),
    "reclaim-gang-2000/2000x1": Scenario(
        lambda: full_cluster(GANG_QUOTAS, [("gang", 3, 2000, 1)]),
        ("reclaim",),
        check_gang_2000,
        target_cycle_s=2.0,
        about="the same, a 2,000 x 1-GPU gang",
    ),
    "reclaim-gang-2000/250x8-scattered": Scenario(
        lambda: full_cluster(GANG_QUOTAS, [("gang", 3, 250, 8)], scattered=True),
        ("reclaim",),
        check_gang_2000,
        target_cycle_s=2.0,
        about="the 250 x 8 gang, running pods scattered over the nodes (seeded shuffle) instead of in creation order",
    ),
    "consolidation-41/1x8": Scenario(
        lambda: fragmented_cluster(41, 1),
        ("consolidation",),
        check_consolidation(6),
        target_cycle_s=2.0,
        about="500 x 8, six 1-GPU pods per node at random (1,000 GPUs free, 2 per node); 41 jobs of 1 x 8 GPUs",
    ),
    "consolidation-41/2x8": Scenario(
        lambda: fragmented_cluster(41, 2),
        ("consolidation",),
        check_consolidation(16),
        target_cycle_s=2.0,
        about="the same fragmented cluster; 41 gangs of 2 x 8 GPUs",
    ),
    "full-cycle-medium": Scenario(
        lambda: generate(ALLOCATE_SCENARIOS["medium"].spec),
        ALL_ACTIONS,
        check_no_evictions,
        target_cycle_s=None,
        about="bench_allocate's medium: 1,000 x 8 GPUs, 5,000 pending 1-8 GPU jobs, nothing running; all actions",
    ),
}
GROUPS = sorted({name.split("/")[0] for name in SCENARIOS})


def select(names: list[str] | None) -> list[str]:
    """Scenario names for ``--scenario`` values: a full name, or a group name for all its variants."""
    if not names:
        return list(SCENARIOS)
    out: list[str] = []
    for n in names:
        out.extend(s for s in SCENARIOS if (s == n or s.split("/")[0] == n) and s not in out)
    return out


# ---------------------------------------------------------------------------------------------
# Measuring (worker side)
# ---------------------------------------------------------------------------------------------


def run_scenario(name: str, runs: int) -> dict[str, Any]:
    """Generate the scenario's cluster once, then time *runs* fresh snapshot builds and cycles."""
    scenario = SCENARIOS[name]
    conf = SchedulerConf(actions=scenario.actions)
    rss_start = _rss_mib()
    t = perf_counter()
    cluster = scenario.make()
    generate_s = perf_counter() - t
    out: dict[str, Any] = {
        "scenario": name,
        "about": scenario.about,
        "actions": list(scenario.actions),
        "nodes": len(cluster.nodes),
        "gpus": cluster.total_gpus,
        "pending_pods": cluster.pending_pods,
        "running_pods": cluster.running_pods,
        "generate_s": generate_s,
        "rss_after_import_mib": rss_start,
        "rss_after_generate_mib": _rss_mib(),
        "target_cycle_s": scenario.target_cycle_s,
        "runs": [],
        "aborted": "",
    }
    outcomes = []
    for _ in range(runs):
        gc.collect()
        try:
            with _deadline(MAX_RUN_S):
                t0 = perf_counter()
                snap = build_snapshot(**cluster.snapshot_args())
                t1, c1 = perf_counter(), process_time()
                result = run_cycle(snap, conf)
                t2, c2 = perf_counter(), process_time()
        except RunTooLong as e:
            out["aborted"] = str(e)
            break
        stats = result.stats
        run = {"build_s": t1 - t0, "cycle_s": t2 - t1, "cycle_cpu_s": c2 - c1}
        run["open_session_s"] = stats.get("open_session_s", float("nan"))
        actions_s = 0.0
        for a in scenario.actions:
            run[f"{a}_s"] = stats.get(f"action_{a}_s", float("nan"))
            actions_s += run[f"{a}_s"]
        run["close_session_s"] = stats.get("cycle_s", t2 - t1) - run["open_session_s"] - actions_s
        out["runs"].append(run)
        outcomes.append(outcome(result, cluster))
        del snap, result
    if outcomes:
        out["outcome"] = outcomes[-1]
        out["deterministic"] = all(o == outcomes[0] for o in outcomes)
        out["problems"] = scenario.check(outcomes[-1])
    keys = [
        "build_s",
        "cycle_s",
        "cycle_cpu_s",
        "open_session_s",
        *(f"{a}_s" for a in scenario.actions),
        "close_session_s",
    ]
    for key in keys:
        values = [r[key] for r in out["runs"]]
        out[f"median_{key}"] = statistics.median(values) if values else None
    cycles = [r["cycle_s"] for r in out["runs"]]
    out["min_cycle_s"], out["max_cycle_s"] = (min(cycles), max(cycles)) if cycles else (None, None)
    out["peak_rss_mib"] = _peak_rss_mib()
    return out


# ---------------------------------------------------------------------------------------------
# Driving (parent side)
# ---------------------------------------------------------------------------------------------


def run_in_subprocess(name: str, runs: int) -> dict[str, Any]:
    """One scenario in a fresh interpreter, so its peak RSS is its own."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--runs", str(runs)]
    budget = 600.0 + runs * MAX_RUN_S
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        return {"scenario": name, "aborted": f"worker exceeded {budget:g} s", "runs": []}
    if proc.returncode != 0:
        return {"scenario": name, "aborted": f"worker failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check_cell(r: dict[str, Any]) -> str:
    if "problems" not in r:
        return "-"
    return "FAIL" if r["problems"] else "ok"


def render_table(results: list[dict[str, Any]]) -> str:
    """A fixed-width table: decisions, medians in milliseconds, targets and verdicts."""
    head = (
        "scenario",
        "pending pods",
        "placed",
        "evicted",
        "moved",
        "check",
        "build ms",
        "open ms",
        *(f"{a[:5]} ms" for a in ACTION_COLUMNS),
        "close ms",
        "cycle ms",
        "(CPU ms)",
        "target ms",
        "",
        "peak RSS MiB",
    )
    rows = [head]
    for r in results:
        if r.get("aborted") and not r.get("runs"):
            rows.append((r["scenario"], *["-"] * (len(head) - 3), "ABORTED", "-"))
            continue
        o = r.get("outcome", {})
        cycle = r.get("median_cycle_s")
        target = r.get("target_cycle_s")
        rows.append(
            (
                r["scenario"],
                f"{r['pending_pods']:,}",
                f"{o.get('pending_pods_placed', 0):,}",
                f"{o.get('evictions', 0):,}",
                f"{o.get('moved', 0):,}",
                _check_cell(r),
                _ms(r.get("median_build_s")),
                _ms(r.get("median_open_session_s")),
                *(_ms(r.get(f"median_{a}_s")) for a in ACTION_COLUMNS),
                _ms(r.get("median_close_session_s")),
                _ms(cycle),
                _ms(r.get("median_cycle_cpu_s")),
                _ms(target) if target is not None else "-",
                _verdict(cycle, target) + (" (aborted)" if r.get("aborted") else ""),
                f"{r['peak_rss_mib']:,.0f}",
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(len(head))]
    lines = []
    for k, row in enumerate(rows):
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("-" * len(lines[0]))
    return "\n".join(lines)


def profile(name: str, tool: str, top: int) -> None:
    """Profile one snapshot build + cycle of *name* in this process (the build is excluded from cProfile)."""
    scenario = SCENARIOS[name]
    conf = SchedulerConf(actions=scenario.actions)
    cluster = scenario.make()
    snap = build_snapshot(**cluster.snapshot_args())
    if tool == "pyinstrument":
        from pyinstrument import Profiler  # optional: pip install pyinstrument into the venv

        profiler = Profiler(interval=0.001)
        profiler.start()
        result = run_cycle(snap, conf)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
    else:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        result = run_cycle(snap, conf)
        prof.disable()
        label = f"run_cycle({', '.join(scenario.actions)})"
        for key in ("cumulative", "tottime"):
            print(f"===== {name}: {label} (cProfile, sorted by {key}) =====")
            pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats(key).print_stats(top)
    o = outcome(result, cluster)
    problems = scenario.check(o)
    print(f"{name}: stats {json.dumps({k: round(v, 4) for k, v in result.stats.items()})}")
    print(f"{name}: outcome {json.dumps(o)}; check {'FAIL: ' + '; '.join(problems) if problems else 'ok'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Time kai's eviction actions on synthetic clusters.")
    ap.add_argument(
        "--scenario",
        action="append",
        choices=[*GROUPS, *(s for s in SCENARIOS if s not in GROUPS)],
        help="repeatable; a group name selects all its variants; default: all",
    )
    ap.add_argument("--runs", type=int, default=3, help="runs per scenario; the median is reported (default 3)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--save", metavar="PATH", help="also write the JSON document to PATH")
    ap.add_argument("--profile", choices=("cprofile", "pyinstrument"), help="profile one cycle in-process")
    ap.add_argument("--top", type=int, default=30, help="rows of cProfile output")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one scenario and print its JSON
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    if args.worker:
        print(json.dumps(run_scenario(args.worker, args.runs)))
        return 0
    names = select(args.scenario)
    if args.profile:
        for name in names:
            profile(name, args.profile, args.top)
        return 0

    results = run_and_report(
        names,
        args,
        run_in_subprocess,
        f"median of {args.runs} runs (fresh snapshot each run); 'check' is the expected shape of the result",
    )
    if not args.json:
        for r in results:
            o = r.get("outcome")
            if o:
                print(
                    f"\n{r['scenario']}: {o['jobs_placed']:,}/{o['pending_jobs']:,} arriving jobs placed "
                    f"({o['pending_pods_pipelined']:,} pods pipelined), {o['binds']:,} binds, "
                    f"{o['evictions']:,} evictions {o['evictions_by_action']} of which {o['moved']:,} moved"
                )
            if r.get("problems"):
                print(f"{r['scenario']}: FAIL: {'; '.join(r['problems'])}")
            if r.get("aborted"):
                print(f"{r['scenario']}: aborted: {r['aborted']}")
            if r.get("deterministic") is False:
                print(f"{r['scenario']}: WARNING: runs disagreed on the outcome")
    failed = any(r.get("aborted") or r.get("problems") for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
