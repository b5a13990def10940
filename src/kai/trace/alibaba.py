"""Loader for Alibaba's GPU-sharing trace (clusterdata ``cluster-trace-gpu-v2023``, the FGD paper's data).

Two CSV formats:

* nodes: ``sn, cpu_milli, memory_mib, gpu, model`` (one GPU model per node, empty for none);
* pods: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and optionally ``gpu_spec`` (accepted
  models separated by ``|``, empty = any); other columns (qos, phase, times) are ignored.

A pod's GPU demand is ``num_gpu * gpu_milli``; ``gpu_milli`` < 1000 only for a shared pod of one GPU.
A pod with ``num_gpu`` 0 is CPU-only whatever its ``gpu_milli`` and ``gpu_spec`` say (as the
authors' converter does). Every error names the file and the line.

``load_pods`` is the plain function other workload sources (e.g. the time simulator) use: it returns
pod shapes in file order.
"""

from __future__ import annotations

import csv
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kai.scheduler.gpupolicy import MILLI, FreeState, PodRequest

# The benchmark's data, copied into the repository (see data/alibaba-gpu-v2023/UPSTREAM_README.md).
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[3] / "data" / "alibaba-gpu-v2023"
DEFAULT_NODES = "openb_node_list_gpu_node.csv"
POD_PREFIX = "openb_pod_list_"

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")


class TraceError(ValueError):
    """Bad trace input; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class PodShape:
    """One pod of a trace: its name and request."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int  # per GPU, 1..1000; 0 for a CPU-only pod
    gpu_models: tuple[str, ...]  # accepted GPU models; () = any

    @property
    def gpu_demand(self) -> int:
        """Milli-GPUs in all."""
        return self.num_gpu * self.gpu_milli

    def request(self, model_ids: dict[str, int]) -> PodRequest:
        """The policy-facing request, with models as ids of *model_ids* (from ``NodeTable.model_ids``)."""
        models = tuple(sorted({model_ids[m] for m in self.gpu_models})) if self.gpu_models else None
        return PodRequest(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli, models)


@dataclass(frozen=True)
class NodeTable:
    """Nodes of a trace, in file order."""

    names: tuple[str, ...]
    cpu_milli: np.ndarray  # (n,) int64
    memory_mib: np.ndarray  # (n,) int64
    gpus: np.ndarray  # (n,) int64 devices per node
    models: tuple[str, ...]  # (n,) GPU model of each node; "" = no GPUs

    @property
    def model_ids(self) -> dict[str, int]:
        """GPU model name -> id (sorted names)."""
        return {m: i for i, m in enumerate(sorted({m for m in self.models if m}))}

    @property
    def gpu_capacity(self) -> int:
        """Milli-GPUs in the cluster."""
        return int(self.gpus.sum()) * MILLI

    def free_state(self, rank: np.ndarray | None = None) -> FreeState:
        """An idle cluster of these nodes; *rank* (tie-break order) defaults to node name order."""
        ids = self.model_ids
        model = np.array([ids.get(m, -1) for m in self.models], dtype=np.int64)
        if rank is None:
            rank = np.empty(len(self.names), dtype=np.int64)
            rank[np.argsort(np.array(self.names), kind="stable")] = np.arange(len(self.names))
        return FreeState.idle(self.cpu_milli, self.memory_mib, self.gpus, model, rank)


def _rows(path: Path, required: tuple[str, ...]) -> Iterator[tuple[int, dict[str, str]]]:
    """(line number, row) of a CSV file; checks the header has *required*."""
    try:
        fh = open(path, encoding="utf-8", newline="")  # noqa: SIM115 (closed below)
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror}") from None
    with fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames or []
        missing = [c for c in required if c not in header]
        if missing:
            raise TraceError(
                f"{path}:1: missing column(s) {', '.join(missing)} (header: {', '.join(header) or 'empty'})"
            )
        for row in reader:
            yield reader.line_num, row


def _int(path: Path, line: int, row: dict[str, str], col: str) -> int:
    text = (row.get(col) or "").strip()
    try:
        value = int(text)
    except ValueError:
        try:
            f = float(text)
        except ValueError:
            raise TraceError(f"{path}:{line}: {col}: {text!r} is not a number") from None
        if not f.is_integer():
            raise TraceError(f"{path}:{line}: {col}: {text!r} is not a whole number") from None
        value = int(f)
    if value < 0:
        raise TraceError(f"{path}:{line}: {col}: {value} must not be negative")
    return value


