"""Benchmark of one scheduling cycle running only the allocate action, on synthetic clusters.

Run with ``make bench`` (or ``.venv/bin/python benchmarks/bench_allocate.py``). Flags:
``--scenario NAME`` (repeatable; default all), ``--runs N`` (default 3), ``--json``,
``--save PATH`` (also write the JSON), ``--profile cprofile|pyinstrument`` (profile one
cycle in this process instead; pyinstrument is optional, ``pip install pyinstrument``),
``--gpu-policy NAME`` (a ``placementStrategy.gpu`` policy such as ``fragmentation``: the Placer asks
it for every task that fits now; ``ms/placement`` in the JSON is the allocate action's time per
placement).

Why each scenario runs in its own subprocess: peak memory (``ru_maxrss``) is a
high-water mark for a whole process, so a fresh process per scenario is the only way
to get the peak of *that* scenario rather than of the largest one run before it.

What a run measures, on a fresh Snapshot each time (built from the same generated
objects, which neither the snapshot nor the cycle changes):
* ``build``: ``build_snapshot`` (typed objects -> arrays), timed on its own;
* ``cycle``: the wall time of ``run_cycle(snap, SchedulerConf(actions=("allocate",)))``,
  i.e. open session (fair share) + allocate + close session (decisions). The target
  applies to this number; ``allocate`` (the action alone, from ``result.stats``) is
  reported beside it, and so is the cycle's CPU time, which other load on a shared
  machine skews less than wall time.
Figures are medians over the runs. A run longer than ``MAX_RUN_S`` is interrupted and
the scenario is reported as aborted rather than left to run for an hour.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import resource
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter, process_time
from typing import Any

import numpy as np

from kai.api import constants as C
from kai.api.objects import GPU_POLICIES
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.decisions import CycleResult
from kai.scheduler.snapshot import build_snapshot
from synth import ClusterSpec, fixed, generate, uniform

MAX_RUN_S = 120.0  # one run (build + cycle) longer than this stops the scenario
CONF = SchedulerConf(actions=("allocate",))


def conf_for(gpu_policy: str = "") -> SchedulerConf:
    """The allocate-only configuration, with *gpu_policy* as ``placementStrategy.gpu`` if given."""
    return CONF.with_plugin("gpupolicy", policy=gpu_policy) if gpu_policy else CONF


@dataclass(frozen=True, slots=True)
class Scenario:
    """A cluster to generate and the budget one allocate cycle on it must meet."""

    spec: ClusterSpec
    target_cycle_s: float
    target_peak_rss_mib: float | None = None
    about: str = ""


SCENARIOS: dict[str, Scenario] = {
    "small": Scenario(
        ClusterSpec(nodes=100, queues=4, jobs=500, gang_size=fixed(1), gpus_per_pod=uniform(1, 8), seed=1),
        target_cycle_s=0.050,
        about="100 nodes x 8 GPUs, 500 single-pod jobs of 1-8 GPUs",
    ),
    "medium": Scenario(
        ClusterSpec(nodes=1_000, queues=8, jobs=5_000, gang_size=fixed(1), gpus_per_pod=uniform(1, 8), seed=2),
        target_cycle_s=0.300,
        about="1,000 nodes x 8 GPUs, 5,000 single-pod jobs of 1-8 GPUs",
    ),
    # 10,000 gangs x 5 pods x 1 GPU = 50,000 GPUs asked of 40,000: 8,000 gangs fit, 2,000 fail.
    "large": Scenario(
        ClusterSpec(nodes=5_000, queues=16, jobs=10_000, gang_size=fixed(5), gpus_per_pod=fixed(1), seed=3),
        target_cycle_s=2.0,
        target_peak_rss_mib=1024.0,
        about="5,000 nodes x 8 GPUs, 10,000 gangs x 5 pods x 1 GPU (50,000 pods)",
    ),
}


# ---------------------------------------------------------------------------------------------
# Measuring (worker side)
# ---------------------------------------------------------------------------------------------


class RunTooLong(Exception):
    """Raised by the SIGALRM handler when one run passes MAX_RUN_S."""


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """Interrupt the block after *seconds* (SIGALRM fires between bytecodes, so pure-Python loops stop)."""

    def on_alarm(signum: int, frame: Any) -> None:
        raise RunTooLong(f"one run took more than {seconds:g} s")

    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def _rss_mib() -> float:
    """Current resident set size (VmRSS), to separate the generated objects from the cycle's own peak."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _peak_rss_mib() -> float:
    """Peak RSS of this process; ru_maxrss is KiB on Linux and bytes on macOS."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def _outcome(result: CycleResult, gpus_of: dict[tuple[str, str], int]) -> dict[str, int]:
    """What the cycle decided, in counts: the same on every run, or the engine is not deterministic."""
    placed = [*result.binds, *result.pipelines]
    return {
        "binds": len(result.binds),
        "pipelines": len(result.pipelines),
        "placements": len(placed),
        "gpus_placed": sum(gpus_of[(d.pod.namespace, d.pod.name)] for d in placed),
        "unschedulable_jobs": sum(1 for pg in result.podgroups if pg.conditions),
    }


def run_scenario(name: str, runs: int, gpu_policy: str = "") -> dict[str, Any]:
    """Generate the scenario's cluster once, then time *runs* fresh snapshot builds and cycles."""
    scenario = SCENARIOS[name]
    conf = conf_for(gpu_policy)
    rss_start = _rss_mib()
    t = perf_counter()
    cluster = generate(scenario.spec)
    generate_s = perf_counter() - t
    rss_generated = _rss_mib()
    gpus_of = {(p.meta.namespace or "", p.meta.name): p.requests.get(C.RESOURCE_GPU, 0) for p in cluster.pods}
    running_gpus = sum(p.requests.get(C.RESOURCE_GPU, 0) for p in cluster.pods if p.node_name)
    out: dict[str, Any] = {
        "scenario": name,
        "about": scenario.about,
        "gpu_policy": gpu_policy or "binpack",
        "nodes": len(cluster.nodes),
        "gpus": cluster.total_gpus,
        "pending_jobs": scenario.spec.jobs,
        "pending_pods": cluster.pending_pods,
        "running_pods": cluster.running_pods,
        "running_gpus": running_gpus,
        "generate_s": generate_s,
        "rss_after_import_mib": rss_start,
        "rss_after_generate_mib": rss_generated,
        "target_cycle_s": scenario.target_cycle_s,
        "target_peak_rss_mib": scenario.target_peak_rss_mib,
        "runs": [],
        "aborted": "",
    }
    outcomes = []
    for _ in range(runs):
        gc.collect()  # start every run from the same heap; collections during the run still count
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
        open_s = stats.get("open_session_s", float("nan"))
        alloc_s = stats.get("action_allocate_s", float("nan"))
        out["runs"].append(
            {
                "build_s": t1 - t0,
                "cycle_s": t2 - t1,
                "cycle_cpu_s": c2 - c1,
                "open_session_s": open_s,
                "allocate_s": alloc_s,
                "close_session_s": stats.get("cycle_s", t2 - t1) - open_s - alloc_s,
            }
        )
        outcomes.append(_outcome(result, gpus_of))
        del snap, result
    if outcomes:
        out.update(outcomes[-1])
        out["deterministic"] = all(o == outcomes[0] for o in outcomes)
    for key in ("build_s", "cycle_s", "cycle_cpu_s", "open_session_s", "allocate_s", "close_session_s"):
        values = [r[key] for r in out["runs"]]
        out[f"median_{key}"] = statistics.median(values) if values else None
    if out.get("placements") and out.get("median_allocate_s") is not None:
        out["ms/placement"] = 1000.0 * out["median_allocate_s"] / out["placements"]
    out["peak_rss_mib"] = _peak_rss_mib()
    return out


