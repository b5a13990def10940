"""Support for the tests of ``kai scheduler`` against a real API server.

* ``scheduler_cluster``: a control plane of the test module's own (nodes are cluster-scoped, so tests
  that count GPUs on nodes must not share them with other modules), with ``kai install``, the
  ``kai-scheduler`` namespace and deploy/rbac.yaml applied: the scheduler runs as its ServiceAccount,
  so every test also checks that the RBAC rules allow what the process does.
* ``InProcess``: a KaiScheduler on its own event loop in a thread (``call`` runs code on that loop).
* ``Kubelet``: the parts of a kubelet the tests need: mark bound pods Running, and finish the
  termination of deleted pods (a bound pod stays Terminating until its kubelet confirms).
* ``KubeRay``: creates a RayCluster's pods and a RayService's RayCluster as KubeRay does, by running
  kai sim's model of KubeRay (``kai.sim.controllers.ray``) over the objects read from the API server.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import ctypes
import logging
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.core_v1 import Namespace, Node, Pod

from kai.api.workloads import Workload, parse_workload
from kai.k8s._leader import LeaseConfig
from kai.k8s._scheduler import KaiScheduler, SchedulerOptions
from kai.k8s.envtest import (
    SCHEDULER_USER,
    Binaries,
    ControlPlane,
    FaultProxy,
    create_node,
    free_port,
    mark_pod_running,
)
from kai.sim.controllers import ray as kuberay
from tests.k8s.conftest import REPO, run_kai

log = logging.getLogger("tests.k8s.sched")
T = TypeVar("T")
DATA = Path(__file__).parent / "data"
Queue = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")
PodGroup = create_namespaced_resource("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")
WAIT_S = 60.0


def wait_for(check: Callable[[], T], what: str, timeout: float = WAIT_S, interval: float = 0.1) -> T:
    """Poll *check* until it returns something truthy; fail naming *what* after *timeout* seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def wait_for_progress(
    measure: Callable[[], Any], done: Callable[[Any], bool], what: str, stall_s: float = 30.0, interval: float = 0.2
) -> Any:
    """Poll *measure* until ``done(value)``; fail naming *what* only when the value has not changed for
    *stall_s* seconds. For waits whose length depends on the machine's load (a replica starting, 100 pods
    grouped and bound on a shared 2-core machine): a slow run that keeps moving is a correct run, one
    that stopped moving is not."""
    last = measure()
    moved = time.monotonic()
    while not done(last):
        if time.monotonic() - moved > stall_s:
            pytest.fail(f"no progress for {stall_s:.0f} s waiting for {what} (stuck at {last!r})")
        time.sleep(interval)
        now = measure()
        if now != last:
            last, moved = now, time.monotonic()
    return last


def pdb_resource(client: Client) -> Any:
    """PodDisruptionBudgets at policy/v1 where served (1.21+), else policy/v1beta1 (1.20)."""
    try:
        list(client.list(create_namespaced_resource("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets")))
        version = "v1"
    except ApiError as e:
        if e.status.code != 404:
            raise
        version = "v1beta1"
    return create_namespaced_resource("policy", version, "PodDisruptionBudget", "poddisruptionbudgets")


def start_cluster(binaries: Binaries) -> ControlPlane:
    cp = ControlPlane(binaries)
    cp.start()
    try:
        code, out, err = run_kai("install", "--kubeconfig", str(cp.kubeconfig))
        assert code == 0, f"kai install failed:\n{out}\n{err}"
        cp.kubectl("apply", "-f", str(REPO / "deploy" / "namespace.yaml"))
        cp.kubectl("apply", "-f", str(REPO / "deploy" / "rbac.yaml"))
    except BaseException:
        cp.stop()
        raise
    return cp


@pytest.fixture(scope="module")
def scheduler_cluster(binaries: Binaries) -> Iterator[ControlPlane]:
    cp = start_cluster(binaries)
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="module")
def admin(scheduler_cluster: ControlPlane) -> Iterator[Client]:
    c = Client(KubeConfig.from_file(str(scheduler_cluster.kubeconfig)), field_manager="kai-tests")
    yield c
    c.close()


