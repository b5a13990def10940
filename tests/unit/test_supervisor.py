"""The Supervisor (kai.k8s._supervisor) on a real event loop: restarts, one-shot tasks, health, close."""

from __future__ import annotations

import asyncio

from kai.k8s._api import Backoff
from kai.k8s._supervisor import Supervisor

FAST = Backoff(initial=0.001, cap=0.002)


def test_a_failing_task_is_restarted_counted_and_makes_health_fail() -> None:
    async def main() -> tuple[int, list[str], tuple[bool, str]]:
        counted: list[str] = []
        sup = Supervisor(on_failure_metric=counted.append, backoff=FAST, failing_after=3)
        runs = 0
        done = asyncio.Event()

        async def flaky() -> None:
            nonlocal runs
            runs += 1
            if runs <= 3:
                raise RuntimeError(f"failure {runs}")
            done.set()
            await asyncio.Event().wait()  # then runs for good

        entry = sup.start("informer/Pod", flaky)
        await asyncio.wait_for(done.wait(), 5)
        while_running = sup.healthy()  # 3 failures in a row, and not yet stable_s (60 s) of running since
        assert sup.alive(entry)
        await sup.close()
        return runs, counted, while_running

    runs, counted, while_running = asyncio.run(main())
    assert runs == 4
    assert counted == ["informer/Pod"] * 3
    assert not while_running[0] and "informer/Pod keeps failing (3 times in a row)" in while_running[1]
    assert "RuntimeError: failure 3" in while_running[1]


def test_one_shot_tasks_are_not_retried_their_failures_count_and_a_success_resets_them() -> None:
    """A shared-GPU bind runs once (``spawn``): a bug in it is logged and counted, not retried; a run of
    failures of one name fails health until one of them succeeds."""

    async def main() -> list[object]:
        counted: list[str] = []
        sup = Supervisor(on_failure_metric=counted.append, failing_after=2)
        calls = 0

        async def bad() -> None:
            nonlocal calls
            calls += 1
            raise ValueError("a bug in one bind")

        async def good() -> None:
            nonlocal calls
            calls += 1

        seen: list[object] = []
        await sup.spawn("gpu-sharing-bind", bad)
        seen.append(sup.healthy()[0])  # one failure: still healthy
        await sup.spawn("gpu-sharing-bind", bad)
        seen.append(sup.healthy())  # two in a row: not
        await sup.spawn("gpu-sharing-bind", good)
        seen.append(sup.healthy())  # a success: healthy again
        seen.append((calls, list(counted)))
        await sup.close()
        return seen

    one, two, three, (calls, counted) = asyncio.run(main())
    assert one is True
    assert two[0] is False and "gpu-sharing-bind keeps failing (2 times in a row)" in two[1]  # type: ignore[index]
    assert "ValueError: a bug in one bind" in two[1]  # type: ignore[index]
    assert three == (True, "ok")
    assert calls == 3  # nothing retried
    assert counted == ["gpu-sharing-bind"] * 2


def test_close_cancels_one_shot_tasks_still_running() -> None:
    async def main() -> tuple[bool, bool]:
        sup = Supervisor()
        started = asyncio.Event()
        cancelled = False

        async def slow() -> None:
            nonlocal cancelled
            started.set()
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                cancelled = True
                raise

        task = sup.spawn("gpu-sharing-bind", slow)
        await started.wait()
        await asyncio.wait_for(sup.close(), 5)
        return cancelled, task.cancelled()

    assert asyncio.run(main()) == (True, True)
