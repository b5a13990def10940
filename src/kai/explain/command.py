"""``kai explain`` and ``kai snapshot``: the edge where the cluster is read (files as ``kai sim`` reads
them, or a live API server, read-only) and the answer printed. The logic is in ``kai.explain``.
"""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

import click

from kai.api.errors import ManifestError
from kai.cli import EXIT_BAD_INPUT
from kai.cli import _fail as fail
from kai.cli import _kubeconfig_option as kubeconfig_option

EXIT_UNREACHABLE = 1


def state_from_files(files: tuple[str, ...], at: tuple[str, ...], cycle: int | None, now_text: str | None) -> Any:
    """The cluster as ``kai sim FILES --at ...`` has it just before cycle *cycle* (default: the last
    ``--at`` cycle, else 1): earlier cycles are played, that cycle's files applied, nothing scheduled."""
    from kai.api.objects import parse_time
    from kai.explain import ClusterState
    from kai.sim.cluster import ARRIVAL_SPACING_S, SCHEDULE_PERIOD_S, EmbeddedCluster, shard_conf
    from kai.sim.command import load_arrivals, read_texts
    from kai.sim.timeline import play
    from kai.sim.timesim import load_input

    objects, _ignored, simulation = load_input(read_texts(files))
    if simulation is not None:  # nothing accepted and ignored: time mode is kai sim's, not explain's
        raise ManifestError(
            "kai explain reads the cluster at one moment (use --at and --cycle); run time-based simulations "
            "with kai sim",
            source=simulation.source,
            obj=simulation.ref,
        )
    now = parse_time(now_text, "--now") if now_text else _dt.datetime.now(_dt.UTC).timestamp()
    last_at = max((int(a.partition(":")[0]) for a in at if a.partition(":")[0].strip().isdigit()), default=1)
    target = cycle or last_at
    arrivals = load_arrivals(at, target)
    cluster = EmbeddedCluster(now=now, strict_input=True)  # type: ignore[arg-type]
    cluster.apply(objects)
    conf = shard_conf(cluster, None)
    play(cluster, conf, target - 1, arrivals)
    if target > 1:
        cluster.advance(cluster.now + SCHEDULE_PERIOD_S)
    if arrivals.get(target):
        cluster.apply(arrivals[target], spacing=ARRIVAL_SPACING_S)
    return ClusterState.from_store(cluster.store, now=cluster.now)


def state_from_cluster(kubeconfig: str | None, shard: str) -> Any:
    """The live cluster's state, read once (GET only), with the clock now."""
    import time

    from kai.explain import ClusterState

    read = read_live(kubeconfig)
    for line in read.invalid:
        click.echo(f"warning: {line}", err=True)
    return ClusterState.from_store(read.store, now=time.time(), shard=shard, bare_pods_return=False)


def read_live(kubeconfig: str | None) -> Any:
    from lightkube import ConfigError as KubeConfigError

    from kai.k8s._api import ApiError
    from kai.k8s._read import CrdsMissing, read_cluster

    try:
        return read_cluster(kubeconfig)
    except CrdsMissing as e:
        fail(str(e), EXIT_BAD_INPUT)
    except (KubeConfigError, KeyError, OSError) as e:
        where = kubeconfig or "in-cluster config / $KUBECONFIG / ~/.kube/config"
        fail(f"{where}: {e}", EXIT_BAD_INPUT)
    except ApiError as e:
        if e.code == 403:
            fail(f"the API server refused a read: {e}", EXIT_UNREACHABLE)
        fail(f"cannot read the cluster: {e}", EXIT_UNREACHABLE)


@click.command()
@click.argument("kind", type=click.Choice(["pod", "podgroup", "queue", "pg", "po"]))
@click.argument("name")
@click.option(
    "-f", "--filename", "files", multiple=True, help="Manifests as kai sim reads them (repeatable; - = stdin)."
)
@click.option("--at", multiple=True, metavar="N:FILE[,FILE...]", help="As kai sim --at: apply FILEs before cycle N.")
@click.option(
    "--cycle",
    type=click.IntRange(min=1),
    default=None,
    help="With -f: explain this cycle [default: the last --at cycle, else 1].",
)
@click.option("--now", "now_text", default=None, help="With -f: the clock (RFC3339).")
@kubeconfig_option
@click.option("--shard", default="default", show_default=True, help="The SchedulingShard whose settings apply.")
@click.option("--actions", default=None, help="Comma-separated actions, in order (default: the shard's).")
@click.option(
    "--what-if/--no-what-if",
    default=True,
    show_default=True,
    help="Re-run the engine to say what would make a waiting job run.",
)
@click.option("-o", "--output", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def explain(
    kind: str,
    name: str,
    files: tuple[str, ...],
    at: tuple[str, ...],
    cycle: int | None,
    now_text: str | None,
    kubeconfig: str | None,
    shard: str,
    actions: str | None,
    what_if: bool,
    fmt: str,
) -> None:
    """Why a pod or PodGroup waits (or runs) and what a queue looks like: KIND NAME, with NAME as
    NAMESPACE/NAME for pods and PodGroups. Reads files (-f) or a live cluster (read-only), runs the
    scheduler's cycle as a dry run, and never writes. Exit 2 if the object does not exist."""
    import gc

    gc.disable()  # a short-lived process: collecting the cluster's objects would only cost time (see explain)
    from kai.explain import NotFound, render
    from kai.explain import explain as explain_doc
    from kai.scheduler.conf import ConfigError

    kind = {"pg": "podgroup", "po": "pod"}.get(kind, kind)
    chosen = tuple(a.strip() for a in actions.split(",") if a.strip()) if actions else None
    try:
        if files:
            state = state_from_files(files, at, cycle, now_text)
        else:
            if at or cycle or now_text:
                fail("--at, --cycle and --now go with -f FILE (a live cluster is read as it is now)", EXIT_BAD_INPUT)
            state = state_from_cluster(kubeconfig, shard)
        doc = explain_doc(state, kind, name, actions=chosen, whatif=what_if)
    except (ManifestError, ConfigError) as e:
        fail(str(e), EXIT_BAD_INPUT)
    except NotFound as e:
        fail(str(e), EXIT_BAD_INPUT)
    if fmt == "json":
        click.echo(json.dumps(doc, indent=2, sort_keys=False))
    else:
        click.echo(render(doc))


@click.command()
@kubeconfig_option
@click.option(
    "--anonymize",
    is_flag=True,
    help="Replace names (namespaces, pods, PodGroups, queues, nodes, labels' values) by stable stand-ins.",
)
@click.option(
    "-o",
    "--output",
    "path",
    type=click.Path(dir_okay=False, writable=True),
    default="-",
    show_default=True,
    help="File to write (- = stdout).",
)
def snapshot(kubeconfig: str | None, anonymize: bool, path: str) -> None:
    """Dump a live cluster's scheduling state (read-only) as one YAML file that `kai sim` reads unchanged:
    nodes, pods, queues, PodGroups, priority classes, topologies, shards and PDBs, with only the fields kai
    reads. Then: kai sim cluster.yaml --at 1:myjob.yaml --cycles 1."""
    import time

    from kai.explain._dump import dump_yaml

    read = read_live(kubeconfig)
    for line in read.invalid:
        click.echo(f"warning: {line}", err=True)
    text, notes = dump_yaml(read.docs, now=time.time(), anonymize=anonymize)
    for line in notes:
        click.echo(f"note: {line}", err=True)
    if path == "-":
        click.echo(text, nl=False)
    else:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
