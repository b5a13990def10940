"""KAI's action tests as kai scenarios: tests/scenarios/kai/<dir>/<case>/{cluster.yaml,expect.yaml}.

Input: the JSON lines KAI's own test harness writes with the hook of this folder (see README.md): for every
case, its TestTopologyBasic as the harness received it, and the session's tasks as KAI left them when the harness
compared them with the expectations (the "result" records). Nothing of KAI's code is copied: the harness
semantics (tests/scenarios/CONFORMANCE.md, "How KAI's harness maps to kai sim") are written out here.

    kai_cases.py generate DUMP [--out tests/scenarios/kai]
        writes one folder per case kai can express and tests/scenarios/kai/cases.json (every case: where it
        lives in KAI, its folder or why there is none)

Expectations are the test's own (JobExpectedResults / TaskExpectedResults): a status for every pod of an
expected job, its node where the test names one. Where KAI's harness does not check what a test says, KAI's
actual result is used instead and the description says so: a TaskExpectedResults key that names no pod, the
node of a Pending pod (KAI leaves the node a failed attempt tried), GPU groups (the harness compares only
groups that kept their label). Shared-GPU relations (same GPU, different GPUs) come from KAI's actual result for
the pods the test names a GPU group for. Integration cases run all five actions for RoundsUntilMatch +
RoundsAfterMatch cycles; their expected statuses are the harness's (Binding -> Running, Pipelined and
Releasing -> Pending between rounds), which kai sim shows once the cluster is stable.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

NOW = datetime(2026, 1, 1, tzinfo=UTC)
ACTIONS_DIR = "/pkg/scheduler/actions/"
DRA_PENDING = "pending: DRA ResourceClaimTemplate objects (the harness has none; kai_cases.py writes none)"
ST = {
    1: "Pending",
    2: "Gated",
    4: "Allocated",
    8: "Pipelined",
    16: "Binding",
    32: "Bound",
    64: "Running",
    128: "Releasing",
    256: "Succeeded",
    512: "Failed",
    1024: "Unknown",
    2048: "Deleted",
    4096: "StuckInReleasing",
}
CLASSES = {50: "train", 75: "build-preemptible", 100: "build", 125: "inference"}
ALL_ACTIONS = "allocate,consolidation,reclaim,preempt,stalegangeviction"
LIVE = ("Running", "Binding", "Pipelined", "Releasing", "Allocated", "Bound", "StuckInReleasing")

# Cases whose scenario cannot come from the expectations alone: (KAI file, case name) -> what to do.
#   skip: the reason there is no scenario (the inventory's "why")
#   pods / args / pod_count: the expectations the Go test asserts in code instead of JobExpectedResults
OVERRIDES: dict[tuple[str, str], dict[str, Any]] = {
    ("allocate/allocate_test.go", "elastic job"): {
        "skip": "backend: the cache's bind fails (kai's engine never fails a bind; the Kubernetes backend's is "
        "tests/k8s/test_scheduler.py::test_a_bind_the_api_server_refuses_is_replanned_next_cycle)",
    },
    ("allocate/allocate_test.go", "No jobs"): {"pod_count": 0},
    (
        "integration_tests/reclaim/reclaim_dra_overflow_test.go",
        "overflowing DRA request does not block reclaim for a valid request in the same queue",
    ): {
        "skip": "not expressible: the test's claims ask for 9223372036854775807 devices; the API server refuses a "
        "count above 128 (ResourceClaim validation) and kai refuses such a claim the same way, naming the field "
        "(docs/dra.md)",
    },
    ("consolidation/consolidation_victim_invariant_prefilter_test.go", "consolidation victim invariant blocker"): {
        "skip": "internal: the test injects a VictimInvariantPrePredicate function into the session",
    },
    ("preempt/preempt_victim_invariant_prefilter_test.go", "preempt victim invariant blocker"): {
        "skip": "internal: the test injects a VictimInvariantPrePredicate function into the session",
    },
    ("reclaim/reclaim_benchmark_test.go", "unschedulable distributed reclaim benchmark"): {
        "skip": "internal: asserts KAI's scenario_search_scenarios_total{state=duplicate} metric",
    },
    ("integration_tests/reclaim/reclaim_topology_test.go", "unschedulable distributed reclaim topology #2"): {
        "skip": "internal: asserts KAI's default scenario generators and search budgets",
    },
    ("integration_tests/reclaim/reclaim_topology_test.go", "unschedulable distributed reclaim topology"): {
        "action": "reclaim",
        "pods": {"unschedulable-distributed-job-*": "Pending", "running-job-*": "Running"},
    },
    ("integration_tests/reclaim/reclaim_many_single_gpu_topology_test.go", "many single GPU jobs reclaim benchmark"): {
        "action": ALL_ACTIONS,
        "pods": {"many-single-gpu-running-job-*": "Releasing", "many-single-gpu-pending-job-*": "Pipelined"},
    },
    (
        "integration_tests/reclaim/reclaim_cross_hierarchy_root_leaf_test.go",
        "cross-hierarchy reclaim from root leaf victim",
    ): {
        "action": "reclaim",
        "pods": {"root-leaf-victim-0": "Releasing", "inference-pending-0": "Pipelined"},
    },
    ("reclaim/reclaim_test.go", "queue0 is under fair share, queue1 is over fair share - reclaim"): {
        "skip": "covered: reclaim/fractional_reclaim (the Go test's two running fractions without a GPU group get a "
        "GPU each, five GPUs on a 4-GPU node; the scenario puts them on one GPU as B.2.5 describes)",
    },
    (
        "allocate/allocateFractionalGpu_test.go",
        "test gpuSharingOrder for a node that has a gpu reservation pod pending - two pods",
    ): {
        "skip": "not expressible: a pod Pipelined in the input (kai keeps pipelining within a cycle; a pipelined pod "
        "is pending again in the next)",
    },
}
# Cases where kai decides otherwise on purpose (docs/differences.md): the scenario asserts kai's decision.
OVERRIDES[
    (
        "allocate/allocateGpuMemory_test.go",
        "pending job requests gpu memory - overlimit on available nodes, not overlimit on full largest-memory node",
    )
] = {
    "deliberate": "gpu-memory in queue accounting: kai charges the fraction on the largest GPU memory before placing "
    "(KAI checks each node's own fraction against the quota), so 350 MiB of a 600 MiB GPU (0.58 > quota 0.5) binds",
    "pods": {
        "pending-job-0": {"status": "Binding", "node": "node-medium"},
        "running-job-0": {"status": "Running", "node": "node-large"},
        "running-job-1": {"status": "Running", "node": "node-large"},
    },
}
OVERRIDES[
    (
        "allocate/allocateFractionalGpu_test.go",
        "Pipeline fractional interactive gpu task when a task is evicting - dont allocate a new gpu",
    )
] = {
    "deliberate": "order of GPU candidates on a node: kai binds a fraction on a free GPU now rather than pipelining "
    "it onto a shared GPU whose other half is still being released",
    "pods": {
        "running-job0-0": {"status": "Running", "node": "node0"},
        "releasing-job0-0": {"status": "Releasing", "node": "node0"},
        "pending-job0-0": {"status": "Binding", "node": "node0", "gpuGroups": 1},
    },
    "different_gpu": [["pending-job0-0", "running-job0-0"]],
}
OVERRIDES[("integration_tests/reclaim/reclaim_test.go", "Reclaim based on releasing and idle resources")] = {
    "deliberate": "nominated nodes: a pod pipelined by an eviction keeps the node it was pipelined to "
    "(status.nominatedNodeName, as kube-scheduler's nominated pods) instead of being placed afresh next cycle",
    "pods": {
        "pending-job-0": {"status": "Running", "node": "node1"},
        "pending-job-1": {"status": "Running", "node": "node0"},
        "running-job-0": {"status": "Pending"},
    },
}
# Multi-topology cases assert domain sets in code; kai's placement (checked against those sets) is written out.
for _key, _pods in {
    ("allocate/allocate_multi_topology_test.go", "Allocate one job with two subgroups using different topology CRs"): {
        "pending-job0-0": "node0",
        "pending-job0-1": "node1",
        "pending-job0-2": "node1",
        "pending-job0-3": "node2",
        "pending-job0-4": "node4",
        "pending-job0-5": "node4",
    },
    (
        "allocate/allocate_multi_topology_test.go",
        "Allocate one hierarchical job with parent and children using different topology CRs",
    ): {
        "pending-job1-0": "node0",
        "pending-job1-1": "node1",
        "pending-job1-2": "node1",
        "pending-job1-3": "node2",
        "pending-job1-4": "node3",
        "pending-job1-5": "node3",
    },
}.items():
    OVERRIDES[_key] = {"pods": {p: {"status": "Binding", "node": n} for p, n in _pods.items()}}


class Unsupported(Exception):
    """The case needs something kai does not model; the message is the inventory's reason."""


