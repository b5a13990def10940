"""``kai scheduler`` in-process against a real API server, as kai's ServiceAccount (deploy/rbac.yaml).

Binds, the pod-grouper, status and conditions, events, metrics; a Job through the real
kube-controller-manager; invalid Queues and PodGroups; the API server restarted mid-run; a forced
410 Gone on the watches; preemption through the Eviction API where a PodDisruptionBudget applies;
a bind the API server refuses, re-planned.
"""

from __future__ import annotations

import contextlib
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

from lightkube import Client
from lightkube.generic_resource import create_global_resource
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Event, Node, Pod
from lightkube.resources.rbac_authorization_v1 import ClusterRole
from lightkube.types import PatchType

from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import InProcess, Kubelet, PodGroup, Queue, options, pdb_resource, wait_for


def gpu_pod(name: str, ns: str, gpus: int = 1, queue: str = "default-queue", **meta: Any) -> Pod:
    return Pod.from_dict(
        {
            "metadata": {"name": name, "namespace": ns, "labels": {"kai.scheduler/queue": queue}, **meta},
            "spec": {
                "schedulerName": "kai-scheduler",
                "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            },
        }
    )


def gpu_job(name: str, ns: str, pods: int, gpus: int = 1, queue: str = "default-queue") -> Job:
    """A batch/v1 Job of *pods* pods at once (parallelism = completions), each asking *gpus* GPUs of kai."""
    labels = {"kai.scheduler/queue": queue}
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    return Job.from_dict(
        {
            "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {
                "parallelism": pods,
                "completions": pods,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"schedulerName": "kai-scheduler", "restartPolicy": "Never", "containers": [container]},
                },
            },
        }
    )


def node_of(client: Client, ns: str, name: str) -> str:
    return client.get(Pod, name, namespace=ns).spec.nodeName or ""


def bound(client: Client, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.nodeName for p in client.list(Pod, namespace=ns) if p.spec.nodeName}