@pytest.fixture
def ns(admin: Client) -> Iterator[str]:
    """A namespace for one test; afterwards its pods are removed at once and its nodes-to-be are free."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin.create(Namespace.from_dict({"metadata": {"name": name}}))
    yield name
    for p in admin.list(Pod, namespace=name):
        with _ignore_missing():
            admin.delete(Pod, p.metadata.name, namespace=name, grace_period=0)
    admin.delete(Namespace, name)


@pytest.fixture
def cluster_scoped(admin: Client) -> Iterator[Callable[[Any], Any]]:
    """Create cluster-scoped objects (StorageClasses, PersistentVolumes, DeviceClasses, ResourceSlices);
    deleted after the test."""
    made: list[Any] = []

    def create(obj: Any) -> Any:
        made.append(obj)
        return admin.create(obj)

    yield create
    for obj in made:
        with contextlib.suppress(ApiError):
            admin.delete(type(obj), obj.metadata.name)


@pytest.fixture
def nodes(admin: Client) -> Iterator[Callable[..., str]]:
    """Create Ready nodes (``nodes(name, gpus=8, ...)``); all are deleted after the test."""
    made: list[str] = []

    def make(name: str, **kw: Any) -> str:
        made.append(name)
        create_node(admin, name, **kw)
        return name

    yield make
    for n in made:
        with _ignore_missing():
            admin.delete(Node, n)


class _ignore_missing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, typ: Any, exc: Any, tb: Any) -> bool:
        return isinstance(exc, ApiError) and exc.status.code == 404


def options(cp: ControlPlane, **kw: Any) -> SchedulerOptions:
    """In-process scheduler options: kai's ServiceAccount identity, a Lease of the test's own (15 s, renewed
    within 10 s: an in-process scheduler shares its process with the test, and a loaded machine must not
    take its Lease away mid-test; the tests of Lease loss run kai as a process with short timings)."""
    base: dict[str, Any] = {
        "kubeconfig": str(cp.scheduler_kubeconfig),
        "schedule_period_s": 0.5,
        "metrics_port": None,
        "lease": LeaseConfig(
            name=f"kai-{uuid.uuid4().hex[:6]}", lease_duration_s=15, renew_deadline_s=10, retry_period_s=0.5
        ),
    }
    base.update(kw)
    return SchedulerOptions(**base)


@contextlib.contextmanager
def through_proxy(
    cp: ControlPlane, workdir: Path, name: str = "kai", seed: int = 0
) -> Iterator[tuple[FaultProxy, Path]]:
    """A FaultProxy in front of *cp*'s API server and a kubeconfig of kai's ServiceAccount through it."""
    with FaultProxy(name, "127.0.0.1", cp.apiserver_port, cp.ca_file, seed=seed) as proxy:
        yield proxy, proxy.kubeconfig(workdir / f"{name}.kubeconfig", cp.token(SCHEDULER_USER))


class InProcess:
    """A KaiScheduler running on its own event loop in a background thread."""

    def __init__(self, opts: SchedulerOptions) -> None:
        self.scheduler = KaiScheduler(opts)
        self.loop = asyncio.new_event_loop()
        self.exit_code: int | None = None
        self._thread = threading.Thread(target=self._main, daemon=True)
        self.error: BaseException | None = None

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.exit_code = self.loop.run_until_complete(self.scheduler.run())
        except BaseException as e:  # reported by stop()
            self.error = e

    def __enter__(self) -> InProcess:
        self._thread.start()
        wait_for(lambda: self.scheduler.synced() or self.error, "the scheduler's informers to sync")
        assert self.error is None, self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def call(self, fn: Callable[[], T]) -> T:
        """Run *fn* on the scheduler's loop thread and return its result."""
        fut: concurrent.futures.Future[T] = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as e:
                fut.set_exception(e)

        self.loop.call_soon_threadsafe(run)
        return fut.result(timeout=10)

    def stop(self) -> None:
        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.scheduler.stop)
            self._thread.join(timeout=30)
        if self.error is not None:
            raise self.error
        if self._thread.is_alive():  # it goes on deciding for the module's later tests (its Lease is its own)
            log.warning("the in-process scheduler did not stop within 30 s")


KAI = Path(sys.executable).parent / "kai"


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: no scheduler outlives a killed test run


class KaiProcess:
    """One ``kai scheduler`` replica; its JSON log goes to a file."""

    def __init__(
        self,
        cp: ControlPlane,
        identity: str,
        lease: str,
        log_dir: Path,
        *,
        kubeconfig: Path | None = None,
        timings: tuple[float, float, float] = (10, 7, 0.5),  # a loaded machine must not take the Lease mid-test
        extra: tuple[str, ...] = (),
    ) -> None:
        self.port = free_port()
        self.identity = identity
        self.log = log_dir / f"kai-{identity}.log"
        duration, deadline, retry = timings
        args = [
            str(KAI),
            "scheduler",
            f"--kubeconfig={kubeconfig or cp.scheduler_kubeconfig}",
            "--schedule-period=0.5",
            f"--leader-elect-name={lease}",
            f"--lease-duration={duration}",
            f"--renew-deadline={deadline}",
            f"--retry-period={retry}",
            f"--identity={identity}",
            f"--metrics-bind-address=127.0.0.1:{self.port}",
            *extra,
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=2) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=30)

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:])


