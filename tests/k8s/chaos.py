"""The chaos harness: ``kai scheduler`` replicas behind fault proxies, a workload, and the invariants.

Theory of operation (one ``ChaosRun`` per scenario, tests/k8s/test_chaos.py):

* **Real parts.** etcd, kube-apiserver and kube-controller-manager (its disruption controller keeps
  the PodDisruptionBudget's status; its garbage collector removes PodGroups of deleted pods) run as in
  every test of tests/k8s. Each kai replica is a real ``kai scheduler`` process with kai's
  ServiceAccount, reaching the API server through a ``FaultProxy`` of its own, so the proxy's log says
  which replica wrote what, and when it reached the API server. A replica that exits (it lost its
  Lease) or is killed is replaced by a new one, as its Deployment would.
* **Played by the test**, because nothing real can stand in for them here: the kubelets (a thread marks
  bound pods Running and Ready, and removes pods being deleted once "their containers stopped"; for a
  GPU reservation pod it also plays the device plugin and the container, giving it a free GPU of its
  node and writing that GPU's UUID on it, as ``kai resource-reservation`` does), and the workload's
  owners (a thread creates bare pods, gangs with their PodGroup, half-GPU pods, higher-priority pods
  that preempt, pods a PodDisruptionBudget protects, and deletes finished pods). A half-GPU pod is made
  as kai's admission webhook would have admitted it: the workload applies kai's own mutation
  (``kai.k8s._admission``) in-process, because a webhook registered at one replica's address would
  refuse every pod while the chaos kills that replica.
* **Seeded.** The workload's choices and every proxy's fault draws come from generators seeded by the
  scenario's seed, so a run makes the same requests and injects the same kinds of faults in the same
  order; the interleaving with real processes still varies from run to run.
* **Afterwards** the faults are lifted, the workload stops, and kai is given until everything is either
  bound or pending with a reason; then the invariants are read from the API server and the proxies'
  logs (``violations``): no node over its allocatable (whole GPUs, GPU groups and reservation pods, no
  GPU reserved twice); no pod bound
  twice; no pod lost (every pod the workload made is bound, or pending with PodScheduled=False, or was
  deleted by the workload, or evicted by kai); every gang at or above minMember or wholly pending; no
  pod a budget covers deleted without the Eviction API; two replicas never writing at once (the
  replicas' writes, in the order they reached the API server, form one run per replica: a replica that
  another has written after never writes again).
"""

from __future__ import annotations

import collections
import random
import re
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from httpx2 import HTTPStatusError, TransportError
from lightkube import ApiError, Client, KubeConfig
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Event, Node, Pod

from kai.api import constants as C
from kai.k8s._admission import Admission, AdmissionConfig
from kai.k8s.envtest import SCHEDULER_USER, ControlPlane, Fault, FaultProxy, Logged, mark_pod_running
from kai.store import Store
from tests.k8s.sched import KaiProcess, PodGroup, pdb_resource

LEASE_TIMINGS = (4.0, 3.0, 0.5)  # lease, renew deadline, retry: 1 s of margin for writes on the wire
# A new leader within: the old Lease expiring, then a replica taking it; that replica may be a
# replacement still starting (a Python process on a loaded 2-core machine: up to tens of seconds).
LEADER_WAIT_S = LEASE_TIMINGS[0] + 30.0
WATCH_ARGS = ("--watch-timeout=5", "--watch-progress-deadline=8")  # a stalled watch is noticed in seconds
GPUS_PER_NODE = 8
SETTLE_STALL_S = 30.0  # after the faults: how long kai may go without visible progress (ChaosRun.settle)
SETTLE_CAP_S = 120.0
PROTECTED_MIN_AVAILABLE = 2
RESTARTING = (429, 500, 503, 504)  # an API server (or its etcd) restarting: the harness's writes try again
GPU = "nvidia.com/gpu"
_BIND = re.compile(r"/namespaces/[^/]+/pods/([^/?]+)/binding")
_POD = re.compile(r"/namespaces/[^/]+/pods/([^/?]+)(/eviction)?(?:\?|$)")
ADMISSION = Admission(Store(), AdmissionConfig(gpu_fraction_runtime_class=""))  # no RuntimeClass here


