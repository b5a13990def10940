"""The KubeRay + KAI walkthrough on a real API server, scheduled by ``kai scheduler``.

The manifests are the walkthrough's, unchanged (copies in data/walkthrough). There is no KubeRay
operator: the test creates the pods and the RayService's RayCluster as KubeRay does, with kai sim's
model of it, and plays the kubelet (pods Running, terminations finished). Expected, as the walkthrough
says: the RayCluster's head and worker are placed as one gang; when the RayService arrives, its
inference gang (priority inference, non-preemptible) preempts the training gang as a whole (both pods
stop together) and takes the one GPU.
"""

from __future__ import annotations

import yaml
from lightkube import Client
from lightkube.resources.core_v1 import Pod

from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import DATA, InProcess, Kubelet, KubeRay, PodGroup, Queue, options, wait_for

WALK = DATA / "walkthrough"


def _node(nodes) -> str:
    doc = yaml.safe_load((WALK / "node-a10g.yaml").read_text())
    alloc = doc["status"]["allocatable"]
    return nodes(
        doc["metadata"]["name"],
        labels=doc["metadata"]["labels"],
        cpu=alloc["cpu"],
        memory=alloc["memory"],
        gpus=int(alloc["nvidia.com/gpu"]),
        capacity=doc["status"]["capacity"],
    )


def _pods(client: Client, ns: str, cluster: str) -> list[Pod]:
    return [p for p in client.list(Pod, namespace=ns) if (p.metadata.labels or {}).get("ray.io/cluster") == cluster]


def test_walkthrough_gang_then_whole_gang_preemption(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    cp = scheduler_cluster
    cp.kubectl("apply", "-f", str(DATA / "ray-crds.yaml"))
    cp.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "crd/rayclusters.ray.io", "crd/rayservices.ray.io"
    )
    cp.kubectl("apply", "-f", str(WALK / "00-queues.yaml"))
    node = _node(nodes)
    kuberay, kubelet = KubeRay(admin), Kubelet(admin)

    with InProcess(options(cp)):
        cp.kubectl("apply", "-n", ns, "-f", str(WALK / "01-raycluster-train.yaml"))
        train = kuberay.reconcile_cluster("raycluster-sample", ns)
        assert len(train) == 2  # head + one worker (replicas 1)

        bound = wait_for(
            lambda: [p for p in _pods(admin, ns, "raycluster-sample") if p.spec.nodeName == node],
            "the training gang to be bound",
        )
        wait_for(lambda: len([p for p in _pods(admin, ns, "raycluster-sample") if p.spec.nodeName]) == 2, "both")
        bound = _pods(admin, ns, "raycluster-sample")
        groups = {p.metadata.annotations["pod-group-name"] for p in bound}
        assert len(groups) == 1, groups  # one gang
        train_pg = admin.get(PodGroup, groups.pop(), namespace=ns)
        assert train_pg["spec"]["minMember"] == 2
        assert train_pg["spec"]["queue"] == "team-a"
        assert train_pg["spec"]["priorityClassName"] == "train"
        assert kubelet.run_bound(ns) == 2

        cp.kubectl("apply", "-n", ns, "-f", str(WALK / "02-rayservice-inference.yaml"))
        serve_cluster = kuberay.reconcile_service("ray-kai-scheduler-serve-llm", ns)
        inference = kuberay.reconcile_cluster(serve_cluster, ns)
        assert len(inference) == 2

        # The whole training gang is evicted (both pods deleted), not just the worker holding the GPU.
        wait_for(
            lambda: all(p.metadata.deletionTimestamp for p in _pods(admin, ns, "raycluster-sample")),
            "both training pods to be evicted",
        )
        assert sorted(kubelet.finish_terminating(ns)) == sorted(train)
        wait_for(
            lambda: len([p for p in _pods(admin, ns, serve_cluster) if p.spec.nodeName == node]) == 2,
            "the inference gang to be bound",
        )
        serve_pg = {p.metadata.annotations["pod-group-name"] for p in _pods(admin, ns, serve_cluster)}
        assert len(serve_pg) == 1
        assert admin.get(PodGroup, serve_pg.pop(), namespace=ns)["spec"]["priorityClassName"] == "inference"
        kubelet.run_bound(ns)

        # KubeRay recreates the training pods; they wait (inference is non-preemptible), and say why.
        again = kuberay.reconcile_cluster("raycluster-sample", ns)
        assert len(again) == 2
        wait_for(
            lambda: all(
                any(
                    c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable"
                    for c in (admin.get(Pod, n, namespace=ns).status.conditions or [])
                )
                for n in again
            ),
            "PodScheduled=False on the waiting training pods",
        )
        assert all(not admin.get(Pod, n, namespace=ns).spec.nodeName for n in again)

        # Queue status through the status subresource: team-a holds the one GPU.
        wait_for(
            lambda: (admin.get(Queue, "team-a").get("status") or {}).get("allocated", {}).get("nvidia.com/gpu") == "1",
            "team-a's status.allocated to show 1 GPU",
        )

    # Events, as `kubectl describe` shows them.
    described = cp.kubectl("describe", "podgroup", "-n", ns, train_pg["metadata"]["name"]).stdout
    assert "Evict" in described and "preempted by higher priority workload" in described, described
    described = cp.kubectl("describe", "pod", "-n", ns, inference[-1]).stdout
    assert "Scheduled" in described and f"to node {node}" in described, described
    described = cp.kubectl(
        "describe", "podgroup", "-n", ns, admin.get(Pod, again[0], namespace=ns).metadata.annotations["pod-group-name"]
    ).stdout
    assert "Unschedulable" in described, described


