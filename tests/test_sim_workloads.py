"""kai sim with workload owners: the KubeRay + KAI walkthrough applied unchanged, errors in owners reported
where the user wrote them, controllers recreating pods after an eviction, and kai.sim/duration."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kai.api.errors import ManifestError
from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.decisions import CycleResult, Evict, PodRef
from kai.sim.cluster import EmbeddedCluster
from tests.conftest import NOW

SimFn = Callable[..., tuple[int, dict[str, Any] | None, str]]
WALKTHROUGH = Path(__file__).parent.parent / "examples" / "ray-kai"
QUEUES, TRAIN, SERVE, NODE = (
    str(WALKTHROUGH / f)
    for f in ("00-queues.yaml", "01-raycluster-train.yaml", "02-rayservice-inference.yaml", "node-a10g.yaml")
)
ALLOCATE = ["--actions", "allocate"]


def by_name(doc: dict[str, Any]) -> tuple[dict[str, dict], dict[str, dict]]:
    return {p["name"]: p for p in doc["pods"]}, {g["name"]: g for g in doc["podGroups"]}


# --- the walkthrough, unchanged ----------------------------------------------------------------------


def test_walkthrough_raycluster_head_and_worker_are_one_gang_in_team_a(sim: SimFn) -> None:
    code, doc, err = sim([QUEUES, NODE, TRAIN, *ALLOCATE])
    assert code == 0, err
    assert doc is not None
    pods, pgs = by_name(doc)
    assert {n.rsplit("-", 1)[0] for n in pods} == {"raycluster-sample-head", "raycluster-sample-worker-worker"}
    assert {(p["status"], p["node"], p["podGroup"], p["queue"]) for p in pods.values()} == {
        ("Binding", "gpu-node-a10g", "pg-raycluster-sample", "team-a")
    }
    assert sorted(p["gpus"] for p in pods.values()) == [0.0, 1.0]
    pg = pgs["pg-raycluster-sample"]
    assert (pg["minMember"], pg["queue"], pg["priorityClassName"], pg["conditions"]) == (2, "team-a", "train", [])


def test_walkthrough_all_files_inference_gang_takes_the_gpu_first(sim: SimFn) -> None:
    """Applied together, both gangs wait in team-a; inference (125) is ordered before train (50) and takes
    the one GPU; the training gang stays whole and pending (allocate never splits a gang)."""
    code, doc, err = sim([QUEUES, TRAIN, SERVE, NODE, *ALLOCATE])
    assert code == 0, err
    assert doc is not None
    pods, pgs = by_name(doc)
    assert len(pods) == 4
    serve = pgs["pg-ray-kai-scheduler-serve-llm"]
    assert (serve["minMember"], serve["queue"], serve["priorityClassName"], serve["conditions"]) == (
        2,
        "team-a",
        "inference",
        [],
    )
    status = {p["podGroup"]: set() for p in pods.values()}
    for p in pods.values():
        status[p["podGroup"]].add(p["status"])
    assert status == {"pg-ray-kai-scheduler-serve-llm": {"Binding"}, "pg-raycluster-sample": {"Pending"}}
    train = pgs["pg-raycluster-sample"]
    assert train["priorityClassName"] == "train"
    assert "required for gang scheduling" in train["conditions"][0]["message"]
    (team_a,) = [q for q in doc["queues"] if q["name"] == "team-a"]
    assert (team_a["allocated"]["gpu"], team_a["requested"]["gpu"]) == (1.0, 2.0)


def _load(*paths: str) -> list:
    objects, _ = load_manifests([(p, Path(p).read_text()) for p in paths])
    return objects


def test_walkthrough_inference_arriving_later_waits_while_train_runs() -> None:
    """The walkthrough's sequence: train runs; the RayService arrives and, with allocate only (no preemption
    yet), its gang stays pending in full while the training gang keeps the GPU."""
    now = parse_time(NOW, "now")
    assert now is not None
    cluster = EmbeddedCluster(now=now)
    cluster.apply(_load(QUEUES, NODE, TRAIN))
    conf = SchedulerConf(actions=("allocate",))
    cluster.run_cycle(conf)
    cluster.run_cycle(conf)
    cluster.apply(_load(SERVE))
    cluster.run_cycle(conf)
    views = {v.pod.meta.name: v for v in cluster.pod_views()}
    groups = {v.pod.meta.annotations["pod-group-name"]: set() for v in views.values()}
    for v in views.values():
        groups[v.pod.meta.annotations["pod-group-name"]].add(v.status)
    assert groups == {"pg-raycluster-sample": {"Running"}, "pg-ray-kai-scheduler-serve-llm": {"Pending"}}
    serve_pg = cluster.store.get("PodGroup", ("default", "pg-ray-kai-scheduler-serve-llm"))
    assert (serve_pg.min_member, serve_pg.priority_class_name, [s.name for s in serve_pg.sub_groups]) == (
        2,
        "inference",
        ["headgroup", "gpu-group"],
    )
    service = cluster.store.get("RayService", ("default", "ray-kai-scheduler-serve-llm"))
    cluster_name = service.doc["status"]["pendingServiceStatus"]["rayClusterName"]
    assert cluster.store.get("RayCluster", ("default", cluster_name)).meta.labels["kai.scheduler/queue"] == "team-a"


# --- errors in owners are reported where the user wrote them ----------------------------------------------

BASE = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Node
    metadata: {name: node0}
    status: {allocatable: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "4"}}
    ---
    apiVersion: scheduling.run.ai/v2
    kind: Queue
    metadata: {name: dept}
    spec: {resources: {gpu: {quota: -1, limit: -1}, cpu: {quota: -1, limit: -1}, memory: {quota: -1, limit: -1}}}
    ---
    apiVersion: scheduling.run.ai/v2
    kind: Queue
    metadata: {name: team-a}
    spec:
      parentQueue: dept
      resources: {gpu: {quota: 2, limit: -1}, cpu: {quota: -1, limit: -1}, memory: {quota: -1, limit: -1}}
    """
)

