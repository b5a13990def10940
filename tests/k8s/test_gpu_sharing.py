"""GPU sharing delivered to the pods on a real API server: the admission webhook (served by ``kai scheduler
--webhook-listen``, registered by ``kai install --webhook-url``), reservation pods and device visibility.

kai runs in-process as its ServiceAccount (deploy/rbac.yaml). The test plays what has no stand-in here
(tests/k8s/gpushare.py): the kubelet (pods Running, terminations finished), the device plugin (a GPU of
the node's list for each reservation pod) and the reservation pod's container, which is the real ``kai
resource-reservation`` command run against a fake NVML library that shows it its one GPU.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Event, Pod

from kai.k8s._gpushare import ReservationOptions
from kai.k8s.envtest import ControlPlane
from tests.k8s.gpushare import (
    GpuNode,
    configmap_value,
    gpu_uuids,
    install_webhooks,
    nvidia_runtime_class,
    remove_webhooks,
    reservation_pods,
    visible_devices,
)
from tests.k8s.sched import DATA, InProcess, Kubelet, PodGroup, Queue, options, wait_for
from tests.k8s.test_scheduler import events_for

WALK = DATA / "walkthrough"


@pytest.fixture(scope="module", autouse=True)
def gpu_cluster(scheduler_cluster: ControlPlane) -> ControlPlane:
    nvidia_runtime_class(scheduler_cluster)
    scheduler_cluster.kubectl("apply", "-f", str(WALK / "00-queues.yaml"))
    return scheduler_cluster


def sharing_options(cp: ControlPlane, port: int, **kw: Any) -> Any:
    return options(cp, webhook_listen=("127.0.0.1", port), reservation=ReservationOptions(timeout_s=20), **kw)


class Kai(InProcess):
    """``kai scheduler`` in-process with its admission webhooks, once they serve."""

    def __init__(self, cp: ControlPlane, port: int, **kw: Any) -> None:
        super().__init__(sharing_options(cp, port, **kw))

    def __enter__(self) -> Kai:
        super().__enter__()
        wait_for(lambda: self.call(self.scheduler.webhook_serving), "the admission webhooks to serve")
        return self


def fraction_pod(name: str, ns: str, fraction: str = "0.5", queue: str = "team-a", **annotations: str) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"kai.scheduler/queue": queue},
                "annotations": {"gpu-fraction": fraction, **annotations},
            },
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
        }
    )


def _a10_node(nodes: Any) -> str:
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


def _bound(client: Client, ns: str, names: list[str]) -> list[Pod]:
    pods = [client.get(Pod, n, namespace=ns) for n in names]
    return pods if all(p.spec.nodeName for p in pods) else []


def test_the_walkthrough_gpu_memory_pods_share_one_gpu_and_see_its_uuid(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, webhook_port: int, fake_nvml: Any
) -> None:
    cp = gpu_cluster
    node = _a10_node(nodes)
    (gpu,) = gpu_uuids(node, 1)
    with Kai(cp, webhook_port), GpuNode(admin, cp, node, [gpu], fake_nvml):
        cp.kubectl("apply", "-n", ns, "-f", str(DATA / "gpu-memory-pods.yaml"))
        pods = wait_for(lambda: _bound(admin, ns, ["gpu-memory-a", "gpu-memory-b"]), "both pods to be bound", 60)
        assert {p.spec.nodeName for p in pods} == {node}
        groups = {p.metadata.labels["runai-gpu-group"] for p in pods}
        assert groups == {f"{node}-gpu0"}  # one shared GPU
        (res,) = reservation_pods(admin, node)
        assert res.metadata.labels == {"app": "kai-resource-reservation", "runai-gpu-group": f"{node}-gpu0"}
        assert res.metadata.annotations["run.ai/reserve_for_gpu_index"] == gpu
        assert res.spec.serviceAccountName == "kai-resource-reservation"
        assert res.spec.containers[0].resources.limits == {"nvidia.com/gpu": "1"}
        for p in pods:
            # the webhook's env, filled at bind: both see the one GPU; 20 MiB of 23028 is 0.01 of it
            assert visible_devices(admin, p) == gpu
            assert configmap_value(admin, p, "GPU_PORTION") == "0.01"
            assert configmap_value(admin, p, "RUNAI_NUM_OF_GPUS") == "0.01"
            assert p.spec.runtimeClassName == "nvidia"
            assert p.metadata.annotations["received-resource-type"] == "Fraction"


def _gpu_node(nodes: Any, name: str, gpus: int, memory_mib: int = 40000) -> str:
    return nodes(name, gpus=gpus, labels={"nvidia.com/gpu.memory": str(memory_mib), "nvidia.com/gpu.count": str(gpus)})


def _by_group(client: Client, node: str) -> dict[str, str]:
    """GPU group -> UUID, from the node's reservation pods."""
    return {
        p.metadata.labels["runai-gpu-group"]: (p.metadata.annotations or {}).get("run.ai/reserve_for_gpu_index", "")
        for p in reservation_pods(client, node)
    }


