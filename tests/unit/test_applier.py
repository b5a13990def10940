"""The Applier (kai.k8s._apply), with the API server played by a fake that holds each PATCH until released (the
live tests cover the writes themselves against a real one).

* Status writes go out while the next cycle runs: a cycle's apply returns with its status writes in flight, and
  the next cycle's apply waits for them before it makes its own, so two writes to one object never pass each
  other.
* ``_gather`` raises a call's error as itself (Fenced stays Fenced), and a cancellation as a cancellation."""

from __future__ import annotations

import asyncio
import gc
import time
import warnings
from types import SimpleNamespace
from typing import Any

import pytest

from kai.api import constants as C
from kai.api.objects import ObjectMeta, Pod, Queue, parse_pod
from kai.k8s._apply import Applier
from kai.k8s._fence import Fence, Fenced
from kai.k8s._gpushare import GpuSharingBinder
from kai.k8s._metrics import Metrics
from kai.scheduler.decisions import CycleResult, QueueStatus
from kai.store import Store


class HeldApi:
    """Records each request; a PATCH waits for ``release``."""

    def __init__(self) -> None:
        self.started: list[tuple[str, Any]] = []
        self.finished: list[tuple[str, Any]] = []
        self.release = asyncio.Event()

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        self.started.append((path, kw.get("body")))
        if method == "PATCH":
            await self.release.wait()
        if "gate" in kw:
            kw["gate"]()  # as the real client does just before the bytes go out
        self.finished.append((path, kw.get("body")))
        return {}


def applier(api: HeldApi, fence: Fence | None = None) -> Applier:
    store = Store()
    store.put(Queue(ObjectMeta("q", None, "uid-q")))
    informer = SimpleNamespace(statuses={})
    return Applier(
        api,  # type: ignore[arg-type]
        store,
        informer,  # type: ignore[arg-type]
        informer,  # type: ignore[arg-type]
        informer,  # type: ignore[arg-type]
        informer,  # type: ignore[arg-type]
        SimpleNamespace(record=lambda events: None),  # type: ignore[arg-type]
        Metrics(),
        fence=fence,
    )


def queue_allocated(gpus: float) -> CycleResult:
    return CycleResult(queues=[QueueStatus("q", "", {}, {"gpu": gpus}, {}, {}, {}, {})])


def test_a_cycles_status_writes_end_before_the_next_cycle_makes_its_own() -> None:
    async def scenario() -> None:
        api = HeldApi()
        a = applier(api)
        stats = await asyncio.wait_for(a.apply(queue_allocated(1.0)), 1.0)  # returns with its write in flight
        assert stats.status_writes == 1 and len(api.started) == 1 and not api.finished
        second = asyncio.create_task(a.apply(queue_allocated(2.0)))
        await asyncio.sleep(0.05)
        assert not second.done() and len(api.started) == 1  # waits for the first cycle's write
        api.release.set()
        await asyncio.wait_for(second, 1.0)
        await a.statuses_sent()
        gpus = [body["status"]["allocated"]["nvidia.com/gpu"] for _, body in api.finished]
        assert gpus == ["1", "2"]  # in the cycles' order: the second was made after the first had landed
        await a.close()

    asyncio.run(scenario())


def test_a_lost_lease_during_the_writes_reaches_the_next_cycle() -> None:
    """The writes were made under the first cycle's term and the Lease is lost before they go out: they are not
    sent, and the next cycle's apply raises Fenced, as a write of its own would."""

    async def scenario() -> None:
        api = HeldApi()
        fence = Fence()
        fence.grant(1, time.monotonic() + 60.0)
        a = applier(api, fence)
        await asyncio.wait_for(a.apply(queue_allocated(1.0), term=1), 1.0)
        fence.revoke()
        api.release.set()
        with pytest.raises(Fenced):
            await asyncio.wait_for(a.apply(queue_allocated(2.0), term=1), 1.0)
        assert api.finished == []
        await a.close()

    asyncio.run(scenario())


