"""One test per owner kind of reference section 7, end to end on the embedded cluster: the owner is applied
as a user would (kinds kai does not simulate come with their pods), the controllers and the pod-grouper run,
then one allocate cycle. Each row checks the PodGroup(s) — name, minMember, queue, priority class,
subgroups — which subgroup every pod joined, and that the pods were placed. A last test keeps the rows
in step with the pod-grouper's table, so a kind cannot be added without its test.

The rows that the issue names: a Job with batch-min-member, a PyTorchJob with segments, a RayCluster
with two worker groups and numOfHosts 2.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from dataclasses import dataclass, field

import pytest

from kai.api.manifests import load_manifests
from kai.api.objects import parse_time
from kai.api.workloads import split_api_version
from kai.podgrouper import REGISTRY
from kai.scheduler.conf import SchedulerConf
from kai.sim.cluster import EmbeddedCluster
from tests.conftest import NOW

BASE = """\
apiVersion: v1
kind: Node
metadata: {name: node0}
status: {allocatable: {cpu: "64", memory: 256Gi, nvidia.com/gpu: "8", pods: "110"}}
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
  resources: {gpu: {quota: -1, limit: -1}, cpu: {quota: -1, limit: -1}, memory: {quota: -1, limit: -1}}
"""

T = '{spec: {containers: [{name: c, resources: {requests: {cpu: "100m"}}}]}}'
Q = "{kai.scheduler/queue: team-a}"

SubGroupRow = tuple[str, int | None, int | None, str | None]  # name, minMember, minSubGroup, parent


@dataclass(frozen=True)
class Kind:
    """An owner kind's row: its manifests and what KAI's pod-grouper makes of them."""

    keys: tuple[tuple[str, str, str], ...]  # the REGISTRY keys this row covers
    manifests: str
    podgroups: dict[str, tuple[int, str]]  # name → (minMember, priority class); queue is team-a for all
    pods: int  # how many pods the cluster ends with
    subgroups: dict[str, list[SubGroupRow]] = field(default_factory=dict)  # PodGroup → its subgroups
    joined: dict[str, int] = field(default_factory=dict)  # subgroup label → how many pods carry it


def owner_doc(api: str, kind: str, spec: str) -> str:
    """A one-line-spec owner named w in queue team-a."""
    return f"apiVersion: {api}\nkind: {kind}\nmetadata: {{name: w, labels: {Q}}}\nspec: {spec}\n"


def pod_of(owner_api: str, owner_kind: str, owner: str, name: str, labels: str = "{}") -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {labels}
  ownerReferences: [{{apiVersion: {owner_api}, kind: {owner_kind}, name: {owner}}}]
spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "100m"}}}}}}]}}
"""


def default_kind(api: str, kind: str) -> Kind:
    """A kind KAI groups with the default grouper and kai does not simulate: applied with one pod."""
    group, version = split_api_version(api)
    manifests = owner_doc(api, kind, "{}") + "---\n" + pod_of(api, kind, "w", "w-pod")
    return Kind(((group, version, kind),), manifests, {"pg-w": (1, "train")}, 1)


