"""The Alibaba trace as a workload source of ``kai sim`` in time mode (``spec.traces``): the trace's pod
shapes and nodes through the real command and the embedded cluster, determinism, and bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from kai.api import constants as C
from kai.cli import main
from kai.sim.timesim import Overrides, load_input, plan
from kai.trace.alibaba import DEFAULT_DATA_DIR, DEFAULT_NODES, load_nodes, load_pods
from tests.timesim.helpers import node, queue, simulation

NODES_CSV = """sn,cpu_milli,memory_mib,gpu,model
node-t4,32000,131072,4,T4
node-v100,64000,262144,8,V100M32
node-cpu,16000,65536,0,
"""
# CPU-only, shared, two whole GPUs, one model (a node selector), shared on two models (an affinity)
PODS_CSV = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos
pod-cpu,4000,8192,0,0,,BE
pod-half,2000,4096,1,500,,LS
pod-two,8000,16384,2,1000,,LS
pod-v100,4000,8192,1,1000,V100M32,LS
pod-quarter,2000,4096,1,250,T4|V100M32,LS
"""
TRACE = {
    "name": "tr",
    "pods": "pods.csv",
    "nodes": "nodes.csv",
    "pick": "first",
    "interArrival": "1m",
    "duration": "1h",
    "queue": "team-a",
}


def _write(tmp_path: Path, docs: list[str]) -> Path:
    (tmp_path / "nodes.csv").write_text(NODES_CSV)
    (tmp_path / "pods.csv").write_text(PODS_CSV)
    f = tmp_path / "sim.yaml"
    f.write_text("---\n".join(docs))
    return f


def kai_sim(path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["sim", str(path), *args])
    return result.exit_code, result.stdout, result.stderr


def _trace(**changes: Any) -> dict[str, Any]:
    t = {**TRACE, **changes}
    return {k: v for k, v in t.items() if v is not None}


