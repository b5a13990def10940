"""``kai bench trace``: the fill-up benchmark over seeds, summarized for people (text) and machines (JSON)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kai.scheduler.gpupolicy import canonical_name

from .alibaba import DEFAULT_DATA_DIR, DEFAULT_NODES, TraceError, load_nodes, load_pods, resolve_trace
from .fillup import FillupResult, run_fillup

CURVE = (75, 130)  # arrived % range of the reported curve


def parse_seeds(text: str) -> list[int]:
    """``42-51``, ``42,43,50`` or a mix (``42-44,50``) -> the seeds, in order."""
    seeds: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            if sep:
                a, b = int(lo), int(hi)
                if b < a:
                    raise ValueError
                seeds.extend(range(a, b + 1))
            else:
                seeds.append(int(part))
        except ValueError:
            raise ValueError(f"--seeds: {part!r} is not a seed or a range like 42-51") from None
    if not seeds:
        raise ValueError("--seeds: no seeds given")
    return seeds


def _mean_sd(values: Sequence[float]) -> dict[str, float]:
    a = np.asarray(values, dtype=np.float64)
    return {"mean": round(float(a.mean()), 4), "sd": round(float(a.std(ddof=1)) if len(a) > 1 else 0.0, 4)}


def summarize(trace: str, trace_file: Path, nodes_file: Path, runs: Sequence[FillupResult]) -> dict[str, Any]:
    """The JSON document of ``kai bench trace -o json``."""
    curves = [r.curve(*CURVE) for r in runs]
    buckets = sorted(set.intersection(*(set(c) for c in curves)))
    return {
        "trace": trace,
        "trace_file": str(trace_file),
        "nodes_file": str(nodes_file),
        "policy": runs[0].policy,
        "seeds": [r.seed for r in runs],
        "unallocated_at_100": _mean_sd([r.unallocated_at(100) for r in runs]),
        "curve": [
            {
                "arrived": b,
                "allocated": _mean_sd([c[b] for c in curves]),
                "unallocated": _mean_sd([100.0 - c[b] for c in curves]),
            }
            for b in buckets
        ],
        "per_seed": [
            {
                "seed": r.seed,
                "unallocated_at_100": round(r.unallocated_at(100), 4),
                "pods": r.placed + r.failed,
                "placed": r.placed,
                "failed": r.failed,
                "seconds": round(r.seconds, 3),
            }
            for r in runs
        ],
    }


def run_trace_bench(trace: str, policy: str, seeds: Sequence[int], nodes: str | None = None) -> dict[str, Any]:
    """Load the trace and nodes, run the fill-up for each seed, summarize. Raises TraceError/ValueError."""
    canonical_name(policy)  # fail on a bad name before loading anything
    nodes_file = Path(nodes) if nodes else DEFAULT_DATA_DIR / DEFAULT_NODES
    node_table = load_nodes(nodes_file)
    trace_file = resolve_trace(trace)
    pods = load_pods(trace_file, set(node_table.model_ids))
    if node_table.gpu_capacity == 0:
        raise TraceError(f"{nodes_file}: no GPUs: the benchmark measures GPU allocation")
    runs = [run_fillup(node_table, pods, policy, seed) for seed in seeds]
    return summarize(trace, trace_file, nodes_file, runs)


def render_text(doc: dict[str, Any]) -> str:
    u = doc["unallocated_at_100"]
    seeds = doc["seeds"]
    seed_text = (
        f"{seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1)) else ",".join(map(str, seeds))
    )
    secs = [s["seconds"] for s in doc["per_seed"]]
    lines = [
        f"trace {doc['trace']} ({doc['trace_file']}), policy {doc['policy']}, seeds {seed_text}",
        f"unallocated GPU at 100% arrived: {u['mean']:.2f}% ± {u['sd']:.2f}",
        f"placement time per seed: {np.mean(secs):.2f} s (max {max(secs):.2f} s), {doc['per_seed'][0]['pods']} pods",
        "",
        "arrived %  allocated %  unallocated %",
    ]
    for row in doc["curve"]:
        a = row["allocated"]
        lines.append(f"{row['arrived']:>9}  {a['mean']:>8.2f} ± {a['sd']:<5.2f} {row['unallocated']['mean']:>8.2f}")
    return "\n".join(lines)
