"""Kubeflow, KubeRay, JobSet and LWS controllers: the children they create, with the labels KAI's
pod-grouper routes by."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kai.api import constants as C
from kai.sim.controllers import apps, batch, jobset, kubeflow, lws, ray
from tests.unit.controllers.helpers import TEMPLATE, FakeView, made, names, with_phase, workload

ROLE, TYPE, INDEX = C.LABEL_KUBEFLOW_JOB_ROLE, C.LABEL_KUBEFLOW_REPLICA_TYPE, C.LABEL_KUBEFLOW_REPLICA_INDEX


def specs(**replicas: int) -> dict[str, Any]:
    return {k: {"replicas": v, "template": copy.deepcopy(TEMPLATE)} for k, v in replicas.items()}


def training(kind: str, field: str, api: str = "kubeflow.org/v1", **spec: Any) -> Any:
    return workload(
        {"apiVersion": api, "kind": kind, "metadata": {"name": "j"}, "spec": {field: spec.pop("replicas"), **spec}}
    )


def test_pytorchjob_pods_master_first_with_replica_labels() -> None:
    job = training("PyTorchJob", "pytorchReplicaSpecs", replicas=specs(Worker=2, Master=1))
    pods = made(kubeflow.training_job(job, FakeView()))
    assert [p.meta.name for p in pods] == ["j-master-0", "j-worker-0", "j-worker-1"]
    assert [(p.meta.labels[TYPE], p.meta.labels[INDEX], p.meta.labels.get(ROLE)) for p in pods] == [
        ("master", "0", "master"),
        ("worker", "0", None),
        ("worker", "1", None),
    ]
    assert all(p.meta.labels[C.LABEL_KUBEFLOW_JOB_NAME] == "j" for p in pods)
    # a lost pod comes back under its name; the others are left alone
    assert names(kubeflow.training_job(job, FakeView(pods[:2]))) == ["j-worker-1"]


def test_tfjob_without_chief_leads_with_worker_zero() -> None:
    pods = made(kubeflow.training_job(training("TFJob", "tfReplicaSpecs", replicas=specs(Worker=2, PS=1)), FakeView()))
    assert {p.meta.name: p.meta.labels.get(ROLE) for p in pods} == {
        "j-ps-0": None,
        "j-worker-0": "master",
        "j-worker-1": None,
    }


def test_suspended_training_job_has_no_pods() -> None:
    job = training("PyTorchJob", "pytorchReplicaSpecs", replicas=specs(Worker=2), runPolicy={"suspend": True})
    assert kubeflow.training_job(job, FakeView()).create == []


def test_mpijob_v1_launcher_pod_and_workers() -> None:
    pods = made(
        kubeflow.training_job(training("MPIJob", "mpiReplicaSpecs", replicas=specs(Launcher=1, Worker=2)), FakeView())
    )
    assert [(p.meta.name, p.meta.labels[ROLE]) for p in pods] == [
        ("j-launcher", "launcher"),
        ("j-worker-0", "worker"),
        ("j-worker-1", "worker"),
    ]


def test_mpijob_v2_waits_for_workers_before_the_launcher_job() -> None:
    job = training(
        "MPIJob",
        "mpiReplicaSpecs",
        api="kubeflow.org/v2beta1",
        replicas=specs(Launcher=1, Worker=2),
        launcherCreationPolicy="WaitForWorkersReady",
    )
    workers = made(kubeflow.training_job(job, FakeView()))
    assert [p.meta.name for p in workers] == ["j-worker-0", "j-worker-1"]
    assert kubeflow.training_job(job, FakeView(workers)).create == []
    for w in workers:
        with_phase(w, "Running")
    (launcher,) = made(kubeflow.training_job(job, FakeView(workers)))
    assert (launcher.kind, launcher.meta.name) == ("Job", "j-launcher")
    assert launcher.doc["spec"]["template"]["metadata"]["labels"][ROLE] == "launcher"


def test_notebook_is_a_statefulset_of_one() -> None:
    nb = workload(
        {
            "apiVersion": "kubeflow.org/v1beta1",
            "kind": "Notebook",
            "metadata": {"name": "nb"},
            "spec": {"template": TEMPLATE},
        }
    )
    (sts,) = made(kubeflow.notebook(nb, FakeView()))
    assert (sts.kind, sts.meta.name, sts.doc["spec"]["replicas"]) == ("StatefulSet", "nb", 1)


# --- KubeRay ---------------------------------------------------------------------------------------


def cluster(workers: list[dict[str, Any]], **meta: Any) -> Any:
    spec = {"headGroupSpec": {"template": copy.deepcopy(TEMPLATE)}, "workerGroupSpecs": workers}
    return workload({"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc", **meta}, "spec": spec})


def wg(name: str, **fields: Any) -> dict[str, Any]:
    return {"groupName": name, "template": copy.deepcopy(TEMPLATE), **fields}


def test_raycluster_head_and_workers_named_and_labelled_as_kuberay_does() -> None:
    rc = cluster([wg("gpu", replicas=2)], labels={"kai.scheduler/queue": "team-a", "priorityClassName": "train"})
    result = ray.raycluster(rc, FakeView())
    pods = made(result)
    assert [p.meta.name[:-5] for p in pods] == ["rc-head-", "rc-gpu-worker-", "rc-gpu-worker-"]
    head = pods[0]
    assert head.scheduler_name == C.SCHEDULER_NAME
    assert {
        k: head.meta.labels[k] for k in (C.LABEL_RAY_NODE_TYPE, C.LABEL_RAY_GROUP, C.LABEL_RAY_CLUSTER, C.LABEL_QUEUE)
    } == {
        C.LABEL_RAY_NODE_TYPE: "head",
        C.LABEL_RAY_GROUP: "headgroup",
        C.LABEL_RAY_CLUSTER: "rc",
        C.LABEL_QUEUE: "team-a",
    }
    assert "priorityClassName" not in head.meta.labels  # KubeRay does not copy it; KAI reads the owner
    assert pods[1].meta.labels[C.LABEL_RAY_GROUP] == "gpu"
    assert [c.maps[1] for c in result.create] == ["spec.headGroupSpec.template"] + [
        "spec.workerGroupSpecs[0].template"
    ] * 2


def test_raycluster_replaces_only_lost_pods_not_finished_ones() -> None:
    rc = cluster([wg("gpu", replicas=2)])
    head, w0, w1 = made(ray.raycluster(rc, FakeView()))
    with_phase(w0, "Succeeded")
    taken = {("Pod", p.meta.name) for p in (head, w0, w1)}
    result = ray.raycluster(rc, FakeView([head, w0], taken=taken))
    assert [n[:-5] for n in names(result)] == ["rc-gpu-worker-"]
    assert names(result)[0] not in {w0.meta.name, w1.meta.name}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"replicas": 2}, 2),
        ({"replicas": 1, "minReplicas": 3}, 3),
        ({"replicas": 9, "maxReplicas": 4}, 4),
        ({"minReplicas": 2}, 2),
        ({"replicas": 2, "numOfHosts": 3}, 6),
        ({"replicas": 2, "suspend": True}, 0),
        ({"replicas": 2, "minReplicas": 5, "maxReplicas": 3}, 3),
    ],
)
def test_desired_workers(fields: dict[str, Any], expected: int) -> None:
    rc = cluster([wg("g", **fields)])
    assert ray.desired_workers(rc.fields().at("spec", "workerGroupSpecs", 0)) == expected


def test_suspended_raycluster_has_no_pods() -> None:
    rc = workload(
        {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"}, "spec": {"suspend": True}}
    )
    assert ray.raycluster(rc, FakeView()).create == []


def test_rayservice_creates_its_cluster_with_its_labels_and_records_it() -> None:
    svc = workload(
        {
            "apiVersion": "ray.io/v1",
            "kind": "RayService",
            "metadata": {"name": "svc", "labels": {"kai.scheduler/queue": "team-a", "priorityClassName": "inference"}},
            "spec": {"rayClusterConfig": {"headGroupSpec": {"template": TEMPLATE}}},
        }
    )
    result = ray.rayservice(svc, FakeView())
    (rc,) = made(result)
    assert rc.kind == "RayCluster" and rc.meta.name.startswith("svc-") and len(rc.meta.name) == len("svc-") + 5
    assert rc.meta.labels[C.LABEL_QUEUE] == "team-a" and rc.meta.labels[C.LABEL_RAY_ORIGINATED_FROM_CRD] == "RayService"
    assert result.status == {"pendingServiceStatus": {"rayClusterName": rc.meta.name}}
    assert result.create[0].maps == ("spec", "spec.rayClusterConfig")
    assert ray.rayservice(svc, FakeView([rc])).create == []


def test_rayjob_creates_its_cluster_unless_it_selects_one() -> None:
    base = {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": {"name": "rj"}}
    job = workload({**base, "spec": {"rayClusterSpec": {"headGroupSpec": {"template": TEMPLATE}}}})
    result = ray.rayjob(job, FakeView())
    (rc,) = made(result)
    assert result.status == {"rayClusterName": rc.meta.name}
    selecting = workload({**base, "spec": {"clusterSelector": {"ray.io/cluster": "shared"}}})
    assert ray.rayjob(selecting, FakeView()).create == []


# --- JobSet and LWS ----------------------------------------------------------------------------------


def rjob(name: str, replicas: int, parallelism: int = 1) -> dict[str, Any]:
    return {
        "name": name,
        "replicas": replicas,
        "template": {"spec": {"parallelism": parallelism, "template": TEMPLATE}},
    }


def test_jobset_jobs_carry_the_routing_labels_on_their_pod_templates() -> None:
    js = workload(
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "metadata": {"name": "js"},
            "spec": {"replicatedJobs": [rjob("a", 1), rjob("b", 2, 4)]},
        }
    )
    jobs = made(jobset.jobset(js, FakeView()))
    assert [j.meta.name for j in jobs] == ["js-a-0", "js-b-0", "js-b-1"]
    template_labels = jobs[2].doc["spec"]["template"]["metadata"]["labels"]
    assert template_labels[C.LABEL_JOBSET_REPLICATED_JOB] == "b" and template_labels[C.LABEL_JOBSET_JOB_INDEX] == "1"
    assert template_labels[C.LABEL_JOBSET_JOB_GLOBAL_INDEX] == "2"
    assert (jobs[1].doc["spec"]["completionMode"], jobs[1].doc["spec"]["completions"]) == ("Indexed", 4)


def test_jobset_in_order_waits_for_each_replicated_job_to_run() -> None:
    spec = {"replicatedJobs": [rjob("a", 1), rjob("b", 1)], "startupPolicy": {"startupPolicyOrder": "InOrder"}}
    js = workload(
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"}, "spec": spec}
    )
    (first,) = made(jobset.jobset(js, FakeView()))
    assert first.meta.name == "js-a-0"
    assert jobset.jobset(js, FakeView([first])).create == []
    pod = with_phase(made_pod(first), "Running")
    assert names(jobset.jobset(js, FakeView([first, pod]))) == ["js-b-0"]


def made_pod(job: Any) -> Any:
    (p,) = made(batch.job(job, FakeView()))
    return p


def test_lws_leader_statefulset_then_worker_statefulsets_owned_by_leaders() -> None:
    spec = {"replicas": 2, "leaderWorkerTemplate": {"size": 3, "workerTemplate": TEMPLATE}}
    top = workload(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "v"},
            "spec": spec,
        }
    )
    (leaders,) = made(lws.leaderworkerset(top, FakeView()))
    assert (leaders.kind, leaders.meta.name, leaders.doc["spec"]["replicas"]) == ("StatefulSet", "v", 2)
    assert leaders.doc["spec"]["template"]["metadata"]["labels"][C.LABEL_LWS_WORKER_INDEX] == "0"
    leader_docs = [c.doc for c in apps.statefulset(leaders, FakeView()).create]
    for d in leader_docs:
        lws.admit_pod(d)
    assert [d["metadata"]["labels"][C.LABEL_LWS_GROUP_INDEX] for d in leader_docs] == ["0", "1"]
    leader_pods = made(apps.statefulset(leaders, FakeView()))
    for p, d in zip(leader_pods, leader_docs):
        p.meta.labels = d["metadata"]["labels"]
    workers = made(lws.leaderworkerset(top, FakeView([leaders, *leader_pods])))
    assert [(w.meta.name, w.meta.owner_references[0].kind, w.doc["spec"]["replicas"]) for w in workers] == [
        ("v-0", "Pod", 2),
        ("v-1", "Pod", 2),
    ]
    worker_docs = [c.doc for c in apps.statefulset(workers[0], FakeView()).create]
    for d in worker_docs:
        lws.admit_pod(d)
    assert [(d["metadata"]["name"], d["metadata"]["labels"][C.LABEL_LWS_WORKER_INDEX]) for d in worker_docs] == [
        ("v-0-1", "1"),
        ("v-0-2", "2"),
    ]


def test_lws_leader_ready_creates_workers_once_the_leader_runs() -> None:
    spec = {"leaderWorkerTemplate": {"size": 2, "workerTemplate": TEMPLATE}, "startupPolicy": "LeaderReady"}
    top = workload(
        {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "v"},
            "spec": spec,
        }
    )
    (leaders,) = made(lws.leaderworkerset(top, FakeView()))
    (leader,) = made(apps.statefulset(leaders, FakeView()))
    assert lws.leaderworkerset(top, FakeView([leaders, leader])).create == []
    assert len(lws.leaderworkerset(top, FakeView([leaders, with_phase(leader, "Running")])).create) == 1
