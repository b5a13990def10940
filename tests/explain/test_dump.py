"""kai snapshot's documents: what is left out or renamed for kai sim, and anonymization that keeps every
reference (selectors, PodGroup names, nodes, queues) pointing where it pointed."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from kai.cli import main
from kai.explain._dump import OTHER_SCHEDULER, dump_yaml

DOCS = {
    "Queue": [
        {"metadata": {"name": "dept"}, "spec": {"resources": {"gpu": {"quota": 4, "limit": -1}}}},
        {"metadata": {"name": "team"}, "spec": {"parentQueue": "dept", "resources": {"gpu": {"quota": 4}}}},
    ],
    "Node": [
        {
            "metadata": {"name": "gpu-1", "labels": {"rack": "r1", "kubernetes.io/hostname": "gpu-1"}},
            "status": {
                "allocatable": {"nvidia.com/gpu": "4", "cpu": "8"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }
    ],
    "PodGroup": [
        {"metadata": {"name": "train", "namespace": "ml", "uid": "u-1"}, "spec": {"minMember": 1, "queue": "team"}}
    ],
    "PodDisruptionBudget": [
        {
            "metadata": {"name": "keep", "namespace": "ml"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "train"}}},
        }
    ],
    "Pod": [
        {
            "metadata": {
                "name": "train-0",
                "namespace": "ml",
                "labels": {"app": "train"},
                "annotations": {"pod-group-name": "train", "secret/note": "x"},
                "ownerReferences": [{"kind": "Job", "name": "train", "uid": "j"}],
            },
            "spec": {
                "schedulerName": "kai-scheduler",
                "nodeName": "gpu-1",
                "nodeSelector": {"rack": "r1"},
                "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
            },
            "status": {"phase": "Running", "startTime": "2026-01-01T11:00:00Z"},
        },
        {  # kai's, not grouped yet: the scheduler skips it, so does the snapshot
            "metadata": {"name": "fresh", "namespace": "ml"},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c"}]},
        },
        {  # another scheduler's, bound: it takes room
            "metadata": {"name": "web", "namespace": "ml"},
            "spec": {
                "schedulerName": "default-scheduler",
                "nodeName": "gpu-1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}],
            },
            "status": {"phase": "Running"},
        },
        {  # another scheduler's, pending: nothing
            "metadata": {"name": "web-2", "namespace": "ml"},
            "spec": {"schedulerName": "default-scheduler", "containers": [{"name": "c"}]},
        },
    ],
}  # fmt: skip


def _sim(text: str, tmp_path) -> dict:
    path = tmp_path / "snap.yaml"
    path.write_text(text)
    r = CliRunner().invoke(main, ["sim", str(path), "-o", "json", "--now", "2026-01-01T12:00:00Z"])
    assert r.exit_code == 0, r.stderr
    return json.loads(r.stdout)


def test_what_kai_sim_gets(tmp_path) -> None:
    text, notes = dump_yaml(DOCS, now=0.0)
    docs = [d for d in yaml.safe_load_all(text) if d]
    pods = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Pod"}
    assert set(pods) == {"train-0", "web"}
    assert pods["web"]["spec"]["schedulerName"] == OTHER_SCHEDULER
    assert "ownerReferences" not in pods["train-0"]["metadata"]
    assert any("1 kai pods without an existing PodGroup left out" in n for n in notes)
    sim = _sim(text, tmp_path)
    assert {p["name"]: p["status"] for p in sim["pods"]} == {"train-0": "Running", "web": "Running"}
    team = next(q for q in sim["queues"] if q["name"] == "team")
    assert team["allocated"]["gpu"] == 2.0


def test_anonymized_references_still_meet(tmp_path) -> None:
    text, _ = dump_yaml(DOCS, now=0.0, anonymize=True)
    for secret in ("ml", "gpu-1", "train", "dept", "team", "r1", "keep", "secret/note"):
        assert f" {secret}\n" not in text and f": {secret}" not in text and f"{secret}:" not in text, secret
    docs = [d for d in yaml.safe_load_all(text) if d]
    node = next(d for d in docs if d["kind"] == "Node")
    pod = next(d for d in docs if d["kind"] == "Pod" and d["spec"]["schedulerName"] == "kai-scheduler")
    pg = next(d for d in docs if d["kind"] == "PodGroup")
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
    queues = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Queue"}
    assert pod["spec"]["nodeName"] == node["metadata"]["name"] == node["metadata"]["labels"]["kubernetes.io/hostname"]
    assert pod["spec"]["nodeSelector"]["rack"] == node["metadata"]["labels"]["rack"]
    assert pod["metadata"]["annotations"] == {"pod-group-name": pg["metadata"]["name"]}
    assert pod["metadata"]["namespace"] == pg["metadata"]["namespace"] == pdb["metadata"]["namespace"]
    assert pdb["spec"]["selector"]["matchLabels"] == pod["metadata"]["labels"]
    assert pg["spec"]["queue"] in queues and queues[pg["spec"]["queue"]]["spec"]["parentQueue"] in queues
    assert pg["metadata"]["uid"] == "u-1"  # kept: it breaks order ties
    sim = _sim(text, tmp_path)
    assert [p["status"] for p in sim["pods"]] == ["Running", "Running"]
    assert sorted(q["allocated"]["gpu"] for q in sim["queues"])[-2:] == [2.0, 2.0]  # team and its parent
