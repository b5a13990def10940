"""jobset.x-k8s.io JobSet → one Job per replica of each replicatedJob, ``<jobset>-<rj>-<index>``.

The JobSet stamps its labels (jobset name, replicatedJob name and replicas, job index, global index) on the
Jobs and on their pod templates, which is how KAI's grouper finds each pod's leaf subgroup. As JobSet's
webhook does, a Job without a completion mode runs Indexed with ``completions = parallelism``. With
``startupPolicyOrder: InOrder`` the Jobs of one replicatedJob are created only once every pod of the ones
before it runs. Simplifications: no failure or success policies.
"""

from __future__ import annotations

import copy

from kai.api import constants as C
from kai.api.workloads import Workload
from kai.sim.controllers._base import Created, Result, View, object_manifest, pods_of, template_with, workloads_of


def jobset(owner: Workload, view: View) -> Result:
    spec = owner.fields().at("spec")
    if spec.flag("suspend"):
        return Result()
    in_order = spec.string("startupPolicy", "startupPolicyOrder") == "InOrder"
    jobs = {j.meta.name: j for j in workloads_of(view, owner, "Job")}
    out = []
    global_index = 0
    for i, rj in enumerate(spec.items("replicatedJobs")):
        rj_name = rj.string("name")
        if not rj_name:
            raise rj.error("is required", "name")
        replicas = rj.integer("replicas", default=1) or 0
        template = rj.at("template")
        ready = True
        for index in range(replicas):
            name = f"{owner.meta.name}-{rj_name}-{index}"
            labels = {
                C.LABEL_JOBSET_NAME: owner.meta.name,
                C.LABEL_JOBSET_REPLICATED_JOB: rj_name,
                C.LABEL_JOBSET_REPLICATED_JOB_REPLICAS: str(replicas),
                C.LABEL_JOBSET_JOB_INDEX: str(index),
                C.LABEL_JOBSET_JOB_GLOBAL_INDEX: str(global_index),
            }
            global_index += 1
            job = jobs.get(name)
            if job is not None:
                parallelism = job.fields().integer("spec", "parallelism", default=1) or 0
                running = sum(1 for p in pods_of(view, job) if p.phase == "Running")
                ready = ready and running >= parallelism
                continue
            ready = False
            job_spec = copy.deepcopy(template.mapping("spec"))
            job_spec["template"] = template_with(template.at("spec", "template"), labels, labels)
            if "completionMode" not in job_spec:
                job_spec["completionMode"] = "Indexed"
                job_spec.setdefault("completions", job_spec.get("parallelism", 1))
            meta = template.at("metadata")
            doc = object_manifest(
                "batch/v1",
                "Job",
                name,
                owner,
                job_spec,
                labels={**meta.string_map("labels"), **labels},
                annotations={**meta.string_map("annotations"), **labels},
            )
            out.append(Created(doc, ("", f"spec.replicatedJobs[{i}].template")))
        if in_order and not ready:
            break
    return Result(out)
