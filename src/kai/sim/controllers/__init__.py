"""The workload controllers the embedded cluster plays: owner manifest in, children (pods, Jobs,
ReplicaSets, StatefulSets, RayClusters) out.

Rules: each controller is a pure, level-triggered ``reconcile(owner, view) -> Result`` (see ``_base``); the
embedded cluster calls them until nothing more is created, after every change (apply, eviction, a pod
finishing). ``CONTROLLERS`` is the one table, keyed by (API group, kind); ``ADMISSION`` holds the pod
webhooks of the simulated operators, applied to every pod a controller creates.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kai.api.workloads import Workload
from kai.sim.controllers import apps, batch, jobset, kubeflow, lws, ray
from kai.sim.controllers._base import Created, Reconciler, Result, View

CONTROLLERS: dict[tuple[str, str], Reconciler] = {
    ("apps", "Deployment"): apps.deployment,
    ("apps", "ReplicaSet"): apps.replicaset,
    ("apps", "StatefulSet"): apps.statefulset,
    ("batch", "Job"): batch.job,
    ("batch", "CronJob"): batch.cronjob,
    ("kubeflow.org", "PyTorchJob"): kubeflow.training_job,
    ("kubeflow.org", "TFJob"): kubeflow.training_job,
    ("kubeflow.org", "XGBoostJob"): kubeflow.training_job,
    ("kubeflow.org", "JAXJob"): kubeflow.training_job,
    ("kubeflow.org", "MPIJob"): kubeflow.training_job,
    ("kubeflow.org", "Notebook"): kubeflow.notebook,
    ("ray.io", "RayCluster"): ray.raycluster,
    ("ray.io", "RayJob"): ray.rayjob,
    ("ray.io", "RayService"): ray.rayservice,
    ("jobset.x-k8s.io", "JobSet"): jobset.jobset,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): lws.leaderworkerset,
}

ADMISSION: tuple[Callable[[dict[str, Any]], None], ...] = (lws.admit_pod,)


def controller_for(owner: Workload) -> Reconciler | None:
    return CONTROLLERS.get((owner.group, owner.kind))


__all__ = ["ADMISSION", "CONTROLLERS", "Created", "Reconciler", "Result", "View", "controller_for"]
