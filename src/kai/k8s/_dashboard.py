"""``kai scheduler --dashboard-listen HOST:PORT``: the live dashboard served by the scheduler process.

Its one hook into the scheduler is a cycle listener (each applied cycle's result and timings feed the
page's history); the page's document is ``kai.dashboard.overview`` of a dry run on what the scheduler's
next cycle would decide on (``KaiScheduler.view``: its Store with the binds and groupings kai made and the
watch does not show yet), made in a worker thread at most every few seconds while a page asks. Read-only:
the server answers GET only. Off by default.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from kai.dashboard import History, Overview, overview, serve, split_listen


async def start_dashboard(scheduler: Any, listen: str) -> asyncio.Server:  # a KaiScheduler (no import: cycle)
    from kai.explain import ClusterState, run

    history = History()

    def on_cycle(result: Any, record: Any) -> None:
        history.record(time.time(), result, {"engine": record.engine_s, "e2e": record.seconds}, real=True)

    scheduler.cycle_listeners.append(on_cycle)
    store, shard = scheduler.store, scheduler.options.shard

    def capture() -> Any:  # on the loop thread, where the informers write the Store
        now = time.time()
        started = scheduler.applier is not None and scheduler.grouper is not None  # else: the Store as it is
        seen = scheduler.view(now, time.monotonic()).mine if started else None  # what the next cycle decides on
        return ClusterState.from_store(store, now, shard=shard, bare_pods_return=False, seen=seen)

    def compute(state: Any) -> dict[str, Any]:
        dry = run(state, scheduler.options.actions)  # the actions this scheduler runs
        return overview(dry, history, now=state.now, source=f"kai scheduler {scheduler.identity}")

    host, port = split_listen(listen)
    return await serve(host, port, Overview(compute, capture))
