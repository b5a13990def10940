"""kai.k8s._usage without a network: the PromQL kai sends, the arithmetic on the answers, and the rules for a
shard whose usageDBConfig cannot be used (tests/k8s/test_usage_prometheus.py runs it on a real Prometheus)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kai.api.objects import parse_shard
from kai.k8s._metrics import Metrics
from kai.k8s._usage import UsageFetcher, UsageQuery, _vector, normalize, usage_queries, usage_query_of
from kai.scheduler.usage import UsageLedger, UsageParams
from kai.store import Store


def _shard(db: dict[str, Any] | None, **params: Any) -> Any:
    spec: dict[str, Any] = {}
    if db is not None:
        spec["usageDBConfig"] = {**db, "usageParams": params}
    return parse_shard(
        {"apiVersion": "kai.scheduler/v1", "kind": "SchedulingShard", "metadata": {"name": "s"}, "spec": spec}
    )


def _one_minute_query(half_life: str) -> UsageQuery:
    """A 60 s window at 1 s resolution (the end-to-end test's), decayed with *half_life*."""
    params = {"windowSize": "60s", "halfLifePeriod": half_life, "extraParams": {"queryResolution": "1s"}}
    q = usage_query_of(_shard({"connectionString": "http://p"}, **params), "default", {})
    assert isinstance(q, UsageQuery)
    return q


def test_query_follows_kai_defaults_and_extra_params() -> None:
    q = usage_query_of(
        _shard({"connectionString": "http://prom:9090/"}, windowSize="2h", halfLifePeriod="30m"), "a", {}
    )
    assert isinstance(q, UsageQuery)
    assert q.address == "http://prom:9090"
    assert (q.window, q.half_life, q.resolution, q.timeout) == (7200.0, 1800.0, 60.0, 10.0)  # KAI: 1m, 10s
    assert (q.fetch_interval, q.staleness_period, q.wait_timeout) == (60.0, 300.0, 60.0)  # KAI: 1m, 5m, 1m
    assert q.allocation["gpu"] == "kai_queue_allocated_gpus"
    assert q.capacity["gpu"] == 'max(kai_nodepool_capacity{nodepool="a",resource="gpu"})'
    custom = usage_query_of(
        _shard(
            {"connectionString": "http://p"},
            extraParams={
                "queryResolution": "5s",
                "gpuCapacityMetric": 'sum(kube_node_status_capacity{resource="nvidia_com_gpu"})',
            },
        ),
        "a",
        {},
    )
    assert isinstance(custom, UsageQuery)
    assert custom.resolution == 5.0 and custom.capacity["gpu"].startswith("sum(kube_node_status_capacity")


def test_promql_is_kais_subquery_with_the_decay() -> None:
    q = _one_minute_query(half_life="10s")
    used, capacity = usage_queries(q, 1000.0)["gpu"]
    assert used == (
        "sum by (queue_name) (sum_over_time((((kai_queue_allocated_gpus) * (0.5^((1000.000 - time()) / 10))))"
        "[60000ms:1000ms]))"
    )
    assert capacity == 'avg_over_time((max(kai_nodepool_capacity{nodepool="default",resource="gpu"}))[60000ms:1000ms])'


@pytest.mark.parametrize(
    ("db", "env", "why"),
    [
        (None, {}, "no usageDBConfig"),
        ({"clientType": "influx", "connectionString": "http://p"}, {}, "'influx' is not supported"),
        ({"connectionString": "http://p", "connectionStringEnvVar": "PROM"}, {}, "both set"),
        ({}, {}, "no connectionString"),
        ({"connectionStringEnvVar": "PROM"}, {}, "$PROM is empty"),
    ],
)
def test_an_unusable_config_says_why(db: dict[str, Any] | None, env: dict[str, str], why: str) -> None:
    q = usage_query_of(_shard(db), "default", env)
    assert isinstance(q, str) and why in q


def test_the_address_may_come_from_an_env_var() -> None:
    q = usage_query_of(_shard({"connectionStringEnvVar": "PROM"}), "default", {"PROM": "http://x:1"})
    assert isinstance(q, UsageQuery) and q.address == "http://x:1"


def test_normalized_as_the_simulators_ledger() -> None:
    """The same history gives the same usage as kai sim's UsageLedger: samples once a second over 10 s of a
    60 s window, team-a holding 2 of 4 GPUs, half-life 20 s."""
    q = _one_minute_query(half_life="20s")
    now = 100.0
    ledger = UsageLedger(UsageParams(60.0, 20.0))
    samples = 0.0
    for t in range(90, 100):  # one sample per second, at t = 91..100 (Prometheus' subquery steps)
        ledger.record(t, t + 1, {"team-a": (2.0, 0.0, 0.0)}, (4.0, 1.0, 1.0))
        samples += 2.0 * 0.5 ** ((now - (t + 1)) / 20.0)
    got = normalize({"gpu": {"team-a": samples}}, {"gpu": 4.0}, q)
    want = ledger.queue_usage(now)["team-a"][0]
    assert got["team-a"][0] == pytest.approx(want, rel=0.03)  # the ledger decays at mid-interval, a sample at its end
    assert normalize({"gpu": {"team-a": samples}}, {}, q)["team-a"][0] == 0.0  # no capacity known: no usage


def test_answers_that_are_not_vectors_are_errors() -> None:
    from kai.k8s._usage import UsageError

    with pytest.raises(UsageError):
        _vector({"status": "error", "error": "bad query"})
    with pytest.raises(UsageError):
        _vector({"status": "success", "data": {"resultType": "matrix", "result": []}})
    ok = _vector(
        {
            "status": "success",
            "data": {
                "resultType": "vector",
                "result": [
                    {"metric": {"queue_name": "a"}, "value": [1, "2.5"]},
                    {"metric": {"queue_name": "b"}, "value": [1, "NaN"]},
                ],
            },
        }
    )
    assert ok == [({"queue_name": "a"}, 2.5)]


def test_a_prometheus_that_cannot_be_reached_costs_only_the_usage() -> None:
    """Nothing listens at the address: each fetch fails fast, is counted, and current() stays None."""
    store = Store()
    store.put(_shard({"connectionString": "http://127.0.0.1:9"}, fetchInterval="1s", waitTimeout="1s"))
    metrics = Metrics()
    fetcher = UsageFetcher(store, "s", "default", metrics, env={})

    async def go() -> None:
        task = asyncio.ensure_future(fetcher.run())
        await fetcher.wait_first()  # gives up after waitTimeout
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(go())
    assert fetcher.current() is None
    assert metrics.usage_errors._value.get() >= 1


def test_usage_older_than_the_staleness_period_is_not_used() -> None:
    store = Store()
    store.put(_shard({"connectionString": "http://p"}, fetchInterval="1s", stalenessPeriod="2s"))
    fetcher = UsageFetcher(store, "s", "default", Metrics(), env={})
    q = fetcher._query()
    assert isinstance(q, UsageQuery) and q.staleness_period == 2.0
    fetcher._set({"a": (0.5, 0.0, 0.0)}, q)
    assert fetcher.current() == {"a": (0.5, 0.0, 0.0)}  # the last good value while fresh
    assert fetcher._fetched_at is not None
    fetcher._fetched_at -= 2.5  # as if Prometheus had failed for 2.5 s since
    assert fetcher.current() is None
