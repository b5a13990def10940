"""``kai explain`` on embedded scenario clusters (files as ``kai sim`` reads them): the text and the JSON,
with the numbers checked against what ``kai sim`` itself decides and reports for the same cycle."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from kai.api.objects import parse_time
from kai.cli import main

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
RAY = REPO / "examples" / "ray-kai"
WALKTHROUGH = [
    "-f", str(RAY / "00-queues.yaml"), "-f", str(RAY / "node-a10g.yaml"),
    "--at", f"1:{RAY / '01-raycluster-train.yaml'}", "--at", f"2:{RAY / '02-rayservice-inference.yaml'}",
]  # fmt: skip
NOW = "2026-01-01T12:00:00Z"


def kai(*args: str) -> tuple[int, str, str]:
    r = CliRunner().invoke(main, list(args))
    if r.exception and not isinstance(r.exception, SystemExit):
        raise r.exception
    return r.exit_code, r.stdout, r.stderr


def explain_json(*args: str) -> dict[str, Any]:
    code, out, err = kai("explain", *args, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def sim_json(*args: str) -> dict[str, Any]:
    code, out, err = kai("sim", *args, "-o", "json")
    assert code == 0, err
    return json.loads(out)


def sim_queue(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(q for q in doc["queues"] if q["name"] == name)


def same_numbers(numbers: dict[str, Any], sim_q: dict[str, Any]) -> None:
    for ours, theirs in (("fairShare", "fairShare"), ("allocated", "allocated"), ("requested", "requested")):
        for r in ("gpu", "cpu", "memory"):
            assert abs(numbers[ours][r] - sim_q[theirs][r]) < 1e-6, (ours, r, numbers[ours], sim_q[theirs])


def test_the_walkthroughs_raycluster_waits_for_the_inference_gang() -> None:
    """Cycle 3 of `make demo`: the recreated training RayCluster waits. Its reason is the very condition
    `kai sim` writes in that cycle, its queue's numbers are the cycle's, and what would make it run is the
    end of the inference gang that took its GPU."""
    doc = explain_json("podgroup", "default/pg-raycluster-sample", *WALKTHROUGH, "--cycle", "3")
    rays = [a for i, a in enumerate(WALKTHROUGH) if WALKTHROUGH[i - 1] == "-f"]
    sim = sim_json(*rays, "--at", WALKTHROUGH[5], "--at", WALKTHROUGH[7], "--cycles", "3")
    waiting = {w["podGroup"]: w for w in sim["timeline"][2]["waiting"]}
    assert doc["state"] == "pending" and doc["placed"] == 0 and doc["minMember"] == 2
    assert doc["reason"]["message"] == waiting["default/pg-raycluster-sample"]["message"]
    assert "Resources were found for 1 pods while 2 are required" in doc["reason"]["message"]
    same_numbers(doc["queueNumbers"], sim_queue(sim, "team-a"))
    worker = next(s for s in doc["missing"] if "worker" in s["pod"])
    assert worker["needPerPod"]["gpu"] == 1.0
    (a10g,) = worker["classes"]
    assert a10g["bestNode"] == "gpu-node-a10g" and a10g["free"]["gpu"] == 0.0 and a10g["short"] == ["GPUs"]
    assert doc["actions"]["preempt"] == "no preemptible pods are running"
    assert doc["position"]["inQueue"] == {"queue": "team-a", "rank": 2, "of": 2}
    assert doc["whatIf"]["ending"]["job"] == "default/pg-ray-kai-scheduler-serve-llm"
    code, text, _ = kai("explain", "podgroup", "default/pg-raycluster-sample", *WALKTHROUGH, "--cycle", "3")
    assert code == 0
    head = doc["reason"]["message"].split(". consolidation:")[0]
    assert f"  Why:    Unschedulable: {head}\n" in text
    assert "when job default/pg-ray-kai-scheduler-serve-llm ends" in text


def test_a_gang_over_its_queue_limit_would_run_with_the_limit_lifted() -> None:
    doc = explain_json("podgroup", "ml/big", "-f", str(DATA / "limit.yaml"), "--now", NOW)
    sim = sim_json(str(DATA / "limit.yaml"), "--now", NOW)
    assert doc["reason"]["code"] == "OverLimit"
    assert doc["reason"]["message"].startswith(
        "queue team-a is at its GPU limit: 0 GPUs of 2 GPUs allocated, job needs 4 GPUs"
    )
    condition = next(g for g in sim["podGroups"] if g["name"] == "big")["conditions"][0]
    assert condition["message"] == doc["reason"]["message"]
    same_numbers(doc["queueNumbers"], sim_queue(sim, "team-a"))
    assert doc["queueNumbers"]["limit"]["gpu"] == 2.0
    (lifted,) = doc["whatIf"]["tried"]
    assert lifted["change"] == "limit" and lifted["runs"] and lifted["nodes"] == ["node-0"]


def test_a_pod_whose_node_selector_matches_no_node() -> None:
    doc = explain_json("pod", "ml/wants-h100", "-f", str(DATA / "selector.yaml"))
    job = doc["job"]
    (shape,) = job["missing"]
    (a100,) = shape["classes"]
    assert a100["class"] == "4 x NVIDIA-A100" and a100["nodes"] == 2 and a100["matching"] == 0
    assert "2 do not match nodeSelector gpu=h100" in a100["text"]
    (tried,) = job["whatIf"]["tried"]
    assert tried["change"] == "nodeSelector" and tried["runs"] and tried["nodes"] == ["a100-0"]


def test_when_a_job_with_a_duration_ends_and_the_order_of_the_waiting_ones() -> None:
    args = ("-f", str(DATA / "ending.yaml"), "--now", NOW)
    second = explain_json("pod", "ml/second", *args)["job"]
    third = explain_json("pod", "ml/third", *args)["job"]
    # started 11:50 with kai.sim/duration 40m: ends 12:30, 30 minutes after --now
    assert second["whatIf"]["ending"] == {
        "job": "ml/pg-first",
        "jobsBefore": 0,
        "inSeconds": 1800.0,
        "text": "when job ml/pg-first ends, ~30 min if its duration annotation holds",
    }
    assert second["position"]["inQueue"]["rank"] == 1 and third["position"]["inQueue"]["rank"] == 2
    assert second["position"]["levels"][0]["dominantShare"] == 1.0  # 4 of its 4 GPUs allocated
    assert second["whatIf"]["tried"] == []  # no limit on GPUs, no selector, no topology: nothing else to try
    first = explain_json("pod", "ml/first", *args)["job"]
    assert first["state"] == "running"
    assert first["evictableBy"]["preempt"]["by"] == "jobs of priority above 50 in queue team-a"
    assert first["evictableBy"]["reclaim"] == []  # team-a is within its quota


def test_who_may_reclaim_a_running_job_and_until_when_min_runtime_protects_it() -> None:
    doc = explain_json("pod", "a/train", "-f", str(DATA / "reclaim.yaml"), "--now", NOW)
    (reclaim,) = doc["job"]["evictableBy"]["reclaim"]
    assert reclaim["queue"] == "team-b"
    assert reclaim["protectedUntil"] == parse_time("2026-01-01T12:30:00Z", "t")  # started 11:30, 1h
    assert doc["job"]["queueNumbers"]["standing"] == ["over quota (gpu)"]


def test_without_the_topology_constraint_the_gang_would_run() -> None:
    doc = explain_json("podgroup", "team-llm/pg-llm-finetune", "-f", str(REPO / "examples/topology/cluster.yaml"))
    assert "no rack of topology cluster-topology has 24 free GPUs" in doc["reason"]["message"]
    (topology,) = doc["whatIf"]["tried"]
    assert topology["change"] == "topology" and topology["runs"] and len(topology["nodes"]) == 3
    # racks are two 8-GPU nodes: even with every running job gone, no rack has the 24 GPUs the gang needs
    assert doc["whatIf"]["ending"]["text"].startswith("even when the 3 running jobs considered have ended")


def test_a_queue_tree_with_its_waiting_jobs() -> None:
    path = str(REPO / "examples/two-teams/cluster.yaml")
    doc = explain_json("queue", "research", "-f", path)
    sim = sim_json(path)
    assert [(r["queue"], r["depth"]) for r in doc["tree"]] == [("research", 0), ("team-a", 1), ("team-b", 1)]
    for row in doc["tree"]:
        same_numbers(row, sim_queue(sim, row["queue"]))
    (waiting,) = doc["pending"]
    condition = next(g for g in sim["podGroups"] if g["name"] == "llm-pretrain")["conditions"][0]
    assert waiting["podGroup"] == "team-a/llm-pretrain"
    assert condition["message"].startswith(waiting["reason"])
    code, text, _ = kai("explain", "queue", "team-b", "-f", path)
    assert code == 0 and text.startswith("Queue team-b\n") and "No waiting jobs." in text


def test_the_same_cluster_gives_the_same_answer() -> None:
    a = explain_json("podgroup", "ml/big", "-f", str(DATA / "limit.yaml"), "--now", NOW)
    b = explain_json("podgroup", "ml/big", "-f", str(DATA / "limit.yaml"), "--now", NOW)
    a.pop("timing"), b.pop("timing")
    assert a == b


def test_bad_input_names_the_object_and_exits_2() -> None:
    args = ("-f", str(DATA / "ending.yaml"), "--now", NOW)
    code, _, err = kai("explain", "pod", "ml/nope", *args)
    assert code == 2 and "pod ml/nope not found" in err
    code, _, err = kai("explain", "queue", "nope", *args)
    assert code == 2 and "queue 'nope' not found" in err
    code, _, err = kai("explain", "podgroup", "nope", *args)
    assert code == 2 and "podgroup default/nope not found" in err
    code, _, err = kai("explain", "pod", "ml/x", "-f", str(DATA / "missing.yaml"))
    assert code == 2 and "missing.yaml" in err
    code, _, err = kai("explain", "pod", "ml/x", "--now", NOW)
    assert code == 2 and "--now" in err
    other = explain_json("pod", "ml/other", *args)
    assert other["notScheduled"].startswith("schedulerName is 'someone-else'")


def test_an_unreachable_api_server_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tmp_path / "kubeconfig"
    config.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    for args in (("explain", "queue", "q"), ("snapshot",)):
        code, _, err = kai(*args, "--kubeconfig", str(config))
        assert code == 1 and "cannot read the cluster" in err, err


def test_a_simulation_document_is_refused_not_ignored() -> None:
    code, _, err = kai("explain", "queue", "team-a", "-f", str(REPO / "examples/two-teams-over-time/simulation.yaml"))
    assert code == 2 and "Simulation/" in err and "kai explain reads the cluster at one moment" in err


def test_a_gang_short_of_pods_is_not_ready_and_nothing_is_tried() -> None:
    doc = explain_json("podgroup", "ml/gang", "-f", str(DATA / "notready.yaml"))
    assert doc["reason"] == {
        "code": "NotReady",
        "message": "Job is not ready for scheduling. Waiting for 3 pods, currently 1 exist, 0 are gated",
    }
    assert doc["whatIf"]["tried"] == []
    assert doc["whatIf"]["blocked"].startswith("nothing to try: fewer than minMember 3 of its pods exist")


def test_a_pod_stuck_in_releasing_is_shown_so_and_keeps_its_gpu() -> None:
    """A pod terminating past the stuckInReleasingThreshold is StuckInReleasing in explain too, and its GPU is not
    free for the job waiting behind it (nothing is pipelined onto it)."""
    stuck = REPO / "tests" / "scenarios" / "allocate" / "stuck_in_releasing_no_pipelining" / "cluster.yaml"
    args = ("-f", str(stuck), "--now", "2026-01-01T00:00:00Z")
    victim = explain_json("podgroup", "default/victim-job", *args)
    assert [(p["name"], p["status"], p["node"]) for p in victim["pods"]] == [
        ("victim-job-0", "StuckInReleasing", "node0")
    ]
    waiting = explain_json("podgroup", "default/pending-job", *args)
    assert [p["status"] for p in waiting["pods"]] == ["Pending"]
    code, out, _ = kai("explain", "podgroup", "default/pending-job", *args)
    assert code == 0 and "node0, has 0 GPUs" in out and "short of GPUs" in out
