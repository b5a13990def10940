"""A supervisor for the scheduler's background tasks: a task that fails is restarted, with backoff.

Rules:

* Any coroutine function can be supervised (``start(name, run)``): informers, pod-grouper and event
  workers, the cycle loop, the Lease renewal. The supervisor knows nothing about what they do.
* A task that raises (anything but cancellation) is logged with its traceback, counted in
  ``kai_task_failures_total{task}`` and started again after an exponential backoff. ``on_failure``
  runs first, so the owner can mark what the task served as not live (an informer clears ``synced``).
* A task that ran for ``stable_s`` before failing starts its backoff from the beginning again: one
  failure a day is not a crash loop. A task that has failed ``failing_after`` times in a row without
  such a stable run makes ``healthy()`` false, so ``/healthz`` fails and Kubernetes restarts the pod;
  once it has run for ``stable_s`` again, it counts as healthy again.
* A task that returns normally is done and is not restarted (a one-shot task, or one told to stop).
* One-shot tasks (a shared-GPU bind done in the background) are ``spawn``ed: never restarted, but a
  failure is logged and counted the same way, and ``failing_after`` failures of one name in a row (no
  success between) make ``healthy()`` false too. ``close()`` cancels them with the others.
* Names label a metric, so they come from a small fixed set ("informer/Pod", "podgrouper", ...):
  several workers of one kind share a name.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from kai.k8s._api import Backoff

log = logging.getLogger("kai.k8s.supervisor")

RESTART_BACKOFF = Backoff(initial=0.5, cap=30.0)


@dataclass
class Supervised:
    """One supervised task: how often it failed, and the last error."""

    name: str
    failures: int = 0  # in total
    consecutive: int = 0  # since the last run that lasted stable_s
    last_error: str = ""
    running: bool = False
    started: float = 0.0  # monotonic time of the last (re)start
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Supervisor:
    """Runs tasks, restarts the ones that fail, and says whether any of them keeps failing."""

    def __init__(
        self,
        *,
        on_failure_metric: Callable[[str], None] | None = None,
        backoff: Backoff = RESTART_BACKOFF,
        stable_s: float = 60.0,
        failing_after: int = 5,
    ) -> None:
        self._count = on_failure_metric
        self.backoff = backoff
        self.stable_s = stable_s
        self.failing_after = failing_after
        self.tasks: list[Supervised] = []
        self._oneshot: dict[str, Supervised] = {}  # name -> the record its one-shot tasks share
        self._spawned: set[asyncio.Task[None]] = set()

    def start(
        self,
        name: str,
        run: Callable[[], Awaitable[Any]],
        *,
        on_failure: Callable[[BaseException], None] | None = None,
    ) -> Supervised:
        """Run ``run()`` now and again after each failure, until it returns or ``close()``."""
        entry = Supervised(name)
        entry.task = asyncio.ensure_future(self._keep(entry, run, on_failure))
        self.tasks.append(entry)
        return entry

    def spawn(self, name: str, run: Callable[[], Awaitable[Any]]) -> asyncio.Task[None]:
        """Run ``run()`` once; a failure is recorded (module docstring) and not retried."""
        entry = self._oneshot.get(name)
        if entry is None:
            entry = self._oneshot[name] = Supervised(name)
            self.tasks.append(entry)
        task = asyncio.ensure_future(self._once(entry, run))
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    async def _once(self, entry: Supervised, run: Callable[[], Awaitable[Any]]) -> None:
        try:
            await run()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # logged and counted; the task's owner made it safe to drop
            self._failed(entry, e, "task failed", {})
        else:
            entry.consecutive = 0

    def _failed(self, entry: Supervised, e: Exception, message: str, extra: dict[str, Any]) -> None:
        """Record a failure of *entry*: its counts and last error, the log line with the traceback, the metric."""
        entry.failures += 1
        entry.consecutive += 1
        entry.last_error = f"{type(e).__name__}: {e}"[:500]
        log.error(message, exc_info=True, extra={"task": entry.name, "failures": entry.failures, **extra})
        if self._count is not None:
            self._count(entry.name)

    async def _keep(
        self,
        entry: Supervised,
        run: Callable[[], Awaitable[Any]],
        on_failure: Callable[[BaseException], None] | None,
    ) -> None:
        while True:
            started = entry.started = time.monotonic()
            entry.running = True
            try:
                await run()
                entry.running = False
                return
            except asyncio.CancelledError:
                entry.running = False
                raise
            except Exception as e:  # the point of a supervisor: nothing a task raises ends the process
                entry.running = False
                if time.monotonic() - started >= self.stable_s:
                    entry.consecutive = 0
                delay = self.backoff.delay(entry.consecutive)  # the failure about to be counted is attempt n
                self._failed(entry, e, "task failed; restarting", {"delay_s": round(delay, 3)})
                if on_failure is not None:
                    try:
                        on_failure(e)
                    except Exception:
                        log.exception("on_failure of a task failed", extra={"task": entry.name})
                await asyncio.sleep(delay)

    def healthy(self) -> tuple[bool, str]:
        """False (and which task) when a task has failed ``failing_after`` times in a row."""
        now = time.monotonic()
        bad = [
            t
            for t in self.tasks
            if t.consecutive >= self.failing_after and not (t.running and now - t.started >= self.stable_s)
        ]
        if bad:
            t = bad[0]
            return False, f"task {t.name} keeps failing ({t.consecutive} times in a row): {t.last_error}"
        return True, "ok"

    def alive(self, entry: Supervised) -> bool:
        """The task is running now (not waiting to be restarted, not finished)."""
        return entry.running and entry.task is not None and not entry.task.done()

    async def close(self) -> None:
        """Cancel every task and wait for them to end."""
        tasks = [t.task for t in self.tasks if t.task is not None] + list(self._spawned)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.tasks.clear()
        self._oneshot.clear()