class Kubelet:
    """What the kubelets of the nodes would do, on request."""

    def __init__(self, client: Client) -> None:
        self.client = client

    def run_bound(self, namespace: str) -> int:
        """Mark every bound, pending pod of *namespace* Running; how many were."""
        n = 0
        for p in self.client.list(Pod, namespace=namespace):
            if p.spec.nodeName and p.status.phase == "Pending" and p.metadata.deletionTimestamp is None:
                mark_pod_running(self.client, p.metadata.name, namespace)
                n += 1
        return n

    def finish_terminating(self, namespace: str) -> list[str]:
        """Remove the pods of *namespace* that are being deleted (their containers stopped); their names."""
        gone = []
        for p in self.client.list(Pod, namespace=namespace):
            if p.metadata.deletionTimestamp is not None:
                with _ignore_missing():
                    self.client.delete(Pod, p.metadata.name, namespace=namespace, grace_period=0)
                gone.append(p.metadata.name)
        return gone


class _ApiView:
    """kai sim's controller View over the API server (one namespace)."""

    def __init__(self, client: Client, namespace: str, owned: list[tuple[str, Any]]) -> None:
        self._client = client
        self._ns = namespace
        self._owned = owned

    @property
    def now(self) -> float:
        return time.time()

    def children(self, owner: Workload | Any) -> list[Any]:
        from kai.api.objects import parse_pod

        out: list[Any] = []
        for p in self._client.list(Pod, namespace=self._ns):
            refs = p.metadata.ownerReferences or []
            if refs and refs[0].uid == owner.meta.uid:
                out.append(parse_pod(p.to_dict()))
        for kind, obj in self._owned:
            refs = obj["metadata"].get("ownerReferences") or []
            if refs and refs[0]["uid"] == owner.meta.uid:
                out.append(parse_workload({**obj, "kind": kind}))
        return out

    def taken(self, kind: str, namespace: str, name: str) -> bool:
        """A name already in use (generateName's retry): KubeRay's pods are the only kind made here by name."""
        if kind != "Pod":
            return False
        try:
            self._client.get(Pod, name, namespace=namespace)
        except ApiError as e:
            if e.status.code == 404:
                return False
            raise
        return True


def _limit_extended_resources(pod: dict[str, Any]) -> None:
    """The API server refuses a pod that requests nvidia.com/gpu without a limit ("Limit must be set for
    non overcommitable resources"); the walkthrough's training worker does just that, so the pod is made
    with the limit equal to the request, the only value the API server would accept."""
    for c in pod["spec"].get("containers", []):
        res = c.setdefault("resources", {})
        gpu = (res.get("requests") or {}).get("nvidia.com/gpu")
        if gpu is not None and "nvidia.com/gpu" not in (res.get("limits") or {}):
            res.setdefault("limits", {})["nvidia.com/gpu"] = gpu


class KubeRay:
    """KubeRay with its KAI plugin, one reconcile at a time (the tests say when)."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.RayCluster = create_namespaced_resource("ray.io", "v1", "RayCluster", "rayclusters")
        self.RayService = create_namespaced_resource("ray.io", "v1", "RayService", "rayservices")

    def _workload(self, res: Any, name: str, namespace: str) -> Workload:
        obj = self.client.get(res, name, namespace=namespace)
        doc = obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)
        return parse_workload(doc)

    def reconcile_cluster(self, name: str, namespace: str) -> list[str]:
        """Create the RayCluster's missing head and worker pods; their names."""
        owner = self._workload(self.RayCluster, name, namespace)
        result = kuberay.raycluster(owner, _ApiView(self.client, namespace, []))
        made = []
        for c in result.create:
            _limit_extended_resources(c.doc)
            self.client.create(Pod.from_dict(c.doc))
            made.append(c.doc["metadata"]["name"])
        return made

    def reconcile_service(self, name: str, namespace: str) -> str:
        """Create the RayService's RayCluster and write its name in the RayService's status; the name."""
        owner = self._workload(self.RayService, name, namespace)
        clusters = [
            dict(c)
            for c in self.client.list(self.RayCluster, namespace=namespace)
            if (c.metadata.ownerReferences or []) and c.metadata.ownerReferences[0].uid == owner.meta.uid
        ]
        if clusters:
            return clusters[0]["metadata"]["name"]
        result = kuberay.rayservice(owner, _ApiView(self.client, namespace, []))
        doc = result.create[0].doc
        self.client.create(self.RayCluster.from_dict(doc))
        svc = self.client.get(self.RayService, name, namespace=namespace)
        body = dict(svc)
        body["status"] = result.status
        self.client.replace(self.RayService(body), namespace=namespace)
        return doc["metadata"]["name"]