def test_scaling_a_raycluster_updates_its_podgroup(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """The RayCluster's worker group grows from 1 to 2 (minReplicas too): when KubeRay's new worker pod
    arrives, the pod-grouper patches the gang's minMember from 2 to 3, as KAI's pod controller does, and
    the three pods run as one gang."""
    cp = scheduler_cluster
    cp.kubectl("apply", "-f", str(DATA / "ray-crds.yaml"))
    cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd/rayclusters.ray.io")
    cp.kubectl("apply", "-f", str(WALK / "00-queues.yaml"))
    node = nodes("ray-scale-0", gpus=4)
    kuberay = KubeRay(admin)
    with InProcess(options(cp)):
        cp.kubectl("apply", "-n", ns, "-f", str(WALK / "01-raycluster-train.yaml"))
        assert len(kuberay.reconcile_cluster("raycluster-sample", ns)) == 2
        wait_for(
            lambda: len([p for p in _pods(admin, ns, "raycluster-sample") if p.spec.nodeName == node]) == 2,
            "the first two pods to be bound",
        )
        pg_name = _pods(admin, ns, "raycluster-sample")[0].metadata.annotations["pod-group-name"]
        assert admin.get(PodGroup, pg_name, namespace=ns)["spec"]["minMember"] == 2

        scale = '[{"op":"replace","path":"/spec/workerGroupSpecs/0/replicas","value":2},'
        scale += '{"op":"replace","path":"/spec/workerGroupSpecs/0/minReplicas","value":2}]'
        cp.kubectl("patch", "raycluster", "raycluster-sample", "-n", ns, "--type=json", "-p", scale)
        added = kuberay.reconcile_cluster("raycluster-sample", ns)
        assert len(added) == 1
        wait_for(lambda: admin.get(PodGroup, pg_name, namespace=ns)["spec"]["minMember"] == 3, "minMember to become 3")
        wait_for(lambda: admin.get(Pod, added[0], namespace=ns).spec.nodeName == node, "the new worker to be bound")
        assert admin.get(Pod, added[0], namespace=ns).metadata.annotations["pod-group-name"] == pg_name
        spec = admin.get(PodGroup, pg_name, namespace=ns)["spec"]
        assert spec["queue"] == "team-a" and spec["priorityClassName"] == "train"
