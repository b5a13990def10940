"""The Alibaba trace loader (bad input named by file and line), the fill-up protocol on tiny CSVs,
and ``kai bench trace -o json`` end to end."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from kai.cli import main
from kai.trace.alibaba import DEFAULT_DATA_DIR, TraceError, load_nodes, load_pods, resolve_trace, trace_variants
from kai.trace.fillup import bucket_curve, fillup_order, run_fillup

NODES = """sn,cpu_milli,memory_mib,gpu,model
node-b,64000,262144,4,T4
node-a,32000,131072,4,G2
node-c,96000,393216,8,G2
"""
POD_HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def small_pods(n: int = 40) -> str:
    """Shared pods of 100..500 milli, a few whole GPUs and CPU-only pods: fine steps of arrived %."""
    lines = []
    for i in range(n):
        if i % 10 == 0:
            lines.append(f"pod-{i:03d},4000,8192,1,1000,,LS")
        elif i % 10 == 5:
            lines.append(f"pod-{i:03d},2000,4096,0,0,,BE")
        else:
            lines.append(f"pod-{i:03d},1000,2048,1,{100 * (1 + i % 5)},{'G2' if i % 7 == 0 else ''},LS")
    return POD_HEADER + "\n".join(lines) + "\n"


# --- loader ---------------------------------------------------------------------------------------


def test_loads_nodes_and_pods(tmp_path: Path) -> None:
    nodes = load_nodes(write(tmp_path, "n.csv", NODES))
    assert nodes.names == ("node-b", "node-a", "node-c")
    assert nodes.gpu_capacity == 16_000
    assert nodes.model_ids == {"G2": 0, "T4": 1}
    state = nodes.free_state()
    assert state.rank.tolist() == [1, 0, 2]  # name order
    assert state.gpu[1].tolist() == [1000] * 4 + [-1] * 4
    pods = load_pods(write(tmp_path, "p.csv", POD_HEADER + "p1,6000,1024,1,460,G2|T4|T4,LS\np2,8000,1,0,500,T4,BE\n"))
    assert pods[0].gpu_models == ("G2", "T4") and pods[0].gpu_demand == 460
    assert pods[1].gpu_milli == 0 and pods[1].gpu_models == ()  # CPU-only: gpu_milli and gpu_spec do not apply
    assert pods[0].request(nodes.model_ids).models == (0, 1)


def test_the_repository_carries_the_benchmark_data() -> None:
    assert set(trace_variants()) >= {"default", "cpu050", "gpushare40", "multigpu20", "gpuspec10"}
    assert resolve_trace("default") == DEFAULT_DATA_DIR / "openb_pod_list_default.csv"
    nodes = load_nodes(DEFAULT_DATA_DIR / "openb_node_list_gpu_node.csv")
    assert len(nodes.names) == 1213 and nodes.gpu_capacity == 6212 * 1000


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,cpu_milli,num_gpu,gpu_milli\np1,1,0,0\n", r"p\.csv:1: missing column\(s\) memory_mib"),
        (POD_HEADER + "p1,1000,1,0,0,,LS\np2,-5,1,0,0,,LS\n", r"p\.csv:3: cpu_milli: -5 must not be negative"),
        (
            POD_HEADER + "p1,1000,1,1,1000,A100,LS\n",
            r"p\.csv:2: gpu_spec: unknown GPU model 'A100' \(nodes have: G2, T4\)",
        ),
        (POD_HEADER + "p1,1000,1,1,1200,,LS\n", r"p\.csv:2: gpu_milli: 1200 is not a GPU share"),
        (POD_HEADER + "p1,1000,1,2,500,,LS\n", r"p\.csv:2: gpu_milli: a shared GPU .* needs num_gpu 1, got 2"),
        (POD_HEADER + "p1,lots,1,0,0,,LS\n", r"p\.csv:2: cpu_milli: 'lots' is not a number"),
        (POD_HEADER, r"p\.csv: no pods"),
    ],
    ids=["missing-column", "negative", "unknown-model", "share-over-1000", "shared-multi-gpu", "not-a-number", "empty"],
)
def test_bad_pod_input_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        load_pods(write(tmp_path, "p.csv", text), known_models={"G2", "T4"})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("sn,cpu_milli,gpu,model\nn1,1,1,G2\n", r"n\.csv:1: missing column\(s\) memory_mib"),
        (NODES + "node-a,1,1,1,G2\n", r"n\.csv:5: sn: node 'node-a' already listed on line 3"),
        (NODES + "node-d,1,1,2,\n", r"n\.csv:5: model: node 'node-d' has 2 GPUs but no model"),
        (NODES + "node-d,1,-1,0,\n", r"n\.csv:5: memory_mib: -1 must not be negative"),
    ],
    ids=["missing-column", "duplicate", "gpus-without-model", "negative"],
)
def test_bad_node_input_names_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(TraceError, match=message):
        load_nodes(write(tmp_path, "n.csv", text))


def test_missing_file_and_unknown_variant(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.csv: cannot read"):
        load_pods(tmp_path / "nope.csv")
    with pytest.raises(TraceError, match=r"bogus: not a trace variant \(cpu050, default"):
        resolve_trace("bogus")


# --- the fill-up protocol -------------------------------------------------------------------------


def test_fillup_order_shuffles_by_name_then_draws_up_to_130_percent(tmp_path: Path) -> None:
    """The first len(pods) arrivals are the pods sorted by name and permuted with the seed; then
    draws (uniform, with replacement, over the name-sorted list) follow while the total GPU request
    plus the draw's per-GPU share stays within 130% of capacity."""
    pods = load_pods(write(tmp_path, "p.csv", small_pods()))
    capacity = 16_000
    order = fillup_order(pods, capacity, np.random.default_rng(7))
    by_name = sorted(range(len(pods)), key=lambda i: pods[i].name)
    rng = np.random.default_rng(7)
    assert order[: len(pods)] == [by_name[i] for i in rng.permutation(len(pods))]
    total = sum(p.gpu_demand for p in pods)
    for i in order[len(pods) :]:
        assert i == by_name[int(rng.integers(len(pods)))]
        total += pods[i].gpu_demand
    assert total <= 1.3 * capacity
    stopper = pods[by_name[int(rng.integers(len(pods)))]]
    assert total + stopper.gpu_milli > 1.3 * capacity  # the next draw would have crossed 130%
    assert fillup_order(pods, capacity, np.random.default_rng(8)) != order


