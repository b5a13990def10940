"""The scheduler process's first lists of pods and nodes, sent before the rest of kai is imported.

Why: at a start the API server takes ~0.26 s to serialize a list of 4,000 pods, and kai's own imports
(the informers, the pod-grouper, the objects' parsers) take ~0.15 s before an informer could ask for it.
Asked first, the list is serialized on the API server's core while kai imports on its own, and the Pod
informer takes the answer that is already there instead of asking again (the fourteenth session tried
this from a thread and lost: lightkube's kubeconfig loader was most of the time before the request, and
the thread waited for the GIL the imports held; here the loader is kai's own and there is no thread).

Rules:

- Only reads, the same requests the informers' first lists make (the watch cache's list,
  ``resourceVersion=0``): nothing is written before the Lease is held, and a list that is a little older
  is caught up by the watch that follows it, as every list is.
- The requests are sent on the event loop the scheduler then runs on (``EarlyStart.runner``): the loop
  runs until each request is written, then stops while Python imports; the answers are read when the
  scheduler's loop runs.
- An informer takes an early answer only for the identical request (``list_key``); one that failed is
  asked again by the informer, as any failed list is. Nothing else changes.
"""

from __future__ import annotations

import asyncio
import functools
import gc
from collections.abc import Mapping
from dataclasses import dataclass, field

from kai.k8s._api import MAX_CONNECTIONS, Api, load_config

PAGE_SIZE = 500  # an informer's list pages (Informer.page_size); the watch cache serves a first list whole


def list_params(page_size: int, *, first: bool) -> dict[str, str]:
    """An informer's list request (Informer._list): the first from the API server's watch cache (resourceVersion
    0, as client-go's reflector asks), a list after 410 Gone from etcd, by pages. Here, so that the early lists
    ask exactly what the informers will (an early answer is taken only for the identical request)."""
    return {"limit": str(page_size), "resourceVersion": "0"} if first else {"limit": str(page_size)}


FIRST_LIST_PARAMS = list_params(PAGE_SIZE, first=True)
EARLY_PATHS = ("/api/v1/pods", "/api/v1/nodes")  # the large lists; the small kinds' cost nothing to wait for

ListKey = tuple[str, tuple[tuple[str, str], ...]]


def list_key(path: str, params: Mapping[str, str]) -> ListKey:
    return path, tuple(sorted(params.items()))


@dataclass
class EarlyStart:
    """The loop, the API client and the lists in flight, handed to ``run_scheduler``."""

    runner: asyncio.Runner
    api: Api
    lists: dict[ListKey, asyncio.Task[bytes]] = field(default_factory=dict)

    def close(self) -> None:
        """Cancel the lists not taken and close the loop (``run_scheduler`` closes it too; closing twice is
        nothing)."""
        self.runner.close()

    def take(self, path: str, params: Mapping[str, str]) -> asyncio.Task[bytes] | None:
        """The early answer to this request, once (None when it was not sent early or was taken)."""
        return self.lists.pop(list_key(path, params), None)


def begin(kubeconfig: str | None, event_loop: str, max_connections: int = MAX_CONNECTIONS) -> EarlyStart:
    """Read the kubeconfig (a bad one raises ``ConfigError`` here), make the scheduler's event loop and API
    client, and send the first lists of pods and nodes; return once each request is written."""
    gc.disable()  # as run_scheduler does (until the initial objects are frozen): the imports next make many
    api = Api(load_config(kubeconfig), max_connections=max_connections)
    if event_loop == "uvloop":
        import uvloop

        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    else:
        runner = asyncio.Runner()
    early = EarlyStart(runner, api)
    runner.run(_send(early))
    return early


async def _send(early: EarlyStart) -> None:
    written: list[asyncio.Future[None]] = []
    for path in EARLY_PATHS:
        sent = asyncio.get_running_loop().create_future()
        task = asyncio.ensure_future(early.api.get_raw(path, FIRST_LIST_PARAMS, gate=functools.partial(_set, sent)))
        task.add_done_callback(functools.partial(_ended, sent))
        early.lists[list_key(path, FIRST_LIST_PARAMS)] = task
        written.append(sent)
    await asyncio.wait(written, timeout=0.5)  # a server that does not answer at once is waited for later
    await asyncio.sleep(0)  # the written requests' bytes leave before the loop stops


def _set(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _ended(sent: asyncio.Future[None], task: asyncio.Task[bytes]) -> None:
    """A list ended (maybe before it was written: the server refused the connection). Its error is marked
    seen: the informer that takes it gets it again, and a process that exits first logs nothing."""
    _set(sent)
    if not task.cancelled():
        task.exception()
