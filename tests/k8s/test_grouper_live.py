"""The pod-grouper at bind speed, against a real API server (kai as its ServiceAccount, deploy/rbac.yaml).

* bare pods are scheduled in the cycle that decides their PodGroups: the Binding carries the
  ``pod-group-name`` annotation (no pod patch), the PodGroups are created after, once each;
* pods a cycle leaves pending are annotated by patches, many in flight at once;
* a Job of 1,000 pods made by the real kube-controller-manager gets exactly one PodGroup, its owner
  read once, and every pod bound;
* ``kai scheduler`` killed (-9) after binding some pods whose PodGroups it could not make yet (a webhook
  down), then started again: every pod bound exactly once, every PodGroup made, every pod counted to its queue;
* a decided PodGroup that came and went between two cycles leaves the pod-grouper's memory on its
  DELETED event (the soak, benchmarks/soak.py, churns pods fast enough for that).

No kubelet runs: pods stay Pending once bound, which is all the scheduler reads of them here.
"""

from __future__ import annotations

import signal
import uuid
from pathlib import Path

from lightkube import Client
from lightkube.resources.admissionregistration_v1 import ValidatingWebhookConfiguration
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import Namespace, Pod

from kai.api.objects import parse_podgroup
from kai.k8s.envtest import ControlPlane
from tests.k8s.sched import InProcess, PodGroup, Queue, free_port, options, wait_for
from tests.k8s.test_scheduler import bound, events_for, gpu_job, gpu_pod, gpus_per_node
from tests.k8s.test_scheduler_process import KaiProcess


def podgroups(client: Client, ns: str) -> dict[str, object]:
    return {pg.metadata.name: pg for pg in client.list(PodGroup, namespace=ns)}


def kai_name(pod: Pod) -> str:
    """KAI's PodGroup name for a bare pod: pg-<pod>-<uid>."""
    return f"pg-{pod.metadata.name}-{pod.metadata.uid}"


def binds_by_code(cp: ControlPlane) -> dict[str, int]:
    """The API server's count of binding requests by answer (201 accepted, 409 refused), from its metrics."""
    text = cp.kubectl("get", "--raw", "/metrics").stdout
    out: dict[str, int] = {}
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'subresource="binding"' in line:
            code = line.split('code="', 1)[1].split('"', 1)[0]
            out[code] = out.get(code, 0) + int(float(line.rsplit(" ", 1)[1]))
    return out


def make_queue(client: Client) -> str:
    name = f"q-{uuid.uuid4().hex[:6]}"
    client.create(
        Queue.from_dict(
            {
                "metadata": {"name": name},
                "spec": {"parentQueue": "default-parent-queue", "resources": {"gpu": {"quota": -1, "limit": -1}}},
            }
        )
    )
    return name


def queue_gpus(client: Client, name: str) -> str:
    status = client.get(Queue, name).status or {}
    return ((status.get("allocated") or {}).get("nvidia.com/gpu")) or ""


