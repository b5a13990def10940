"""Owners whose spec contradicts itself, in kai sim: a Warning event on the owner naming the field, the pods
grouped by the default rule (one PodGroup, minMember 1) and scheduled; nothing is dropped. Malformed values
stay errors (tests/test_sim_workloads.py)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.test_sim_workloads import BASE, raycluster

SimFn = Callable[..., tuple[int, dict[str, Any] | None, str]]

C = '{spec: {containers: [{name: c, resources: {requests: {cpu: "100m"}}}]}}'


def _doc(text: str) -> str:
    return textwrap.dedent(text).replace("TEMPLATE", C)


# (manifest, owner reference, field, podgroup, pods expected)
INCONSISTENT = [
    pytest.param(
        raycluster().replace("replicas: 1", "replicas: 1\n    minReplicas: 2\n    maxReplicas: 2"),
        "RayCluster/default/rc",
        "spec.workerGroupSpecs[0].minReplicas",
        "pg-rc",
        3,  # KubeRay clamps replicas up to minReplicas: head + 2 workers
        id="raycluster_min_replicas_over_replicas",
    ),
    pytest.param(
        raycluster().replace("replicas: 1", "replicas: 3\n    minReplicas: 3\n    maxReplicas: 2"),
        "RayCluster/default/rc",
        "spec.workerGroupSpecs[0].minReplicas",
        "pg-rc",
        3,
        id="raycluster_min_replicas_over_max_replicas",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: ray.io/v1
            kind: RayService
            metadata: {name: svc, labels: {kai.scheduler/queue: team-a}}
            spec:
              rayClusterConfig:
                headGroupSpec: {template: TEMPLATE}
                workerGroupSpecs:
                - {groupName: g, replicas: 1, numOfHosts: -1, template: TEMPLATE}
            """
        ),
        "RayService/default/svc",
        "spec.rayClusterConfig.workerGroupSpecs[0].numOfHosts",
        "pg-svc",
        1,
        id="rayservice_negative_num_of_hosts",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: kubeflow.org/v1
            kind: TFJob
            metadata: {name: tf, labels: {kai.scheduler/queue: team-a}}
            spec:
              tfReplicaSpecs:
                Worker: {replicas: 2, template: TEMPLATE}
                PS: {replicas: 0, template: TEMPLATE}
            """
        ),
        "TFJob/default/tf",
        "spec.tfReplicaSpecs.PS.replicas",
        "pg-tf",
        2,
        id="tfjob_zero_replicas",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: kubeflow.org/v1
            kind: PyTorchJob
            metadata: {name: pt, labels: {kai.scheduler/queue: team-a}}
            spec:
              pytorchReplicaSpecs:
                Master: {replicas: 1, template: TEMPLATE}
                Worker: {replicas: -1, template: TEMPLATE}
            """
        ),
        "PyTorchJob/default/pt",
        "spec.pytorchReplicaSpecs.Worker.replicas",
        "pg-pt",
        1,
        id="pytorchjob_negative_replicas",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: kubeflow.org/v1
            kind: PyTorchJob
            metadata: {name: pt, labels: {kai.scheduler/queue: team-a}}
            spec:
              pytorchReplicaSpecs:
                Master: {replicas: 1, template: TEMPLATE}
                Worker:
                  replicas: 2
                  template:
                    metadata: {annotations: {kai.scheduler/segment-size: "0"}}
                    spec: {containers: [{name: c}]}
            """
        ),
        "PyTorchJob/default/pt",
        "spec.pytorchReplicaSpecs.Worker.template.metadata.annotations.kai.scheduler/segment-size",
        "pg-pt",
        3,
        id="pytorchjob_segment_size_zero",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: batch/v1
            kind: Job
            metadata:
              name: train
              labels: {kai.scheduler/queue: team-a}
              annotations: {kai.scheduler/batch-min-member: "-1"}
            spec: {parallelism: 2, template: TEMPLATE}
            """
        ),
        "Job/default/train",
        "metadata.annotations.kai.scheduler/batch-min-member",
        "pg-train",
        2,
        id="job_negative_batch_min_member",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: jobset.x-k8s.io/v1alpha2
            kind: JobSet
            metadata: {name: js, labels: {kai.scheduler/queue: team-a}}
            spec:
              replicatedJobs:
              - name: w
                replicas: 1
                template:
                  metadata: {annotations: {kai.scheduler/batch-min-member: "0"}}
                  spec: {parallelism: 2, template: TEMPLATE}
            """
        ),
        "JobSet/default/js",
        "spec.replicatedJobs[0].template.metadata.annotations.kai.scheduler/batch-min-member",
        "pg-js",
        2,
        id="jobset_leaf_min_member_zero",
    ),
    pytest.param(
        _doc(
            """\
            apiVersion: leaderworkerset.x-k8s.io/v1
            kind: LeaderWorkerSet
            metadata: {name: lws, labels: {kai.scheduler/queue: team-a}}
            spec:
              replicas: 1
              leaderWorkerTemplate:
                size: 2
                subGroupPolicy: {subGroupSize: 3}
                workerTemplate: TEMPLATE
            """
        ),
        "LeaderWorkerSet/default/lws",
        "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize",
        "pg-lws",  # the default rule: one PodGroup for the owner, not one per replica group
        2,
        id="lws_segment_larger_than_the_group",
    ),
]


def _run(sim: SimFn, tmp_path: Path, text: str, *args: str) -> dict[str, Any]:
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "owner.yaml").write_text(text)
    code, doc, err = sim([str(tmp_path / "base.yaml"), *(args or [str(tmp_path / "owner.yaml")])])
    assert code == 0, err
    assert doc is not None
    return doc


@pytest.mark.parametrize(("text", "ref", "field", "podgroup", "n_pods"), INCONSISTENT)
def test_inconsistent_owner_warns_on_the_owner_and_its_pods_still_run(
    sim: SimFn, tmp_path: Path, text: str, ref: str, field: str, podgroup: str, n_pods: int
) -> None:
    doc = _run(sim, tmp_path, text)
    warnings = [e for e in doc["events"] if e["type"] == "Warning" and e["reason"] == "PodGrouperWarning"]
    assert [(e["object"], e["cycle"]) for e in warnings] == [(ref, 1)], "one warning, on the owner, when applied"
    assert warnings[0]["message"].startswith(f"{field}: ")
    assert f"grouped by the default rule instead (PodGroup default/{podgroup}, minMember 1)" in warnings[0]["message"]
    assert len(doc["pods"]) == n_pods
    assert {(p["podGroup"], p["queue"], p["status"]) for p in doc["pods"]} == {(podgroup, "team-a", "Binding")}
    (pg,) = [g for g in doc["podGroups"] if g["name"] == podgroup]
    assert (pg["minMember"], pg["conditions"]) == (1, [])


def test_the_warning_is_given_once_across_cycles_and_recreated_pods(sim: SimFn, tmp_path: Path) -> None:
    text = INCONSISTENT[0].values[0]
    doc = _run(sim, tmp_path, str(text), str(tmp_path / "owner.yaml"), "--cycles", "3")
    warnings = [e for e in doc["events"] if e["reason"] == "PodGrouperWarning"]
    assert len(warnings) == 1
    assert {p["status"] for p in doc["pods"]} == {"Running"}


def test_an_inconsistent_owner_arriving_later_warns_in_its_cycle(sim: SimFn, tmp_path: Path) -> None:
    text = INCONSISTENT[3].values[0]
    doc = _run(sim, tmp_path, str(text), "--at", f"2:{tmp_path / 'owner.yaml'}", "--cycles", "2")
    warnings = [e for e in doc["events"] if e["reason"] == "PodGrouperWarning"]
    assert [(e["object"], e["cycle"]) for e in warnings] == [("TFJob/default/tf", 2)]
    assert {(p["podGroup"], p["status"]) for p in doc["pods"]} == {("pg-tf", "Binding")}
