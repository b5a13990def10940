"""The event recorder's dedup memory (kai.k8s._events): keys older than the dedup window are dropped
once the memory has doubled since its last pruning, not only past 50,000 keys, so that it stops
growing under churn (benchmarks/soak.py: about one key per pod, RSS growing with it for half an hour)."""

from __future__ import annotations

import pytest

from kai.k8s import _events
from kai.k8s._events import PRUNE_FLOOR, EventRecorder
from kai.k8s._metrics import Metrics
from kai.scheduler.decisions import Event


def recorder() -> EventRecorder:
    resolve = lambda obj: {"kind": "Pod", "namespace": "ns", "name": obj.rsplit("/", 1)[-1]}  # noqa: E731
    return EventRecorder(None, resolve, Metrics(), instance="test", queue_size=100_000, dedup_s=600.0)


def scheduled(i: int) -> Event:
    return Event(f"Pod/ns/p{i}", "Normal", "Scheduled", f"Successfully assigned ns/p{i} to node-0")


def test_old_keys_go_once_the_memory_doubles(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(_events.time, "monotonic", lambda: clock[0])
    r = recorder()
    r.record([scheduled(i) for i in range(PRUNE_FLOOR + 200)])  # all young: the first pruning keeps them
    assert len(r._recent) == PRUNE_FLOOR + 200
    clock[0] += 700.0  # past the dedup window
    r.record([scheduled(i) for i in range(10_000, 11_000)])  # the memory reaches twice its size: pruned
    r.record([scheduled(20_000)])
    assert len(r._recent) <= 1_001  # only the keys of the last window (before: 2,201, kept to 50,000)


def test_a_repeat_within_the_window_is_still_not_sent_again(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(_events.time, "monotonic", lambda: clock[0])
    r = recorder()
    r.record([scheduled(1)])
    r.record([scheduled(i) for i in range(2, 3 * PRUNE_FLOOR)])  # prunings meanwhile keep young keys
    clock[0] += 10.0
    r.record([scheduled(1)])
    assert r._queue.qsize() == 3 * PRUNE_FLOOR - 1  # scheduled(1) queued once
    clock[0] += 601.0
    r.record([scheduled(1)])
    assert r._queue.qsize() == 3 * PRUNE_FLOOR
