"""deploy/grafana/kai-dashboard.json: valid Grafana JSON whose every query names a metric kai exports."""

from __future__ import annotations

import json
import re
from pathlib import Path

from kai.k8s._metrics import Metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "kai-dashboard.json"


def _exported() -> set[str]:
    """Every sample name kai scheduler's registry can expose (counters as NAME_total, histograms'
    _bucket/_sum/_count), from the metric families themselves."""
    names = set()
    for family in Metrics().registry.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + s for s in ("_bucket", "_sum", "_count"))
        else:
            names.add(family.name)
    return names


def test_every_query_names_an_exported_metric() -> None:
    doc = json.loads(DASHBOARD.read_text())
    assert doc["uid"] == "kai-scheduler" and doc["panels"]
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in doc["templating"]["list"] if isinstance(v.get("query"), dict)]
    used = {m for e in exprs for m in re.findall(r"\bkai_[a-z0-9_]+", e)}
    exported = _exported()
    assert used - exported == set()
    # the dashboard covers cycles, actions, binds, queues and evictions
    for name in (
        "kai_e2e_scheduling_latency_milliseconds",
        "kai_action_scheduling_latency_milliseconds",
        "kai_task_bind_latency_milliseconds_bucket",
        "kai_queue_allocated_gpus",
        "kai_queue_fair_share_gpu",
        "kai_pod_group_evicted_pods_total",
    ):
        assert name in used, name
    ids = [p["id"] for p in doc["panels"]]
    assert len(ids) == len(set(ids))