# --- YAML, names, numbers ---------------------------------------------------------------------------------


class _Flow(dict):
    pass


yaml.add_representer(_Flow, lambda d, data: d.represent_mapping("tag:yaml.org,2002:map", data, flow_style=True))


def _flow(d: dict) -> _Flow:
    return _Flow({k: (_flow(v) if isinstance(v, dict) else v) for k, v in d.items()})


def doc(d: dict) -> str:
    """A manifest with one line per top-level key, each value in flow style (the scenarios' house style)."""
    lines = []
    for k, v in d.items():
        if isinstance(v, dict):
            lines.append(yaml.dump({k: _flow(v)}, width=10000, sort_keys=False, default_flow_style=None).strip())
        else:
            lines.append(yaml.dump({k: v}, width=10000, sort_keys=False).strip())
    return "\n".join(lines)


def ts(d: datetime) -> str:
    return d.strftime("%Y-%m-%dT%H:%M:%SZ")


def num(x: float) -> str:
    """Go's strconv.FormatFloat(x, 'f', -1, 64): the harness's way of turning a float into a quantity string."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))


def intish(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


def kname(s: str) -> str:
    return s.replace("_", "-").lower()


def class_name(priority: int) -> str:
    return CLASSES.get(priority, f"priority-{priority}" if priority >= 0 else f"priority-minus-{-priority}")


def slug(name: str) -> str:
    words = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_").split("_")
    out: list[str] = []
    for w in words:
        if len("_".join([*out, w])) > 60:
            break
        out.append(w)
    return "_".join(out) or "case"


# --- the cluster -------------------------------------------------------------------------------------------


def constraint(c: dict) -> dict:
    out = {}
    for key, field in (
        ("Topology", "topology"),
        ("RequiredLevel", "requiredTopologyLevel"),
        ("PreferredLevel", "preferredTopologyLevel"),
    ):
        if c.get(key):
            out[field] = c[key]
    return out


def subgroups_of(root: dict | None, ntasks: int) -> tuple[int | None, int | None, dict | None, list[dict]]:
    """(minMember, minSubGroup, constraint, spec.subGroups) of a dumped SubGroupSet tree. The harness adds a
    podset "default" holding every task that names no subgroup, with minAvailable = all the job's tasks."""
    if not root:
        return ntasks, None, None, []
    groups, podsets = root.get("Groups") or [], root.get("PodSets") or []
    if not groups and not podsets:
        return ntasks, root.get("MinSubGroup"), root.get("Constraint"), []
    if not groups and len(podsets) == 1 and podsets[0]["Name"] == "default" and not podsets[0].get("Constraint"):
        return podsets[0]["MinAvailable"], root.get("MinSubGroup"), root.get("Constraint"), []
    out: list[dict] = []

    def walk(node: dict, parent: str | None) -> None:
        for g in node.get("Groups") or []:
            e: dict[str, Any] = {"name": g["Name"]}
            if parent:
                e["parent"] = parent
            if g.get("MinSubGroup") is not None:
                e["minSubGroup"] = g["MinSubGroup"]
            if g.get("Constraint"):
                e["topologyConstraint"] = constraint(g["Constraint"])
            out.append(e)
            walk(g, g["Name"])
        for p in node.get("PodSets") or []:
            e = {"name": p["Name"], "minMember": p["MinAvailable"]}
            if parent:
                e["parent"] = parent
            if p.get("Constraint"):
                e["topologyConstraint"] = constraint(p["Constraint"])
            out.append(e)

    walk(root, None)
    return None, root.get("MinSubGroup"), root.get("Constraint"), out