def test_three_halves_on_a_two_gpu_node_use_two_reservations_and_leave_with_their_group(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, webhook_port: int, fake_nvml: Any
) -> None:
    cp = gpu_cluster
    node = _gpu_node(nodes, "halves-0", gpus=2)
    uuids = gpu_uuids(node, 2)
    names = ["half-0", "half-1", "half-2"]
    kubelet = Kubelet(admin)
    with Kai(cp, webhook_port), GpuNode(admin, cp, node, uuids, fake_nvml) as gpus:
        for n in names:
            admin.create(fraction_pod(n, ns))
        pods = wait_for(lambda: _bound(admin, ns, names), "the three halves to be bound", 60)
        by_group = _by_group(admin, node)
        assert len(by_group) == 2 and set(by_group.values()) == set(uuids)  # two reservations, two GPUs
        groups = {p.metadata.name: p.metadata.labels["runai-gpu-group"] for p in pods}
        assert sorted(groups.values()).count(sorted(set(groups.values()))[0]) in (1, 2)
        for p in pods:
            # each pod sees the GPU of its own group, and half of it
            assert visible_devices(admin, p) == by_group[groups[p.metadata.name]]
            assert configmap_value(admin, p, "GPU_PORTION") == "0.50"
        assert gpus.runs == 2
        kubelet.run_bound(ns)
        admin.create(fraction_pod("too-wide", ns, fraction="0.6"))  # 0.5 free on each GPU: it waits
        time.sleep(1.5)
        assert not admin.get(Pod, "too-wide", namespace=ns).spec.nodeName
        assert len(reservation_pods(admin, node)) == 2
        admin.delete(Pod, "too-wide", namespace=ns)  # (it would take the GPU the next step frees)

        # The group holding one pod empties: its reservation pod goes, the other group's stays.
        alone = next(g for g in set(groups.values()) if list(groups.values()).count(g) == 1)
        pod = next(n for n, g in groups.items() if g == alone)
        admin.delete(Pod, pod, namespace=ns)
        kubelet.finish_terminating(ns)
        wait_for(lambda: alone not in _by_group(admin, node), "the emptied group's reservation pod to go", 30)
        remaining = _by_group(admin, node)
        assert list(remaining) == [g for g in set(groups.values()) if g != alone]


def test_a_bad_fraction_is_refused_at_create_naming_the_annotation(
    gpu_cluster: ControlPlane, admin: Client, ns: str, webhook_port: int, tmp_path: Path
) -> None:
    cp = gpu_cluster
    with Kai(cp, webhook_port):
        with pytest.raises(ApiError) as e:
            admin.create(fraction_pod("too-big", ns, fraction="1.5"))
        assert e.value.status.code == 403
        assert "metadata.annotations.gpu-fraction: '1.5' must be a number between 0 and 1" in e.value.status.message
        with pytest.raises(ApiError) as e:
            admin.create(fraction_pod("both", ns, fraction="0.5", **{"gpu-memory": "100"}))
        assert "cannot request both GPU and GPU memory" in e.value.status.message
        # kubectl shows the webhook's words to the user
        manifest = tmp_path / "bad.yaml"
        manifest.write_text(yaml.safe_dump(fraction_pod("via-kubectl", ns, fraction="1.5").to_dict()))
        res = cp.kubectl("apply", "-f", str(manifest), check=False)
        assert res.returncode != 0
        assert 'admission webhook "admission.kai-scheduler.svc" denied the request' in res.stderr
        assert "metadata.annotations.gpu-fraction: '1.5'" in res.stderr
        with pytest.raises(ApiError):
            admin.get(Pod, "too-big", namespace=ns)  # never created
        good = admin.create(fraction_pod("fine", ns))
        assert good.metadata.annotations["runai/shared-gpu-configmap"].endswith("-shared-gpu")


