"""A progress bar on stderr for simulations that take more than a second of wall time.

Rules: it writes only to its own console (stderr), never to stdout, so ``-o json`` output stays clean;
it appears only once a run has lasted ``delay`` seconds (short runs print nothing) and only on a
terminal unless forced. The wall clock is injectable, so tests drive it without waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import BarColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from kai.api.duration import format_duration

REFRESH_S = 0.1


class SimProgress:
    """``with SimProgress(horizon) as update: ... update(simulated_seconds)``."""

    def __init__(
        self,
        horizon: float | None,
        *,
        console: Console | None = None,
        delay: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.console = console if console is not None else Console(stderr=True)
        self.horizon = horizon
        self.delay = delay
        self.clock = clock
        self.shown = False
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._started = 0.0
        self._refreshed = float("-inf")

    def __enter__(self) -> Callable[[float], None]:
        self._started = self.clock()
        return self.update

    def update(self, simulated: float) -> None:
        if self._progress is None:
            if not self.console.is_terminal or self.clock() - self._started < self.delay:
                return
            self._progress = Progress(
                TextColumn("[bold]kai sim[/]"),
                BarColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
                auto_refresh=False,  # refreshed from update(), at most every REFRESH_S of wall time: no thread
            )
            self._progress.start()
            self._task = self._progress.add_task("", total=self.horizon)
            self.shown = True
        assert self._task is not None
        total = f" / {format_duration(round(self.horizon))}" if self.horizon else ""
        self._progress.update(
            self._task, completed=simulated, description=f"simulated {format_duration(round(simulated))}{total}"
        )
        now = self.clock()
        if now - self._refreshed >= REFRESH_S:
            self._refreshed = now
            self._progress.refresh()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