def test_bare_pods_bind_in_the_cycle_that_groups_them(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    for i in range(5):
        nodes(f"bare-{i}", gpus=8)
    for i in range(40):
        admin.create(gpu_pod(f"b{i:02d}", ns))
    with InProcess(options(scheduler_cluster)) as s:
        wait_for(lambda: len(bound(admin, ns)) == 40, "the 40 bare pods to be bound")
        wait_for(lambda: len(podgroups(admin, ns)) == 40, "their 40 PodGroups")
        grouper = s.scheduler.grouper
        assert grouper is not None
        # the API server shows a PodGroup before kai has read the answer to its create
        wait_for(lambda: grouper.created == 40, "kai to count its 40 creates", timeout=10)
        assert (grouper.patched, grouper.created) == (0, 40)  # annotations came with the binds
        # the binds' connections were opened while the informers listed (KaiScheduler._warming)
        warming = s.scheduler._warming
        assert warming is not None and warming.done() and warming.result() > 0
        # a cycle is recorded when it ends, after its status writes, which can come after the PodGroups
        wait_for(lambda: sum(c.binds for c in s.scheduler.cycles) >= 40, "the cycle that bound them to end")
        samples = [m for f in s.scheduler.metrics.binds.collect() for m in f.samples if m.name.endswith("_total")]
        binds = {m.labels["result"]: m.value for m in samples}
        cycles = [(c.index, c.pods, c.binds) for c in s.scheduler.cycles]
        # one cycle decided and bound all (the message says how the binds went, if not)
        assert [c.binds for c in s.scheduler.cycles if c.binds] == [40], (binds, cycles[:20])
    pgs = podgroups(admin, ns)
    for pod in admin.list(Pod, namespace=ns):
        assert pod.metadata.annotations["pod-group-name"] == kai_name(pod)
        pg = pgs[kai_name(pod)]
        assert pg.spec["queue"] == "default-queue" and pg.spec["minMember"] == 1  # type: ignore[attr-defined]
        assert pg.metadata.ownerReferences[0].uid == pod.metadata.uid  # type: ignore[attr-defined]


def test_podgroups_decided_before_the_first_cycle_are_created_after_its_binds(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """At a start, the pods listed are grouped before the first cycle, and their PodGroups' creates wait for
    that cycle's binds, as a later cycle's do (they would take kai's CPU while it decides and the API server's
    while it binds). Checked in etcd's order: every bind has a lower resourceVersion than any PodGroup's
    create (revisions of one etcd; a pod's current version bounds its bind's, as nothing writes it after)."""
    for i in range(2):
        nodes(f"first-{i}", gpus=8)
    made = [admin.create(gpu_pod(f"f{i:02d}", ns)) for i in range(16)]
    since = max(int(p.metadata.resourceVersion) for p in made)
    with InProcess(options(scheduler_cluster)):
        wait_for(lambda: len(bound(admin, ns)) == 16, "the 16 bare pods to be bound")
        wait_for(lambda: len(podgroups(admin, ns)) == 16, "their 16 PodGroups")
    bind_versions = [int(p.metadata.resourceVersion) for p in admin.list(Pod, namespace=ns)]
    created: list[int] = []
    for kind, pg in admin.watch(PodGroup, namespace=ns, resource_version=str(since)):  # replayed from the cache
        if kind == "ADDED":
            created.append(int(pg.metadata.resourceVersion))
            if len(created) == 16:
                break
    assert max(bind_versions) < min(created), (sorted(bind_versions), sorted(created))


def test_pods_left_pending_are_annotated_by_concurrent_patches(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    nodes("pending-0", gpus=2)
    for i in range(100):
        admin.create(gpu_pod(f"w{i:03d}", ns, gpus=4))  # larger than any node: all stay pending
    with InProcess(options(scheduler_cluster)) as s:

        def annotated() -> int:
            return sum("pod-group-name" in (p.metadata.annotations or {}) for p in admin.list(Pod, namespace=ns))

        wait_for(lambda: annotated() == 100, "the 100 pending pods to be annotated")
        wait_for(lambda: len(podgroups(admin, ns)) == 100, "their 100 PodGroups")
        grouper = s.scheduler.grouper
        assert grouper is not None
        wait_for(lambda: (grouper.patched, grouper.created) == (100, 100), "kai to count its writes", timeout=10)
        assert grouper.peak_writes > 1  # creates and patches overlap (64 slots)
    assert not bound(admin, ns)
    for pod in admin.list(Pod, namespace=ns):
        assert pod.metadata.annotations["pod-group-name"] == kai_name(pod)


def test_job_of_1000_pods_through_kube_controller_manager(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """kube-controller-manager makes the Job's pods as they come; kai reads the Job once (its watch keeps
    it current while the Job's status changes) and makes one PodGroup for all of them."""
    scheduler_cluster.start_controller_manager()
    for i in range(125):
        nodes(f"job-{i:03d}", gpus=8)
    with InProcess(options(scheduler_cluster)) as s:
        admin.create(gpu_job("big", ns, pods=1000))
        wait_for(lambda: len(bound(admin, ns)) == 1000, "the Job's 1,000 pods to be bound", timeout=600, interval=1)
        job = admin.get(Job, "big", namespace=ns)
        name = f"pg-big-{job.metadata.uid}"
        wait_for(lambda: set(podgroups(admin, ns)) == {name}, "the Job's one PodGroup")
        grouper = s.scheduler.grouper
        assert grouper is not None
        assert grouper.owners.fetches == {("batch/v1", "Job", ns, "big"): 1}  # one GET for 1,000 pods
        assert grouper.created == 1
    pods = list(admin.list(Pod, namespace=ns))
    assert len(pods) == 1000
    assert {p.metadata.annotations["pod-group-name"] for p in pods} == {name}
    assert len(bound(admin, ns)) == 1000


def podgroup_creates_down(admin: Client, ns: str) -> str:
    """A validating webhook for PodGroup creates in *ns* whose server is down (nothing listens on its port),
    failing closed: the API server answers each create 500, which kai retries, so no PodGroup is made
    while it stands. An admission webhook's outage, as a cluster sees one; the name to delete."""
    name = f"podgroups-down-{uuid.uuid4().hex[:6]}"
    admin.patch(Namespace, ns, {"metadata": {"labels": {name: "down"}}})
    rule = {
        "operations": ["CREATE"],
        "apiGroups": ["scheduling.run.ai"],
        "apiVersions": ["*"],
        "resources": ["podgroups"],
    }
    admin.create(
        ValidatingWebhookConfiguration.from_dict(
            {
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": "down.kai.test",
                        "clientConfig": {"url": f"https://127.0.0.1:{free_port()}/validate"},
                        "rules": [rule],
                        "namespaceSelector": {"matchLabels": {name: "down"}},
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 1,
                    }
                ],
            }
        )
    )
    return name


def test_kill_9_between_binds_and_their_podgroups(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """300 bare pods for 320 GPUs. The scheduler binds pods while their PodGroups cannot be made (an
    admission webhook for PodGroups is down: kai retries the creates), and is killed (-9) then; the webhook
    comes back and a second one starts: every pod is bound, by exactly one accepted binding each, its
    annotation and PodGroup are KAI's, and the queue counts all 300 GPUs. (Left to timing, the kill came
    after the creates as often as not: PodGroups decided before a cycle starts are made before its binds.)"""
    for i in range(40):
        nodes(f"crash-{i:02d}", gpus=8)
    queue = make_queue(admin)
    for i in range(300):
        admin.create(gpu_pod(f"c{i:03d}", ns, queue=queue))
    binds_before = binds_by_code(scheduler_cluster)
    lease = f"kai-crash-{uuid.uuid4().hex[:6]}"
    procs: list[KaiProcess] = []
    webhook: str | None = podgroup_creates_down(admin, ns)
    try:
        first = KaiProcess(scheduler_cluster, "crash-first", lease, tmp_path)
        procs.append(first)
        wait_for(lambda: len(bound(admin, ns)) >= 20, "the first scheduler to bind 20 pods")
        first.proc.send_signal(signal.SIGKILL)
        assert first.proc.wait(timeout=10) == -signal.SIGKILL
        at_kill = bound(admin, ns)
        assert not podgroups(admin, ns), "a PodGroup was made through the webhook that is down"
        assert all(
            p.metadata.annotations["pod-group-name"] == kai_name(p)
            for p in admin.list(Pod, namespace=ns)
            if p.spec.nodeName
        )
        admin.delete(ValidatingWebhookConfiguration, webhook)
        webhook = None

        second = KaiProcess(scheduler_cluster, "crash-second", lease, tmp_path)
        procs.append(second)
        wait_for(lambda: len(bound(admin, ns)) == 300, f"300 pods bound after the restart ({len(at_kill)} at the kill)")
        wait_for(lambda: len(podgroups(admin, ns)) == 300, "300 PodGroups after the restart")
        wait_for(lambda: queue_gpus(admin, queue) == "300", "the queue to count 300 GPUs")
        assert second.proc.poll() is None, second.tail()
    finally:
        for p in procs:
            if p.proc.poll() is None:
                p.stop(signal.SIGKILL)
        if webhook is not None:
            admin.delete(ValidatingWebhookConfiguration, webhook)
    pods = list(admin.list(Pod, namespace=ns))
    pgs = podgroups(admin, ns)
    for pod in pods:
        assert pod.metadata.annotations["pod-group-name"] == kai_name(pod)
        assert pgs[kai_name(pod)].spec["queue"] == queue  # type: ignore[attr-defined]
    assert {n: node for n, node in at_kill.items()} == {n: bound(admin, ns)[n] for n in at_kill}  # not moved
    after = binds_by_code(scheduler_cluster)
    delta = {c: n - binds_before.get(c, 0) for c, n in after.items() if n != binds_before.get(c, 0)}
    # At most one accepted binding per pod. (Binds in flight when the first process died may have been
    # applied yet counted 504 by the API server, whose request context was cancelled: so not == 300.)
    assert 0 < delta.get("201", 0) <= 300, delta
    per_node = gpus_per_node(admin, ns)
    assert sum(per_node.values()) == 300 and max(per_node.values()) <= 8, per_node


def test_a_podgroup_the_api_server_refuses_keeps_its_pod_unbound_and_says_why(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """A bare pod whose name is near the limit: KAI's PodGroup name (pg-<name>-<uid>) is too long and the API
    server refuses it. The pod is not bound (its PodGroup is written before any bind, not after), and a
    PodGrouperWarning says why; a pod next to it binds."""
    nodes("refused-0", gpus=8)
    long_name = "p" * 230
    admin.create(gpu_pod(long_name, ns))
    admin.create(gpu_pod("short", ns))
    with InProcess(options(scheduler_cluster)):
        wait_for(lambda: "short" in bound(admin, ns), "the other pod to be bound")
        warnings = wait_for(
            lambda: [e for e in events_for(admin, ns, long_name) if e.reason == "PodGrouperWarning"],
            "a PodGrouperWarning on the pod whose PodGroup is refused",
        )
        assert "refused" in warnings[0].message and "422" in warnings[0].message, warnings[0].message
        assert long_name not in bound(admin, ns)
    assert len(podgroups(admin, ns)) == 1


def test_a_decided_podgroup_deleted_between_cycles_is_forgotten(
    scheduler_cluster: ControlPlane, admin: Client, ns: str
) -> None:
    """The pod-grouper decided a PodGroup, whose create landed and whose pod went, and the garbage
    collector deleted the PodGroup, all before the next cycle's ``expire`` looked: the Store never showed
    it there, so the decision (laid over every snapshot) and its create task were kept for ever. Played
    here: the decision put in place on the scheduler's loop, ``expire`` held off (no cycle looks), then
    the PodGroup made and deleted through the API server."""
    with InProcess(options(scheduler_cluster)) as s:
        grouper = s.scheduler.grouper
        assert grouper is not None
        name = f"pg-gone-{uuid.uuid4().hex[:6]}"
        key = (ns, name)
        pg = parse_podgroup(
            {"metadata": {"name": name, "namespace": ns}, "spec": {"queue": "default-queue", "minMember": 1}}
        )
        expire = grouper.expire

        def decide() -> None:
            grouper.expire = lambda: None  # type: ignore[method-assign]  # no cycle looks meanwhile
            grouper.decided.add_podgroup(pg)

        s.call(decide)
        try:
            admin.create(PodGroup.from_dict({"metadata": {"name": name, "namespace": ns}, "spec": {"minMember": 1}}))
            wait_for(lambda: s.call(lambda: s.scheduler.store.get("PodGroup", key)) is not None, "its ADDED")
            admin.delete(PodGroup, name, namespace=ns)
            wait_for(lambda: s.call(lambda: s.scheduler.store.get("PodGroup", key)) is None, "its DELETED")
            assert s.call(lambda: key not in grouper.decided.podgroups)  # let go on the DELETED event
        finally:
            s.call(lambda: setattr(grouper, "expire", expire))
