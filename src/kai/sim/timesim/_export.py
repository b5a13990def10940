"""The metrics document as files: JSON (``--metrics``) and CSV tables (``--csv DIR``).

Rules: pure functions of the metrics document; the CSV files are one table each (time series per
cycle, jobs, queues, evictions), with a header row, written with the standard library's csv module.
"""

from __future__ import annotations

import csv
import json
import os
from typing import Any

CSV_FILES = ("timeseries.csv", "jobs.csv", "queues.csv", "evictions.csv")


def metrics_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=1, allow_nan=False)


def write_csv(doc: dict[str, Any], folder: str) -> list[str]:
    """Write the four tables into *folder* (created if missing); returns the paths written."""
    os.makedirs(folder, exist_ok=True)
    ts = doc["timeseries"]
    queues = sorted(ts["queues"])
    paths = []

    def table(name: str, header: list[str], rows: Any) -> None:
        path = os.path.join(folder, name)
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.writer(fh)
            w.writerow(header)
            w.writerows(rows)
        paths.append(path)

    header = ["time_s", "capacity_gpu", "allocated_gpu", "pending_jobs"]
    for q in queues:
        header += [f"{q}_allocated_gpu", f"{q}_fair_share_gpu"]
    rows = []
    for i, t in enumerate(ts["time"]):
        row = [t, ts["capacityGpu"][i], ts["allocatedGpu"][i], ts["pendingJobs"][i]]
        for q in queues:
            row += [ts["queues"][q]["allocatedGpu"][i], ts["queues"][q]["fairShareGpu"][i]]
        rows.append(row)
    table("timeseries.csv", header, rows)
    job_cols = [
        "podGroup",
        "queue",
        "pods",
        "gpus",
        "submitted",
        "started",
        "finished",
        "waitSeconds",
        "completionSeconds",
        "evictions",
        "lostGpuHours",
        "cannotRun",
    ]
    table("jobs.csv", job_cols, ([_cell(j[c]) for c in job_cols] for j in doc["jobs"]))
    queue_cols = ["name", "parent", "quotaGpu", "meanAllocatedGpu", "meanFairShareGpu", "gpuHours", "evictions"]
    table(
        "queues.csv",
        [*queue_cols, "jobs_submitted", "jobs_completed", "wait_p50_s", "wait_p90_s", "wait_p99_s"],
        (
            [
                *(_cell(q[c]) for c in queue_cols),
                q["jobs"]["submitted"],
                q["jobs"]["completed"],
                _cell(q["waitSeconds"]["p50"]),
                _cell(q["waitSeconds"]["p90"]),
                _cell(q["waitSeconds"]["p99"]),
            ]
            for q in doc["queues"]
        ),
    )
    ev_cols = ["time", "pod", "podGroup", "queue", "action", "reason"]
    table("evictions.csv", ev_cols, ([_cell(e[c]) for c in ev_cols] for e in doc["evictions"]))
    return paths


def _cell(v: Any) -> Any:
    return "" if v is None else v