RAYCLUSTER = """\
apiVersion: ray.io/v1
kind: RayCluster
metadata: {name: rc, labels: LABELS}
spec:
  headGroupSpec:
    template: {spec: {containers: [{name: h, resources: {requests: {cpu: "1"}}}]}}
  workerGroupSpecs:
  - groupName: g
    replicas: 1
    template: {metadata: {annotations: ANNOTATIONS}, spec: {containers: [{name: w, resources: {requests: {cpu: CPU}}}]}}
"""


def raycluster(labels: str = "{kai.scheduler/queue: team-a}", cpu: str = '"1"', annotations: str = "{}") -> str:
    return RAYCLUSTER.replace("LABELS", labels).replace("CPU", cpu).replace("ANNOTATIONS", annotations)


BAD_OWNERS = [
    pytest.param(
        raycluster(cpu='"2x"'),
        ["RayCluster/default/rc", "spec.workerGroupSpecs[0].template.spec.containers[0].resources.requests.cpu", "2x"],
        id="bad_quantity_in_raycluster_template",
    ),
    pytest.param(
        raycluster(labels="{kai.scheduler/queue: nope}"),
        ["RayCluster/default/rc", "metadata.labels.kai.scheduler/queue", "'nope' does not exist"],
        id="raycluster_queue_label_names_missing_queue",
    ),
    pytest.param(
        raycluster(labels="{kai.scheduler/queue: dept}"),
        ["RayCluster/default/rc", "metadata.labels.kai.scheduler/queue", "parent queue"],
        id="raycluster_in_parent_queue",
    ),
    pytest.param(
        raycluster(labels="{kai.scheduler/queue: team-a, priorityClassName: platinum}"),
        ["RayCluster/default/rc", "metadata.labels.priorityClassName", "platinum"],
        id="raycluster_unknown_priority_class",
    ),
    pytest.param(
        raycluster(annotations="{kai.sim/duration: soon}"),
        ["RayCluster/default/rc", "spec.workerGroupSpecs[0].template.metadata.annotations.kai.sim/duration", "soon"],
        id="bad_sim_duration_in_template",
    ),
    pytest.param(
        textwrap.dedent(
            """\
            apiVersion: ray.io/v1
            kind: RayService
            metadata: {name: svc, labels: {kai.scheduler/queue: team-a}}
            spec:
              rayClusterConfig:
                headGroupSpec:
                  template: {spec: {containers: [{name: h, resources: {requests: {memory: 1Gb}}}]}}
            """
        ),
        [
            "RayService/default/svc",
            "spec.rayClusterConfig.headGroupSpec.template.spec.containers[0].resources.requests.memory",
        ],
        id="bad_quantity_in_rayservice_cluster_config",
    ),
    pytest.param(
        textwrap.dedent(
            """\
            apiVersion: batch/v1
            kind: Job
            metadata: {name: train, annotations: {kai.scheduler/batch-min-member: three}}
            spec: {template: {spec: {containers: [{name: c}]}}}
            """
        ),
        ["Job/default/train", "metadata.annotations.kai.scheduler/batch-min-member", "'three'"],
        id="job_batch_min_member_not_an_integer",
    ),
    pytest.param(
        textwrap.dedent(
            """\
            apiVersion: batch/v1
            kind: Job
            metadata: {name: train}
            spec: {template: {metadata: {labels: {kai.scheduler/queue: ghost}}, spec: {containers: [{name: c}]}}}
            """
        ),
        ["Job/default/train", "spec.template.metadata.labels.kai.scheduler/queue", "ghost"],
        id="job_template_queue_label_names_missing_queue",
    ),
    pytest.param(
        textwrap.dedent(
            """\
            apiVersion: v1
            kind: Pod
            metadata:
              name: orphan
              ownerReferences: [{apiVersion: ray.io/v1, kind: RayCluster, name: missing}]
            spec: {containers: [{name: c}]}
            """
        ),
        ["Pod/default/orphan", "metadata.ownerReferences[0]", "RayCluster default/missing does not exist"],
        id="pod_owned_by_missing_raycluster",
    ),
    pytest.param(
        textwrap.dedent(
            """\
            apiVersion: v1
            kind: Pod
            metadata: {name: p, labels: {kai.scheduler/skip-podgrouper: "true", kai.scheduler/queue: team-a}}
            spec: {containers: [{name: c}]}
            """
        ),
        ["Pod/default/p", "metadata.annotations.pod-group-name", "skip-podgrouper"],
        id="skip_podgrouper_without_a_podgroup",
    ),
]