# ---------------------------------------------------------------------------------------------
# Driving (parent side)
# ---------------------------------------------------------------------------------------------


def source_state() -> str:
    """The commit measured and whether src/ had uncommitted edits: figures belong to a version of the code."""
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}{' + uncommitted changes in src/' if dirty else ''}"


def machine_info() -> dict[str, Any]:
    """What the figures depend on, for RESULTS.md and the JSON output."""
    cpu = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            cpu = next((ln.split(":", 1)[1].strip() for ln in fh if ln.startswith("model name")), "")
    except OSError:
        pass
    ram_gib = float("nan")
    with suppress(ValueError, OSError):
        ram_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    load = os.getloadavg() if hasattr(os, "getloadavg") else (float("nan"),) * 3
    return {
        "nproc": os.cpu_count(),
        "load_avg_1_5_15": [round(x, 2) for x in load],  # other work on the machine skews wall-clock figures
        "source": source_state(),
        "cpu": cpu or platform.processor(),
        "ram_gib": round(ram_gib, 1),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "platform": platform.platform(),
    }


def run_in_subprocess(name: str, runs: int, gpu_policy: str = "") -> dict[str, Any]:
    """One scenario in a fresh interpreter, so its peak RSS is its own."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", name, "--runs", str(runs)]
    if gpu_policy:
        cmd += ["--gpu-policy", gpu_policy]
    # The worker interrupts a slow run itself; this outer limit only catches a hung generator.
    budget = 600.0 + runs * MAX_RUN_S
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=budget, check=False)
    except subprocess.TimeoutExpired:
        return {"scenario": name, "aborted": f"worker exceeded {budget:g} s", "runs": []}
    if proc.returncode != 0:
        return {"scenario": name, "aborted": f"worker failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _ms(s: float | None) -> str:
    return "-" if s is None else f"{s * 1000:,.1f}"


def _verdict(value: float | None, target: float | None) -> str:
    if target is None:
        return ""
    if value is None:
        return "n/a"
    return "ok" if value <= target else "OVER"


def render_table(results: list[dict[str, Any]]) -> str:
    """A fixed-width table: medians in milliseconds, targets and verdicts beside them."""
    head = (
        "scenario",
        "pods",
        "placed",
        "GPU fill",
        "unsched",
        "build ms",
        "open ms",
        "allocate ms",
        "close ms",
        "cycle ms",
        "(CPU ms)",
        "target ms",
        "",
        "peak RSS MiB",
        "target",
        "",
    )
    rows = [head]
    for r in results:
        if r.get("aborted") and not r.get("runs"):
            rows.append((r["scenario"], *["-"] * 14, "ABORTED"))
            continue
        cycle = r.get("median_cycle_s")
        rss_target = r.get("target_peak_rss_mib")
        rows.append(
            (
                r["scenario"],
                f"{r['pending_pods']:,}",
                f"{r.get('placements', 0):,}",
                f"{(r['running_gpus'] + r.get('gpus_placed', 0)) / max(r['gpus'], 1):.0%}",
                f"{r.get('unschedulable_jobs', 0):,}",
                _ms(r.get("median_build_s")),
                _ms(r.get("median_open_session_s")),
                _ms(r.get("median_allocate_s")),
                _ms(r.get("median_close_session_s")),
                _ms(cycle),
                _ms(r.get("median_cycle_cpu_s")),
                _ms(r["target_cycle_s"]),
                _verdict(cycle, r["target_cycle_s"]) + (" (aborted)" if r.get("aborted") else ""),
                f"{r['peak_rss_mib']:,.0f}",
                "-" if rss_target is None else f"{rss_target:,.0f}",
                _verdict(r["peak_rss_mib"], rss_target),
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
    """Profile one snapshot build and one allocate cycle of *name* in this process."""
    cluster = generate(SCENARIOS[name].spec)
    if tool == "pyinstrument":
        from pyinstrument import Profiler  # optional: pip install pyinstrument into the venv

        profiler = Profiler(interval=0.001)
        profiler.start()
        snap = build_snapshot(**cluster.snapshot_args())
        run_cycle(snap, CONF)
        profiler.stop()
        print(profiler.output_text(unicode=False, color=False, show_all=False))
        return
    import cProfile
    import pstats

    for label, fn in (
        ("build_snapshot", lambda: build_snapshot(**cluster.snapshot_args())),
        ("run_cycle(allocate)", lambda: run_cycle(build_snapshot(**cluster.snapshot_args()), CONF)),
    ):
        prof = cProfile.Profile()
        prof.enable()
        fn()
        prof.disable()
        print(f"===== {name}: {label} (cProfile, sorted by cumtime) =====")
        pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats("cumulative").print_stats(top)
        print(f"===== {name}: {label} (cProfile, sorted by tottime) =====")
        pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats("tottime").print_stats(top)


def run_and_report(
    names: list[str], args: argparse.Namespace, run_one: Callable[[str, int], dict], title: str
) -> list[dict]:
    """Run each scenario in a fresh subprocess (*run_one*), then print (or --save) the JSON document, or
    the machine, the *title* and the table. Shared by every bench_*.py that times whole scenarios."""
    scenarios = sys.modules[run_one.__module__].SCENARIOS
    results = []
    for name in names:
        if not args.json:
            print(f"running {name}: {scenarios[name].about} ({args.runs} runs)...", file=sys.stderr, flush=True)
        results.append(run_one(name, args.runs))
    m = machine_info()
    doc = json.dumps({"machine": m, "runs": args.runs, "scenarios": results}, indent=2)
    if args.save:
        Path(args.save).write_text(doc + "\n", encoding="utf-8")
    if args.json:
        print(doc)
    else:
        print(f"machine: {m['nproc']} CPUs, {m['cpu']}, {m['ram_gib']} GiB; Python {m['python']}, NumPy {m['numpy']}")
        print(f"source: {m['source']}; load average {m['load_avg_1_5_15']}")
        print(title + "\n")
        print(sys.modules[run_one.__module__].render_table(results))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Time kai's allocate cycle on synthetic clusters.")
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="repeatable; default: all")
    ap.add_argument("--runs", type=int, default=3, help="runs per scenario; the median is reported (default 3)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of a table")
    ap.add_argument("--save", metavar="PATH", help="also write the JSON document to PATH")
    ap.add_argument("--profile", choices=("cprofile", "pyinstrument"), help="profile one cycle in-process")
    ap.add_argument("--top", type=int, default=30, help="rows of cProfile output")
    ap.add_argument("--gpu-policy", default="", choices=("", *GPU_POLICIES), help="placementStrategy.gpu policy")
    ap.add_argument("--worker", help=argparse.SUPPRESS)  # internal: run one scenario and print its JSON
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error("--runs must be at least 1")

    if args.worker:
        print(json.dumps(run_scenario(args.worker, args.runs, args.gpu_policy)))
        return 0
    names = args.scenario or list(SCENARIOS)
    if args.profile:
        for name in names:
            profile(name, args.profile, args.top)
        return 0

    policy = args.gpu_policy

    def run_one(name: str, runs: int) -> dict[str, Any]:
        return run_in_subprocess(name, runs, policy)

    title = f"allocate-only cycle, median of {args.runs} runs (fresh snapshot each run)"
    if policy:
        title += f", placementStrategy.gpu: {policy}"
    results = run_and_report(names, args, run_one, title)
    if not args.json:
        for r in results:
            if r.get("aborted"):
                print(f"\n{r['scenario']}: aborted: {r['aborted']}")
            if r.get("deterministic") is False:
                print(f"\n{r['scenario']}: WARNING: runs disagreed on the outcome")
    failed = any(r.get("aborted") for r in results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
