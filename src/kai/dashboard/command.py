"""``kai dashboard --kubeconfig K --listen 127.0.0.1:PORT``: the dashboard for a read-only operator.

It watches the kinds ``kai scheduler`` watches (list + watch through the same informers, GET only), and
each time the page asks (at most every few seconds) runs the cycle as a dry run on what it holds: the
page shows what the scheduler would decide now. It writes nothing; its "evictions" are the dry runs'
plans, marked as such.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from kai.explain.command import EXIT_BAD_INPUT, fail, kubeconfig_option


async def run_dashboard(kubeconfig: str | None, listen: str, shard: str, ready: Any = None) -> None:
    from kai.dashboard import History, Overview, overview, serve, split_listen
    from kai.explain import ClusterState, run
    from kai.k8s._api import Api, load_config
    from kai.k8s._decode import KINDS
    from kai.k8s._informer import Informer
    from kai.k8s._read import pdb_spec, read_with

    api = Api(load_config(kubeconfig), max_connections=16)
    tasks: list[asyncio.Task[None]] = []
    try:
        first = await read_with(api)  # fails early, naming what is missing, if kai's CRDs are not there
        store = first.store
        specs = [k for k in KINDS if k.kind != "PodDisruptionBudget"] + [await pdb_spec(api)]
        informers = [Informer(api, spec, store) for spec in specs]
        tasks = [asyncio.ensure_future(i.run()) for i in informers]
        await asyncio.gather(*(i.synced.wait() for i in informers))
        history = History()

        def capture() -> Any:
            return ClusterState.from_store(store, time.time(), shard=shard, bare_pods_return=False)

        def compute(state: Any) -> dict[str, Any]:
            dry = run(state)
            history.record(state.now, dry.result, {"engine": dry.seconds}, real=False)
            return overview(dry, history, now=state.now, source="kai dashboard (read-only; dry runs of the cycle)")

        host, port = split_listen(listen)
        server = await serve(host, port, Overview(compute, capture, min_interval_s=3.0))
        bound = server.sockets[0].getsockname()
        click.echo(f"kai dashboard: http://{bound[0]}:{bound[1]}/ (read-only)", err=True)
        if ready is not None:
            ready(bound[1])
        async with server:
            await server.serve_forever()
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await api.close()


@click.command()
@kubeconfig_option
@click.option(
    "--listen", default="127.0.0.1:8090", show_default=True, help="host:port to serve on (loopback unless told)."
)
@click.option("--shard", default="default", show_default=True, help="The SchedulingShard whose settings apply.")
def dashboard(kubeconfig: str | None, listen: str, shard: str) -> None:
    """Serve the live, read-only dashboard of a cluster kai schedules: queues, waiting jobs and why, the
    node x GPU map, planned evictions and cycle timings (docs/explain.md)."""
    from lightkube import ConfigError as KubeConfigError

    from kai.dashboard import split_listen
    from kai.k8s._api import ApiError
    from kai.k8s._read import CrdsMissing

    try:
        split_listen(listen)
    except ValueError as e:
        fail(f"--listen: {e}", EXIT_BAD_INPUT)
    try:
        asyncio.run(run_dashboard(kubeconfig, listen, shard))
    except CrdsMissing as e:
        fail(str(e), EXIT_BAD_INPUT)
    except (KubeConfigError, KeyError) as e:
        fail(f"{kubeconfig or 'kubeconfig'}: {e}", EXIT_BAD_INPUT)
    except ApiError as e:
        fail(f"cannot read the cluster: {e}", 1)
    except KeyboardInterrupt:
        pass