def gpus_per_node(client: Client, ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in client.list(Pod, namespace=ns):
        if p.spec.nodeName:
            n = sum(int((c.resources.limits or {}).get("nvidia.com/gpu", 0)) for c in p.spec.containers)
            out[p.spec.nodeName] = out.get(p.spec.nodeName, 0) + n
    return out


def events_for(client: Client, ns: str, name: str) -> list[Event]:
    return [e for e in client.list(Event, namespace=ns) if e.involvedObject.name == name]


def http_get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_bare_pods_are_grouped_bound_and_the_rest_explained(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    n0, n1 = nodes("bare-0", gpus=8), nodes("bare-1", gpus=8)
    with InProcess(options(scheduler_cluster, metrics_port=0)) as run:
        for i in range(5):
            admin.create(gpu_pod(f"p{i}", ns, gpus=4))
        wait_for(lambda: len(bound(admin, ns)) == 4, "4 of the 5 pods to be bound")
        placed = bound(admin, ns)
        assert sorted(set(placed.values())) == sorted({n0, n1})
        assert all(v <= 8 for v in gpus_per_node(admin, ns).values())
        waiting = next(f"p{i}" for i in range(5) if f"p{i}" not in placed)

        # The pod-grouper made one PodGroup per bare pod, in default-queue, and annotated each pod (the bound
        # ones through their Binding; the PodGroups are created after the binds: docs/cluster.md).
        def made() -> dict[str, Any]:
            return {pg["metadata"]["name"]: pg for pg in admin.list(PodGroup, namespace=ns)}

        def annotated() -> bool:
            return all("pod-group-name" in (p.metadata.annotations or {}) for p in admin.list(Pod, namespace=ns))

        pgs = wait_for(lambda: len(made()) == 5 and annotated() and made(), "5 PodGroups and 5 annotated pods")
        for p in admin.list(Pod, namespace=ns):
            pg = pgs[p.metadata.annotations["pod-group-name"]]
            assert pg["spec"]["queue"] == "default-queue" and pg["spec"]["minMember"] == 1
            assert pg["metadata"]["ownerReferences"][0]["uid"] == p.metadata.uid

        # The waiting pod says why: pod condition, PodGroup status, and a Warning event on the PodGroup.
        def condition() -> Any:
            conds = admin.get(Pod, waiting, namespace=ns).status.conditions or []
            return next((c for c in conds if c.type == "PodScheduled" and c.status == "False"), None)

        cond = wait_for(condition, "PodScheduled=False on the waiting pod")
        assert cond.reason == "Unschedulable" and "GPU" in cond.message, cond
        pg_name = admin.get(Pod, waiting, namespace=ns).metadata.annotations["pod-group-name"]
        status = wait_for(
            lambda: (admin.get(PodGroup, pg_name, namespace=ns).get("status") or {}).get("schedulingConditions"),
            "the waiting PodGroup's schedulingConditions",
        )
        assert status[0]["type"] == "UnschedulableOnNodePool" and status[0]["reason"] == "Unschedulable"
        wait_for(
            lambda: any(e.reason == "Unschedulable" and e.type == "Warning" for e in events_for(admin, ns, pg_name)),
            "an Unschedulable event on the PodGroup",
        )
        some = next(iter(placed))
        scheduled = wait_for(
            lambda: [e for e in events_for(admin, ns, some) if e.reason == "Scheduled"], "a Scheduled event"
        )
        assert scheduled[0].message == f"Successfully assigned pod {ns}/{some} to node {placed[some]}"
        assert len(events_for(admin, ns, some)) == 1  # one Scheduled event, not one per cycle

        # Queue status (status subresource) and metrics.
        wait_for(
            lambda: (admin.get(Queue, "default-queue").get("status") or {}).get("requested", {}).get("nvidia.com/gpu"),
            "default-queue's status",
        )
        port = run.scheduler.http_port
        assert http_get(port, "/healthz") == (200, "ok")
        assert http_get(port, "/readyz") == (200, "ok")
        code, text = http_get(port, "/metrics")
        assert code == 200
        for name in (
            "kai_e2e_scheduling_latency_milliseconds",
            "kai_action_scheduling_latency_milliseconds",
            "kai_task_bind_latency_milliseconds_bucket",
            'kai_queue_allocated_gpus{queue_name="default-queue"}',
            'kai_queue_fair_share_gpu{queue_display_name="default-queue"',
            'kai_binds_total{result="bound"} 4.0',
            "kai_is_leader 1.0",
        ):
            assert name in text, name


def test_job_through_kube_controller_manager(scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes) -> None:
    """A batch/v1 Job: kube-controller-manager creates its pods, kai groups them by the Job and binds them."""
    scheduler_cluster.start_controller_manager()
    node = nodes("job-0", gpus=8)
    with InProcess(options(scheduler_cluster)):
        admin.create(gpu_job("train", ns, pods=2, gpus=2))
        placed = wait_for(lambda: len(bound(admin, ns)) == 2 and bound(admin, ns), "the Job's two pods to be bound")
        assert set(placed.values()) == {node}
        job = admin.get(Job, "train", namespace=ns)
        names = {p.metadata.annotations["pod-group-name"] for p in admin.list(Pod, namespace=ns)}
        assert names == {f"pg-train-{job.metadata.uid}"}  # KAI's name: pg-<job>-<uid>, one for the Job


def test_invalid_queue_and_podgroup_get_an_event_and_the_rest_schedules(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    nodes("inv-0", gpus=8)
    bad_queue = f"bad-{uuid.uuid4().hex[:6]}"
    admin.create(
        Queue.from_dict(
            {
                "metadata": {"name": bad_queue},
                "spec": {"parentQueue": "default-parent-queue", "resources": {"gpu": {"quota": -5, "limit": -1}}},
            }
        )
    )
    admin.create(
        PodGroup.from_dict(
            {
                "metadata": {"name": "bad-pg", "namespace": ns},
                "spec": {"queue": "default-queue", "minMember": 1, "minSubGroup": 1},
            }
        )
    )
    with InProcess(options(scheduler_cluster)):
        admin.create(gpu_pod("fine", ns))
        wait_for(lambda: node_of(admin, ns, "fine"), "a valid pod to be bound")
        queue_events = wait_for(
            lambda: [e for e in events_for(admin, "default", bad_queue) if e.reason == "InvalidObject"],
            "an InvalidObject event on the bad Queue",
        )
        assert queue_events[0].type == "Warning"
        assert "spec.resources.gpu.quota" in queue_events[0].message, queue_events[0].message
        pg_events = wait_for(
            lambda: [e for e in events_for(admin, ns, "bad-pg") if e.reason == "InvalidObject"],
            "an InvalidObject event on the bad PodGroup",
        )
        assert "spec.minMember" in pg_events[0].message and "mutually exclusive" in pg_events[0].message
    admin.delete(Queue, bad_queue)


def test_api_server_restarted_mid_run(scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes) -> None:
    nodes("restart-0", gpus=8)
    # Without leader election: a leader that cannot renew its Lease within the renew deadline steps down
    # and exits (as kube-scheduler does), which the process tests cover; here the informers must recover.
    with InProcess(options(scheduler_cluster, leader_elect=False)) as run:
        admin.create(gpu_pod("before", ns))
        wait_for(lambda: node_of(admin, ns, "before"), "the first pod to be bound")
        scheduler_cluster.restart_apiserver()
        admin.create(gpu_pod("after", ns))
        wait_for(lambda: node_of(admin, ns, "after"), "a pod created after the restart to be bound")
        assert run.scheduler.synced()
        assert run.error is None


def test_forced_410_relists_and_decides_on_fresh_data(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """A watch resumed from a resourceVersion the API server no longer serves gets 410 Gone: the kind is
    listed again and diffed, and the next decision uses the fresh list."""
    old = nodes("gone-0", gpus=8)
    # The API server's watch cache starts at its own start: restarting it puts every older
    # resourceVersion out of reach (without leader election: the restart outlasts the test's short Lease).
    with InProcess(options(scheduler_cluster, leader_elect=False)) as run:
        s = run.scheduler
        node_inf, pod_inf = s.informers["Node"], s.informers["Pod"]
        # The watches go down; meanwhile the old node is deleted, a new one made, and a pod created.
        run.call(node_inf.pause)
        run.call(pod_inf.pause)
        scheduler_cluster.restart_apiserver()
        admin.delete(Node, old)
        new = nodes("fresh-0", gpus=8)
        admin.create(gpu_pod("needs-8", ns, gpus=8))
        before = node_inf.relists, pod_inf.relists
        run.call(lambda: node_inf.resume_watch_from("1"))
        wait_for(lambda: node_inf.relists > before[0], "the node informer to list again")
        assert s.store.get("Node", ("", old)) is None and s.store.get("Node", ("", new)) is not None
        run.call(lambda: pod_inf.resume_watch_from("1"))
        wait_for(lambda: node_of(admin, ns, "needs-8"), "the pod to be bound")
        assert node_of(admin, ns, "needs-8") == new
        assert pod_inf.relists > before[1]


def test_no_cycle_while_an_informer_is_not_synced(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """While a kind is being listed again (after 410 Gone) the Store may be stale: nothing is decided."""
    nodes("sync-0", gpus=8)
    with InProcess(options(scheduler_cluster)) as run:
        inf = run.scheduler.informers["Queue"]
        run.call(inf.synced.clear)
        time.sleep(1.0)  # a cycle already under way when the flag dropped finishes first
        cycles = run.scheduler.cycles_run
        admin.create(gpu_pod("held", ns))
        time.sleep(2.0)  # four schedule periods
        assert node_of(admin, ns, "held") == "" and run.scheduler.cycles_run == cycles
        run.call(inf.synced.set)
        wait_for(lambda: node_of(admin, ns, "held"), "the pod to be bound once synced")


# GPU sharing (group labels, reservation pods, the webhook's env) is tested in test_gpu_sharing.py.


def test_preemption_goes_through_the_eviction_api_where_a_pdb_applies(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """The victim is protected by a PodDisruptionBudget whose status (what the API server decides by)
    allows no disruption yet: kai holds the victim's eviction back, saying why on its PodGroup, and
    keeps it; once the budget's status allows it, the next cycle evicts through the Eviction API and
    the preemptor binds."""
    # This test plays the disruption controller (it writes the budget's status); another test of the
    # module may have started kube-controller-manager, whose controller would overwrite it.
    scheduler_cluster.stop_controller_manager()
    node = nodes("pdb-0", gpus=1)
    kubelet = Kubelet(admin)
    pdb = pdb_resource(admin)
    with InProcess(options(scheduler_cluster)):
        admin.create(gpu_pod("low", ns, labels={"kai.scheduler/queue": "default-queue", "app": "low"}))
        wait_for(lambda: node_of(admin, ns, "low") == node, "the low-priority pod to be bound")
        assert kubelet.run_bound(ns) == 1
        # maxUnavailable 1: kai's own PDB arithmetic allows evicting the one pod. The API server checks
        # the budget's status, which no disruption controller fills in here: it refuses (429).
        admin.create(
            pdb.from_dict(
                {
                    "metadata": {"name": "low-pdb", "namespace": ns},
                    "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "low"}}},
                }
            )
        )
        time.sleep(1.5)  # the PDB informer sees it before the preemptor arrives
        high = gpu_pod("high", ns)
        high.spec.priorityClassName = "build-preemptible"  # 75 > train 50, preemptible: no quota needed
        admin.create(high)
        low_pg = admin.get(Pod, "low", namespace=ns).metadata.annotations["pod-group-name"]
        refused = wait_for(
            lambda: [e for e in events_for(admin, ns, low_pg) if e.reason == "EvictionRefused"],
            "an EvictionRefused event on the victim's PodGroup",
        )
        assert refused[0].type == "Warning", refused[0]
        assert f"PodDisruptionBudget {ns}/low-pdb allows 0 more disruptions" in refused[0].message
        assert "preempt" in refused[0].message and "no pod touched" in refused[0].message
        time.sleep(2)  # more cycles: the victim stays, the preemptor waits, nothing is bound twice
        low = admin.get(Pod, "low", namespace=ns)
        assert low.metadata.deletionTimestamp is None and low.spec.nodeName == node
        assert node_of(admin, ns, "high") == ""

        # What the disruption controller would write: one disruption allowed.
        gen = admin.get(pdb, "low-pdb", namespace=ns)["metadata"]["generation"]
        admin.patch(
            pdb.Status,
            "low-pdb",
            {
                "status": {
                    "observedGeneration": gen,
                    "disruptionsAllowed": 1,
                    "currentHealthy": 1,
                    "desiredHealthy": 0,
                    "expectedPods": 1,
                }
            },
            namespace=ns,
            patch_type=PatchType.MERGE,
        )
        wait_for(
            lambda: admin.get(Pod, "low", namespace=ns).metadata.deletionTimestamp is not None,
            "the victim to be evicted through the Eviction API",
        )
        assert kubelet.finish_terminating(ns) == ["low"]
        wait_for(lambda: node_of(admin, ns, "high") == node, "the preemptor to be bound on the freed GPU")


Shard = create_global_resource("kai.scheduler", "v1", "SchedulingShard", "schedulingshards")


def test_stuck_in_releasing_threshold_comes_from_the_shard(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """A Running pod terminating longer than the shard's stuckInReleasingThreshold is StuckInReleasing: its GPU
    is not pipelined to anyone (KAI's allocate_stuck_in_releasing_test.go); raising the threshold makes it
    Releasing again, and the waiting pod is pipelined onto that GPU. No kubelet runs here, so the deleted pod
    stays Terminating, as a pod with a stuck finalizer or an unreachable kubelet does."""
    node = nodes("stuck-0", gpus=1)
    shard = f"stuck-{uuid.uuid4().hex[:6]}"
    admin.create(Shard.from_dict({"metadata": {"name": shard}, "spec": {"stuckInReleasingThreshold": "1s"}}))
    try:
        with InProcess(options(scheduler_cluster, shard=shard)) as run:
            admin.create(gpu_pod("old", ns))
            wait_for(lambda: node_of(admin, ns, "old") == node, "the first pod to be bound")
            assert Kubelet(admin).run_bound(ns) == 1
            admin.delete(Pod, "old", namespace=ns, grace_period=1)  # deletionTimestamp = now + 1s
            time.sleep(3)  # now more than the 1s threshold past the deletionTimestamp
            admin.create(gpu_pod("waiting", ns))
            pg = wait_for(
                lambda: (admin.get(Pod, "waiting", namespace=ns).metadata.annotations or {}).get("pod-group-name"),
                "the waiting pod to be grouped",
            )
            wait_for(
                lambda: (admin.get(PodGroup, pg, namespace=ns).get("status") or {}).get("schedulingConditions"),
                "the waiting PodGroup to be found unschedulable",
            )
            time.sleep(1.5)  # a few more cycles: the stuck pod's GPU is still not lent
            last = run.scheduler.last_result
            assert last is not None and not [p for p in last.pipelines if p.pod.name == "waiting"]
            assert node_of(admin, ns, "waiting") == ""

            admin.patch(Shard, shard, {"spec": {"stuckInReleasingThreshold": "1h"}}, patch_type=PatchType.MERGE)
            wait_for(
                lambda: any(p.pod.name == "waiting" and p.node == node for p in run.scheduler.last_result.pipelines),
                "the waiting pod to be pipelined onto the releasing GPU",
            )
    finally:
        admin.delete(Shard, shard)


def test_a_bind_the_api_server_refuses_is_replanned_next_cycle(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """kai's ServiceAccount loses the right to bind (a broken RBAC rollout): the bind fails with 403, the
    pod gets a FailedBinding event and stays pending, nothing is assumed; once the rule is back, a later
    cycle plans the pod again and binds it, once."""
    node = nodes("bindfail-0", gpus=2)
    with kai_role_without(admin, "pods/binding") as restore, InProcess(options(scheduler_cluster)):
        admin.create(gpu_pod("p", ns))
        failed = wait_for(
            lambda: [e for e in events_for(admin, ns, "p") if e.reason == "FailedBinding"],
            "a FailedBinding event",
        )
        assert failed[0].type == "Warning" and "403" in failed[0].message, failed[0].message
        assert node_of(admin, ns, "p") == ""
        restore()
        wait_for(lambda: node_of(admin, ns, "p") == node, "the pod to be bound once the rule is back")
        scheduled = wait_for(
            lambda: [e for e in events_for(admin, ns, "p") if e.reason == "Scheduled"], "a Scheduled event"
        )
        assert len(scheduled) == 1


def test_optional_kinds_kai_may_not_read_do_not_block_scheduling(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """RBAC without Topologies and SchedulingShards (a narrowed install): those kinds count as empty and
    the rest schedules; a pod asking for a topology waits and says the topology does not exist."""
    node = nodes("norbac-0", gpus=2)
    with kai_role_without(admin, "topologies"):
        time.sleep(1)  # RBAC changes reach the authorizer's cache
        with InProcess(options(scheduler_cluster)) as run:
            assert run.scheduler.store.count("Topology") == 0
            admin.create(gpu_pod("plain", ns))
            wait_for(lambda: node_of(admin, ns, "plain") == node, "the plain pod to be bound")
            racked = {"kai.scheduler/topology": "cluster-topology", "kai.scheduler/topology-required-placement": "rack"}
            admin.create(gpu_pod("racked", ns, annotations=racked))
            pg = wait_for(
                lambda: admin.get(Pod, "racked", namespace=ns).metadata.annotations.get("pod-group-name"),
                "the topology pod to be grouped",
            )
            wait_for(
                lambda: any("cluster-topology does not exist" in (e.message or "") for e in events_for(admin, ns, pg)),
                "the topology pod's PodGroup to say the topology does not exist",
            )
            assert node_of(admin, ns, "racked") == ""


@contextlib.contextmanager
def kai_role_without(admin: Client, resource: str) -> Iterator[Callable[[], None]]:
    """kai's ClusterRole without its one rule naming *resource* (a broken or narrowed RBAC rollout);
    the whole role is put back on exit, or earlier by calling what this yields."""
    original = [r.to_dict() for r in admin.get(ClusterRole, "kai-scheduler").rules]
    without = [r for r in original if resource not in r.get("resources", [])]
    assert len(without) == len(original) - 1

    def restore() -> None:
        admin.patch(ClusterRole, "kai-scheduler", {"rules": original}, patch_type=PatchType.MERGE)

    admin.patch(ClusterRole, "kai-scheduler", {"rules": without}, patch_type=PatchType.MERGE)
    try:
        yield restore
    finally:
        restore()


def test_a_standby_turns_the_collector_back_on_once_synced(scheduler_cluster: ControlPlane) -> None:
    """`kai scheduler` pauses Python's garbage collector until its informers have synced. A standby
    (the Lease is another replica's) syncs too but may never lead: it must not run on without its
    collector, growing with every watch event's garbage."""
    import gc

    leader_opts = options(scheduler_cluster)
    with InProcess(leader_opts) as leader:
        wait_for(lambda: leader.scheduler.leader is not None and leader.scheduler.leader.is_leader, "a leader")
        gc.disable()
        try:
            standby_opts = options(scheduler_cluster, lease=leader_opts.lease, gc_paused_until_synced=True)
            with InProcess(standby_opts) as standby:  # returns once its informers have synced
                assert not standby.scheduler.leader.is_leader
                # The informers' synced events are set on the scheduler's loop, which resumes the coroutine
                # that enables the collector right after: on a loaded machine this thread can look first.
                wait_for(gc.isenabled, "the standby to turn the collector back on after its sync", timeout=10)
        finally:
            gc.enable()


def test_a_replica_is_not_ready_until_its_shard_is_read(scheduler_cluster: ControlPlane, monkeypatch: Any) -> None:
    """The informers list while the SchedulingShard is read (its CRD's storage may still be initializing: 429),
    and the Lease is named after the shard. Synced but with the shard unread, a replica is neither leader nor
    standby: /readyz must not say "ok" then (a rolling update would take it for a leader)."""
    import asyncio
    import threading

    from kai.k8s import _scheduler

    release = threading.Event()
    resolve = _scheduler.resolve_partition

    async def held(*args: Any, **kwargs: Any) -> Any:
        while not release.is_set():
            await asyncio.sleep(0.02)
        return await resolve(*args, **kwargs)

    monkeypatch.setattr(_scheduler, "resolve_partition", held)
    with InProcess(options(scheduler_cluster)) as s:  # returns once its informers have synced
        ready, why = s.scheduler._readyz()
        assert (ready, why) == (False, "reading SchedulingShard 'default'")
        release.set()
        wait_for(lambda: s.scheduler._readyz() == (True, "ok"), "the replica to lead and be ready")


def test_the_leaders_first_cycle_runs_with_the_collector_paused(
    scheduler_cluster: ControlPlane, monkeypatch: Any
) -> None:
    """`kai scheduler` pauses the collector again from the Lease's first groupings to the end of the first
    cycle (their objects live on; collecting them would only cost time before the first bind), and turns it
    back on after that cycle, so a leader never runs on without it."""
    import gc

    from kai.k8s._scheduler import KaiScheduler

    seen: list[bool] = []
    cycle = KaiScheduler.cycle

    async def recording(self: KaiScheduler) -> Any:
        seen.append(gc.isenabled())
        return await cycle(self)

    monkeypatch.setattr(KaiScheduler, "cycle", recording)
    gc.disable()
    try:
        with InProcess(options(scheduler_cluster, gc_paused_until_synced=True)) as s:
            wait_for(lambda: len(seen) >= 2, "two cycles", timeout=20)
            assert seen[0] is False  # the first cycle: paused since _start_writers
            assert seen[1] is True  # and on again from the end of the first cycle
            assert s.scheduler.cycles_run >= 1
    finally:
        gc.enable()
