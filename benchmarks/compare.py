"""Before/after: run the existing benchmarks on two source trees, alternating, and report every run.

``.venv/bin/python benchmarks/compare.py --before /path/to/old/checkout --rounds 3`` runs, for each round,
each benchmark once on the old tree (``PYTHONPATH=<before>/src``) then once on this one, so both see the
same load. Prints one row per (benchmark, scenario): every run's cycle wall and CPU seconds, before and after,
and the ratio of the CPU medians (the machine is shared: CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[1]

# (label, script, extra args, how to read (scenario, wall s, cpu s) rows from its JSON)
BENCHES: list[tuple[str, str, list[str]]] = [
    ("allocate", "bench_allocate.py", []),
    ("sharing", "bench_sharing.py", []),
    ("sharing-gangs", "bench_sharing.py", ["--replicas", "4"]),
    ("evictions", "bench_evictions.py", []),
    ("topology", "bench_topology.py", []),
]


def rows(label: str, doc: dict[str, Any]) -> list[tuple[str, float, float]]:
    if "scenarios" in doc:  # allocate, evictions
        return [(f"{label}/{s['scenario']}", s["median_cycle_s"], s["median_cycle_cpu_s"]) for s in doc["scenarios"]]
    if "results" in doc:  # topology
        return [(f"{label}/{r['scenario']}", r["decision_s"], r["decision_cpu_s"]) for r in doc["results"]]
    return [(label, doc["cycle_s"], doc["cycle_cpu_s"])]  # sharing


def run(tree: Path, script: str, extra: list[str]) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    out = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / script), "--runs", "1", "--json", *extra],
        capture_output=True, text=True, env=env, cwd=tree, check=True, timeout=3600,
    )  # fmt: skip
    return json.loads(out.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the code to compare with")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", action="append", help="benchmark labels to run (default: all)")
    args = ap.parse_args(argv)
    got: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for _ in range(args.rounds):
        for label, script, extra in BENCHES:
            if args.only and label not in args.only:
                continue
            for side, tree in (("before", args.before), ("after", HERE)):
                for name, wall, cpu in rows(label, run(tree, script, extra)):
                    got.setdefault(name, {}).setdefault(side, []).append((wall, cpu))
    print(
        "| benchmark | before: cycle wall / CPU per run (s) | after: cycle wall / CPU per run (s) "
        "| CPU median after/before |"
    )
    print("|---|---|---|---|")
    for name, sides in got.items():
        cells = [" ; ".join(f"{w:.3f} / {c:.3f}" for w, c in sides.get(s, [])) for s in ("before", "after")]
        b = statistics.median(c for _, c in sides.get("before", [(0, 0)]))
        a = statistics.median(c for _, c in sides.get("after", [(0, 0)]))
        print(
            f"| {name} | {cells[0]} | {cells[1]} | {a / b:.2f} |" if b else f"| {name} | {cells[0]} | {cells[1]} | - |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