def load_nodes(path: str | Path) -> NodeTable:
    """The nodes of a node CSV (``sn, cpu_milli, memory_mib, gpu, model``)."""
    path = Path(path)
    names: list[str] = []
    cols: dict[str, list[int]] = {"cpu_milli": [], "memory_mib": [], "gpu": []}
    models: list[str] = []
    seen: dict[str, int] = {}
    for line, row in _rows(path, NODE_COLUMNS):
        name = (row["sn"] or "").strip()
        if not name:
            raise TraceError(f"{path}:{line}: sn: empty node name")
        if name in seen:
            raise TraceError(f"{path}:{line}: sn: node {name!r} already listed on line {seen[name]}")
        seen[name] = line
        for c in cols:
            cols[c].append(_int(path, line, row, c))
        model = (row["model"] or "").strip()
        if model.lower() == "nan":
            model = ""
        if cols["gpu"][-1] > 0 and not model:
            raise TraceError(f"{path}:{line}: model: node {name!r} has {cols['gpu'][-1]} GPUs but no model")
        names.append(name)
        models.append(model if cols["gpu"][-1] > 0 else "")
    if not names:
        raise TraceError(f"{path}: no nodes")
    return NodeTable(
        names=tuple(names),
        cpu_milli=np.array(cols["cpu_milli"], dtype=np.int64),
        memory_mib=np.array(cols["memory_mib"], dtype=np.int64),
        gpus=np.array(cols["gpu"], dtype=np.int64),
        models=tuple(models),
    )


def load_pods(path: str | Path, known_models: Collection[str] | None = None) -> list[PodShape]:
    """The pods of a pod CSV, in file order. With *known_models*, a ``gpu_spec`` naming another model
    is an error (the pod could never run)."""
    path = Path(path)
    pods: list[PodShape] = []
    known = set(known_models) if known_models is not None else None
    for line, row in _rows(path, POD_COLUMNS):
        name = (row["name"] or "").strip()
        if not name:
            raise TraceError(f"{path}:{line}: name: empty pod name")
        cpu = _int(path, line, row, "cpu_milli")
        memory = _int(path, line, row, "memory_mib")
        num_gpu = _int(path, line, row, "num_gpu")
        gpu_milli = _int(path, line, row, "gpu_milli")
        models: tuple[str, ...] = ()
        if num_gpu == 0:
            gpu_milli = 0  # CPU-only: gpu_milli and gpu_spec do not apply
        else:
            if not 1 <= gpu_milli <= MILLI:
                raise TraceError(
                    f"{path}:{line}: gpu_milli: {gpu_milli} is not a GPU share (1..{MILLI}) for num_gpu {num_gpu}"
                )
            if gpu_milli < MILLI and num_gpu != 1:
                raise TraceError(
                    f"{path}:{line}: gpu_milli: a shared GPU ({gpu_milli} < {MILLI}) needs num_gpu 1, got {num_gpu}"
                )
            spec = (row.get("gpu_spec") or "").strip()
            if spec.lower() == "nan":
                spec = ""
            models = tuple(dict.fromkeys(m.strip() for m in spec.split("|") if m.strip()))
            if known is not None:
                unknown = [m for m in models if m not in known]
                if unknown:
                    have = ", ".join(sorted(known))
                    raise TraceError(f"{path}:{line}: gpu_spec: unknown GPU model {unknown[0]!r} (nodes have: {have})")
        pods.append(PodShape(name, cpu, memory, num_gpu, gpu_milli, models))
    if not pods:
        raise TraceError(f"{path}: no pods")
    return pods


def trace_variants(data_dir: Path = DEFAULT_DATA_DIR) -> list[str]:
    """Variant names of the pod lists in *data_dir* (``openb_pod_list_<variant>.csv``)."""
    return sorted(p.stem[len(POD_PREFIX) :] for p in data_dir.glob(f"{POD_PREFIX}*.csv"))


def resolve_trace(trace: str, data_dir: Path = DEFAULT_DATA_DIR) -> Path:
    """A variant name (``default``, ``cpu050``, ...) or the path of a pod CSV."""
    candidate = data_dir / f"{POD_PREFIX}{trace}.csv"
    if candidate.is_file():
        return candidate
    path = Path(trace)
    if path.is_file():
        return path
    known = ", ".join(trace_variants(data_dir)) or f"none found in {data_dir}"
    raise TraceError(f"{trace}: not a trace variant ({known}) nor a pod CSV file")