KINDS = {
    "pod": Kind(
        (("", "v1", "Pod"),),
        owner_doc("v1", "Pod", '{containers: [{name: c, resources: {requests: {cpu: "100m"}}}]}'),
        {"pg-w": (1, "train")},
        1,
    ),
    "job_batch_min_member": Kind(
        (("batch", "v1", "Job"),),
        f"""\
apiVersion: batch/v1
kind: Job
metadata: {{name: w, labels: {Q}, annotations: {{kai.scheduler/batch-min-member: "3"}}}}
spec: {{parallelism: 3, completions: 3, template: {T}}}
""",
        {"pg-w": (3, "train")},
        3,
    ),
    "cronjob": Kind(
        (("batch", "v1", "CronJob"),),
        f"""\
apiVersion: batch/v1
kind: CronJob
metadata: {{name: w}}
spec:
  schedule: "0 * * * *"
  jobTemplate: {{spec: {{template: {{metadata: {{labels: {Q}}}, spec: {{containers: [{{name: c}}]}}}}}}}}
""",
        {"pg-w-29453760": (1, "train")},
        1,
    ),
    "deployment": Kind(
        (("apps", "v1", "Deployment"),),
        owner_doc("apps/v1", "Deployment", f"{{replicas: 2, template: {T}}}"),
        {},  # one PodGroup per pod, named after the pod: checked by count below
        2,
    ),
    "statefulset": Kind(
        (("apps", "v1", "StatefulSet"),),
        f"""\
apiVersion: apps/v1
kind: StatefulSet
metadata: {{name: w, labels: {Q}}}
spec: {{replicas: 2, podManagementPolicy: Parallel, template: {T}}}
""",
        {"pg-w": (1, "train")},
        2,
    ),
    "replicaset": Kind(
        (("apps", "v1", "ReplicaSet"),),
        owner_doc("apps/v1", "ReplicaSet", f"{{replicas: 2, template: {T}}}"),
        {"pg-w": (1, "train")},
        2,
    ),
    "pytorchjob_segments": Kind(
        (("kubeflow.org", "v1", "PyTorchJob"),),
        f"""\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: w, labels: {Q}}}
spec:
  pytorchReplicaSpecs:
    Master: {{replicas: 1, template: {T}}}
    Worker:
      replicas: 5
      template:
        metadata: {{annotations: {{kai.scheduler/segment-size: "2"}}}}
        spec: {{containers: [{{name: c, resources: {{requests: {{cpu: "100m"}}}}}}]}}
""",
        {"pg-w": (6, "train")},
        6,
        {
            "pg-w": [
                ("master", 1, None, None),
                ("worker", 5, None, None),
                ("worker-0", 2, None, "worker"),
                ("worker-1", 2, None, "worker"),
                ("worker-2", 1, None, "worker"),
            ]
        },
        {"master": 1, "worker-0": 2, "worker-1": 2, "worker-2": 1},
    ),
    "tfjob": Kind(
        (("kubeflow.org", "v1", "TFJob"),),
        f"""\
apiVersion: kubeflow.org/v1
kind: TFJob
metadata: {{name: w, labels: {Q}}}
spec: {{tfReplicaSpecs: {{Worker: {{replicas: 2, template: {T}}}, PS: {{replicas: 1, template: {T}}}}}}}
""",
        {"pg-w": (3, "train")},
        3,
    ),
    "xgboostjob": Kind(
        (("kubeflow.org", "v1", "XGBoostJob"),),
        f"""\
apiVersion: kubeflow.org/v1
kind: XGBoostJob
metadata: {{name: w, labels: {Q}}}
spec: {{xgbReplicaSpecs: {{Master: {{replicas: 1, template: {T}}}, Worker: {{replicas: 2, template: {T}}}}}}}
""",
        {"pg-w": (3, "train")},
        3,
    ),
    "jaxjob": Kind(
        (("kubeflow.org", "v1", "JAXJob"),),
        f"""\
apiVersion: kubeflow.org/v1
kind: JAXJob
metadata: {{name: w, labels: {Q}}}
spec:
  runPolicy: {{schedulingPolicy: {{minAvailable: 2}}}}
  jaxReplicaSpecs: {{Worker: {{replicas: 3, template: {T}}}}}
""",
        {"pg-w": (2, "train")},
        3,
    ),
    "mpijob_v1": Kind(
        (("kubeflow.org", "v1", "MPIJob"),),
        f"""\
apiVersion: kubeflow.org/v1
kind: MPIJob
metadata: {{name: w, labels: {Q}}}
spec: {{mpiReplicaSpecs: {{Launcher: {{replicas: 1, template: {T}}}, Worker: {{replicas: 2, template: {T}}}}}}}
""",
        {"pg-w": (3, "train")},
        3,
    ),
    "mpijob_v2beta1": Kind(
        (("kubeflow.org", "v2beta1", "MPIJob"),),
        f"""\
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {{name: w, labels: {Q}}}
spec: {{mpiReplicaSpecs: {{Launcher: {{replicas: 1, template: {T}}}, Worker: {{replicas: 2, template: {T}}}}}}}
""",
        {"pg-w": (3, "train")},
        3,
    ),
    "notebook": Kind(
        (("kubeflow.org", "v1beta1", "Notebook"),),
        owner_doc("kubeflow.org/v1beta1", "Notebook", f"{{template: {T}}}"),
        {"pg-w": (1, "build")},
        1,
    ),
    "raycluster_two_groups_num_of_hosts": Kind(
        (("ray.io", "v1", "RayCluster"), ("ray.io", "v1alpha1", "RayCluster")),
        f"""\
apiVersion: ray.io/v1
kind: RayCluster
metadata: {{name: w, labels: {Q}}}
spec:
  headGroupSpec: {{template: {T}}}
  workerGroupSpecs:
  - {{groupName: cpu, replicas: 1, template: {T}}}
  - {{groupName: tpu, replicas: 2, minReplicas: 1, maxReplicas: 3, numOfHosts: 2, template: {T}}}
""",
        {"pg-w": (4, "train")},  # 1 head + 1 cpu + minReplicas 1 × numOfHosts 2
        6,  # KubeRay creates replicas × numOfHosts = 4 tpu pods
        {"pg-w": [("headgroup", 1, None, None), ("cpu", 1, None, None), ("tpu", 2, None, None)]},
        {"headgroup": 1, "cpu": 1, "tpu": 4},
    ),
    "rayjob": Kind(
        (("ray.io", "v1", "RayJob"), ("ray.io", "v1alpha1", "RayJob")),
        f"""\
apiVersion: ray.io/v1
kind: RayJob
metadata: {{name: w, labels: {Q}}}
spec:
  rayClusterSpec:
    headGroupSpec: {{template: {T}}}
    workerGroupSpecs: [{{groupName: g, replicas: 2, template: {T}}}]
""",
        {"pg-w": (3, "train")},
        3,
        {"pg-w": [("headgroup", 1, None, None), ("g", 2, None, None)]},
        {"headgroup": 1, "g": 2},
    ),
    "rayservice": Kind(
        (("ray.io", "v1", "RayService"), ("ray.io", "v1alpha1", "RayService")),
        f"""\
apiVersion: ray.io/v1
kind: RayService
metadata: {{name: w, labels: {{kai.scheduler/queue: team-a, ray.io/priority-class-name: inference}}}}
spec:
  rayClusterConfig:
    headGroupSpec: {{template: {T}}}
    workerGroupSpecs: [{{groupName: g, replicas: 1, template: {T}}}]
""",
        {"pg-w": (2, "inference")},
        2,
        {"pg-w": [("headgroup", 1, None, None), ("g", 1, None, None)]},
        {"headgroup": 1, "g": 1},
    ),
    "jobset": Kind(
        (("jobset.x-k8s.io", "v1alpha2", "JobSet"),),
        f"""\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {{name: w, labels: {Q}}}
spec:
  replicatedJobs:
  - {{name: driver, replicas: 1, template: {{spec: {{parallelism: 1, template: {T}}}}}}}
  - {{name: workers, replicas: 2, template: {{spec: {{parallelism: 2, template: {T}}}}}}}
""",
        {"pg-w": (1, "train")},  # minSubGroup 2 decides; kai's model reads the absent minMember as 1
        5,
        {
            "pg-w": [
                ("driver", None, 1, None),
                ("driver-replica-0", 1, None, "driver"),
                ("workers", None, 2, None),
                ("workers-replica-0", 2, None, "workers"),
                ("workers-replica-1", 2, None, "workers"),
            ]
        },
        {"driver-replica-0": 1, "workers-replica-0": 2, "workers-replica-1": 2},
    ),
    "leaderworkerset": Kind(
        (("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"),),
        f"""\
apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: w, labels: {Q}}}
spec: {{replicas: 2, leaderWorkerTemplate: {{size: 3, workerTemplate: {T}}}}}
""",
        {"pg-w-group-0": (3, "train"), "pg-w-group-1": (3, "train")},
        6,
        {
            "pg-w-group-0": [("leader", 1, None, None), ("workers", 2, None, None)],
            "pg-w-group-1": [("leader", 1, None, None), ("workers", 2, None, None)],
        },
        {"leader": 2, "workers": 4},
    ),
    "knative_service": Kind(
        (("serving.knative.dev", "v1", "Service"),),
        f"""\
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {{name: w, labels: {Q}}}
spec: {{}}
---
apiVersion: serving.knative.dev/v1
kind: Configuration
metadata:
  name: w
  ownerReferences: [{{apiVersion: serving.knative.dev/v1, kind: Service, name: w}}]
spec: {{}}
---
apiVersion: serving.knative.dev/v1
kind: Revision
metadata:
  name: w-00001
  labels: {Q}  # Knative copies the Service's labels to its Revisions; KAI reads the Revision's
  annotations: {{autoscaling.knative.dev/min-scale: "2"}}
  ownerReferences: [{{apiVersion: serving.knative.dev/v1, kind: Configuration, name: w}}]
spec: {{}}
---
{pod_of("serving.knative.dev/v1", "Revision", "w-00001", "w-00001-a", "{serving.knative.dev/revision: w-00001}")}
---
{pod_of("serving.knative.dev/v1", "Revision", "w-00001", "w-00001-b", "{serving.knative.dev/revision: w-00001}")}
""",
        {"pg-w-00001": (2, "inference")},
        2,
    ),
    "argo_workflow": Kind(
        (("argoproj.io", "v1alpha1", "Workflow"),),
        owner_doc("argoproj.io/v1alpha1", "Workflow", "{}")
        + "---\n"
        + pod_of("argoproj.io/v1alpha1", "Workflow", "w", "w-step"),
        {"pg-w-step": (1, "train")},  # skip-top-owner: grouped as the pod, with the Workflow's labels
        1,
    ),
    "trainjob": Kind(
        (("trainer.kubeflow.org", "v1alpha1", "TrainJob"),),
        f"""\
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {{name: w, labels: {Q}}}
spec: {{}}
---
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: w
  ownerReferences: [{{apiVersion: trainer.kubeflow.org/v1alpha1, kind: TrainJob, name: w}}]
spec:
  replicatedJobs:
  - {{name: node, replicas: 1, template: {{spec: {{parallelism: 2, template: {T}}}}}}}
""",
        {"pg-w": (1, "train")},  # grouped by the JobSet (skip-top-owner), with the TrainJob's queue label
        2,
        {"pg-w": [("node", None, 1, None), ("node-replica-0", 2, None, "node")]},
        {"node-replica-0": 2},
    ),
    "scheduledworkflow": default_kind("kubeflow.org/v1alpha1", "ScheduledWorkflow"),
    "seldon_v1": default_kind("machinelearning.seldon.io/v1", "SeldonDeployment"),
    "seldon_v1alpha2": default_kind("machinelearning.seldon.io/v1alpha2", "SeldonDeployment"),
    "virtualmachineinstance": default_kind("kubevirt.io/v1", "VirtualMachineInstance"),
    "devworkspace": default_kind("workspace.devfile.io/v1alpha2", "DevWorkspace"),
    "pipelinerun": default_kind("tekton.dev/v1", "PipelineRun"),
    "taskrun": default_kind("tekton.dev/v1", "TaskRun"),
}


