"""Whole gangs on a real API server (issue 14, item 4): a gang is never left bound or evicted in part.

* A gang some of whose binds fail has its bound part evicted at once when it no longer meets
  minMember on its own (not after the 60 s staleness grace), with an event.
* A victim gang that a PodDisruptionBudget covers in part is evicted whole or not touched, decided
  from the budget's status before the first eviction.

Bind failures come from ``kai.k8s.envtest.FaultProxy`` between kai and the API server. There is no
kubelet: the test marks bound pods Running and finishes the termination of evicted ones, and it plays
the disruption controller by writing the budget's status (kube-controller-manager is stopped).
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path
from typing import Any

from lightkube import ApiError, Client
from lightkube.resources.core_v1 import Pod
from lightkube.types import PatchType

from kai.k8s.envtest import ControlPlane, Fault
from tests.k8s.sched import InProcess, Kubelet, PodGroup, options, pdb_resource, through_proxy, wait_for
from tests.k8s.test_scheduler import bound, events_for, gpu_pod

GRACE_S = 60  # the default staleness grace the old code waited for


def gang(client: Client, ns: str, name: str, size: int, **pod_meta: Any) -> list[str]:
    """A PodGroup *name* with minMember *size* and its *size* one-GPU pods; their names."""
    client.create(
        PodGroup.from_dict(
            {"metadata": {"name": name, "namespace": ns}, "spec": {"queue": "default-queue", "minMember": size}}
        )
    )
    names = []
    for i in range(size):
        labels = {"kai.scheduler/queue": "default-queue", **pod_meta.get("labels_of", {}).get(i, {})}
        client.create(gpu_pod(f"{name}-{i}", ns, labels=labels, annotations={"pod-group-name": name}))
        names.append(f"{name}-{i}")
    return names


def terminating(client: Client, ns: str) -> set[str]:
    return {p.metadata.name for p in client.list(Pod, namespace=ns) if p.metadata.deletionTimestamp is not None}


def test_a_gang_bound_in_part_is_evicted_at_once(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """Four one-GPU pods, minMember 4; the API server (the proxy) refuses the binds of two of them with
    500, every time. Before, the two bound pods stayed bound: each cycle planned the other two again,
    so the gang never even counted as stale. Now the next cycle sees the bound part alone, below its
    minimum, and evicts it at once, with a FailedBinding event on the PodGroup; the gang ends wholly
    pending."""
    nodes("half-0", gpus=4)
    with (
        through_proxy(scheduler_cluster, tmp_path) as (proxy, kubeconfig),
        InProcess(options(scheduler_cluster, kubeconfig=str(kubeconfig))),
    ):
        proxy.add(Fault("status", method="POST", path=r"/pods/g-[23]/binding", code=500))
        gang(admin, ns, "g", 4)
        wait_for(lambda: set(bound(admin, ns)) == {"g-0", "g-1"}, "two of the gang's pods to be bound")
        started = time.monotonic()
        wait_for(lambda: terminating(admin, ns) == {"g-0", "g-1"}, "the bound part to be evicted", timeout=15)
        assert time.monotonic() - started < GRACE_S / 4
        events = wait_for(
            lambda: [e for e in events_for(admin, ns, "g") if e.reason == "FailedBinding"],
            "a FailedBinding event on the PodGroup",
        )
        assert "2 of 4 binds of gang" in events[0].message, events[0].message
        assert sorted(Kubelet(admin).finish_terminating(ns)) == ["g-0", "g-1"]
        time.sleep(3)  # the two failed pods come back from their backoff: two pods cannot make the gang
        assert bound(admin, ns) == {}


def test_a_gang_its_predecessor_left_bound_in_part_is_decided_on_at_once(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """A leader deposed mid-bind (killed, or frozen past its Lease) leaves a gang bound in part, and its
    successor knows nothing of those binds. Here the predecessor's work is played by creating two of a
    three-pod gang's pods already bound, on a node with room for those two only. The new leader cannot
    complete the gang, so it evicts the bound part in its first cycles, not after the 60 s staleness
    grace (``Assumed.adopt``)."""
    nodes("adopt-0", gpus=2)
    admin.create(
        PodGroup.from_dict(
            {"metadata": {"name": "g", "namespace": ns}, "spec": {"queue": "default-queue", "minMember": 3}}
        )
    )
    for i in range(3):
        pod = gpu_pod(f"g-{i}", ns, annotations={"pod-group-name": "g"})
        if i < 2:
            pod.spec.nodeName = "adopt-0"  # what the predecessor's binds left
        admin.create(pod)
    Kubelet(admin).run_bound(ns)
    with InProcess(options(scheduler_cluster)):
        started = time.monotonic()
        wait_for(lambda: terminating(admin, ns) == {"g-0", "g-1"}, "the bound part to be evicted", timeout=20)
        assert time.monotonic() - started < GRACE_S / 3


class BusyKubelet:
    """The kubelets, at work all along (every 0.1 s) as the chaos runs' are: bound pods Running, terminations
    finished as soon as they start, so an evicted pod is gone within a cycle or two."""

    def __init__(self, client: Client, ns: str) -> None:
        self.kubelet, self.ns = Kubelet(client), ns
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> BusyKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(0.1):
            with contextlib.suppress(ApiError):
                self.kubelet.run_bound(self.ns)
                self.kubelet.finish_terminating(self.ns)


def test_a_victim_gang_whose_eviction_failed_in_part_loses_the_rest_at_once_under_its_next_leader(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """The chaos run of seed 7 (twenty-second session), replayed: a higher-priority pod preempts gang g (2 pods,
    minMember 2); the API server refuses the deletion of g-0 (503) and lets g-1's through; g-1's termination
    ends at once. The leader is deposed while g-0 still runs alone, and its successor knows nothing of the
    failed eviction. g-0 must go at once, not after the 60 s staleness grace: under the first leader the
    gang stays marked broken across the cycle that saw g-1 still terminating (``Assumed.settle`` judges from
    that cycle's snapshot, not from a Store where g-1 is already gone), and the next leader adopts it
    (``Assumed.adopt``). The preemptor is then bound."""
    node = nodes("evict-part-0", gpus=2)
    with BusyKubelet(admin, ns):
        with (
            through_proxy(scheduler_cluster, tmp_path) as (proxy, kubeconfig),
            InProcess(options(scheduler_cluster, kubeconfig=str(kubeconfig))),
        ):
            gang(admin, ns, "g", 2)
            wait_for(lambda: set(bound(admin, ns)) == {"g-0", "g-1"}, "the gang to be bound")
            proxy.add(Fault("status", method="DELETE", path=r"/pods/g-0(\?|$)", code=503))
            high = gpu_pod("high", ns, gpus=2)
            high.spec.priorityClassName = "build-preemptible"  # 75 > train 50
            admin.create(high)
            wait_for(lambda: "g-1" not in {p.metadata.name for p in admin.list(Pod, namespace=ns)}, "g-1 gone")
            wait_for(
                lambda: len([e for e in events_for(admin, ns, "g-0") if e.reason == "EvictionFailed"]) >= 1,
                "the deletion of g-0 to be refused",
            )
            time.sleep(1.0)  # more cycles of this leader: every try at g-0 refused
            assert admin.get(Pod, "g-0", namespace=ns).metadata.deletionTimestamp is None
            # still marked broken: never stamped stale, which would have started a 60 s grace for its successor
            annotations = admin.get(PodGroup, "g", namespace=ns)["metadata"].get("annotations") or {}
            assert "kai.scheduler/stale-podgroup-timestamp" not in annotations, annotations
        started = time.monotonic()
        with InProcess(options(scheduler_cluster)):  # the next leader, straight to the API server
            wait_for(lambda: "g-0" not in {p.metadata.name for p in admin.list(Pod, namespace=ns)}, "g-0 evicted")
            assert time.monotonic() - started < GRACE_S / 4
            wait_for(lambda: bound(admin, ns).get("high") == node, "the preemptor to be bound")


def test_a_victim_gang_a_pdb_covers_in_part_goes_whole_or_not_at_all(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """Victim gang v (4 pods, minMember 4) on a 4-GPU node; a PodDisruptionBudget (maxUnavailable 2)
    covers two of its pods, and its status (what the API server decides by) allows 1 disruption. A
    higher-priority pod needs the whole node. Before, kai deleted the two uncovered pods and evicted the
    covered ones: the API server let one through and refused the other (429), leaving the gang half
    evicted. Now kai sees that the gang does not fit the budget's allowance and touches none of it
    (an EvictionRefused event on the PodGroup says why); once the budget allows 2, the gang is evicted
    whole, covered pods first, and the preemptor binds."""
    scheduler_cluster.stop_controller_manager()  # the test writes the budget's status
    PDB = pdb_resource(admin)
    node = nodes("pdb-gang-0", gpus=4)
    kubelet = Kubelet(admin)
    with InProcess(options(scheduler_cluster)):
        names = gang(admin, ns, "v", 4, labels_of={0: {"app": "v"}, 1: {"app": "v"}})
        wait_for(lambda: len(bound(admin, ns)) == 4, "the victim gang to be bound")
        assert kubelet.run_bound(ns) == 4
        admin.create(
            PDB.from_dict(
                {
                    "metadata": {"name": "v-pdb", "namespace": ns},
                    "spec": {"maxUnavailable": 2, "selector": {"matchLabels": {"app": "v"}}},
                }
            )
        )

        def allow(n: int) -> None:
            gen = admin.get(PDB, "v-pdb", namespace=ns)["metadata"]["generation"]
            status = {
                "observedGeneration": gen,
                "disruptionsAllowed": n,
                "currentHealthy": 2,
                "desiredHealthy": 2 - n,
                "expectedPods": 2,
            }
            admin.patch(PDB.Status, "v-pdb", {"status": status}, namespace=ns, patch_type=PatchType.MERGE)

        allow(1)
        time.sleep(1.5)  # the PDB informer sees it before the preemptor arrives
        high = gpu_pod("high", ns, gpus=4)
        high.spec.priorityClassName = "build-preemptible"
        admin.create(high)
        time.sleep(3)  # cycles: nothing of the gang may be touched
        assert terminating(admin, ns) == set(), "the victim gang was evicted in part"
        assert set(bound(admin, ns)) == set(names)
        refused = wait_for(
            lambda: [e for e in events_for(admin, ns, "v") if e.reason == "EvictionRefused"],
            "an EvictionRefused event on the victim gang's PodGroup",
        )
        assert "allows 1 more disruption now and the gang has 2 of its pods" in refused[0].message

        allow(2)
        wait_for(lambda: terminating(admin, ns) == set(names), "the whole gang to be evicted")
        kubelet.finish_terminating(ns)
        wait_for(lambda: bound(admin, ns) == {"high": node}, "the preemptor to be bound")