@pytest.mark.parametrize(("text", "needles"), BAD_OWNERS)
def test_bad_owner_is_reported_with_file_object_and_field(
    sim: SimFn, tmp_path: Path, text: str, needles: list[str]
) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    bad = tmp_path / "owner.yaml"
    bad.write_text(text)
    code, doc, err = sim([str(base), str(bad)])
    assert code == 2, err
    assert doc is None
    for needle in ["owner.yaml", *needles]:
        assert needle in err, f"{needle!r} not in {err!r}"


def test_owner_kind_in_an_unknown_version_is_rejected_with_a_hint(sim: SimFn, tmp_path: Path) -> None:
    bad = tmp_path / "rc.yaml"
    bad.write_text("apiVersion: ray.io/v2\nkind: RayCluster\nmetadata: {name: rc}\n")
    code, _, err = sim([str(bad)])
    assert code == 2
    assert "ray.io/v1" in err and "RayCluster/default/rc" in err


# --- controllers after an eviction ------------------------------------------------------------------------


def cluster_of(text: str) -> EmbeddedCluster:
    now = parse_time(NOW, "now")
    assert now is not None
    c = EmbeddedCluster(now=now)
    objects, _ = load_manifests([("cluster.yaml", BASE + "---\n" + textwrap.dedent(text))])
    c.apply(objects)
    return c


def evict_all(c: EmbeddedCluster) -> set[str]:
    """Evict every pod, as a reclaim of the whole gang would; returns their names."""
    pods = c.store.list("Pod")
    result = CycleResult(
        evictions=[
            Evict(PodRef(p.meta.namespace, p.meta.name), p.meta.annotations["pod-group-name"], "reclaim", "test")
            for p in pods
        ]
    )
    c._apply(result)
    return {p.meta.name for p in pods}


ALLOCATE_ONLY = SchedulerConf(actions=("allocate",))


def test_raycluster_gang_comes_back_with_new_pod_names_in_the_same_podgroup() -> None:
    c = cluster_of(raycluster())
    c.run_cycle(ALLOCATE_ONLY)
    before = evict_all(c)
    assert {v.status for v in c.pod_views()} == {"Releasing"}
    c.run_cycle(ALLOCATE_ONLY)
    views = c.pod_views()
    after = {v.pod.meta.name for v in views}
    assert len(after) == 2 and not after & before
    assert {v.pod.meta.annotations["pod-group-name"] for v in views} == {"pg-rc"}
    assert {v.status for v in views} == {"Binding"}
    assert sorted(v.pod.meta.labels["ray.io/node-type"] for v in views) == ["head", "worker"]


def test_regrouping_recreated_pods_keeps_what_the_scheduler_wrote_on_the_podgroup() -> None:
    """The pod-grouper updates its PodGroup in place: a stale timestamp the scheduler set survives the
    regrouping of the gang's recreated pods, as do the PodGroup's age and scheduler annotations."""
    c = cluster_of(raycluster())
    c.run_cycle(ALLOCATE_ONLY)
    pg = c.store.get("PodGroup", ("default", "pg-rc"))
    created = pg.meta.creation_timestamp
    pg.stale_since = c.now
    pg.meta.annotations["kai.scheduler/stale-podgroup-timestamp"] = "2026-01-01T00:00:00Z"
    evict_all(c)
    c.run_cycle(ALLOCATE_ONLY)
    after = c.store.get("PodGroup", ("default", "pg-rc"))
    assert (after.stale_since, after.meta.creation_timestamp) == (pg.stale_since, created)
    assert after.meta.annotations["kai.scheduler/stale-podgroup-timestamp"] == "2026-01-01T00:00:00Z"
    assert (after.min_member, after.queue) == (2, "team-a")