def run(manifests: str) -> EmbeddedCluster:
    now = parse_time(NOW, "now")
    assert now is not None
    cluster = EmbeddedCluster(now=now)
    objects, _ = load_manifests([("cluster.yaml", BASE + "---\n" + textwrap.dedent(manifests))])
    cluster.apply(objects)
    cluster.run_cycle(SchedulerConf(actions=("allocate",)))
    return cluster


@pytest.mark.parametrize("name", sorted(KINDS))
def test_owner_kind_groups_as_kai_does(name: str) -> None:
    kind = KINDS[name]
    cluster = run(kind.manifests)
    views = cluster.pod_views()
    assert len(views) == kind.pods
    assert {v.status for v in views} == {"Binding"}, "every pod placed in the first cycle"
    pgs = {pg.meta.name: pg for pg in cluster.store.list("PodGroup")}
    if name == "deployment":  # one PodGroup per pod, named after it, priority inference
        assert sorted(pgs) == sorted(f"pg-{v.pod.meta.name}" for v in views)
        rows = {(pg.min_member, pg.queue, pg.priority_class_name) for pg in pgs.values()}
        assert rows == {(1, "team-a", "inference")}
        return
    got = {n: (pg.min_member, pg.priority_class_name) for n, pg in pgs.items()}
    assert got == kind.podgroups
    assert {pg.queue for pg in pgs.values()} == {"team-a"}
    for pg_name, rows in kind.subgroups.items():
        got_rows = [(s.name, s.min_member, s.min_subgroup, s.parent) for s in pgs[pg_name].sub_groups]
        assert got_rows == rows, pg_name
    if not kind.subgroups:
        assert all(not pg.sub_groups for pg in pgs.values())
    joined = Counter(v.pod.meta.labels.get("kai.scheduler/subgroup-name") for v in views)
    assert dict(joined) == (kind.joined or {None: kind.pods})


def test_every_kind_in_the_pod_grouper_table_has_a_row() -> None:
    covered = {key for kind in KINDS.values() for key in kind.keys}
    assert covered == set(REGISTRY), f"missing rows: {sorted(set(REGISTRY) - covered)}"
