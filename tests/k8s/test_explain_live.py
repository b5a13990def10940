"""``kai explain`` and ``kai snapshot`` against a real API server, with ``kai scheduler`` scheduling it.

kai's answers must be the scheduler's: the reason ``kai explain`` prints is the one the live scheduler
wrote on the PodGroup, and a ``kai snapshot`` run through ``kai sim`` reaches the decisions the live
scheduler takes in its next cycle. Neither command writes: the API server's revision does not move.
What a kubelet would do (mark bound pods Running) is played by the test (``Kubelet``).
"""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from kai.k8s.envtest import ControlPlane
from tests.k8s.conftest import run_kai
from tests.k8s.sched import InProcess, Kubelet, PodGroup, Queue, options, wait_for

# What kai could write, cluster-wide: any change to one of these is a write. (etcd's global revision is no
# measure: from 1.26 on, the API server renews its own identity Lease in kube-system every 10 s.)
_WRITABLE = (
    "/api/v1/pods", "/api/v1/events", "/api/v1/configmaps", "/api/v1/secrets", "/api/v1/nodes",
    "/api/v1/namespaces", "/apis/coordination.k8s.io/v1/leases", "/apis/scheduling.run.ai/v2alpha2/podgroups",
    "/apis/scheduling.run.ai/v2/queues",
)  # fmt: skip


def revision(cp: ControlPlane) -> dict[tuple[str, str, str], str]:
    """(resource, namespace, name) -> resourceVersion of every object kai could write, but the API server's
    own Leases in kube-system: equal before and after means nothing was written."""
    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    seen: dict[tuple[str, str, str], str] = {}
    for path in _WRITABLE:
        req = urllib.request.Request(f"{cp.url}{path}", headers={"Authorization": f"Bearer {cp.token()}"})
        with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
            items = json.loads(r.read())["items"]
        for item in items:
            meta = item["metadata"]
            if path.endswith("/leases") and meta.get("namespace") == "kube-system":
                continue
            seen[(path, meta.get("namespace", ""), meta["name"])] = meta["resourceVersion"]
    return seen


def queue(name: str, gpus: float, parent: str = "", limit: float = -1) -> Queue:
    spec: dict[str, Any] = {
        "resources": {
            "gpu": {"quota": gpus, "limit": limit, "overQuotaWeight": 1},
            "cpu": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
            "memory": {"quota": -1, "limit": -1, "overQuotaWeight": 1},
        }
    }
    if parent:
        spec["parentQueue"] = parent
    return Queue.from_dict({"metadata": {"name": name}, "spec": spec})


def pod(
    name: str, ns: str, gpus: int, *, queue: str = "", group: str = "", prio: str = "train", fraction: str = ""
) -> Pod:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "labels": {}, "annotations": {}}
    if fraction:
        meta["annotations"]["gpu-fraction"] = fraction
    if queue:
        meta["labels"]["kai.scheduler/queue"] = queue
    if group:
        meta["annotations"]["pod-group-name"] = group
    return Pod.from_dict(
        {
            "metadata": meta,
            "spec": {
                "schedulerName": "kai-scheduler",
                "priorityClassName": prio,
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)} if gpus else {}}}
                ],
            },
        }
    )


def podgroup(name: str, ns: str, queue: str, min_member: int, prio: str = "train") -> Any:
    return PodGroup.from_dict(
        {
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": min_member, "queue": queue, "priorityClassName": prio},
        }
    )


def waiting_condition(admin: Client, ns: str, name: str) -> tuple[str, str]:
    """(PodGroup name, message of the condition the scheduler wrote on it) for a waiting pod."""
    group = wait_for(
        lambda: (admin.get(Pod, name, namespace=ns).metadata.annotations or {}).get("pod-group-name"),
        f"{name}'s PodGroup",
    )
    conditions = wait_for(
        lambda: (admin.get(PodGroup, group, namespace=ns).get("status") or {}).get("schedulingConditions"),
        f"the scheduler's condition on {name}'s PodGroup",
    )
    return group, conditions[0]["message"]