def test_trace_pods_keep_their_shapes_through_kai_sim(tmp_path: Path) -> None:
    f = _write(tmp_path, [queue("team-a", 8), simulation(seed=1, traces=[_trace()])])
    code, out, err = kai_sim(f, "--until", "10m", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    pods = {p["name"]: p for p in doc["pods"]}
    # pick: first -> job i is the trace's row i; all five arrived (one a minute) and were bound
    assert sorted(pods) == [f"tr-{i:05d}-0" for i in range(5)]
    assert all(p["status"] in ("Running", "Binding") and p["queue"] == "team-a" for p in pods.values())
    assert doc["summary"]["jobs"]["submitted"] == 5
    cpu, half, two, v100, quarter = (pods[f"tr-{i:05d}-0"] for i in range(5))
    assert cpu["gpus"] == 0 and cpu["gpuGroups"] == []
    assert half["gpus"] == 0.5 and len(half["gpuGroups"]) == 1  # a shared GPU: a GPU group
    assert two["gpus"] == 2 and two["gpuGroups"] == []  # whole GPUs take no group
    assert v100["node"] == "node-v100"  # gpu_spec V100M32: only the V100 node
    assert quarter["gpus"] == 0.25 and quarter["node"] in ("node-t4", "node-v100")
    assert doc["summary"]["gpuCapacity"] == 12  # the node CSV's 4 + 8 GPUs


def test_each_trace_row_becomes_the_pod_the_loader_describes(tmp_path: Path) -> None:
    f = _write(tmp_path, [queue("team-a", 8), simulation(seed=1, traces=[_trace(checkpointInterval="30m")])])
    objects, _, spec = load_input([(str(f), f.read_text())])
    p = plan(objects, spec, Overrides())
    arrivals = [a for s in p.sources for a in s.arrivals()]
    nodes = {o.meta.name: o for a in arrivals if a.at == 0 for _, o in a.objects if o.kind == "Node"}
    assert set(nodes) == {"node-t4", "node-v100", "node-cpu"}
    assert nodes["node-v100"].allocatable[C.RESOURCE_GPU] == 8
    assert nodes["node-v100"].meta.labels[C.LABEL_GPU_PRODUCT] == "V100M32"
    assert nodes["node-t4"].allocatable["cpu"] == 32000 and nodes["node-t4"].allocatable["memory"] == 131072 * 2**20
    assert C.LABEL_GPU_PRODUCT not in nodes["node-cpu"].meta.labels
    jobs = [a for a in arrivals if a.at > 0]
    assert [a.at for a in jobs] == [60, 120, 180, 240, 300]
    shapes = load_pods(tmp_path / "pods.csv")
    for a, shape in zip(jobs, shapes, strict=True):
        pg, pod = (o for _, o in a.objects)
        assert pg.kind == "PodGroup" and pg.min_member == 1 and pg.queue == "team-a"
        ann = pod.meta.annotations
        assert ann["kai.sim/trace-pod"] == shape.name
        assert ann[C.ANNOTATION_SIM_DURATION] == "3600s" and ann[C.ANNOTATION_SIM_CHECKPOINT] == "30m0s"
        assert pod.requests["cpu"] == shape.cpu_milli  # millicores
        assert pod.requests["memory"] == shape.memory_mib * 2**20
        whole = shape.num_gpu if shape.gpu_milli == 1000 else 0
        assert pod.requests.get(C.RESOURCE_GPU, 0) == whole
        frac = ann.get(C.ANNOTATION_GPU_FRACTION)
        assert (frac is not None) == (0 < shape.gpu_milli < 1000)
        if frac is not None:
            assert float(frac) * 1000 == shape.gpu_milli
    selectors = [next(o for _, o in a.objects if o.kind == "Pod") for a in jobs]
    assert selectors[3].node_selector == {C.LABEL_GPU_PRODUCT: "V100M32"}
    (term,) = selectors[4].affinity_terms
    assert term.match_expressions[0].key == C.LABEL_GPU_PRODUCT
    assert term.match_expressions[0].values == ("T4", "V100M32")
    assert not selectors[0].node_selector and not selectors[0].affinity_terms


def _picked(tmp_path: Path, **changes: Any) -> list[str]:
    f = _write(tmp_path, [queue("team-a", 8), simulation(seed=4, traces=[_trace(**changes)])])
    objects, _, spec = load_input([(str(f), f.read_text())])
    p = plan(objects, spec, Overrides())
    trace = next(s for s in p.sources if s.name == "trace tr")
    return [o.meta.annotations["kai.sim/trace-pod"] for a in trace.arrivals() for _, o in a.objects if o.kind == "Pod"]


def test_picks_pass_over_the_trace_again_and_end_cuts_arrivals(tmp_path: Path) -> None:
    names = [s.name for s in load_pods_csv(tmp_path)]
    assert _picked(tmp_path, jobs=7) == names + names[:2]  # pick: first, file order, then again
    random = _picked(tmp_path, pick="random", jobs=10)
    assert random != names * 2 and sorted(random) == sorted(names * 2)  # two permutations, each row twice
    assert sorted(_picked(tmp_path, pick="random")) == sorted(names)  # no jobs: the whole trace once
    assert _picked(tmp_path, end="3m30s") == names[:3]  # arrivals at 1m, 2m, 3m; 4m is past the end


def load_pods_csv(tmp_path: Path) -> list[Any]:
    (tmp_path / "pods.csv").write_text(PODS_CSV)
    return load_pods(tmp_path / "pods.csv")


def _default_trace_run(tmp_path: Path, seed: int, name: str) -> dict[str, Any]:
    trace = {
        "name": "openb",
        "pods": "default",
        "jobs": 120,
        "interArrival": {"exponential": {"mean": "10s"}},
        "duration": {"lognormal": {"median": "20m", "sigma": 0.5}},
        "queues": {"choices": ["team-a", "team-b"], "weights": [3, 1]},
    }
    f = tmp_path / "sim.yaml"
    f.write_text("---\n".join([queue("team-a", 100), queue("team-b", 100), simulation(seed=seed, traces=[trace])]))
    metrics = tmp_path / f"{name}.json"
    code, _, err = kai_sim(f, "--until", "1h", "--period", "1m", "--metrics", str(metrics))
    assert code == 0, err
    return json.loads(metrics.read_text())


def test_default_trace_runs_on_its_nodes_and_a_seed_fixes_the_run(tmp_path: Path) -> None:
    first = _default_trace_run(tmp_path, 5, "a")
    again = _default_trace_run(tmp_path, 5, "b")
    other = _default_trace_run(tmp_path, 6, "c")
    assert first == again
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    assert [j["gpus"] for j in first["jobs"]] != [j["gpus"] for j in other["jobs"]]
    s = first["summary"]
    table = load_nodes(DEFAULT_DATA_DIR / DEFAULT_NODES)
    assert s["gpuCapacity"] == table.gpu_capacity / 1000 == 6212
    assert s["jobs"]["submitted"] == 120 == len(first["jobs"])  # every arrival counted
    assert s["jobs"]["started"] == 120  # a nearly idle cluster runs them all
    gpus = [j["gpus"] for j in first["jobs"]]
    demands = {p.gpu_demand / 1000 for p in load_pods(DEFAULT_DATA_DIR / "openb_pod_list_default.csv")}
    assert set(gpus) <= demands  # every job has a trace pod's GPU demand
    assert any(0 < g < 1 for g in gpus) and any(g >= 1 and g == int(g) for g in gpus) and 0 in gpus
    by_queue = {q["name"]: q["jobs"]["submitted"] for q in first["queues"]}
    assert by_queue["team-a"] > by_queue["team-b"] > 0  # weights 3:1


def test_round_robin_queues_and_manifest_nodes_with_gpu_spec_ignored(tmp_path: Path) -> None:
    trace = _trace(nodes="manifests", gpuSpec="ignore", queue=None, queues=["team-a", "team-b"])
    docs = [queue("team-a", 8), queue("team-b", 8), node("dgx-0", 8), simulation(seed=1, traces=[trace])]
    code, out, err = kai_sim(_write(tmp_path, docs), "--until", "10m", "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    pods = {p["name"]: p for p in doc["pods"]}
    assert [pods[f"tr-{i:05d}-0"]["queue"] for i in range(5)] == ["team-a", "team-b"] * 2 + ["team-a"]
    assert {p["node"] for p in pods.values()} == {"dgx-0"}  # gpu_spec ignored: the only node takes all
    assert doc["summary"]["gpuCapacity"] == 8


def test_a_trace_leaves_the_generators_draws_alone(tmp_path: Path) -> None:
    gen = {"name": "g", "queue": "team-a", "jobs": 4, "interArrival": {"exponential": {"mean": "1m"}}}
    gen["duration"] = {"exponential": {"mean": "5m"}}
    base = [queue("team-a", 8), node("n1", 8)]

    def arrivals(*traces: dict[str, Any]) -> list[tuple[float, str]]:
        f = _write(tmp_path, [*base, simulation(seed=3, generators=[gen], traces=list(traces))])
        objects, _, spec = load_input([(str(f), f.read_text())])
        p = plan(objects, spec, Overrides())
        return [
            (a.at, o.meta.name)
            for s in p.sources
            if s.name == "generator g"
            for a in s.arrivals()
            for _, o in a.objects
        ]

    alone = arrivals()
    assert len(alone) == 8  # 4 PodGroups and their pods
    assert arrivals(_trace(nodes="manifests", gpuSpec="ignore")) == alone


def test_node_events_may_name_a_trace_node(tmp_path: Path) -> None:
    events = [{"at": "2m", "node": "node-v100", "action": "fail"}]
    f = _write(tmp_path, [queue("team-a", 8), simulation(seed=1, nodeEvents=events, traces=[_trace()])])
    code, out, err = kai_sim(f, "--until", "10m", "-o", "json")
    assert code == 0, err
    assert json.loads(out)["summary"]["gpuCapacity"] == 4  # the V100 node is gone


@pytest.mark.parametrize(
    ("change", "pods_csv", "where", "message"),
    [
        ({"pods": "nosuch"}, None, "spec.traces[0].pods", "'nosuch' is not a trace variant (cpu050, default,"),
        ({"nodes": "missing.csv"}, None, "spec.traces[0].nodes", "'missing.csv' is not a node CSV file"),
        ({"pick": "last"}, None, "spec.traces[0].pick", "expected one of random, first, got 'last'"),
        ({"gpuSpec": "no"}, None, "spec.traces[0].gpuSpec", "expected one of nodeAffinity, ignore"),
        ({"interArrival": None}, None, "spec.traces[0].interArrival", "is required"),
        ({"jobs": -1}, None, "spec.traces[0].jobs", "expected a whole number >= 0, got -1"),
        ({"queue": "nobody"}, None, "spec.traces[0].queue", "queue 'nobody' does not exist"),
        ({"queues": ["team-a"]}, None, "spec.traces[0].queue", "give queue (one queue) or queues"),
        (
            {"queue": None, "queues": {"choices": ["team-a", "x"], "weights": [1]}},
            None,
            "spec.traces[0].queues.weights",
            "expected a list of 2 numbers, one per queue",
        ),
        ({"priorityClassName": "urgent"}, None, "spec.traces[0].priorityClassName", "'urgent' does not exist"),
        (
            {},
            PODS_CSV + "pod-bad,1000,1024,2,500,,LS\n",
            "spec.traces[0].pods",
            "pods.csv:7: gpu_milli: a shared GPU (500 < 1000) needs num_gpu 1, got 2",
        ),
        (
            {},
            PODS_CSV + "pod-h100,1000,1024,1,1000,H100,LS\n",
            "spec.traces[0].pods",
            "pods.csv:7: gpu_spec: unknown GPU model 'H100' (nodes have: T4, V100M32)",
        ),
        (
            {"nodes": "manifests"},
            None,
            "spec.traces[0].pods",
            "pods.csv:5: gpu_spec: unknown GPU model 'V100M32' (nodes have: )",
        ),
    ],
)
def test_bad_trace_input_names_the_field(
    tmp_path: Path, change: dict[str, Any], pods_csv: str | None, where: str, message: str
) -> None:
    f = _write(tmp_path, [queue("team-a", 8), node("n1", 8), simulation(traces=[_trace(**change)])])
    if pods_csv is not None:
        (tmp_path / "pods.csv").write_text(pods_csv)
    code, out, err = kai_sim(f, "--until", "1h")
    assert code == 2 and out == ""
    assert f"{f}: Simulation/t: {where}: " in err
    assert message in " ".join(err.split())


def test_trace_nodes_must_not_clash_with_the_input(tmp_path: Path) -> None:
    f = _write(tmp_path, [queue("team-a", 8), node("node-t4", 8), simulation(traces=[_trace()])])
    code, _, err = kai_sim(f, "--until", "1h")
    assert code == 2
    assert "spec.traces[0].nodes: " in err and "node 'node-t4' is also in the input" in " ".join(err.split())


def test_a_trace_name_is_one_source(tmp_path: Path) -> None:
    gen = {"name": "tr", "queue": "team-a", "jobs": 1, "interArrival": "1m", "duration": "1m"}
    f = _write(tmp_path, [queue("team-a", 8), simulation(generators=[gen], traces=[_trace()])])
    code, _, err = kai_sim(f, "--until", "1h")
    assert code == 2 and "spec.traces[0].name: 'tr' is used by an earlier generator or trace" in err


def test_the_example_document_parses_and_plans() -> None:
    folder = Path(__file__).parent.parent.parent / "examples" / "trace-over-time"
    texts = [(str(p), p.read_text()) for p in sorted(folder.glob("*.yaml"))]
    objects, _, spec = load_input(texts)
    assert spec is not None and spec.traces[0].pods == "default"
    p = plan(objects, spec, Overrides())
    nodes = [o for s in p.sources if s.name == "manifests" for a in s.arrivals() for _, o in a.objects]
    assert len([n for n in nodes if n.kind == "Node"]) == 1213
    assert yaml.safe_load(texts[1][1])["spec"]["traces"][0]["jobs"] == 5000