def test_pytorchjob_and_statefulset_pods_come_back_under_their_names() -> None:
    c = cluster_of(
        """\
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        metadata: {name: pt, labels: {kai.scheduler/queue: team-a}}
        spec:
          pytorchReplicaSpecs:
            Master: {replicas: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
            Worker: {replicas: 1, template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
        ---
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: db, labels: {kai.scheduler/queue: team-a}}
        spec:
          replicas: 1
          template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}
        """
    )
    c.run_cycle(ALLOCATE_ONLY)
    before = evict_all(c)
    c.run_cycle(ALLOCATE_ONLY)
    views = {v.pod.meta.name: v for v in c.pod_views()}
    assert set(views) == before == {"pt-master-0", "pt-worker-0", "db-0"}
    assert {v.status for v in views.values()} == {"Binding"}
    assert views["pt-worker-0"].pod.meta.labels["kai.scheduler/subgroup-name"] == "worker"


def test_job_pod_comes_back_with_a_new_name() -> None:
    c = cluster_of(
        """\
        apiVersion: batch/v1
        kind: Job
        metadata: {name: train, labels: {kai.scheduler/queue: team-a}}
        spec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}}}
        """
    )
    c.run_cycle(ALLOCATE_ONLY)
    (before,) = evict_all(c)
    c.run_cycle(ALLOCATE_ONLY)
    (after,) = [v.pod.meta.name for v in c.pod_views()]
    assert after != before and after.startswith("train-")


def test_bare_pod_still_comes_back_as_the_same_pod() -> None:
    c = cluster_of(
        """\
        apiVersion: v1
        kind: Pod
        metadata: {name: solo, labels: {kai.scheduler/queue: team-a}}
        spec: {containers: [{name: c, resources: {requests: {cpu: "1"}}}]}
        """
    )
    c.run_cycle(ALLOCATE_ONLY)
    evict_all(c)
    c.run_cycle(ALLOCATE_ONLY)
    assert [(v.pod.meta.name, v.status) for v in c.pod_views()] == [("solo", "Binding")]


# --- kai.sim/duration ---------------------------------------------------------------------------------


def test_duration_on_the_owner_finishes_its_pods_and_frees_the_gpus(sim: SimFn, tmp_path: Path) -> None:
    """Two RayClusters want 3 of 4 GPUs each; the first has kai.sim/duration 3s. It succeeds at t+3 and the
    second gang starts in that cycle (both groups finished, KubeRay does not replace finished pods)."""
    one = (
        raycluster()
        .replace("name: rc,", "name: first,")
        .replace("labels: {", "annotations: {kai.sim/duration: 3s}, labels: {")
    )
    two = raycluster().replace("name: rc,", "name: second,")
    gpus = '"1", nvidia.com/gpu: "1"'
    text = (one.replace("replicas: 1", "replicas: 3") + "---\n" + two.replace("replicas: 1", "replicas: 3")).replace(
        'cpu: "1"}}}]}}\n', f"cpu: {gpus}}}}}}}]}}}}\n"
    )
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "rc.yaml").write_text(text)
    for cycles, first, second in (("3", {"Running"}, {"Pending"}), ("4", {"Succeeded"}, {"Binding"})):
        code, doc, err = sim([str(tmp_path / "base.yaml"), str(tmp_path / "rc.yaml"), *ALLOCATE, "--cycles", cycles])
        assert code == 0, err
        assert doc is not None
        status: dict[str, set[str]] = {"pg-first": set(), "pg-second": set()}
        for p in doc["pods"]:
            status[p["podGroup"]].add(p["status"])
        assert (status["pg-first"], status["pg-second"]) == (first, second), cycles


def test_duration_must_be_a_duration_on_a_bare_pod(tmp_path: Path) -> None:
    now = parse_time(NOW, "now")
    assert now is not None
    text = (
        BASE + "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p, annotations: {kai.sim/duration: '-3s'}}\nspec: {}\n"
    )
    objects, _ = load_manifests([("p.yaml", text)])
    with pytest.raises(ManifestError) as info:
        EmbeddedCluster(now=now).apply(objects)
    assert (info.value.source, info.value.obj, info.value.field) == (
        "p.yaml",
        "Pod/default/p",
        "metadata.annotations.kai.sim/duration",
    )
