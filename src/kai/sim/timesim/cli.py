"""``kai sim``'s time-mode flags and their handling, kept here so cli.py only wires them in.

Time mode is on when a Simulation document is among the files or any of --until, --report, --metrics,
--csv, --period, --seed is given. --cycles and --at belong to the static mode and are refused in time mode.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape

from kai.api.errors import ManifestError
from kai.api.manifests import ManifestObject
from kai.api.objects import parse_time
from kai.scheduler.conf import ConfigError
from kai.sim.output import render_json, render_yaml
from kai.sim.timesim._command import OutputError, render_summary, run_timed, timed_document
from kai.sim.timesim._config import SimulationSpec
from kai.sim.timesim._random import seconds
from kai.sim.timesim._run import DEFAULT_START
from kai.sim.timesim._setup import Overrides

EXIT_BAD_INPUT = 2
_FLAGS = ("until", "period", "seed", "report", "metrics", "csv_dir")


def time_options(f: Callable[..., Any]) -> Callable[..., Any]:
    """The time-mode options of ``kai sim``."""
    options = [
        click.option("--until", default=None, help="Time mode: simulated time to run, e.g. 24h or 7d (as 168h)."),
        click.option("--period", default=None, help="Time mode: schedule period (default 1s, KAI's)."),
        click.option("--seed", default=None, type=click.IntRange(min=0), help="Time mode: seed of the generators."),
        click.option("--report", default=None, metavar="FILE.html", help="Time mode: write an HTML report."),
        click.option("--metrics", default=None, metavar="FILE.json", help="Time mode: write the metrics as JSON."),
        click.option("--csv", "csv_dir", default=None, metavar="DIR", help="Time mode: write CSV tables into DIR."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def time_mode(simulation: SimulationSpec | None, timed: dict[str, Any]) -> bool:
    return simulation is not None or any(timed.get(k) is not None for k in _FLAGS)


def _flag_seconds(value: str | None, flag: str) -> float | None:
    if value is None:
        return None
    return seconds(value, flag, lambda field, message: ManifestError(message, field=field), positive=True)


def run_time_mode(
    ctx: click.Context,
    objects: list[tuple[str, ManifestObject]],
    simulation: SimulationSpec | None,
    timed: dict[str, Any],
    actions: tuple[str, ...],
    now_text: str | None,
    fmt: str,
    err: Console,
) -> int:
    """Run, print the -o output on stdout, write files; returns the exit code."""
    try:
        if ctx.get_parameter_source("cycles") == ParameterSource.COMMANDLINE:
            raise ManifestError("counts the cycles of a static run; a time-based run goes by --until", field="--cycles")
        if ctx.params.get("at"):
            raise ManifestError(
                "applies files before cycles of a static run; in time mode use kai.sim/arrival", field="--at"
            )
        start = parse_time(now_text, "--now") if now_text else DEFAULT_START
        over = Overrides(
            until=_flag_seconds(timed.get("until"), "--until"),
            period=_flag_seconds(timed.get("period"), "--period"),
            seed=timed.get("seed"),
        )
        outcome = run_timed(
            objects,
            simulation,
            over,
            actions=actions or None,
            start=start,  # type: ignore[arg-type]
            report=timed.get("report"),
            metrics=timed.get("metrics"),
            csv_dir=timed.get("csv_dir"),
            err=err,
        )
    except (ManifestError, ConfigError, OutputError) as e:
        err.print("[red]error:[/] " + escape(str(e)), highlight=False, soft_wrap=True)
        return EXIT_BAD_INPUT
    if fmt == "json":
        click.echo(render_json(timed_document(outcome)))
    elif fmt == "yaml":
        click.echo(render_yaml(timed_document(outcome)))
    else:
        render_summary(outcome, Console(width=max(Console().width, 120)))
    return 0
