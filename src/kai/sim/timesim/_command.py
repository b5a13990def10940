"""``kai sim`` in time mode: run, print, write the report and metrics files.

Rules: stdout carries only the chosen output (-o); the progress bar and notes about written files go
to stderr. The files are written after the run; a path that cannot be written is an error (exit 2)
reported before the run starts, so a long run is never lost to a typo.
"""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console
from rich.table import Table

from kai.api.manifests import ManifestObject
from kai.sim.output import build_document
from kai.sim.timesim._config import SimulationSpec
from kai.sim.timesim._export import metrics_json, write_csv
from kai.sim.timesim._progress import SimProgress
from kai.sim.timesim._report import render_report
from kai.sim.timesim._run import Outcome, simulate
from kai.sim.timesim._setup import Overrides, plan
from kai.sim.timesim._svg import fmt_time


class OutputError(ValueError):
    """A --report/--metrics/--csv path that cannot be written."""


def check_paths(report: str | None, metrics: str | None, csv_dir: str | None) -> None:
    for flag, path in (("--report", report), ("--metrics", metrics)):
        if path is None:
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise OutputError(f"{flag} {path}: folder {folder} does not exist")
        if os.path.isdir(path):
            raise OutputError(f"{flag} {path}: is a folder; give a file name")
    if csv_dir is not None and os.path.exists(csv_dir) and not os.path.isdir(csv_dir):
        raise OutputError(f"--csv {csv_dir}: exists and is not a folder")


def run_timed(
    objects: list[tuple[str, ManifestObject]],
    spec: SimulationSpec | None,
    over: Overrides,
    *,
    actions: tuple[str, ...] | None,
    start: float,
    report: str | None,
    metrics: str | None,
    csv_dir: str | None,
    err: Console,
) -> Outcome:
    """Run with a progress bar on *err* and write the files asked for; ManifestError, ConfigError or
    OutputError for bad input (nothing is run then)."""
    check_paths(report, metrics, csv_dir)
    horizon = plan(objects, spec, over).params.until  # checks the input before anything runs
    with SimProgress(horizon, console=err) as progress:
        outcome = simulate(objects, spec, over, actions=actions, start=start, progress=progress)
    if metrics is not None:
        with open(metrics, "w", encoding="utf-8") as fh:
            fh.write(metrics_json(outcome.metrics))
        err.print(f"metrics: {metrics}", highlight=False, soft_wrap=True)
    if csv_dir is not None:
        paths = write_csv(outcome.metrics, csv_dir)
        err.print(f"csv: {', '.join(paths)}", highlight=False, soft_wrap=True)
    if report is not None:
        with open(report, "w", encoding="utf-8") as fh:
            fh.write(render_report(outcome.metrics))
        err.print(f"report: {report}", highlight=False, soft_wrap=True)
    return outcome


def timed_document(outcome: Outcome) -> dict[str, Any]:
    """``-o json|yaml`` in time mode: the sim contract's document after the last cycle (its events are the
    last cycle's), plus ``time`` (seconds simulated) and ``summary`` (the metrics summary)."""
    run = outcome.run
    doc = build_document(outcome.cluster, run.last, [(outcome.cluster.cycle, e) for e in run.events])
    doc["time"] = run.end
    doc["summary"] = outcome.metrics["summary"]
    return doc


def render_summary(outcome: Outcome, console: Console) -> None:
    """The table output in time mode: overview, queues, evictions, what cannot run."""
    m = outcome.metrics
    sim, s = m["simulation"], m["summary"]
    j, w, c = s["jobs"], s["waitSeconds"], s["completionSeconds"]

    def t(x: float | None) -> str:
        return "-" if x is None else fmt_time(x)

    console.print(
        f"[bold]{sim['name']}[/]: simulated {fmt_time(sim['end'])} in {sim['cycles']} cycles "
        f"(schedule period {sim['schedulePeriod']:g}s, seed {sim['seed']})",
        highlight=False,
    )
    overview = Table(title="Summary", title_justify="left", show_header=False)
    overview.add_column()
    overview.add_column()
    for k, v in (
        ("GPUs (at the end)", f"{s['gpuCapacity']:g}"),
        ("allocation / utilization", f"{100 * s['allocation']:.1f}% / {100 * s['utilization']:.1f}%"),
        ("jobs submitted / started / completed", f"{j['submitted']} / {j['started']} / {j['completed']}"),
        ("wait p50 / p90 / p99", f"{t(w['p50'])} / {t(w['p90'])} / {t(w['p99'])}"),
        ("completion time p50 / p90 / p99", f"{t(c['p50'])} / {t(c['p90'])} / {t(c['p99'])}"),
        ("pods evicted", ", ".join(f"{a} {n}" for a, n in s["evictions"]["byAction"].items()) or "0"),
        ("GPU-hours lost to evictions and failures", f"{s['lostGpuHours']:g}"),
        (
            "fragmentation mean / max",
            f"{100 * s['fragmentation']['mean']:.1f}% / {100 * s['fragmentation']['max']:.1f}%",
        ),
    ):
        overview.add_row(k, v)
    console.print(overview)
    queues = Table(title="Queues (GPUs)", title_justify="left")
    for col in ("QUEUE", "QUOTA", "MEAN ALLOCATED", "MEAN FAIR SHARE", "JOBS DONE", "WAIT P50", "WAIT P90", "EVICTED"):
        queues.add_column(col)
    for q in m["queues"]:
        if not q["leaf"]:
            continue
        queues.add_row(
            q["name"],
            f"{q['quotaGpu']:g}",
            f"{q['meanAllocatedGpu']:.2f}",
            f"{q['meanFairShareGpu']:.2f}",
            f"{q['jobs']['completed']}/{q['jobs']['submitted']}",
            t(q["waitSeconds"]["p50"]),
            t(q["waitSeconds"]["p90"]),
            str(q["evictions"]),
        )
    console.print(queues)
    for x in s["cannotRun"]:
        console.print(f"[yellow]cannot run:[/] {x['podGroup']} ({x['queue']}): {x['reason']}", highlight=False)
    if sim["stalled"]:
        console.print(
            f"[yellow]stalled:[/] nothing could change any more while {len(s['stuck'])} job(s) waited: "
            + ", ".join(s["stuck"][:10]),
            highlight=False,
        )
