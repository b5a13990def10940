"""Time-based fair share: the usage ledger's arithmetic, and its effect on fair shares in kai sim."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kai.scheduler.usage import UsageLedger, UsageParams
from tests.conftest import run_sim

HOUR = 3600.0


def test_normalized_to_capacity_over_the_window() -> None:
    """The reference's example: 24 GPU-hours in a 10-GPU, 10-hour window is 0.24."""
    ledger = UsageLedger(UsageParams(window=10 * HOUR))
    for h in range(10):
        held = {"team-a": (2.4, 0.0, 0.0)}  # 2.4 GPUs for 10 hours = 24 GPU-hours
        ledger.record(h * HOUR, (h + 1) * HOUR, held, (10.0, 1.0, 1.0))
    assert ledger.queue_usage(10 * HOUR)["team-a"][0] == pytest.approx(0.24)


def test_old_intervals_leave_the_window() -> None:
    ledger = UsageLedger(UsageParams(window=2 * HOUR))
    ledger.record(0, HOUR, {"a": (10.0, 0, 0)}, (10.0, 1, 1))
    ledger.record(HOUR, 5 * HOUR, {"a": (0.0, 0, 0)}, (10.0, 1, 1))
    assert ledger.queue_usage(5 * HOUR)["a"][0] == 0.0
    assert len(ledger.intervals) == 1  # the first hour was dropped


def test_half_life_halves_older_usage() -> None:
    recent = UsageLedger(UsageParams(window=10 * HOUR, half_life=HOUR))
    recent.record(9 * HOUR, 10 * HOUR, {"a": (10.0, 0, 0)}, (10.0, 1, 1))
    older = UsageLedger(UsageParams(window=10 * HOUR, half_life=HOUR))
    older.record(8 * HOUR, 9 * HOUR, {"a": (10.0, 0, 0)}, (10.0, 1, 1))
    older.record(9 * HOUR, 10 * HOUR, {"a": (0.0, 0, 0)}, (10.0, 1, 1))
    a, b = recent.queue_usage(10 * HOUR)["a"][0], older.queue_usage(10 * HOUR)["a"][0]
    assert b == pytest.approx(a / 2)


def _docs(with_usage: bool) -> list[dict[str, Any]]:
    res = {"quota": -1, "limit": -1, "overQuotaWeight": 1}

    def queue(name: str, parent: str | None) -> dict[str, Any]:
        spec: dict[str, Any] = {"resources": {"gpu": {"quota": 0, "limit": -1, "overQuotaWeight": 1}}}
        spec["resources"].update(cpu=dict(res), memory=dict(res))
        if parent:
            spec["parentQueue"] = parent
        return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}

    docs: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "node0"},
            "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "4"}},
        },
        queue("dept", None),
        queue("team-a", "dept"),
        queue("team-b", "dept"),
    ]
    for team, running in (("team-a", True), ("team-b", False)):
        for i in range(4):
            name = f"{team}-job{i}"
            docs.append(
                {
                    "apiVersion": "scheduling.run.ai/v2alpha2",
                    "kind": "PodGroup",
                    "metadata": {"name": name},
                    "spec": {"minMember": 1, "queue": team, "priorityClassName": "train"},
                }
            )
            pod: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": f"{name}-0", "annotations": {"pod-group-name": name}},
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "containers": [{"name": "c", "resources": {"requests": {"nvidia.com/gpu": 1}}}],
                },
            }
            if running:
                pod["spec"]["nodeName"] = "node0"
                pod["status"] = {"phase": "Running", "startTime": "2025-12-31T00:00:00Z"}
            docs.append(pod)
    if with_usage:
        docs.append(
            {
                "apiVersion": "kai.scheduler/v1",
                "kind": "SchedulingShard",
                "metadata": {"name": "default"},
                "spec": {"usageDBConfig": {"clientType": "prometheus", "usageParams": {"windowSize": "10s"}}},
            }
        )
    return docs


def _fair_shares(with_usage: bool, cycles: int) -> dict[str, float]:
    text = yaml.safe_dump_all(_docs(with_usage), sort_keys=False)
    code, doc, err = run_sim(["-", "--actions", "allocate", "--cycles", str(cycles)], stdin=text)
    assert code == 0, err
    assert doc is not None
    return {q["name"]: q["fairShare"]["gpu"] for q in doc["queues"]}


def test_past_usage_shrinks_the_over_quota_share() -> None:
    """team-a held all 4 GPUs for 5 of the last 10 seconds: usage 0.5 against team-b's 0, so with kValue 1
    the over-quota split is 0.5 : 1.0 (4 GPUs -> 1.33 and 2.67, floors 1 and 2, leftover to team-b)."""
    plain = _fair_shares(with_usage=False, cycles=6)
    assert plain["team-a"] == plain["team-b"] == 2.0
    timed = _fair_shares(with_usage=True, cycles=6)
    assert timed["team-a"] == 1.0 and timed["team-b"] == 3.0, timed
    first = _fair_shares(with_usage=True, cycles=1)  # no history yet: the same as without usage
    assert first["team-a"] == first["team-b"] == 2.0