def test_bucket_curve_averages_by_rounded_arrived_percent() -> None:
    """Rows at arrived 10, 10.4 -> bucket 10 (allocated 1, 2: mean 1.5); 10.6 -> 11; 12 -> 12;
    bucket 13 is empty and borrows its neighbours 12..14 (4, 5: 4.5); nothing lies near 16."""
    arrived = np.array([10.0, 10.4, 10.6, 12.0, 14.0])
    allocated = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert bucket_curve(arrived, allocated, 10, 16) == {10: 1.5, 11: 3.0, 12: 4.0, 13: 4.5, 14: 5.0, 15: 5.0}


def test_run_fillup_records_arrived_and_allocated_after_each_pod(tmp_path: Path) -> None:
    nodes = load_nodes(write(tmp_path, "n.csv", NODES))
    pods = load_pods(write(tmp_path, "p.csv", small_pods()), set(nodes.model_ids))
    r = run_fillup(nodes, pods, "fgd", seed=3)
    assert r.placed + r.failed == len(r.arrived) > len(pods)
    assert np.all(np.diff(r.arrived) >= 0) and np.all(np.diff(r.allocated) >= 0)
    assert np.all(r.allocated <= r.arrived + 1e-9)
    assert 125 < r.arrived[-1] <= 130  # stopped near 130%
    assert r.allocated[-1] <= 100
    assert r.failed > 0  # 130% of capacity cannot all fit
    assert r.unallocated_at(100) == pytest.approx(100 - r.curve(100, 100)[100])
    assert run_fillup(nodes, pods, "fgd", seed=3).allocated.tolist() == r.allocated.tolist()  # deterministic


# --- kai bench trace ------------------------------------------------------------------------------


def test_bench_trace_json_on_a_small_csv(tmp_path: Path) -> None:
    nodes = write(tmp_path, "n.csv", NODES)
    pods = write(tmp_path, "p.csv", small_pods())
    args = ["bench", "trace", "--trace", str(pods), "--nodes", str(nodes), "--policy", "bestfit", "--seeds", "42-43"]
    result = CliRunner().invoke(main, [*args, "-o", "json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["trace"] == str(pods) and doc["policy"] == "bestfit" and doc["seeds"] == [42, 43]
    per_seed = [s["unallocated_at_100"] for s in doc["per_seed"]]
    assert doc["unallocated_at_100"]["mean"] == pytest.approx(np.mean(per_seed), abs=1e-3)
    assert doc["unallocated_at_100"]["sd"] == pytest.approx(np.std(per_seed, ddof=1), abs=1e-3)
    arrived = [row["arrived"] for row in doc["curve"]]
    assert arrived[0] >= 75 and arrived[-1] <= 130 and 100 in arrived
    at100 = next(row for row in doc["curve"] if row["arrived"] == 100)
    assert at100["unallocated"]["mean"] == pytest.approx(doc["unallocated_at_100"]["mean"], abs=1e-3)
    text = CliRunner().invoke(main, args)
    assert "unallocated GPU at 100% arrived" in text.stdout


def test_bench_trace_bad_input_exits_2(tmp_path: Path) -> None:
    bad = write(tmp_path, "p.csv", POD_HEADER + "p1,1000,1,1,1000,H100,LS\n")
    result = CliRunner().invoke(main, ["bench", "trace", "--trace", str(bad), "--seeds", "1"])
    assert result.exit_code == 2
    assert "p.csv:2: gpu_spec: unknown GPU model 'H100'" in result.stderr
    result = CliRunner().invoke(main, ["bench", "trace", "--policy", "tetris"])
    assert result.exit_code == 2 and "unknown GPU placement policy" in result.stderr
    result = CliRunner().invoke(main, ["bench", "trace", "--seeds", "9-3"])
    assert result.exit_code == 2 and "--seeds: '9-3'" in result.stderr