def admitted(doc: dict[str, Any]) -> dict[str, Any]:
    """*doc* as kai's mutating webhook would let it in (its JSON patch: "add" operations only)."""
    for op in ADMISSION.mutate_pod({"operation": "CREATE", "object": doc}).patch or []:
        assert op["op"] == "add", op
        *path, last = op["path"].strip("/").split("/")
        target: Any = doc
        for part in path:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[last] = op["value"]
    return doc


@dataclass
class Gang:
    name: str
    pods: list[str]


@dataclass
class ChaosRun:
    """One scenario's cluster state, replicas, workload and checks (module docstring)."""

    cp: ControlPlane
    ns: str
    workdir: Path
    seed: int
    nodes: list[str]
    replicas_wanted: int = 1
    kai_args: tuple[str, ...] = ()
    rng: random.Random = field(init=False)
    fault_rng: random.Random = field(init=False)
    lease: str = field(init=False)
    proxies: list[FaultProxy] = field(default_factory=list)
    replicas: list[KaiProcess] = field(default_factory=list)
    created: dict[str, str] = field(default_factory=dict)  # pod → what the workload made it as
    deleted_by_workload: set[str] = field(default_factory=set)
    gangs: list[Gang] = field(default_factory=list)
    thread_errors: list[str] = field(default_factory=list)
    exits: list[tuple[str, int | None]] = field(default_factory=list)  # replicas that ended: (identity, code)
    settle_report: str = ""

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)  # the workload's draws
        self.fault_rng = random.Random(self.seed + 1000)  # the scenario timeline's draws
        self.lease = f"kai-chaos-{self.seed}-{uuid.uuid4().hex[:6]}"
        self._stop = threading.Event()
        self._workload_stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._counter = 0
        self._local = threading.local()
        list(self.client.list(Pod, namespace=self.ns))  # msgspec builds its decoders here, in one thread

    @property
    def client(self) -> Client:
        """A client of the calling thread's own: lightkube's sync client (and msgspec's first decode of a
        type) are not safe to share between the workload's, the kubelets' and the test's threads."""
        c = getattr(self._local, "client", None)
        if c is None:
            c = self._local.client = Client(KubeConfig.from_file(str(self.cp.kubeconfig)), field_manager="kai-chaos")
        return c

    # ---- replicas ------------------------------------------------------------------------------

    def start_replica(self) -> KaiProcess:
        n = len(self.replicas)
        identity = f"kai-{n}"
        proxy = FaultProxy(identity, "127.0.0.1", self.cp.apiserver_port, self.cp.ca_file, seed=self.seed * 100 + n)
        proxy.start()
        self.proxies.append(proxy)
        kubeconfig = proxy.kubeconfig(self.workdir / f"{identity}.kubeconfig", self.cp.token(SCHEDULER_USER))
        kai = KaiProcess(
            self.cp,
            identity,
            self.lease,
            self.workdir,
            kubeconfig=kubeconfig,
            timings=LEASE_TIMINGS,
            extra=(*WATCH_ARGS, *self.kai_args),
        )
        self.replicas.append(kai)
        return kai

    def alive(self) -> list[KaiProcess]:
        return [r for r in self.replicas if r.proc.poll() is None]

    def leader(self) -> KaiProcess | None:
        try:
            holder = self.client.get(Lease, self.lease, namespace="kai-scheduler").spec.holderIdentity
        except ApiError:
            return None
        return next((r for r in self.alive() if r.identity == holder), None)

    def proxy_of(self, replica: KaiProcess) -> FaultProxy:
        return next(p for p in self.proxies if p.name == replica.identity)

    def add_fault(self, fault_of: Callable[[], Fault]) -> None:
        """Add a fresh copy of a fault to every replica's proxy (those started later get none)."""
        for p in self.proxies:
            p.add(fault_of())

    def clear_faults(self) -> None:
        for p in self.proxies:
            p.clear()

    def _keep_replicas(self) -> None:
        """As a Deployment would: a replica that ended is replaced by a new one."""
        while not self._stop.is_set():
            for r in list(self.replicas):
                code = r.proc.poll()
                if code is not None and (r.identity, code) not in self.exits:
                    self.exits.append((r.identity, code))
            while len(self.alive()) < self.replicas_wanted and not self._stop.is_set():
                self.start_replica()
            time.sleep(0.2)

    # ---- the workload and the kubelets ------------------------------------------------------------

    def _name(self, kind: str) -> str:
        with self._lock:
            self._counter += 1
            return f"{kind}-{self._counter:04d}"

    def _pod(self, name: str, kind: str, *, gpus: int = 1, labels: dict[str, str] | None = None, **extra: Any) -> None:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": self.ns,
            "labels": {"kai.scheduler/queue": "default-queue", **(labels or {})},
        }
        annotations = extra.pop("annotations", None)
        if annotations:
            meta["annotations"] = annotations
        resources = {"limits": {GPU: str(gpus)}} if gpus else {}
        spec: dict[str, Any] = {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "c", "image": "x", "resources": resources}],
            **extra,
        }
        self.client.create(Pod.from_dict(admitted({"metadata": meta, "spec": spec})))
        self.created[name] = kind

    def _one_action(self) -> None:
        r = self.rng.random()
        if r < 0.30:
            self._pod(self._name("bare"), "bare")
        elif r < 0.35 and sum(1 for k in self.created.values() if k == "protected") < 4:
            self._pod(self._name("prot"), "protected", labels={"app": "protected"})
        elif r < 0.55:
            name = self._name("gang")
            size = self.rng.randint(2, 4)
            self.client.create(
                PodGroup.from_dict(
                    {
                        "metadata": {"name": name, "namespace": self.ns},
                        "spec": {"queue": "default-queue", "minMember": size},
                    }
                )
            )
            pods = [f"{name}-{i}" for i in range(size)]
            for p in pods:
                self._pod(p, "gang", annotations={"pod-group-name": name})
            self.gangs.append(Gang(name, pods))
        elif r < 0.70:
            self._pod(self._name("half"), "fraction", gpus=0, annotations={"gpu-fraction": "0.5"})
        elif r < 0.80:
            self._pod(self._name("high"), "high", gpus=2, priorityClassName="build-preemptible")
        else:
            self._finish_one()

    def _finish_one(self) -> None:
        """A bare, half-GPU or high pod that runs completes: its owner deletes it."""
        running = [
            p.metadata.name
            for p in self.client.list(Pod, namespace=self.ns)
            if p.spec.nodeName
            and p.status.phase == "Running"
            and self.created.get(p.metadata.name) in ("bare", "fraction", "high")
        ]
        if running:
            name = self.rng.choice(sorted(running))
            self.deleted_by_workload.add(name)
            try:
                self.client.delete(Pod, name, namespace=self.ns, grace_period=0)
            except ApiError as e:
                if e.status.code != 404:
                    raise

    def _workload(self) -> None:
        while not self._workload_stop.is_set():
            try:
                self._one_action()
            except ApiError as e:  # the API server is restarting: the owner tries again later
                if e.status.code not in RESTARTING:
                    raise
            except HTTPStatusError as e:
                # A restarted API server serves the CRDs' paths a moment after it answers: until then a PodGroup's
                # create gets a bare 404 page (no Status, so lightkube raises httpx's error, not ApiError).
                if e.response.status_code not in (404, *RESTARTING):
                    raise
            except (OSError, TransportError):
                pass
            time.sleep(self.rng.uniform(0.2, 0.6))

    def _kubelet(self) -> None:
        while not self._stop.is_set():
            try:
                for p in self.client.list(Pod, namespace=self.ns):
                    name = p.metadata.name
                    if p.metadata.deletionTimestamp is not None:
                        self.client.delete(Pod, name, namespace=self.ns, grace_period=0)
                    elif p.spec.nodeName and p.status.phase == "Pending":
                        mark_pod_running(self.client, name, self.ns)
                self._reservations()
            except ApiError as e:
                if e.status.code not in (404, 409, *RESTARTING):
                    raise
            except (OSError, TransportError):
                pass
            time.sleep(0.3)

    def _reservations(self) -> None:
        """The device plugin and container of each GPU reservation pod: a GPU of its node that no other
        reservation pod holds, its UUID written on the pod (module docstring)."""
        pods = [p for p in self.client.list(Pod, namespace=C.RESERVATION_NAMESPACE) if p.spec.nodeName in self.nodes]
        held = {p.metadata.annotations.get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX) for p in pods if p.metadata.annotations}
        for p in pods:
            if p.metadata.deletionTimestamp is not None:
                self.client.delete(Pod, p.metadata.name, namespace=C.RESERVATION_NAMESPACE, grace_period=0)
                continue
            if (p.metadata.annotations or {}).get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX):
                continue
            free = [g for g in (f"GPU-{p.spec.nodeName}-{i}" for i in range(GPUS_PER_NODE)) if g not in held]
            if not free:
                continue  # the device plugin has none: the pod stays Pending, and kai's bind times out
            held.add(free[0])
            if p.status.phase == "Pending":
                mark_pod_running(self.client, p.metadata.name, C.RESERVATION_NAMESPACE)
            self.client.patch(
                Pod,
                p.metadata.name,
                {"metadata": {"annotations": {C.ANNOTATION_RESERVE_FOR_GPU_INDEX: free[0]}}},
                namespace=C.RESERVATION_NAMESPACE,
            )

    def _guarded(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except Exception as e:  # reported by violations(): a harness thread must not die silently
                self.thread_errors.append(f"{target.__name__}: {type(e).__name__}: {e}")

        return run

    # ---- a run -------------------------------------------------------------------------------------

    def run(self, faults: Callable[[ChaosRun], None], quiesce_s: float = SETTLE_STALL_S) -> float:
        """Start the replicas, the workload and the kubelets, play *faults* (which sleeps through its
        timeline), then stop the workload, lift the faults and wait until kai has settled. The seconds
        the whole run took."""
        t0 = time.monotonic()
        PDB = pdb_resource(self.client)
        self.client.create(
            PDB.from_dict(
                {
                    "metadata": {"name": "protected", "namespace": self.ns},
                    "spec": {
                        "minAvailable": PROTECTED_MIN_AVAILABLE,
                        "selector": {"matchLabels": {"app": "protected"}},
                    },
                }
            )
        )
        for _ in range(self.replicas_wanted):
            self.start_replica()
        for target in (self._keep_replicas, self._workload, self._kubelet):
            t = threading.Thread(target=self._guarded(target), name=f"chaos-{target.__name__}", daemon=True)
            t.start()
            self._threads.append(t)
        try:
            faults(self)
        finally:
            self._workload_stop.set()
            self.clear_faults()
        self.settle(quiesce_s)
        return time.monotonic() - t0

    def settle(self, stall_s: float) -> None:
        """Wait until every pod is bound or says why it waits, none is terminating and no gang is bound in
        part, twice in a row 2 s apart; give up (the invariants then name what is unsettled) once the
        unsettled set has not changed for *stall_s*, or after SETTLE_CAP_S in all. The stall bound is what
        kai may need after the faults end with nothing visible changing: a Lease to expire (4 s) and a
        replacement replica to start and list (seconds, more on a loaded machine), a stalled watch to be
        noticed (8 s). What was unsettled when the wait began, and for how long, go to ``settle_report``."""
        start = moved = time.monotonic()
        calm = 0
        last: list[str] | None = None
        first: list[str] | None = None
        while calm < 2 and time.monotonic() - moved < stall_s and time.monotonic() - start < SETTLE_CAP_S:
            now = self._unsettled()
            first = now if first is None else first
            calm = calm + 1 if not now else 0
            if now != last:
                last, moved = now, time.monotonic()
            time.sleep(2.0)
        self.settle_report = f"settled in {time.monotonic() - start:.1f} s; unsettled at first: {(first or [])[:8]}"

    def _unsettled(self) -> list[str]:
        """Pods terminating or waiting without a reason, and gangs bound in part: a pod still pending with the
        reason of an earlier cycle may be a gang's whose binds are under way, or whose bound part kai is about
        to evict (a broken gang), so the pods alone do not say kai is done."""
        pods = list(self.client.list(Pod, namespace=self.ns))
        out = [
            p.metadata.name
            for p in pods
            if p.metadata.deletionTimestamp is not None or (not p.spec.nodeName and not _waits_with_reason(p))
        ]
        return out + self._gangs(pods)

    def stop(self) -> None:
        self._workload_stop.set()
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        for r in self.replicas:
            if r.proc.poll() is None:
                r.proc.send_signal(signal.SIGCONT)
                r.proc.kill()
                r.proc.wait(timeout=10)
        for p in self.proxies:
            p.stop()
        for p in self.client.list(Pod, namespace=C.RESERVATION_NAMESPACE):  # the next scenario's nodes have
            if p.spec.nodeName in self.nodes:  # the same names: it starts with none of this one's reservations
                try:
                    self.client.delete(Pod, p.metadata.name, namespace=C.RESERVATION_NAMESPACE, grace_period=0)
                except ApiError as e:
                    if e.status.code != 404:
                        raise

    # ---- the invariants ----------------------------------------------------------------------------

    def violations(self) -> list[str]:
        pods = list(self.client.list(Pod, namespace=self.ns))
        log = sorted((e for p in self.proxies for e in p.log), key=lambda e: e.sent_mono)
        out = [f"harness thread failed: {e}" for e in self.thread_errors]
        out += self._overcommit(pods)
        out += self._bound_twice(log)
        out += self._lost(pods, log)
        out += self._gangs(pods, detail=True)
        out += self._pdb(log)
        out += self._writers(log)
        out += self._errors_logged()
        return out

    def _errors_logged(self) -> list[str]:
        """kai logs an error for a bug (a task or a cycle that raised) and for a lost Lease; the first
        is a violation, the second what some scenarios are about."""
        out = []
        for r in self.replicas:
            for line in r.log.read_text(errors="replace").splitlines():
                if '"level": "error"' in line and '"lost the lease"' not in line:
                    out.append(f"{r.identity} logged an error: {line[:300]}")
        return out

    def _overcommit(self, pods: list[Pod]) -> list[str]:
        cap = {n.metadata.name: int(n.status.allocatable.get(GPU, "0")) for n in self.client.list(Node)}
        whole: dict[str, int] = collections.Counter()
        shared: dict[tuple[str, str], float] = collections.defaultdict(float)
        out = []
        reserved: dict[str, list[str]] = collections.defaultdict(list)  # GPU UUID → reservation pods
        for p in self.client.list(Pod, namespace=C.RESERVATION_NAMESPACE):
            if p.spec.nodeName in self.nodes and p.metadata.deletionTimestamp is None:
                group = (p.metadata.labels or {}).get(C.LABEL_GPU_GROUP, "")
                shared.setdefault((p.spec.nodeName, group), 0.0)  # a reserved GPU is in use, even if empty
                uuid_ = (p.metadata.annotations or {}).get(C.ANNOTATION_RESERVE_FOR_GPU_INDEX)
                if uuid_:
                    reserved[uuid_].append(p.metadata.name)
        out += [f"GPU {g} reserved by {len(names)} pods: {names}" for g, names in reserved.items() if len(names) > 1]
        for p in pods:
            node = p.spec.nodeName
            if not node or p.status.phase in ("Succeeded", "Failed"):
                continue
            fraction = (p.metadata.annotations or {}).get("gpu-fraction")
            if fraction is not None:
                group = (p.metadata.labels or {}).get("runai-gpu-group", f"<no group: {p.metadata.name}>")
                shared[(node, group)] += float(fraction)
            else:
                whole[node] += sum(int((c.resources.limits or {}).get(GPU, 0)) for c in p.spec.containers)
        out += [f"GPU group {g} on {n} holds {f:g} GPUs" for (n, g), f in shared.items() if f > 1.0 + 1e-9]
        for node in set(whole) | {n for n, _ in shared}:
            used = whole[node] + sum(1 for n, _ in shared if n == node)
            if used > cap.get(node, 0):
                out.append(f"node {node}: {used} GPUs in use, {cap.get(node, 0)} allocatable")
        return out

    @staticmethod
    def _bound_twice(log: list[Logged]) -> list[str]:
        binds = collections.Counter(
            m.group(1) for e in log if e.method == "POST" and e.status == 201 and (m := _BIND.search(e.target))
        )
        return [f"pod {name} bound {n} times" for name, n in binds.items() if n > 1]

    def describe(self, name: str) -> str:
        """One pod as the API server has it (for a violation's message)."""
        try:
            p = self.client.get(Pod, name, namespace=self.ns)
        except ApiError as e:
            return f"{name}: {e.status.code}"
        conds = [(c.type, c.status, (c.message or "")[:80]) for c in (p.status.conditions or [])]
        pg = (p.metadata.annotations or {}).get("pod-group-name")
        nominated = p.status.nominatedNodeName
        where = f"node={p.spec.nodeName!r} nominated={nominated!r}"
        return f"{name}: {where} phase={p.status.phase} podgroup={pg} conditions={conds}"

    def _lost(self, pods: list[Pod], log: list[Logged]) -> list[str]:
        present = {p.metadata.name: p for p in pods}
        evicted = {
            m.group(1)
            for e in log
            if 200 <= e.status < 300
            and (
                (e.method == "DELETE" and (m := _POD.search(e.target)))
                or (e.method == "POST" and e.target.endswith("/eviction") and (m := _POD.search(e.target)))
            )
        }
        out = []
        for name in self.created:
            p = present.get(name)
            if p is None:
                if name not in self.deleted_by_workload and name not in evicted:
                    out.append(f"pod {name} was lost")
            elif not p.spec.nodeName and not _waits_with_reason(p):
                out.append(f"pod waits without a reason: {self.describe(name)}")
                group = (p.metadata.annotations or {}).get("pod-group-name")
                out += [f"  {line}" for line in self._logged(name, group)]
        return out

    def _gangs(self, pods: list[Pod], *, detail: bool = False) -> list[str]:
        """Gangs bound in part; with *detail*, each with its pods' state and what kai logged about it."""
        bound = {p.metadata.name for p in pods if p.spec.nodeName and p.metadata.deletionTimestamp is None}
        out = []
        for g in self.gangs:
            n = sum(1 for p in g.pods if p in bound)
            if 0 < n < len(g.pods):
                out.append(f"gang {g.name}: {n} of {len(g.pods)} pods bound (minMember {len(g.pods)})")
                if detail:
                    out += [f"  {self.describe(p)}" for p in g.pods]
                    out += [f"  {line}" for line in self._logged(g.name, *g.pods)]
                    out += [f"  {line}" for line in self._events(g.name, *g.pods)]
        return out

    def _events(self, *names: str) -> list[str]:
        """The events kai recorded on *names* (pods, PodGroups), oldest first (a violation's message)."""
        wanted = set(names)
        events = [e for e in self.client.list(Event, namespace=self.ns) if e.involvedObject.name in wanted]
        events.sort(key=lambda e: (str(e.lastTimestamp or e.eventTime or ""), e.involvedObject.name))
        return [f"event {e.involvedObject.name} {e.reason} x{e.count or 1}: {(e.message or '')[:200]}" for e in events]

    def _logged(self, *names: str | None, last: int = 12) -> list[str]:
        """The replicas' last log lines naming one of *names* (a pod, its PodGroup: a violation's message)."""
        names = tuple(n for n in names if n)
        lines = []
        for r in self.replicas:
            for line in r.log.read_text(errors="replace").splitlines():
                if any(n in line for n in names):
                    lines.append(f"{r.identity}: {line[:400]}")
        return lines[-last:]

    def _pdb(self, log: list[Logged]) -> list[str]:
        protected = {n for n, k in self.created.items() if k == "protected"}
        return [
            f"pod {m.group(1)}, which a PodDisruptionBudget covers, deleted without the Eviction API"
            for e in log
            if e.method == "DELETE" and (m := _POD.search(e.target)) and m.group(1) in protected
        ]

    @staticmethod
    def _writers(log: list[Logged]) -> list[str]:
        """The replicas' writes (not the Lease's own), in the order they reached the API server, form
        one run per replica: once another replica wrote, a replica never writes again."""
        done: set[str] = set()
        current = ""
        out = []
        for e in log:
            if e.method not in ("POST", "PUT", "PATCH", "DELETE") or "/leases" in e.target:
                continue
            if e.client != current:
                if e.client in done:
                    out.append(f"{e.client} wrote {e.method} {e.target} after {current} had started writing")
                if current:
                    done.add(current)
                current = e.client
        return out


def _waits_with_reason(p: Pod) -> bool:
    return any(c.type == "PodScheduled" and c.status == "False" and c.message for c in (p.status.conditions or []))
