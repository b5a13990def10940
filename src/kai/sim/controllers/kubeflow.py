"""Kubeflow: the training operator's jobs (PyTorchJob, TFJob, XGBoostJob, JAXJob, MPIJob v1), the MPI
operator's MPIJob v2beta1, and the Notebook controller.

A training job gets ``replicas`` (default 1) pods per replica spec, named ``<job>-<type>-<index>`` and
labelled with the job name, replica type and index, and ``job-role`` for the pod that leads (master,
chief, launcher), which KAI orders first. A deleted pod comes back under the same name; a pod that
finished is not replaced (the job is done). ``runPolicy.suspend`` holds every pod back.
"""

from __future__ import annotations

from kai.api import constants as C
from kai.api.workloads import Fields, Workload
from kai.sim.controllers._base import (
    Created,
    Result,
    View,
    object_manifest,
    pod_manifest,
    pods_of,
    template_with,
    workloads_of,
)

# kind → (replica specs field, operator name, replica types that lead the job)
TRAINING_KINDS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "PyTorchJob": ("pytorchReplicaSpecs", "pytorchjob-controller", ("Master",)),
    "TFJob": ("tfReplicaSpecs", "tfjob-controller", ("Chief", "Master")),
    "XGBoostJob": ("xgbReplicaSpecs", "xgboostjob-controller", ("Master",)),
    "JAXJob": ("jaxReplicaSpecs", "jaxjob-controller", ()),
    "MPIJob": ("mpiReplicaSpecs", "mpijob-controller", ("Launcher",)),
}
_FIRST = ("Master", "Chief", "Launcher")


def _role(kind: str, rtype: str, index: int, types: list[str]) -> str | None:
    """The job-role label (the training operator's IsMasterRole): the leading type; for MPI also ``worker``;
    for a TFJob or JAXJob without a chief, worker 0."""
    leads = TRAINING_KINDS[kind][2]
    if kind == "MPIJob":
        return "launcher" if rtype == "Launcher" else "worker"
    if rtype in leads:
        return "master"
    if not any(t in leads for t in types) and kind in ("TFJob", "JAXJob") and rtype == "Worker" and index == 0:
        return "master"
    return None


def training_job(owner: Workload, view: View) -> Result:
    spec = owner.fields().at("spec")
    if spec.flag("runPolicy", "suspend"):
        return Result()
    if owner.kind == "MPIJob" and owner.api_version == "kubeflow.org/v2beta1":
        return _mpi_v2(owner, spec, view)
    field, operator, _ = TRAINING_KINDS[owner.kind]
    specs = spec.mapping(field)
    types = sorted(specs, key=lambda t: (t not in _FIRST, t))
    existing = {p.meta.name for p in pods_of(view, owner)}
    out = []
    for rtype in types:
        rspec = spec.at(field, rtype)
        for index in range(rspec.integer("replicas", default=1) or 0):
            lower = rtype.lower()
            name = f"{owner.meta.name}-{lower}-{index}"
            if owner.kind == "MPIJob" and rtype == "Launcher":
                name = f"{owner.meta.name}-launcher"
            if name in existing:
                continue
            labels = {
                C.LABEL_KUBEFLOW_JOB_NAME: owner.meta.name,
                C.LABEL_KUBEFLOW_OPERATOR_NAME: operator,
                C.LABEL_KUBEFLOW_REPLICA_TYPE: lower,
                C.LABEL_KUBEFLOW_REPLICA_INDEX: str(index),
            }
            role = _role(owner.kind, rtype, index, types)
            if role is not None:
                labels[C.LABEL_KUBEFLOW_JOB_ROLE] = role
            doc = pod_manifest(owner, rspec.at("template"), name, labels=labels)
            out.append(Created(doc, ("", f"spec.{field}.{rtype}.template")))
    return Result(out)


def _mpi_v2(owner: Workload, spec: Fields, view: View) -> Result:
    """The MPI operator: worker pods ``<job>-worker-<i>`` owned by the MPIJob, and the launcher as a Job
    ``<job>-launcher``; with ``launcherCreationPolicy: WaitForWorkersReady`` only once every worker runs."""
    base = {C.LABEL_KUBEFLOW_JOB_NAME: owner.meta.name, C.LABEL_KUBEFLOW_OPERATOR_NAME: "mpi-operator"}
    workers = spec.at("mpiReplicaSpecs", "Worker")
    pods = {p.meta.name: p for p in pods_of(view, owner)}
    out = []
    count = workers.integer("replicas", default=1) or 0
    for index in range(count):
        name = f"{owner.meta.name}-worker-{index}"
        if name not in pods:
            labels = {**base, C.LABEL_KUBEFLOW_JOB_ROLE: "worker", C.LABEL_KUBEFLOW_REPLICA_INDEX: str(index)}
            doc = pod_manifest(owner, workers.at("template"), name, labels=labels)
            out.append(Created(doc, ("", "spec.mpiReplicaSpecs.Worker.template")))
    wait = spec.string("launcherCreationPolicy", default="AtStartup") == "WaitForWorkersReady"
    workers_ready = not out and all(pods[f"{owner.meta.name}-worker-{i}"].phase == "Running" for i in range(count))
    if not workloads_of(view, owner, "Job") and (not wait or workers_ready):
        launcher = spec.at("mpiReplicaSpecs", "Launcher")
        labels = {**base, C.LABEL_KUBEFLOW_JOB_ROLE: "launcher"}
        job_spec = {"template": template_with(launcher.at("template"), labels), "backoffLimit": 6}
        doc = object_manifest("batch/v1", "Job", f"{owner.meta.name}-launcher", owner, job_spec, labels=labels)
        out.append(Created(doc, ("spec.template", "spec.mpiReplicaSpecs.Launcher.template")))
    return Result(out)


def notebook(owner: Workload, view: View) -> Result:
    """The Notebook controller: a StatefulSet of one pod, ``<notebook>-0``."""
    if workloads_of(view, owner, "StatefulSet"):
        return Result()
    template = owner.fields().at("spec", "template")
    labels = {"statefulset": owner.meta.name, "notebook-name": owner.meta.name}
    sts_spec = {
        "replicas": 1,
        "selector": {"matchLabels": {"statefulset": owner.meta.name}},
        "template": template_with(template, labels),
    }
    doc = object_manifest("apps/v1", "StatefulSet", owner.meta.name, owner, sts_spec, labels=labels)
    return Result([Created(doc, ("spec.template", "spec.template"))])
