"""The test control plane itself: it answers, enforces tokens and RBAC, survives an API
server restart, plays the kubelet's part for nodes and pods, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Namespace, Node, Pod, Secret

from kai.k8s.envtest import (
    GPU_RESOURCE,
    NOT_READY_TAINT,
    Binaries,
    ControlPlane,
    create_node,
    mark_pod_running,
    release_name,
    selected_version,
)
from tests.k8s.conftest import DATA, PROVISION


def test_apiserver_answers_with_the_built_version(control_plane: ControlPlane, client: Client) -> None:
    got = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    want = f"v{selected_version()}"  # the current release unless KAI_K8S_VERSION says oldest
    assert (got["serverVersion"]["gitVersion"], got["clientVersion"]["gitVersion"]) == (want, want)
    assert set(control_plane.pids()) == {"etcd", "kube-apiserver"}
    assert control_plane.url.startswith("https://127.0.0.1:")
    names = {ns.metadata.name for ns in client.list(Namespace)}
    assert {"default", "kube-system"} <= names


def test_rejects_a_wrong_token_and_enforces_rbac(control_plane: ControlPlane, client: Client) -> None:
    bad = control_plane.kubectl("get", "nodes", "--token=not-a-token", check=False)
    # kubectl 1.20 ends it "(Unauthorized)", later ones "(the server has asked for the client to provide credentials)"
    assert bad.returncode != 0 and "You must be logged in to the server" in bad.stderr, bad.stderr
    # kai's ServiceAccount identity has no binding yet (deploy/rbac.yaml is not applied here): 403.
    sched = Client(KubeConfig.from_file(str(control_plane.scheduler_kubeconfig)))
    with pytest.raises(ApiError) as e:
        list(sched.list(Secret, namespace="default"))
    assert e.value.status.code == 403
    sched.close()


def test_apiserver_restart_keeps_data_and_port(control_plane: ControlPlane, client: Client) -> None:
    name = f"survivor-{uuid.uuid4().hex[:6]}"
    client.create(ConfigMap.from_dict({"metadata": {"name": name}, "data": {"k": "v"}}), namespace="default")
    url, old_pid = control_plane.url, control_plane.pids()["kube-apiserver"]
    control_plane.restart_apiserver()
    assert control_plane.url == url
    assert control_plane.pids()["kube-apiserver"] != old_pid
    with pytest.raises(ProcessLookupError):
        os.kill(old_pid, 0)
    assert client.get(ConfigMap, name, namespace="default").data == {"k": "v"}  # same client, same etcd


def test_create_node_makes_a_ready_gpu_node(control_plane: ControlPlane, client: Client) -> None:
    name = f"gpu-{uuid.uuid4().hex[:6]}"
    node = create_node(client, name, gpus=4, cpu="32", memory="256Gi", labels={"nvidia.com/gpu.product": "A100"})
    got = client.get(Node, name)
    assert got.metadata.resourceVersion == node.metadata.resourceVersion
    assert got.status.allocatable[GPU_RESOURCE] == "4"
    assert got.status.capacity["cpu"] == "32"
    ready = [c for c in got.status.conditions if c.type == "Ready"]
    assert len(ready) == 1 and ready[0].status == "True"
    assert not [t for t in got.spec.taints or [] if t.key == NOT_READY_TAINT]
    assert got.metadata.labels["kubernetes.io/hostname"] == name
    assert got.metadata.labels["nvidia.com/gpu.product"] == "A100"
    row = control_plane.kubectl("get", "node", name, "--no-headers").stdout.split()
    assert row[:2] == [name, "Ready"]


def test_create_node_reproduces_the_walkthrough_node(client: Client) -> None:
    """node-a10g.yaml (a copy of shared/reference/walkthrough's) is the node as the API server shows it."""
    want = yaml.safe_load((DATA / "node-a10g.yaml").read_text())
    alloc = want["status"]["allocatable"]
    name = f"{want['metadata']['name']}-{uuid.uuid4().hex[:4]}"
    create_node(
        client,
        name,
        labels={**want["metadata"]["labels"], "kubernetes.io/hostname": name},
        cpu=alloc["cpu"],
        memory=alloc["memory"],
        pods=int(alloc["pods"]),
        gpus=int(alloc[GPU_RESOURCE]),
        capacity=want["status"]["capacity"],
    )
    got = client.get(Node, name)
    assert got.status.allocatable == alloc
    assert got.status.capacity == want["status"]["capacity"]
    assert [(c.type, c.status) for c in got.status.conditions] == [("Ready", "True")]
    assert got.metadata.labels["nvidia.com/gpu.memory"] == "23028"


def test_create_node_keeps_taints_it_is_given(client: Client) -> None:
    name = f"tainted-{uuid.uuid4().hex[:6]}"
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    create_node(client, name, gpus=1, taints=[taint])
    keys = [t.key for t in client.get(Node, name).spec.taints or []]
    assert keys == ["dedicated"]


def test_mark_pod_running(control_plane: ControlPlane, client: Client, namespace: str) -> None:
    node = f"n-{uuid.uuid4().hex[:6]}"
    create_node(client, node, gpus=1)
    pod = {
        "metadata": {"name": "worker"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
    }
    client.create(Pod.from_dict(pod), namespace=namespace)
    got = mark_pod_running(client, "worker", namespace)
    assert got.status.phase == "Running"
    assert {c.type for c in got.status.conditions if c.status == "True"} >= {"Ready", "PodScheduled"}
    row = control_plane.kubectl("get", "pod", "worker", "-n", namespace, "--no-headers").stdout.split()
    assert row[2] == "Running"


def test_a_second_control_plane_runs_a_job_and_stops_cleanly(binaries: Binaries) -> None:
    """A whole control plane: the Job controller makes a pod, kube-scheduler binds it to a node
    made by create_node (so that node really is schedulable), and stop() leaves nothing."""
    t0 = time.monotonic()
    with ControlPlane(binaries) as cp:
        started = time.monotonic() - t0
        cp.start_controller_manager()
        cp.start_kube_scheduler()
        pids = cp.pids()
        workdir = cp.workdir
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
        client = Client(KubeConfig.from_file(str(cp.kubeconfig)))
        create_node(client, "only-node", gpus=1)
        job = {
            "metadata": {"name": "hello"},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox", "resources": {"limits": {GPU_RESOURCE: "1"}}}],
                    }
                }
            },
        }
        client.create(Job.from_dict(job), namespace="default")
        deadline, bound = time.monotonic() + 60, []
        while time.monotonic() < deadline and not bound:
            pods = list(client.list(Pod, namespace="default", labels={"job-name": "hello"}))
            bound = [p.spec.nodeName for p in pods if p.spec.nodeName]
            time.sleep(0.2)
        assert bound == ["only-node"]
        client.close()
    assert workdir is not None and not workdir.exists()
    for name, pid in pids.items():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
            pytest.fail(f"{name} (pid {pid}) still running after stop()")
    assert started < 60, f"control plane took {started:.1f} s to start"


def test_provision_script_is_idempotent(binaries: Binaries) -> None:
    version = selected_version()
    t0 = time.monotonic()
    res = subprocess.run(
        ["bash", str(PROVISION), release_name(version)], capture_output=True, text=True, timeout=120, check=False
    )
    assert res.returncode == 0, res.stderr
    assert time.monotonic() - t0 < 10, "a provisioned machine must not rebuild"
    assert f"binaries of {version} ready" in res.stderr
    assert any(line.startswith("bin-dir: ") for line in res.stdout.splitlines())