def test_a_cycle_cancelled_while_its_read_back_writes_go_out_leaves_no_call_unawaited() -> None:
    """A shutdown cancels the cycle loop while a cycle waits for the writes the next cycle reads back (here a
    stale nomination cleared). The cycle's other writes were made and never handed to a task; they were
    made as functions, not coroutines, so none is collected "never awaited" (the warning the ninth session's
    last CI log still showed, from this path)."""

    async def scenario() -> None:
        api = HeldApi()
        a = applier(api)
        pod = Pod(ObjectMeta("p", "ns", "uid-p"), {}, scheduler_name=C.SCHEDULER_NAME, nominated_node_name="n1")
        a.store.put(pod)
        cycle = asyncio.create_task(a.apply(queue_allocated(1.0)))
        await asyncio.sleep(0.01)
        assert [path for path, _ in api.started] == ["/api/v1/namespaces/ns/pods/p/status"]  # held
        cycle.cancel()
        await asyncio.gather(cycle, return_exceptions=True)
        assert cycle.cancelled() and len(api.started) == 1  # the Queue status write was never sent

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(scenario())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


def test_gather_raises_the_first_error_as_itself_and_closes_the_calls_not_started() -> None:
    async def scenario() -> None:
        a = applier(HeldApi())
        a._concurrency = 2
        ran: list[int] = []

        async def call(i: int) -> None:
            ran.append(i)
            await asyncio.sleep(0.01 if i else 0.0)
            if i == 0:
                raise Fenced("lost")

        calls = [call(i) for i in range(10)]
        with pytest.raises(Fenced):
            await a._gather(calls)
        assert len(ran) < 10  # the first error stopped the rest
        assert all(c.cr_frame is None for c in calls)  # started or not, each is finished or closed

    asyncio.run(scenario())


def test_gather_cancelled_stops_its_calls_and_is_cancelled() -> None:
    async def scenario() -> None:
        a = applier(HeldApi())
        going = asyncio.Event()
        stopped: list[int] = []

        async def call(i: int) -> None:
            going.set()
            try:
                await asyncio.sleep(10)
            finally:
                stopped.append(i)

        task = asyncio.create_task(a._gather(call(i) for i in range(3)))
        await going.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert sorted(stopped) == [0, 1, 2]

    asyncio.run(scenario())


def test_status_writes_cancelled_before_they_started_are_closed_not_left_unawaited() -> None:
    """A shutdown right after a cycle, with the Lease gone: ``close`` cancels the task of the status writes
    before it first ran, so ``_gather`` never saw its calls; they are closed, not collected "never awaited"
    (a warning a CI log once showed)."""

    async def scenario() -> None:
        api = HeldApi()
        fence = Fence()
        fence.grant(1, time.monotonic() + 60.0)
        a = applier(api, fence)
        await a.apply(queue_allocated(1.0), term=1)  # no await in between: the writes' task has not run
        fence.revoke()
        await a.close()
        assert api.started == []  # cancelled before it sent anything

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        asyncio.run(scenario())
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)], [str(w.message) for w in caught]


def test_the_reservation_pod_of_a_shared_bind_that_failed_after_the_snapshot_outlives_that_cycle() -> None:
    """A shared bind was in flight when a cycle's snapshot was taken (so the cycle did not plan its pod) and
    failed while the cycle decided: its pod is neither labelled nor assumed any more. The reservation sync
    after that cycle keeps the group's reservation pod, which the next cycle reuses when it plans the pod
    again into the same group; before, it deleted it as the pod of an empty group and the next bind made it
    again (the flaky restart test of the twenty-second session). A group nothing used, then or now, is
    still emptied."""

    async def scenario() -> None:
        api = HeldApi()
        api.release.set()  # no write is held here
        a = applier(api)
        a.gpu_sharing = GpuSharingBinder(api, a.store, SimpleNamespace(record=lambda events: None), Metrics())  # type: ignore[arg-type]
        name = "gpu-reservation-n1-g"
        meta = {"name": name, "namespace": C.RESERVATION_NAMESPACE, "uid": "uid-r"}
        labels = {C.LABEL_APP: C.RESERVATION_APP, C.LABEL_GPU_GROUP: "n1-gpu0"}
        spec = {"nodeName": "n1", "containers": [{"name": "c", "image": "x"}]}
        a.store.put(parse_pod({"metadata": {**meta, "labels": labels}, "spec": spec}))
        deletes = lambda: [path for path, body in api.finished if path.endswith(f"/pods/{name}")]  # noqa: E731
        await asyncio.wait_for(a.apply(queue_allocated(1.0), {}, gpu_groups_seen={"n1-gpu0"}), 1.0)
        assert deletes() == []
        await asyncio.wait_for(a.apply(queue_allocated(1.0), {}), 1.0)
        assert deletes() == [f"/api/v1/namespaces/{C.RESERVATION_NAMESPACE}/pods/{name}"]
        await a.close()

    asyncio.run(scenario())