def test_explain_says_what_the_scheduler_wrote_and_writes_nothing(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    nodes("ex-0", gpus=4)
    admin.create(queue("ex-dept", 4))
    admin.create(queue("ex-team", 4, "ex-dept"))
    kubelet = Kubelet(admin)
    with InProcess(options(scheduler_cluster)):
        admin.create(pod("runs", ns, 4, queue="ex-team"))
        wait_for(lambda: admin.get(Pod, "runs", namespace=ns).spec.nodeName, "the first pod to bind")
        kubelet.run_bound(ns)
        admin.create(pod("waits", ns, 2, queue="ex-team"))
        group, written = waiting_condition(admin, ns, "waits")
    kubeconfig = str(scheduler_cluster.kubeconfig)
    before = revision(scheduler_cluster)
    code, out, err = run_kai("explain", "pod", f"{ns}/waits", "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 0, err
    doc = json.loads(out)
    job = doc["job"]
    assert doc["podGroup"] == f"{ns}/{group}" and job["state"] == "pending"
    assert job["reason"]["message"] == written  # the same engine on the same objects: the same words
    assert "1 node lacks free GPUs (need 2, most free 0)" in written
    assert job["queueNumbers"]["allocated"]["gpu"] == 4.0 and job["queueNumbers"]["requested"]["gpu"] == 6.0
    assert job["whatIf"]["ending"]["job"].endswith(
        "/" + admin.get(Pod, "runs", namespace=ns).metadata.annotations["pod-group-name"]
    )
    code, text, _ = run_kai("explain", "pod", f"{ns}/waits", "--kubeconfig", kubeconfig)
    assert code == 0 and f"Why:    Unschedulable: {written.split('. consolidation:')[0]}\n" in text
    code, text, _ = run_kai("explain", "queue", "ex-dept", "--kubeconfig", kubeconfig)
    assert code == 0 and f"{ns}/{group} (ex-team): " in text
    code, _, err = run_kai("explain", "podgroup", f"{ns}/nope", "--kubeconfig", kubeconfig)
    assert code == 2 and f"podgroup {ns}/nope not found" in err
    # kubectl's plugin mechanism: `kubectl kai ...` runs the installed kubectl-kai entry point
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "kubectl-kai").exists()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(
        [str(scheduler_cluster.binaries.kubectl), "kai", "explain", "pod", f"{ns}/waits", "--kubeconfig", kubeconfig],
        capture_output=True, text=True, env=env, timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert written.split(". consolidation:")[0] in proc.stdout
    assert revision(scheduler_cluster) == before  # nothing was written by any of the above


def _sim(path: Path, *args: str) -> dict[str, Any]:
    code, out, err = run_kai("sim", str(path), "-o", "json", *args)
    assert code == 0, err
    return json.loads(out)


def _decided(sim: dict[str, Any], ns: str) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = {"bind": set(), "pipeline": set(), "evict": set()}
    for p in sim["pods"]:
        if p["namespace"] != ns:
            continue
        kind = {"Binding": "bind", "Pipelined": "pipeline", "Releasing": "evict"}.get(p["status"])
        if kind:
            out[kind].add((p["name"], p["node"] if kind != "evict" else ""))
    return out


def test_a_snapshot_run_through_kai_sim_decides_what_the_scheduler_decides_next(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """team-a runs 12 GPUs (its quota is 8) while kai is stopped; team-b's 8-GPU gang and team-a's small pod
    arrive. The snapshot, run through kai sim, must decide exactly what the live scheduler's next cycle
    decides: here reclaim evicts team-a pods and pipelines team-b's gang."""
    nodes("sr-0", gpus=8)
    nodes("sr-1", gpus=8)
    admin.create(queue("sr-dept", 16))
    admin.create(queue("sr-a", 8, "sr-dept"))
    admin.create(queue("sr-b", 8, "sr-dept"))
    kubelet = Kubelet(admin)
    with InProcess(options(scheduler_cluster)):
        for i in range(3):
            admin.create(pod(f"a{i}", ns, 4, queue="sr-a"))
        wait_for(lambda: all(admin.get(Pod, f"a{i}", namespace=ns).spec.nodeName for i in range(3)), "team-a's pods")
        kubelet.run_bound(ns)
    admin.create(podgroup("b-gang", ns, "sr-b", 2))
    for i in range(2):
        admin.create(pod(f"b{i}", ns, 4, group="b-gang"))
    admin.create(podgroup("a-small", ns, "sr-a", 1))
    admin.create(pod("a-small-0", ns, 2, group="a-small"))

    before = revision(scheduler_cluster)
    path = tmp_path / "snapshot.yaml"
    code, _, err = run_kai("snapshot", "--kubeconfig", str(scheduler_cluster.kubeconfig), "-o", str(path))
    assert code == 0, err
    assert revision(scheduler_cluster) == before  # read-only
    text = path.read_text()
    now = next(line.split("--now ")[1].split()[0] for line in text.splitlines() if "--now" in line)
    docs = [d for d in yaml.safe_load_all(text) if d]
    assert all("ownerReferences" not in d["metadata"] and "managedFields" not in d["metadata"] for d in docs)
    sim = _sim(path, "--now", now)
    planned = _decided(sim, ns)
    assert planned["evict"] and planned["pipeline"], planned  # the scenario does exercise reclaim

    # anonymized (taken before the live cycle, like the plain one): no name of ours is left, and kai sim
    # decides the same number of each kind
    anon = tmp_path / "anon.yaml"
    code, _, err = run_kai(
        "snapshot", "--kubeconfig", str(scheduler_cluster.kubeconfig), "--anonymize", "-o", str(anon)
    )
    assert code == 0, err
    anon_text = anon.read_text()
    for name in (ns, "sr-0", "sr-a", "b-gang", "a-small-0"):
        assert name not in anon_text, name
    counts = {k: 0 for k in ("Binding", "Pipelined", "Releasing")}
    for p in _sim(anon, "--now", now)["pods"]:
        if p["status"] in counts:
            counts[p["status"]] += 1
    mine = {k: sum(1 for p in sim["pods"] if p["status"] == k) for k in counts}
    assert counts == mine

    with InProcess(options(scheduler_cluster)) as run:
        wait_for(lambda: run.scheduler.cycles, "the live scheduler's first cycle")
        result = run.scheduler.last_result
    assert result is not None
    live = {
        "bind": {(b.pod.name, b.node) for b in result.binds if b.pod.namespace == ns},
        "pipeline": {(p.pod.name, p.node) for p in result.pipelines if p.pod.namespace == ns},
        "evict": {(e.pod.name, "") for e in result.evictions if e.pod.namespace == ns},
    }
    assert live == planned

    # what if: one more job, applied before the simulated cycle
    job = tmp_path / "myjob.yaml"
    job.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "myjob", "namespace": ns, "labels": {"kai.scheduler/queue": "sr-b"}},
                "spec": {
                    "schedulerName": "kai-scheduler",
                    "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                },
            }
        )
    )  # fmt: skip
    whatif = _sim(path, "--now", now, "--at", f"1:{job}")
    assert any(p["name"] == "myjob" for p in whatif["pods"])


def test_a_cluster_without_kais_crds_is_named(binaries, tmp_path: Path) -> None:
    with ControlPlane(binaries, workdir=tmp_path / "cp") as cp:
        for args in (("explain", "queue", "default-queue"), ("snapshot",)):
            code, _, err = run_kai(*args, "--kubeconfig", str(cp.kubeconfig))
            assert code == 2, err
            assert "does not serve kai's CRDs (queues.scheduling.run.ai, podgroups.scheduling.run.ai)" in err
            assert "kai install" in err
