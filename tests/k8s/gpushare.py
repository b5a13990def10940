"""Support for the GPU-sharing tests against a real API server.

There is no kubelet, device plugin or GPU here, so ``GpuNode`` plays them for one node, as a background
thread: when the binder makes a reservation pod on the node, the "device plugin" gives it one free GPU of
the node's list, the "kubelet" marks it Running, and its container runs: the real ``kai
resource-reservation`` command in a subprocess, against a fake libnvidia-ml.so.1 (tests/unit/fakenvml)
that shows that one GPU, writing ``run.ai/reserve_for_gpu_index`` on the pod as the real container
would. When the pod is deleted, its GPU is free again. ``paused`` holds the containers back (a slow start).
"""

from __future__ import annotations

import subprocess
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from lightkube import ApiError, Client
from lightkube.resources.core_v1 import ConfigMap, Pod

from kai.k8s.envtest import ControlPlane, free_port, mark_pod_running
from tests.k8s.conftest import run_kai
from tests.unit.fakenvml import build, env, kai_command

RESERVATION_NS = "kai-resource-reservation"


@pytest.fixture(scope="session")
def fake_nvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml"))


def install_webhooks(cp: ControlPlane, port: int, failure_policy: str = "Fail") -> None:
    code, out, err = run_kai(
        "install",
        "--kubeconfig",
        str(cp.kubeconfig),
        "--webhook-url",
        f"https://127.0.0.1:{port}",
        "--webhook-failure-policy",
        failure_policy,
    )
    assert code == 0, f"kai install --webhook-url failed:\n{out}\n{err}"


def remove_webhooks(cp: ControlPlane) -> None:
    cp.kubectl(
        "delete",
        "mutatingwebhookconfiguration/mutating-kai-admission",
        "validatingwebhookconfiguration/validating-kai-admission",
        "--ignore-not-found",
    )


@pytest.fixture
def webhook_port(scheduler_cluster: ControlPlane) -> Iterator[int]:
    """A free port with kai's webhooks registered at it (failurePolicy Fail); removed afterwards, so that
    a later test's pods are not refused by a webhook nobody serves."""
    port = free_port()
    install_webhooks(scheduler_cluster, port)
    yield port
    remove_webhooks(scheduler_cluster)


def nvidia_runtime_class(cp: ControlPlane) -> None:
    """The RuntimeClass the GPU operator installs; kai's webhook gives it to fraction pods."""
    doc = "apiVersion: node.k8s.io/v1\nkind: RuntimeClass\nmetadata: {name: nvidia}\nhandler: nvidia\n"
    subprocess.run(
        [str(cp.binaries.kubectl), f"--kubeconfig={cp.kubeconfig}", "apply", "-f", "-"],
        input=doc,
        text=True,
        check=True,
        capture_output=True,
    )


def gpu_uuids(node: str, count: int) -> list[str]:
    return [f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node}/{i}')}" for i in range(count)]


class GpuNode:
    """Device plugin + kubelet + reservation container of one node (see the module docstring)."""

    def __init__(self, client: Client, cp: ControlPlane, node: str, uuids: list[str], nvml: Path) -> None:
        self.client = client
        self.cp = cp
        self.node = node
        self.uuids = uuids
        self.nvml = nvml
        self.given: dict[str, str] = {}  # reservation pod uid -> GPU UUID it holds
        self.paused = threading.Event()
        self.runs = 0  # reservation containers started
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.error: BaseException | None = None

    def __enter__(self) -> GpuNode:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        if self.error is not None:
            raise self.error

    def _loop(self) -> None:
        try:
            while not self._stop.wait(0.1):
                if not self.paused.is_set():
                    self._step()
        except BaseException as e:  # reported by __exit__
            self.error = e

    def _step(self) -> None:
        pods = [p for p in self.client.list(Pod, namespace=RESERVATION_NS) if p.spec.nodeName == self.node]
        alive = {p.metadata.uid for p in pods}
        for uid in list(self.given):
            if uid not in alive:
                del self.given[uid]  # deleted: the device plugin has the GPU back
        for p in pods:
            if p.metadata.deletionTimestamp is not None or p.metadata.uid in self.given:
                continue
            free = [u for u in self.uuids if u not in self.given.values()]
            assert free, f"node {self.node}: a reservation pod asks for a GPU and none is free"
            gpu = free[0]
            self.given[p.metadata.uid] = gpu
            with _missing_ok():
                mark_pod_running(self.client, p.metadata.name, RESERVATION_NS)
            self._run_container(p.metadata.name, gpu)

    def _run_container(self, name: str, gpu: str) -> None:
        """The reservation pod's container: ``kai resource-reservation``, seeing exactly *gpu* through NVML."""
        self.runs += 1
        res = subprocess.run(
            [*kai_command(), "resource-reservation", "--kubeconfig", str(self.cp.kubeconfig), "--exit-after-patch"],
            env=env(self.nvml, [gpu], POD_NAME=name, POD_NAMESPACE=RESERVATION_NS),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if res.returncode != 0 and "NotFound" not in res.stderr and "not found" not in res.stderr:
            raise AssertionError(f"kai resource-reservation failed for {name}:\n{res.stdout}\n{res.stderr}")


class _missing_ok:
    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> bool:
        return isinstance(exc, ApiError) and exc.status.code == 404


def reservation_pods(client: Client, node: str | None = None) -> list[Pod]:
    return [
        p
        for p in client.list(Pod, namespace=RESERVATION_NS)
        if p.metadata.deletionTimestamp is None and (node is None or p.spec.nodeName == node)
    ]


def visible_devices(client: Client, pod: Pod) -> str:
    """NVIDIA_VISIBLE_DEVICES as the pod's container would see it: from the ConfigMap its env names."""
    for e in pod.spec.containers[0].env or []:
        if e.name == "NVIDIA_VISIBLE_DEVICES" and e.valueFrom and e.valueFrom.configMapKeyRef:
            ref = e.valueFrom.configMapKeyRef
            cm = client.get(ConfigMap, ref.name, namespace=pod.metadata.namespace)
            return (cm.data or {}).get(ref.key, "")
    return ""


def configmap_value(client: Client, pod: Pod, key: str) -> str:
    for e in pod.spec.containers[0].env or []:
        if e.name == key and e.valueFrom and e.valueFrom.configMapKeyRef:
            ref = e.valueFrom.configMapKeyRef
            return (client.get(ConfigMap, ref.name, namespace=pod.metadata.namespace).data or {}).get(ref.key, "")
    return ""


def wait_gone(client: Client, what: str, check: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out waiting for {what}")
