"""``kai sim``: the real scheduling cycle on an embedded cluster, statically or over simulated time.

Kept out of cli.py so that ``kai scheduler`` (a process whose start-up is on the clock of every
fail-over) does not import the embedded cluster, the time simulator and rich's renderers.
"""

from __future__ import annotations

import datetime as _dt
import sys

import click
from rich.console import Console
from rich.markup import escape

from kai.api.errors import ManifestError
from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.scheduler.conf import KNOWN_ACTIONS, ConfigError
from kai.sim.cluster import EmbeddedCluster, shard_conf
from kai.sim.output import build_document, render_json, render_table, render_yaml
from kai.sim.timeline import AT_FORM, Loaded, check_arrivals, parse_steps, play, record_document
from kai.sim.timeline_view import render_timeline
from kai.sim.timesim import load_input
from kai.sim.timesim.cli import run_time_mode, time_mode, time_options

EXIT_BAD_INPUT = 2


def read_texts(files: tuple[str, ...]) -> list[tuple[str, str]]:
    texts = []
    for f in files:
        if f == "-":
            texts.append(("<stdin>", sys.stdin.read()))
            continue
        try:
            with open(f, encoding="utf-8") as fh:
                texts.append((f, fh.read()))
        except OSError as e:
            raise ManifestError(f"cannot read: {e.strerror}", source=f) from None
    return texts


def load_arrivals(at: tuple[str, ...], cycles: int) -> dict[int, Loaded]:
    """``--at N:FILE[,FILE...]`` values -> the objects arriving before each cycle (ManifestError if bad)."""
    steps = parse_steps(at, cycles)
    arrivals = {s.cycle: load_manifests(read_texts(s.files))[0] for s in steps}
    for s in steps:
        check_arrivals(s, arrivals[s.cycle])
    return arrivals


@click.command(
    epilog=(
        "Actions run in the order given: allocate places pending pods; consolidation moves running pods "
        "to make room (nobody is killed); reclaim takes resources back for queues below their fair share; "
        "preempt lets higher-priority jobs evict lower-priority ones in the same queue; stalegangeviction "
        "evicts gangs that stayed below their minimum past the grace period."
    )
)
@click.argument("files", nargs=-1, required=True)
@click.option("--cycles", default=1, show_default=True, type=click.IntRange(min=1), help="Scheduling cycles to run.")
@click.option(
    "--actions",
    default=",".join(KNOWN_ACTIONS),
    show_default=True,
    help="Comma-separated actions, in order.",
)
@click.option("--now", "now_text", default=None, help="The clock (RFC3339) for ages, min-runtime and staleness.")
@click.option(
    "--at",
    "at",
    multiple=True,
    metavar=AT_FORM,
    help="Apply FILEs just before cycle N (repeatable); prints every cycle. FILES are applied before cycle 1.",
)
@click.option(
    "--shard",
    default=None,
    help="Run SchedulingShard NAME's scheduler alone: its settings, and only the nodes, queues and PodGroups "
    "of its partitionLabelValue. [default: the whole cluster, with the settings of shard default]",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["table", "json", "yaml"]), default="table", show_default=True)
@time_options
@click.pass_context
def sim(
    ctx: click.Context,
    files: tuple[str, ...],
    cycles: int,
    actions: str,
    now_text: str | None,
    at: tuple[str, ...],
    shard: str | None,
    fmt: str,
    **timed: str,
) -> None:
    """Run the real scheduling cycle on an embedded cluster built from manifests (FILES, or - for stdin).

    With --until, --report, --metrics or --csv, or a Simulation document among FILES, time passes instead:
    jobs arrive, run and finish over simulated time (docs/simulation.md)."""
    err = Console(stderr=True)
    try:
        chosen = tuple(a.strip() for a in actions.split(",") if a.strip())
        objects, _ignored, simulation = load_input(read_texts(files))
        if time_mode(simulation, timed):
            if shard is not None:  # not accepted and ignored: a time simulation schedules the whole cluster
                raise ManifestError("--shard: a time simulation schedules the whole cluster; run cycles instead")
            sys.exit(run_time_mode(ctx, objects, simulation, timed, chosen, now_text, fmt, err))
        now = parse_time(now_text, "--now") if now_text else _dt.datetime.now(_dt.UTC).timestamp()
        arrivals = load_arrivals(at, cycles)
        cluster = EmbeddedCluster(now=now, strict_input=True)  # type: ignore[arg-type]
        cluster.apply(objects)
        cluster.shard_name = shard
        cluster.partition()  # a --shard naming no shard is an error before the first cycle
        conf = shard_conf(cluster, chosen if actions else None)
        run = play(cluster, conf, cycles, arrivals, first=files)
    except (ManifestError, ConfigError) as e:
        err.print("[red]error:[/] " + escape(str(e)), highlight=False, soft_wrap=True)
        sys.exit(EXIT_BAD_INPUT)
    doc = build_document(cluster, run.last, run.events)
    if at:  # a timeline: every cycle's record (kai's addition to the sim contract)
        doc["timeline"] = [record_document(r) for r in run.records]
    if fmt == "json":
        click.echo(render_json(doc))
    elif fmt == "yaml":
        click.echo(render_yaml(doc))
    elif at:
        click.echo(render_timeline(run.records))
    else:
        render_table(doc, Console(width=max(Console().width, 120)))
