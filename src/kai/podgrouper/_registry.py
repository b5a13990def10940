"""The one table: owner kind → grouper (KAI's ``hub/hub.go``).

Keys are (group, version, kind), where version ``*`` matches any version; lookup tries the exact version
first, then ``*``, as KAI does. A kind missing here gets the default grouper, and the caller is told so.
"""

from __future__ import annotations

from kai.api.workloads import split_api_version
from kai.podgrouper._default import default
from kai.podgrouper._model import Grouper
from kai.podgrouper.kinds import apps, batch, jobset, knative, kubeflow, lws, pod, ray, skip

REGISTRY: dict[tuple[str, str, str], Grouper] = {
    ("", "v1", "Pod"): pod.pod,
    ("apps", "v1", "Deployment"): apps.deployment,
    ("apps", "v1", "StatefulSet"): default,
    ("apps", "v1", "ReplicaSet"): default,
    ("batch", "v1", "Job"): batch.job,
    ("batch", "v1", "CronJob"): batch.cronjob,
    ("kubeflow.org", "v1", "PyTorchJob"): kubeflow.pytorchjob,
    ("kubeflow.org", "v1", "TFJob"): kubeflow.tfjob,
    ("kubeflow.org", "v1", "XGBoostJob"): kubeflow.xgboostjob,
    ("kubeflow.org", "v1", "JAXJob"): kubeflow.jaxjob,
    ("kubeflow.org", "v1", "MPIJob"): kubeflow.mpijob,
    ("kubeflow.org", "v2beta1", "MPIJob"): kubeflow.mpijob,
    ("kubeflow.org", "v1beta1", "Notebook"): kubeflow.notebook,
    ("kubeflow.org", "v1alpha1", "ScheduledWorkflow"): default,
    ("trainer.kubeflow.org", "v1alpha1", "TrainJob"): skip.skip_top_owner,
    ("ray.io", "v1", "RayCluster"): ray.ray_cluster,
    ("ray.io", "v1", "RayJob"): ray.ray_job,
    ("ray.io", "v1", "RayService"): ray.ray_service,
    ("ray.io", "v1alpha1", "RayCluster"): ray.ray_cluster,
    ("ray.io", "v1alpha1", "RayJob"): ray.ray_job,
    ("ray.io", "v1alpha1", "RayService"): ray.ray_service,
    ("jobset.x-k8s.io", "v1alpha2", "JobSet"): jobset.jobset,
    ("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet"): lws.leaderworkerset,
    ("serving.knative.dev", "v1", "Service"): knative.knative_service,
    ("argoproj.io", "v1alpha1", "Workflow"): skip.skip_top_owner,
    ("machinelearning.seldon.io", "v1", "SeldonDeployment"): default,
    ("machinelearning.seldon.io", "v1alpha2", "SeldonDeployment"): default,
    ("kubevirt.io", "v1", "VirtualMachineInstance"): default,
    ("workspace.devfile.io", "v1alpha2", "DevWorkspace"): default,
    ("tekton.dev", "v1", "PipelineRun"): default,
    ("tekton.dev", "v1", "TaskRun"): default,
}


def lookup(api_version: str, kind: str) -> Grouper | None:
    """The grouper for an owner's apiVersion and kind, or None when kai has none for it."""
    group, version = split_api_version(api_version)
    return REGISTRY.get((group, version, kind)) or REGISTRY.get((group, "*", kind))
