"""Field-by-field comparison of two Snapshots, for the incremental builder's tests.

Why not ``==``: the Snapshot holds NumPy arrays (``==`` is element-wise), TaskInfo and JobInfo hold arrays
and Gang trees, and a failure must say which field of which task differs. ``snapshot_diff`` walks every
field of the Snapshot, its NodeTable, GpuTable, tasks, jobs (with their gangs), queues, PDBs and other
pods, and returns the differences in words (empty when equal). Pods are compared by identity: both
snapshots are built from the same objects.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from kai.scheduler.snapshot import Snapshot


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and bool(np.array_equal(a, b))
            and a.flags.writeable == b.flags.writeable
        )
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            return False
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(a == b)


def _diff_rows(name: str, a: Any, b: Any, out: list[str]) -> None:
    """Rows of two sequences of dataclasses: each differing row, by field."""
    if len(a) != len(b):
        out.append(f"{name}: {len(a)} rows != {len(b)}")
    for i, (x, y) in enumerate(zip(a, b)):
        if type(x) is not type(y):
            out.append(f"{name}[{i}]: {type(x).__name__} != {type(y).__name__}")
            continue
        for f in dataclasses.fields(x):
            va, vb = getattr(x, f.name), getattr(y, f.name)
            if f.name == "pod":
                if va is not vb:
                    out.append(f"{name}[{i}].pod: {va.meta.name} is not the same object as {vb.meta.name}")
            elif not _same(va, vb):
                out.append(f"{name}[{i}].{f.name}: {va!r} != {vb!r}")


def snapshot_diff(a: Snapshot, b: Snapshot) -> list[str]:
    """Where *a* and *b* differ, one line per field (per row for tasks, jobs, queues, others, PDBs)."""
    out: list[str] = []
    rows = {"tasks", "jobs", "queues", "others", "pdbs"}
    for f in dataclasses.fields(Snapshot):
        va, vb = getattr(a, f.name), getattr(b, f.name)
        if f.name in rows:
            _diff_rows(f.name, va, vb, out)
        elif f.name == "signature_pods":
            if len(va) != len(vb) or any(x is not y for x, y in zip(va, vb)):
                out.append(f"signature_pods: {[p.meta.name for p in va]} != {[p.meta.name for p in vb]}")
        elif f.name in ("nodes", "gpus"):
            for g in dataclasses.fields(va):
                x, y = getattr(va, g.name), getattr(vb, g.name)
                if not _same(x, y):
                    out.append(f"{f.name}.{g.name}: {x!r} != {y!r}")
        elif not _same(va, vb):
            out.append(f"{f.name}: {va!r} != {vb!r}")
    return out
