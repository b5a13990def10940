"""Benchmark of the time-based simulator: 200 nodes x 8 GPUs, 5,000 jobs over a simulated week.

Run with ``.venv/bin/python benchmarks/bench_timesim.py`` (flags: ``--jobs N``, ``--days D``,
``--period S``, ``--idle-recheck S``, ``--json``, ``--profile`` to print the top of a cProfile).

The workload is a Simulation document made here: four teams (quota 400 GPUs each, one department),
jobs from four seeded generators (Poisson arrivals spread over the week, gangs of 1-4 pods of
1/2/4/8 GPUs, log-normal durations with a 2 h median (``--median 8h`` saturates the cluster: queues
form, reclaim runs), checkpoints every 30 min). It runs through the
real ``simulate`` (embedded cluster, all five actions) exactly as ``kai sim`` would.

Cycles are the cost: the loop runs one only when an event happened (arrival, completion, node change)
or when work is pending at a period boundary (backing off while nothing changes). The figure to watch
is cycles run against the period boundaries a naive loop would visit (a week / period).

Each run also checks its shape: the jobs submitted, most started, the run reached the horizon. A
failed check prints FAIL and exits non-zero, as the other benchmarks do.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import platform
import pstats
import sys
import time

import yaml

from kai.sim.timesim import Overrides, load_input, simulate

TEAMS = ("team-a", "team-b", "team-c", "team-d")


def workload(jobs: int, days: float, period: float, idle_recheck: float, median: str = "2h") -> str:
    week = days * 86400
    per_team = jobs // len(TEAMS)
    docs: list[dict] = [
        {
            "apiVersion": "scheduling.run.ai/v2",
            "kind": "Queue",
            "metadata": {"name": "research"},
            "spec": {
                "resources": {
                    "gpu": {"quota": 1600, "limit": -1, "overQuotaWeight": 1},
                    "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                    "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                }
            },
        }
    ]
    for t in TEAMS:
        docs.append(
            {
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": t},
                "spec": {
                    "parentQueue": "research",
                    "resources": {
                        "gpu": {"quota": 400, "limit": -1, "overQuotaWeight": 1},
                        "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                        "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
                    },
                },
            }
        )
    docs.append(
        {
            "apiVersion": "kai.sim/v1alpha1",
            "kind": "Simulation",
            "metadata": {"name": "bench-week"},
            "spec": {
                "seed": 1,
                "duration": f"{week:g}s",
                "schedulePeriod": f"{period:g}s",
                "idleRecheck": f"{idle_recheck:g}s",
                "checkpointInterval": "30m",
                "nodePools": [{"name": "node", "count": 200, "gpus": 8, "cpu": "128", "memory": "1Ti"}],
                "generators": [
                    {
                        "name": f"{t}-jobs",
                        "queue": t,
                        "namespace": t,
                        "jobs": per_team,
                        "interArrival": {"exponential": {"mean": f"{week * 0.95 / per_team:.0f}s"}},
                        "pods": {"choices": [1, 2, 4], "weights": [6, 3, 1]},
                        "gpusPerPod": {"choices": [1, 2, 4, 8], "weights": [4, 3, 2, 1]},
                        "duration": {"lognormal": {"median": median, "sigma": 1.0}, "min": "5m", "max": "48h"},
                    }
                    for t in TEAMS
                ],
            },
        }
    )
    return yaml.safe_dump_all(docs, sort_keys=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=5000)
    ap.add_argument("--days", type=float, default=7.0)
    ap.add_argument("--period", type=float, default=10.0)
    ap.add_argument("--idle-recheck", type=float, default=300.0)
    ap.add_argument("--median", default="2h", help="median job duration (8h: a saturated cluster, queues form)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    objects, _, spec = load_input(
        [("bench", workload(args.jobs, args.days, args.period, args.idle_recheck, args.median))]
    )
    prof = cProfile.Profile() if args.profile else None
    t0, c0 = time.perf_counter(), time.process_time()
    if prof:
        prof.enable()
    out = simulate(objects, spec, Overrides())
    if prof:
        prof.disable()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = out.metrics
    s, sim = m["summary"], m["simulation"]
    boundaries = int(sim["horizon"] / sim["schedulePeriod"]) + 1
    figures = {
        "machine": f"{platform.machine()} {platform.python_implementation()} {platform.python_version()}",
        "nodes": 200,
        "gpus": 1600,
        "jobs_submitted": s["jobs"]["submitted"],
        "jobs_completed": s["jobs"]["completed"],
        "simulated_days": args.days,
        "period_s": args.period,
        "cycles": sim["cycles"],
        "period_boundaries": boundaries,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "ms_per_cycle": round(1000 * wall / max(sim["cycles"], 1), 1),
        "allocation": s["allocation"],
        "utilization": s["utilization"],
        "wait_p50_s": s["waitSeconds"]["p50"],
        "wait_p99_s": s["waitSeconds"]["p99"],
        "evicted_pods": s["evictions"]["pods"],
    }
    checks = {
        "jobs submitted (>= 95%: Poisson arrivals may pass the horizon)": s["jobs"]["submitted"] >= 0.95 * args.jobs,
        "most jobs started (>= 90%)": s["jobs"]["started"] >= 0.9 * s["jobs"]["submitted"],
        "reached the horizon": sim["end"] == sim["horizon"],
        "fewer cycles than period boundaries": sim["cycles"] < boundaries,
    }
    if args.json:
        print(json.dumps({"figures": figures, "checks": checks}, indent=1))
    else:
        for k, v in figures.items():
            print(f"{k:>22}: {v}")
        for k, ok in checks.items():
            print(f"{'ok' if ok else 'FAIL':>22}: {k}")
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