def test_the_queue_access_rule_refuses_a_pod_from_a_foreign_namespace(
    gpu_cluster: ControlPlane, admin: Client, ns: str, webhook_port: int
) -> None:
    cp = gpu_cluster
    queue = {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": f"locked-{ns}", "annotations": {"kai.scheduler/allowed-namespaces": "team-owner, ml-*"}},
        "spec": {
            "parentQueue": "department-1",
            "resources": {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")},
        },
    }
    admin.create(Queue(queue))
    try:
        with Kai(cp, webhook_port) as run:
            wait_for(lambda: run.call(lambda: run.scheduler.store.get("Queue", ("", f"locked-{ns}"))), "the queue")
            pod = Pod.from_dict(
                {
                    "metadata": {"name": "sneaky", "namespace": ns, "labels": {"kai.scheduler/queue": f"locked-{ns}"}},
                    "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
                }
            )
            with pytest.raises(ApiError) as e:
                admin.create(pod)
            assert e.value.status.code == 403
            text = e.value.status.message
            assert f"metadata.labels.kai.scheduler/queue: namespace '{ns}' may not use queue 'locked-{ns}'" in text
            # a PodGroup naming the queue from the same namespace is refused too
            from tests.k8s.sched import PodGroup

            pg = {"metadata": {"name": "pg-sneaky", "namespace": ns}, "spec": {"minMember": 1, "queue": f"locked-{ns}"}}
            with pytest.raises(ApiError) as e:
                admin.create(PodGroup(pg), namespace=ns)
            assert "spec.queue: namespace" in e.value.status.message
            # the rule does not touch other queues
            admin.create(Pod.from_dict({**pod.to_dict(), "metadata": {"name": "fine", "namespace": ns}}))
    finally:
        admin.delete(Queue, f"locked-{ns}")


def test_kai_restarted_mid_way_neither_loses_nor_duplicates_reservations(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, webhook_port: int, fake_nvml: Any
) -> None:
    cp = gpu_cluster
    node = _gpu_node(nodes, "restart-0", gpus=2)
    uuids = gpu_uuids(node, 2)
    with GpuNode(admin, cp, node, uuids, fake_nvml) as gpus:
        gpus.paused.set()  # the reservation pod's container has not started yet when kai stops
        with Kai(cp, webhook_port):
            admin.create(fraction_pod("first", ns))
            wait_for(lambda: reservation_pods(admin, node), "the reservation pod to be made")
        assert not admin.get(Pod, "first", namespace=ns).spec.nodeName  # kai stopped before the bind
        (before,) = reservation_pods(admin, node)
        gpus.paused.clear()
        with Kai(cp, webhook_port):
            admin.create(fraction_pod("second", ns))
            pods = wait_for(lambda: _bound(admin, ns, ["first", "second"]), "both pods to be bound", 60)
            time.sleep(1.0)  # a few more cycles: nothing more is made
            (after,) = reservation_pods(admin, node)
        assert after.metadata.uid == before.metadata.uid  # the same reservation pod, reused
        assert gpus.runs == 1
        gpu = after.metadata.annotations["run.ai/reserve_for_gpu_index"]
        assert {visible_devices(admin, p) for p in pods} == {gpu}
        assert {p.metadata.labels["runai-gpu-group"] for p in pods} == {after.metadata.labels["runai-gpu-group"]}


def test_with_the_webhook_down_and_failure_policy_ignore_pods_are_created_but_not_bound_without_their_env(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, fake_nvml: Any
) -> None:
    from kai.k8s.envtest import free_port

    cp = gpu_cluster
    port = free_port()
    install_webhooks(cp, port, failure_policy="Ignore")
    try:
        node = _gpu_node(nodes, "ignore-0", gpus=1)
        admin.create(fraction_pod("unmutated", ns))  # nobody serves the webhook: created as written
        pod = admin.get(Pod, "unmutated", namespace=ns)
        assert "runai/shared-gpu-configmap" not in (pod.metadata.annotations or {})
        with Kai(cp, port), GpuNode(admin, cp, node, gpu_uuids(node, 1), fake_nvml):
            admin.create(fraction_pod("mutated", ns))  # the webhook is up now
            wait_for(lambda: _bound(admin, ns, ["mutated"]), "the mutated pod to be bound")

            def refusal() -> list[Event]:
                return [
                    e
                    for e in admin.list(Event, namespace=ns)
                    if e.involvedObject.name == "unmutated" and e.reason == "FailedBinding"
                ]

            (event,) = wait_for(refusal, "a FailedBinding event on the unmutated pod")
            assert "has no GPU-sharing env (NVIDIA_VISIBLE_DEVICES" in event.message
            assert "was the webhook down, with failurePolicy Ignore?" in event.message
            time.sleep(1.0)
            assert not admin.get(Pod, "unmutated", namespace=ns).spec.nodeName
            assert len(reservation_pods(admin, node)) == 1  # the mutated pod's only
    finally:
        remove_webhooks(cp)


def test_a_shared_gpu_gang_whose_bind_fails_in_the_background_is_evicted_at_once(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, fake_nvml: Any
) -> None:
    """Whole gangs hold for shared-GPU binds too, which finish after their cycle (issue 14, item 4). A
    gang of two half-GPU pods, minMember 2: one was created while the webhook was down (failurePolicy
    Ignore), so its bind is refused in the background; the other's is under way or done. The gang is
    then bound in part: the bind that failed late breaks it, and the next cycle evicts the other pod at
    once (bound, or its bind still in flight), with a FailedBinding event on the PodGroup. Before, the
    other pod was bound and stayed bound alone: the gang never even counted as stale."""
    from kai.k8s.envtest import free_port

    cp = gpu_cluster
    port = free_port()
    install_webhooks(cp, port, failure_policy="Ignore")
    try:
        node = _gpu_node(nodes, "halfgang-0", gpus=1)
        admin.create(
            PodGroup.from_dict(
                {"metadata": {"name": "hg", "namespace": ns}, "spec": {"queue": "team-a", "minMember": 2}}
            )
        )
        admin.create(fraction_pod("hg-unmutated", ns, **{"pod-group-name": "hg"}))  # nobody serves the webhook
        with Kai(cp, port), GpuNode(admin, cp, node, gpu_uuids(node, 1), fake_nvml):
            admin.create(fraction_pod("hg-mutated", ns, **{"pod-group-name": "hg"}))  # the webhook is up now
            started = time.monotonic()

            def evicted() -> bool:
                try:
                    return admin.get(Pod, "hg-mutated", namespace=ns).metadata.deletionTimestamp is not None
                except ApiError as e:
                    return e.status.code == 404

            wait_for(evicted, "the gang's other half to be evicted", timeout=30)
            assert time.monotonic() - started < 30  # well before the 60 s grace
            (event,) = wait_for(
                lambda: [e for e in events_for(admin, ns, "hg") if e.reason == "FailedBinding"],
                "a FailedBinding event on the PodGroup",
            )
            assert "1 of 2 binds of gang" in event.message, event.message
            assert not admin.get(Pod, "hg-unmutated", namespace=ns).spec.nodeName
    finally:
        remove_webhooks(cp)


def test_a_running_fraction_pod_whose_gpu_group_has_no_reservation_pod_is_deleted_as_kai_does(
    gpu_cluster: ControlPlane, admin: Client, ns: str, nodes: Any, webhook_port: int
) -> None:
    """A fraction pod bound and Running on GPU group g, with no reservation pod for g (say it was deleted
    by hand): nothing holds its GPU towards the device plugin any more, so KAI's binder deletes the pod
    (SyncForPodsList); kai does the same, with a Warning event saying why."""
    node = _gpu_node(nodes, "orphan-0", gpus=1)
    orphan = fraction_pod("orphan", ns)
    orphan.metadata.labels["runai-gpu-group"] = f"{node}-gpu0"
    orphan.spec.nodeName = node
    with Kai(cp=gpu_cluster, port=webhook_port):
        admin.create(orphan)
        Kubelet(admin).run_bound(ns)

        def gone_with_event() -> list[Event]:
            pod = admin.get(Pod, "orphan", namespace=ns)
            events = [e for e in admin.list(Event, namespace=ns) if e.reason == "GpuReservationMissing"]
            return events if pod.metadata.deletionTimestamp is not None else []

        (event,) = wait_for(gone_with_event, "the orphan fraction pod to be deleted")
        assert f"runs on GPU group {node}-gpu0 of node {node}, which has no GPU reservation pod" in event.message


def test_out_of_the_cluster_exactly_as_documented(
    gpu_cluster: ControlPlane, admin: Client, ns: str, webhook_port: int, tmp_path: Path
) -> None:
    """``kai install --kubeconfig K --webhook-url https://127.0.0.1:PORT`` (the fixture ran it) and ``kai scheduler
    --kubeconfig K --webhook-listen 127.0.0.1:PORT`` as a real process: the webhooks serve from the process it
    starts, and it ends with the scheduler."""
    import subprocess
    import sys
    import urllib.request

    from kai.k8s.envtest import free_port

    metrics = free_port()
    kai = Path(sys.executable).parent / "kai"
    log = tmp_path / "kai.log"
    args = [str(kai), "scheduler", "--kubeconfig", str(gpu_cluster.scheduler_kubeconfig)]
    args += ["--webhook-listen", f"127.0.0.1:{webhook_port}", f"--metrics-bind-address=127.0.0.1:{metrics}"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)
    try:

        def ready() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False

        wait_for(ready, "kai scheduler to be ready, webhooks serving", 60)
        pod = admin.create(fraction_pod("documented", ns))
        assert pod.metadata.annotations["runai/shared-gpu-configmap"].endswith("-shared-gpu")
        assert pod.spec.runtimeClassName == "nvidia"
    finally:
        proc.terminate()
        assert proc.wait(30) == 0, log.read_text()[-2000:]
    time.sleep(0.5)
    with pytest.raises(ApiError):  # nobody serves the webhook any more (its process ended too): Fail refuses
        admin.create(fraction_pod("after", ns))