def shard_of(conf: dict | None, integration: bool) -> dict:
    """The SchedulingShard for a test's SchedulerConf mock: its tiers are the whole plugin list, so the GPU-order
    plugins are on exactly when listed, and nodeplacement's arguments are the placement strategy."""
    spec: dict[str, Any] = {}
    if conf:
        plugins = {p.get("name"): p for tier in conf.get("tiers") or [] for p in tier.get("plugins") or []}
        args = (plugins.get("nodeplacement") or {}).get("arguments")
        if args:
            spec["placementStrategy"] = {"gpu": args.get("gpu", "binpack"), "cpu": args.get("cpu", "binpack")}
        if plugins:
            spec["plugins"] = {p: {"enabled": p in plugins} for p in ("gpupack", "gpuspread", "gpusharingorder")}
    if integration:  # KAI's integration harness leaves the global staleness grace period at 0
        spec["args"] = {"staleness-grace-period": "0s"}
    return spec


def queue_doc(name: str, parent: str | None, gq: float, gl: float, gw: float, extra: dict) -> dict:
    def res(q: Any, lim: Any, w: Any) -> dict:
        return {"quota": q, "limit": lim, "overQuotaWeight": w}

    def given(key: str) -> Any:
        return extra[key] if extra.get(key) is not None else -1

    spec: dict[str, Any] = {}
    if parent:
        spec["parentQueue"] = parent
    if extra.get("priority") is not None:
        spec["priority"] = extra["priority"]
    if extra.get("reclaimMinRuntime"):
        spec["reclaimMinRuntime"] = extra["reclaimMinRuntime"]
    spec["resources"] = {
        "gpu": res(intish(gq), intish(gl), intish(gw)),
        "cpu": res(given("cpu_quota"), given("cpu_limit"), 1),
        "memory": res(given("memory_quota"), given("memory_limit"), 1),
    }
    return {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def node_docs(topo: dict, jobs: list[dict]) -> list[str]:
    nodes = topo.get("Nodes") or {}
    affinity_used = any(
        t.get("NodeAffinityNames") or pod_affinity(t) for j in jobs for t in j.get("Tasks") or []
    )  # node affinity, or pod affinity whose topology key may be kai.scheduler/type (NodeAffinityKey)
    out = []
    for name in sorted(nodes):
        n = nodes[name]
        if n.get("NumaTopology"):
            raise Unsupported("not expressible: NUMA topology (kai does not model NUMA placement)")
        labels = dict(n.get("Labels") or {})
        if affinity_used:  # the harness labels every node kai.scheduler/type=<name>, the test's labels win
            labels.setdefault("kai.scheduler/type", name)
        if n.get("GPUMemory"):
            labels["nvidia.com/gpu.memory"] = str(n["GPUMemory"])
        if n.get("MigStrategy"):
            labels["nvidia.com/mig.strategy"] = n["MigStrategy"]
        alloc = {
            "cpu": num(n["CPUMillis"]) if n.get("CPUMillis") else "20000",
            "memory": num(n["CPUMemory"]) if n.get("CPUMemory") else "20G",
        }
        if n.get("GPUs"):
            alloc["nvidia.com/gpu"] = str(n["GPUs"])
        for k, v in (n.get("MigInstances") or {}).items():
            alloc[k] = str(v)
        if n.get("MaxTaskNum") is not None:
            alloc["pods"] = str(n["MaxTaskNum"])
        meta: dict[str, Any] = {"name": name}
        if labels:
            meta["labels"] = labels
        out.append(doc({"apiVersion": "v1", "kind": "Node", "metadata": meta, "status": {"allocatable": alloc}}))
    return out


def queue_docs(topo: dict, notes: list[str]) -> list[str]:
    depts = topo.get("Departments") or []
    implicit = not depts and not topo.get("DisableDefaultDepartment")
    out = []
    if implicit:  # the harness's department "default" (quota -1; its weight -1 is written 1: alone, it has no effect)
        out.append(doc(queue_doc("default", None, -1, -1, 1, {})))
    for d in depts:
        weight = d["DeservedGPUs"]
        if weight < 0:  # kai refuses a negative overQuotaWeight (docs/differences.md)
            weight = 1
            if len(depts) > 1:
                notes.append("a department's over-quota weight -1 is written 1")
        limits = {"cpu_limit": d.get("MaxAllowedCPUs"), "memory_limit": d.get("MaxAllowedMemory")}
        out.append(doc(queue_doc(d["Name"], None, d["DeservedGPUs"], d["MaxAllowedGPUs"] or -1, weight, limits)))
    for q in topo.get("Queues") or []:
        if q.get("V1"):
            raise Unsupported("not expressible: a v1 queue without resources")
        parent = "default" if implicit else (q.get("ParentQueue") or None)
        extra = {
            "priority": q.get("Priority"),
            "cpu_quota": q.get("DeservedCPUs"),
            "memory_quota": q.get("DeservedMemory"),
            "cpu_limit": q.get("MaxAllowedCPUs"),
            "memory_limit": q.get("MaxAllowedMemory"),
            "reclaimMinRuntime": q.get("ReclaimMinRuntime"),
        }
        out.append(
            doc(
                queue_doc(
                    q["Name"],
                    parent,
                    q["DeservedGPUs"],
                    q["MaxAllowedGPUs"] or -1,
                    q.get("GPUOverQuotaWeight") or 0,
                    extra,
                )
            )
        )
    return out


def job_docs(j: dict, created: datetime, mig_default: str, notes: list[str]) -> list[str]:
    name = kname(j["Name"])
    tasks = j.get("Tasks") or []
    min_member, min_sub, root_c, subgroups = subgroups_of(j.get("RootSubGroupSet"), len(tasks))
    spec: dict[str, Any] = {}
    if min_member is not None:
        spec["minMember"] = min_member
    if min_sub is not None:
        spec["minSubGroup"] = min_sub
    spec["queue"] = j["QueueName"]
    spec["priorityClassName"] = class_name(j.get("Priority") or 0)
    if j.get("Preemptibility"):
        spec["preemptibility"] = j["Preemptibility"]
    if j.get("PreemptionDelay"):
        spec["preemptionDelay"] = j["PreemptionDelay"]
    if j.get("PerJobStalenessGracePeriod"):
        spec["stalenessGracePeriod"] = j["PerJobStalenessGracePeriod"]
    if root_c:
        spec["topologyConstraint"] = constraint(root_c)
    if subgroups:
        spec["subGroups"] = subgroups
    meta: dict[str, Any] = {"name": name, "creationTimestamp": ts(created)}
    if j.get("Namespace"):
        meta["namespace"] = j["Namespace"]
    if j.get("StaleDuration"):
        stale = NOW - timedelta(seconds=j["StaleDuration"] / 1e9)
        meta["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": ts(stale)}
    out = [doc({"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta, "spec": spec})]
    gpus = j.get("RequiredGPUsPerTask") or 0
    frac = not float(gpus).is_integer()
    mem = j.get("RequiredGpuMemory") or 0
    devices = j.get("RequiredMultiFractionDevicesPerTask")
    for i, t in enumerate(tasks):
        out.append(pod_doc(j, t, f"{name}-{i}", frac, gpus, mem, devices, mig_default, notes))
    return out


def pod_affinity(t: dict) -> dict[str, Any]:
    """The harness's required inter-pod (anti-)affinity (tasks_fake applyPodAffinityLabels): one term each, the
    pod's PodAffinityLabels as the selector, over PodAffinityTopologyKey / PodAntiAffinityTopologyKey."""
    selector = t.get("PodAffinityLabels")
    out: dict[str, Any] = {}
    if not selector:
        return out
    for kind, key in (("podAffinity", "PodAffinityTopologyKey"), ("podAntiAffinity", "PodAntiAffinityTopologyKey")):
        if t.get(key):
            term = {"labelSelector": {"matchLabels": dict(selector)}, "topologyKey": t[key]}
            out[kind] = {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return out


def pod_doc(
    j: dict,
    t: dict,
    pname: str,
    frac: bool,
    gpus: float,
    mem: int,
    devices: int | None,
    mig_default: str,
    notes: list[str],
) -> str:
    state = ST[t.get("State") or 1]
    ann = {"pod-group-name": kname(j["Name"])}
    labels: dict[str, str] = {}
    if frac:
        ann["gpu-fraction"] = num(gpus)
    if mem:
        ann["gpu-memory"] = str(mem)
    if devices:
        ann["gpu-fraction-num-devices"] = str(devices)
    if t.get("Priority") is not None:
        labels["kai.scheduler/task-priority"] = str(t["Priority"])
    if t.get("SubGroupName"):
        labels["kai.scheduler/subgroup-name"] = t["SubGroupName"]
    labels.update(t.get("PodAffinityLabels") or {})  # the harness gives the pod these labels in any case
    if t.get("PersistentVolumeClaimNames"):
        raise Unsupported(
            "pending: volumes (PersistentVolumeClaims, which kai has since issue 16; this case asserts KAI's solver "
            "calls and fit errors in code, not yet written as a scenario)"
        )
    if t.get("IsLegacyMigTask"):  # a legacy MIG pod names its instances in annotations (the harness sets a flag)
        for k, v in (t.get("RequiredMigInstances") or {mig_default: 1}).items():
            ann[k] = str(v)
    ann.update(t.get("Annotations") or {})
    node = t.get("NodeName") or ""
    placed = node and state not in ("Pending", "Gated")
    if (frac or mem) and placed:  # a running fraction without a group gets a GPU of its own (a fresh UUID)
        groups = list(t.get("GPUGroups") or [])
        groups += [f"{pname}-g{k}" for k in range(len(groups), devices or 1)]
        if len(groups) == 1:
            labels["runai-gpu-group"] = groups[0]
        else:
            labels.update({f"runai-gpu-group/{g}": g for g in groups})
    req: dict[str, str] = {}
    if not j.get("IsBestEffortJob"):
        req["cpu"] = num(j["RequiredCPUsPerTask"]) if j.get("RequiredCPUsPerTask") else "1"
        req["memory"] = num(j["RequiredMemoryPerTask"]) if j.get("RequiredMemoryPerTask") else "1G"
        whole = t["RequiredGPUs"] if t.get("RequiredGPUs") is not None else (0 if frac else int(gpus))
        if whole and not frac:
            req["nvidia.com/gpu"] = str(whole)
        for k, v in (t.get("RequiredMigInstances") or {}).items():
            req[k] = str(v)
    pmeta: dict[str, Any] = {"name": pname}
    if j.get("Namespace"):
        pmeta["namespace"] = j["Namespace"]
    if labels:
        pmeta["labels"] = labels
    pmeta["annotations"] = ann
    spec: dict[str, Any] = {}
    if placed:
        spec["nodeName"] = node
    if t.get("NodeAffinityNames"):
        term = {"key": "kai.scheduler/type", "operator": "In", "values": t["NodeAffinityNames"]}
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}
            }
        }
    affinity = pod_affinity(t)
    if affinity:
        spec.setdefault("affinity", {}).update(affinity)
    claims, claim_statuses = pod_claims(t)
    if claims:
        spec["resourceClaims"] = claims
    if state == "Gated":
        spec["schedulingGates"] = [{"name": "gate"}]
    spec["containers"] = [{"name": "c", "resources": {"requests": req}}]
    status: dict[str, str] = {}
    if state in ("Running", "Releasing", "StuckInReleasing"):
        status = {"phase": "Running", "startTime": ts(NOW - timedelta(minutes=1))}
    elif state in ("Binding", "Bound", "Allocated"):
        status = {"phase": "Pending"}  # bound, not yet running
        notes.append(f"a {state} pod is given as bound (nodeName, phase Pending)")
    elif state in ("Succeeded", "Failed"):
        status = {"phase": state}
    elif state == "Pipelined":
        raise Unsupported("not expressible: a pod Pipelined in the input")
    elif state not in ("Pending", "Gated"):
        raise Unsupported(f"not expressible: a pod {state} in the input")
    if state == "Releasing":
        pmeta["deletionTimestamp"] = ts(NOW - timedelta(seconds=1))
    elif state == "StuckInReleasing":
        pmeta["deletionTimestamp"] = ts(NOW - timedelta(minutes=10))  # past the 2m stuckInReleasingThreshold
    if claim_statuses:
        status["resourceClaimStatuses"] = claim_statuses
    d: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": pmeta, "spec": spec}
    if status:
        d["status"] = status
    return doc(d)


def pod_claims(t: dict) -> tuple[list[dict], list[dict]]:
    """The harness's pod claims (tasks_fake): each of ResourceClaimNames by name; each of ResourceClaimTemplates
    (template -> claim) from its template, with the claim already made (status.resourceClaimStatuses)."""
    claims = [{"name": c, "resourceClaimName": c} for c in t.get("ResourceClaimNames") or []]
    statuses = []
    for template, claim in sorted((t.get("ResourceClaimTemplates") or {}).items()):
        claims.append({"name": claim, "resourceClaimTemplateName": template})
        statuses.append({"name": claim, "resourceClaimName": claim})
    return claims, statuses


# --- DRA objects (test_utils_builder.go getDRAObjects) ---------------------------------------------------------

DRA_DRIVER = "nvidia.com/gpu"  # the harness's driver for every ResourceSlice


def _field(d: dict, *names: str) -> Any:
    """A field of a dumped dra_fake struct: some have json tags (``name``), some not (``Name``)."""
    for n in names:
        if n in d:
            return d[n]
    return None


def strangers(topo: dict, jobs: list[dict]) -> bool:
    """Whether a claim's ``reservedFor`` names a consumer that is no pod of the test."""
    pods = {f"{j['Name']}-{i}" for j in jobs for i, _ in enumerate(j.get("Tasks") or [])}
    return any(
        r.get("name") not in pods
        for c in topo.get("ResourceClaims") or []
        for r in (_field(c, "claimStatus", "ClaimStatus") or {}).get("reservedFor") or []
    )


def dra_docs(topo: dict, jobs: list[dict]) -> list[str]:
    """DeviceClasses (empty spec: every device), ResourceSlices (driver nvidia.com/gpu, the node's pool, Count
    devices named 0, 1, ... with capacity gpu: 1) and ResourceClaims (one request named ``request``: ExactCount of
    the class, with the test's status), as KAI's harness builds them. A consumer in ``reservedFor`` that names a
    pod of the test is renamed as the generator renames pods."""
    out = []
    for name in topo.get("DeviceClasses") or []:
        out.append(doc({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name}}))
    slices = topo.get("ResourceSlices") or []
    per_node: dict[str, int] = defaultdict(int)
    for sl in slices:
        per_node[_field(sl, "nodeName", "NodeName") or ""] += 1
    for sl in slices:
        node = _field(sl, "nodeName", "NodeName") or ""
        if _field(sl, "nodeSelector", "NodeSelector") or _field(sl, "allNodes", "AllNodes") or not node:
            raise Unsupported("not expressible: a ResourceSlice not local to one node (kai: docs/dra.md)")
        count = _field(sl, "Count", "count") or 0
        devices = [{"name": str(i), "capacity": {"gpu": {"value": "1"}}} for i in range(count)]
        spec = {
            "driver": DRA_DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 0, "resourceSliceCount": per_node[node]},
            "devices": devices,
        }
        meta = {"name": kname(_field(sl, "Name", "name"))}
        out.append(doc({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": meta, "spec": spec}))
    pods = {f"{j['Name']}-{i}": f"{kname(j['Name'])}-{i}" for j in jobs for i, _ in enumerate(j.get("Tasks") or [])}
    for c in topo.get("ResourceClaims") or []:
        meta: dict[str, Any] = {"name": _field(c, "name", "Name")}
        if _field(c, "Namespace", "namespace"):
            meta["namespace"] = _field(c, "Namespace", "namespace")
        if _field(c, "labels", "Labels"):
            meta["labels"] = dict(_field(c, "labels", "Labels"))
        exactly: dict[str, Any] = {
            "deviceClassName": _field(c, "deviceClassName", "DeviceClassName"),
            "allocationMode": "ExactCount",
        }
        if _field(c, "count", "Count"):
            exactly["count"] = _field(c, "count", "Count")
        d: dict[str, Any] = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": meta,
            "spec": {"devices": {"requests": [{"name": "request", "exactly": exactly}]}},
        }
        status = dict(_field(c, "claimStatus", "ClaimStatus") or {})
        if status.get("reservedFor"):
            status["reservedFor"] = [
                {**r, "name": pods.get(r.get("name", ""), r.get("name", ""))} for r in status["reservedFor"]
            ]
        if status:
            d["status"] = status
        out.append(doc(d))
    return out


# --- expectations ------------------------------------------------------------------------------------------


def status_entry(want: dict) -> dict:
    e: dict[str, Any] = {"status": ST.get(want.get("Status") or 0, str(want.get("Status")))}
    if want.get("NodeName") and e["status"] != "Pending":  # KAI leaves the node a failed attempt tried on a pending pod
        e["node"] = want["NodeName"]
    return e


def expectations(topo: dict, jobs: list[dict], results: list[dict], notes: list[str]) -> dict:
    pods: dict[str, dict] = {}
    podjob = {f"{kname(j['Name'])}-{i}": j for j in jobs for i, _ in enumerate(j.get("Tasks") or [])}
    actual = {kname(t["Name"]): t for t in (results[0]["Tasks"] or [])} if results else {}
    named_groups: list[str] = []  # pods whose GPU group the test names
    byjob = {j["Name"]: j for j in jobs}
    for jname, want in sorted((topo.get("JobExpectedResults") or {}).items()):
        j = byjob.get(jname)
        if j is None:
            raise Unsupported(f"internal: the expectations name job {jname!r}, which the test does not have")
        for i, _ in enumerate(j.get("Tasks") or []):
            pods[f"{kname(jname)}-{i}"] = status_entry(want)
            if want.get("GPUGroups") and not want.get("DontValidateGPUGroup"):
                named_groups.append(f"{kname(jname)}-{i}")
        if want.get("ExpectedErrorMessage"):
            notes.append("KAI's error message is not compared (kai's reasons carry numbers: docs/differences.md)")
    for tname, want in sorted((topo.get("TaskExpectedResults") or {}).items()):
        name = kname(tname)
        if name not in podjob:  # KAI's harness skips a key that names no pod
            guess = f"{name}-0"
            if guess in podjob and guess in actual:
                pods[guess] = {"status": actual[guess]["Status"]}
                if actual[guess]["Node"] and actual[guess]["Status"] != "Pending":
                    pods[guess]["node"] = actual[guess]["Node"]
                notes.append(f"the test's key {tname!r} names no pod (KAI skips it): {guess} is KAI's result")
            continue
        pods[name] = status_entry(want)
        if want.get("GPUGroups") and not want.get("DontValidateGPUGroup"):
            named_groups.append(name)
    out: dict[str, Any] = {"pods": pods}
    if topo.get("ExpectedNodesResources"):
        out["nodes"] = {
            n: {"idle": {"gpu": v.get("IdleGPUs", 0)}, "releasing": {"gpu": v.get("ReleasingGPUs", 0)}}
            for n, v in sorted(topo["ExpectedNodesResources"].items())
        }
    shared = []
    for m in sorted(set(named_groups)):
        a, j = actual.get(m), podjob[m]
        is_shared = (j.get("RequiredGPUsPerTask") or 0) % 1 != 0 or (j.get("RequiredGpuMemory") or 0) > 0
        if a and is_shared and a["Status"] in LIVE and a["Node"] and a["GPUGroups"]:
            shared.append((m, a["Node"], set(a["GPUGroups"])))
    groups = defaultdict(list)
    for m, node, gs in shared:
        for g in gs:
            groups[(node, g)].append(m)
    same = sorted({tuple(sorted(v)) for v in groups.values() if len(v) > 1})
    if same:
        out["same_gpu"] = [list(v) for v in same]
    different = [
        [a, b] for i, (a, na, ga) in enumerate(shared) for b, nb, gb in shared[i + 1 :] if na == nb and not ga & gb
    ]
    if different:
        out["different_gpu"] = different
    return out


# --- one case ------------------------------------------------------------------------------------------------


def build(rec: dict, results: list[dict], rel: str, line: int, name: str) -> tuple[str, dict, list[str]]:
    """(cluster.yaml, expect.yaml as data, notes) of one case; raises Unsupported."""
    topo = rec["Topology"]
    override = OVERRIDES.get((rel, name), {})
    if "skip" in override:
        raise Unsupported(override["skip"])
    if topo.get("ResourceClaimTemplates"):
        raise Unsupported(DRA_PENDING)
    integration = rel.startswith("integration_tests") and rec["Kind"] == "integration"
    notes: list[str] = []
    jobs = topo.get("Jobs") or []
    docs: list[str] = []
    shard = shard_of((topo.get("Mocks") or {}).get("SchedulerConf"), integration)
    if shard:
        docs.append(
            doc(
                {
                    "apiVersion": "kai.scheduler/v1",
                    "kind": "SchedulingShard",
                    "metadata": {"name": "default"},
                    "spec": shard,
                }
            )
        )
    for t in topo.get("Topologies") or []:
        levels = [{"nodeLabel": lv["nodeLabel"]} for lv in t["spec"]["levels"]]
        docs.append(
            doc(
                {
                    "apiVersion": "kai.scheduler/v1alpha1",
                    "kind": "Topology",
                    "metadata": {"name": t["metadata"]["name"]},
                    "spec": {"levels": levels},
                }
            )
        )
    docs += node_docs(topo, jobs)
    docs += dra_docs(topo, jobs)
    docs += queue_docs(topo, notes)
    for p in sorted({j.get("Priority") or 0 for j in jobs} - set(CLASSES)):
        docs.append(
            doc(
                {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": class_name(p)},
                    "value": p,
                }
            )
        )
    # creation order: jobs stably sorted by priority (descending); the i-th of N is created N - i minutes ago
    order = sorted(range(len(jobs)), key=lambda i: -(jobs[i].get("Priority") or 0))
    mig = next(
        (k for n in (topo.get("Nodes") or {}).values() for k in (n.get("MigInstances") or {})), "nvidia.com/mig-1g.10gb"
    )
    for rank, i in enumerate(order):
        age = jobs[i].get("JobAgeInMinutes") or (len(jobs) - rank)
        docs += job_docs(jobs[i], NOW - timedelta(minutes=age), mig, notes)
    expect = expectations(topo, jobs, results, notes)
    for key in ("pods", "different_gpu"):
        if key in override:
            expect[key] = override[key]
    if "deliberate" in override:
        expect.pop("same_gpu", None)
        notes.insert(0, f"kai decides otherwise on purpose (docs/differences.md): {override['deliberate']}")
    if "pod_count" in override:
        expect["pod_count"] = override["pod_count"]
    where = f"KAI pkg/scheduler/actions/{rel}:{line} '{name}'"
    if integration:
        extra = rec.get("Extra") or {}
        rounds, after = extra.get("RoundsUntilMatch") or 2, extra.get("RoundsAfterMatch") or 5
        cycles = rounds + after
        if any(j.get("DeleteJobInTest") for j in jobs):
            cycles = 1  # the harness keeps a deleted job's pods Releasing in every round: the state of round 1
            notes.append("a deleted job's pods stay Releasing in every round of KAI's harness: one cycle")
        if strangers(topo, jobs):
            cycles = 1  # the harness keeps them in every round; kai sim's claim controller drops them after round 1
            notes.append(
                "a claim's reservedFor names consumers that are no pods of the test (the harness's "
                "RandomReservedForReferences): KAI's harness keeps them in every round, kai sim's claim controller "
                "drops them after the first cycle as kube-controller-manager's does: one cycle, where a pod placed "
                "shows as Binding (the harness turns Binding into Running between rounds)"
            )
            starting = {
                f"{kname(j['Name'])}-{i}": ST[t.get("State") or 1] for j in jobs for i, t in enumerate(j["Tasks"])
            }
            for pname, e in expect["pods"].items():
                if e["status"] == "Running" and starting.get(pname) == "Pending":
                    e["status"] = "Binding"
        args = ["--actions", ALL_ACTIONS, "--cycles", str(cycles)]
        what = (
            f"integration test: the five actions for {rounds} rounds, then {after} more with the same result; "
            f"kai sim runs {cycles} cycle{'s' if cycles > 1 else ''}"
        )
    else:
        action = override.get("action") or rel.split("/")[0 if not rel.startswith("integration_tests") else 1]
        args = ["--actions", action]
        what = f"one session, action {action}" if "," not in action else "one session, all five actions"
    args += ["--now", ts(NOW)]
    description = f"{where} ({what}). Generated by scripts/conformance/kai_cases.py."
    if notes:
        description += " " + " ".join(f"{n[0].upper()}{n[1:]}." for n in dict.fromkeys(notes))
    header = f"# {where}: generated from KAI's test (scripts/conformance/kai_cases.py); do not edit by hand.\n"
    return header + "\n---\n".join(docs) + "\n", {"description": description, "args": args, **expect}, notes


# --- reading the dump ------------------------------------------------------------------------------------------


def case_line(kai_root: Path, rel: str, name: str, nth: int) -> int:
    """The line of the case's name in its test file (the nth occurrence), 0 if not found."""
    text = (kai_root / rel).read_text()
    needle = json.dumps(name)[:50]
    pos = -1
    for _ in range(nth + 1):
        pos = text.find(needle, pos + 1)
        if pos < 0:
            return 0
    return text.count("\n", 0, pos) + 1


def load(dump: Path, kai_root: Path) -> tuple[dict, dict]:
    """(cases, results): cases[(rel, name, n)] = the n-th case of that name in the file (its first topology
    record; an integration case's RunTest record); results[...] = KAI's result records of that case, in order.
    stalegangeviction_test.go names its cases outside the topology: those go by order."""
    firsts: dict[tuple[str, str, int], dict] = {}
    results: dict[tuple[str, str, int], list[dict]] = defaultdict(list)
    ordinal: dict[tuple, int] = defaultdict(int)
    count: dict[tuple[str, str], int] = defaultdict(int)
    current: dict[tuple[str, str], tuple[str, str, int]] = {}
    for line in dump.open():
        r = json.loads(line)
        f = r.get("File", "")
        if ACTIONS_DIR not in f:
            continue
        rel = f.split(ACTIONS_DIR, 1)[1]
        if r["Kind"] == "result":
            name = r.get("Name") or ""
        else:
            name = (r.get("Topology") or {}).get("Name") or ((r.get("Extra") or {}).get("Name") or "")
        if not name:
            k = (rel, r.get("Function", ""), r["Kind"])
            names = re.findall(r'\bname:\s*"([^"]*)"', (kai_root / rel).read_text())
            name = names[ordinal[k]] if ordinal[k] < len(names) else f"#{ordinal[k]}"
            ordinal[k] += 1
        if r["Kind"] == "result":
            key = current.get((rel, name))
            if key is not None:
                results[key].append(r)
            continue
        cur = current.get((rel, name))
        if (
            r["Kind"] == "session"
            and rel.startswith("integration_tests")
            and cur
            and firsts[cur]["Kind"] == "integration"
        ):
            continue  # a later round of an integration case
        key = (rel, name, count[(rel, name)])
        count[(rel, name)] += 1
        firsts[key] = r
        current[(rel, name)] = key
    return firsts, results


def folder_of(rel: str, rec: dict) -> str:
    parts = rel.split("/")
    if parts[0] == "integration_tests":
        return f"integration-{parts[1].replace('_', '-')}" if rec["Kind"] == "integration" else parts[1]
    return parts[0]


def generate(dump: Path, kai_root: Path, out: Path) -> None:
    firsts, results = load(dump, kai_root)
    cases = []
    used: set[str] = set()
    for key, rec in sorted(
        firsts.items(), key=lambda kv: (kv[0][0], case_line(kai_root, kv[0][0], kv[0][1], kv[0][2]))
    ):
        rel, name, nth = key
        # where the case's name is; for a topology a helper builds, where the test calls the harness
        line = case_line(kai_root, rel, name, nth) or rec.get("Line", 0)
        label = name + (f" #{nth + 1}" if nth else "")
        entry: dict[str, Any] = {"file": rel, "line": line, "name": label}
        try:
            cluster, expect, _ = build(rec, results.get(key, []), rel, line, label)
        except Unsupported as e:
            entry["why"] = str(e)
            cases.append(entry)
            continue
        base = f"{folder_of(rel, rec)}/{slug(name)}" + (f"_{nth + 1}" if nth else "")
        folder, k = base, 2
        while folder in used:
            folder, k = f"{base}_{k}", k + 1
        used.add(folder)
        d = out / folder
        d.mkdir(parents=True, exist_ok=True)
        (d / "cluster.yaml").write_text(cluster)
        (d / "expect.yaml").write_text(yaml.dump(expect, sort_keys=False, width=120))
        entry["scenario"] = f"kai/{folder}"
        if "deliberate" in OVERRIDES.get((rel, label), {}):
            entry["deliberate"] = OVERRIDES[(rel, label)]["deliberate"]
        cases.append(entry)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")
    print(f"{len(cases)} cases, {sum(1 for c in cases if 'scenario' in c)} scenarios written to {out}", file=sys.stderr)


def _write_case(out: Path, entry: dict, folder: str, cluster: str, expect: dict) -> None:
    """Write one case's scenario into *folder*, point its cases.json *entry* at it, run it with this kai and
    record the outcome as ``after``."""
    from tests.test_scenarios import test_scenario

    d = out / folder
    d.mkdir(parents=True, exist_ok=True)
    (d / "cluster.yaml").write_text(cluster)
    (d / "expect.yaml").write_text(yaml.dump(expect, sort_keys=False, width=120))
    entry.pop("why", None)
    entry["scenario"] = f"kai/{folder}"
    try:
        test_scenario(out.parent / entry["scenario"])
        entry["after"] = "pass"
    except Exception as e:
        entry["after"] = "fail"
        print(f"{entry['scenario']}: {str(e).splitlines()[0][:160]}", file=sys.stderr)


def transcribed(records: Path, out: Path) -> None:
    """Scenarios for cases the dump lacks because the generator could not express them when it was taken (KAI's
    interpod_affinity_test.go, before kai had inter-pod affinity): *records* holds their TestTopologyBasic in the
    dump's format, transcribed from the test file (scripts/conformance/transcribed.jsonl). Each replaces its
    case's reason in cases.json, is run with this kai and recorded as ``after``."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    cases = json.loads((out / "cases.json").read_text())
    index = {(c["file"], c["name"]): c for c in cases}
    for line in records.open():
        rec = json.loads(line)
        rel = rec["File"].split(ACTIONS_DIR, 1)[1]
        name = rec["Topology"]["Name"]
        entry = index[(rel, name)]
        cluster, expect, _ = build(rec, [], rel, entry["line"], name)
        expect["description"] += " Transcribed from the test file (scripts/conformance/transcribed.jsonl)."
        _write_case(out, entry, f"{folder_of(rel, rec)}/{slug(name)}", cluster, expect)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")


def update(dump: Path, kai_root: Path, out: Path) -> None:
    """Regenerate the cases of a partial dump (the hook run on some of KAI's tests only, e.g. ``go test -run DRA``)
    and leave every other case as it is: each case of *dump* gets its scenario (or its reason) in cases.json, is
    run with this kai and recorded as ``after``. How the DRA cases were added (scripts/conformance/README.md)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    firsts, results = load(dump, kai_root)
    cases = json.loads((out / "cases.json").read_text())
    index = {(c["file"], c["name"]): c for c in cases}
    used = {c["scenario"].removeprefix("kai/") for c in cases if "scenario" in c}
    for key, rec in firsts.items():
        rel, name, nth = key
        label = name + (f" #{nth + 1}" if nth else "")
        entry = index.get((rel, label))
        if entry is None:
            print(f"{rel} '{label}': not in cases.json (a new case: run generate on a full dump)", file=sys.stderr)
            continue
        try:
            cluster, expect, _ = build(rec, results.get(key, []), rel, entry["line"], label)
        except Unsupported as e:
            entry.pop("scenario", None)
            entry.pop("after", None)
            entry["why"] = str(e)
            continue
        folder = entry.get("scenario", "").removeprefix("kai/")
        if not folder:
            base = f"{folder_of(rel, rec)}/{slug(name)}" + (f"_{nth + 1}" if nth else "")
            folder, k = base, 2
            while folder in used:
                folder, k = f"{base}_{k}", k + 1
            used.add(folder)
        _write_case(out, entry, folder, cluster, expect)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")


def record(out: Path, key: str) -> None:
    """Run every scenario of cases.json with the kai on the path (tests/test_scenarios.py's checks) and store
    pass/fail under *key*: ``before`` was measured with PYTHONPATH pointing at the engine before this work."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tests.test_scenarios import test_scenario

    cases = json.loads((out / "cases.json").read_text())
    for case in cases:
        if "scenario" not in case:
            continue
        try:
            test_scenario(out.parent / case["scenario"])
            case[key] = "pass"
        except Exception as e:  # a failed check, or a kai sim that cannot read the scenario
            case[key] = "fail"
            print(f"{case['scenario']}: {str(e).splitlines()[0][:160]}", file=sys.stderr)
    (out / "cases.json").write_text(json.dumps(cases, indent=1) + "\n")


def status_of(case: dict) -> str:
    """pass | deliberate | covered | not expressible | pending | internal | backend."""
    if "scenario" in case:
        return "deliberate" if "deliberate" in case else "pass"
    return case["why"].split(":", 1)[0]


def summary(cases: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for c in cases:
        counts[status_of(c)] += 1
    expressible = counts["pass"] + counts["deliberate"] + counts["covered"]
    before = sum(1 for c in cases if c.get("before") == "pass" and "deliberate" not in c) + counts["covered"]
    return {"total": len(cases), "expressible": expressible, "before": before, **counts}


def inventory(out: Path, doc_path: Path) -> None:
    """Write the case table and the counts of cases.json into *doc_path* between its markers."""
    cases = json.loads((out / "cases.json").read_text())
    lines = ["<!-- generated by scripts/conformance/kai_cases.py inventory: do not edit by hand -->", ""]
    by_file: dict[str, list[dict]] = defaultdict(list)
    for c in cases:
        by_file[c["file"]].append(c)
    for f in sorted(by_file):
        lines += [
            f"### {f}",
            "",
            "| line | case | status | scenario, or why there is none | before |",
            "|---|---|---|---|---|",
        ]
        for c in by_file[f]:
            status = status_of(c)
            name = c["name"].replace("|", "\\|")
            if "scenario" in c:
                where = f"[`{c['scenario']}`]({c['scenario']})"
                if "deliberate" in c:
                    where += f": {c['deliberate']}"
            else:
                where = c["why"].split(": ", 1)[1] if ": " in c["why"] else c["why"]
            if status == "deliberate":
                before = "same"
            elif status == "covered":
                before = "pass"
            else:
                before = c.get("before", "–") if "scenario" in c else "–"
            lines.append(f"| {c['line']} | {name} | {status} | {where} | {before} |")
        lines.append("")
    n = summary(cases)
    counts = (
        f"<!-- counts: total={n['total']} expressible={n['expressible']} pass={n['pass']} "
        f"deliberate={n['deliberate']} covered={n['covered']} before={n['before']} -->"
    )
    text = doc_path.read_text()
    start, end = "<!-- cases:start -->", "<!-- cases:end -->"
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    text = head + start + "\n" + "\n".join(lines) + "\n" + end + tail
    text = re.sub(r"<!-- counts: [^>]*-->", counts, text)
    doc_path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate")
    g.add_argument("dump", type=Path)
    g.add_argument("--kai", type=Path, required=True, help="KAI's pkg/scheduler/actions directory (its test files)")
    g.add_argument("--out", type=Path, default=Path("tests/scenarios/kai"))
    r = sub.add_parser("record")
    r.add_argument("key", choices=("before", "after"))
    r.add_argument("--out", type=Path, default=Path("tests/scenarios/kai"))
    t = sub.add_parser("transcribed")
    t.add_argument("records", type=Path, nargs="?", default=Path(__file__).parent / "transcribed.jsonl")
    t.add_argument("--out", type=Path, default=Path("tests/scenarios/kai"))
    u = sub.add_parser("update")
    u.add_argument("dump", type=Path)
    u.add_argument("--kai", type=Path, required=True, help="KAI's pkg/scheduler/actions directory (its test files)")
    u.add_argument("--out", type=Path, default=Path("tests/scenarios/kai"))
    i = sub.add_parser("inventory")
    i.add_argument("--out", type=Path, default=Path("tests/scenarios/kai"))
    i.add_argument("--doc", type=Path, default=Path("tests/scenarios/CONFORMANCE.md"))
    args = ap.parse_args()
    if args.cmd == "generate":
        generate(args.dump, args.kai, args.out)
    elif args.cmd == "update":
        update(args.dump, args.kai, args.out)
    elif args.cmd == "transcribed":
        transcribed(args.records, args.out)
    elif args.cmd == "record":
        record(args.out, args.key)
    else:
        inventory(args.out, args.doc)


if __name__ == "__main__":
    main()
