"""No single object or failing task stops ``kai scheduler`` (issue 14), against a real API server.

Each test here failed on the code before the fix it names (docs/cluster.md, "Failure modes"):

* a pod owner nested thousands of levels deep no longer kills the pod-grouper's workers;
* a watch event the decoder cannot read no longer kills the informer (and leaves cycles running on
  frozen data);
* an informer task that keeps failing is restarted, holds the cycles back while it is down, and makes
  ``/healthz`` fail;
* an event the recorder cannot send no longer kills its workers.

Faults on the wire come from ``kai.k8s.envtest.FaultProxy`` between kai and the API server. Where a
test makes one of kai's own tasks fail, it does so by replacing one of the task's methods with one that
raises: that plays a bug, the one thing no real part can stand in for.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from lightkube import Client
from lightkube.types import PatchType

from kai.k8s.envtest import ControlPlane, Fault, deep_watch_line
from kai.scheduler.decisions import Event
from tests.k8s.sched import DATA, InProcess, PodGroup, options, through_proxy, wait_for
from tests.k8s.test_scheduler import events_for, gpu_pod, http_get, node_of


def create_deep_raycluster(cp: ControlPlane, ns: str, name: str, depth: int, workdir: Path) -> str:
    """A RayCluster whose spec holds JSON nested *depth* lists deep, made with kubectl (Python's JSON
    encoders recurse and stop near 1,000 levels); its uid. Lists, not maps: the API server's field
    manager walks nested maps of a schemaless object in time exponential in their depth (20 levels take
    seconds, 30 time out), while it keeps a list whole; kai's decoders recurse into both alike."""
    deep = "[" * depth + "1" + "]" * depth
    frame = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"headGroupSpec": {}, "x": "DEEP"},
    }
    doc = json.dumps(frame).replace('"DEEP"', deep)
    path = workdir / f"{name}.json"
    path.write_text(doc)
    out = cp.kubectl("create", "-f", str(path), "-o", "jsonpath={.metadata.uid}").stdout
    return out.strip()


def test_an_owner_nested_too_deep_costs_only_its_pods(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """Defect 4: 8 pods owned by RayClusters whose spec nests 600 and 3,000 lists deep (the CRD keeps
    unknown fields) used to kill the 8 pod-grouper workers with RecursionError, and nothing was grouped
    any more. Now each of those pods gets a PodGrouperWarning naming its owner, and a plain pod created
    after them is grouped and bound."""
    scheduler_cluster.kubectl("apply", "-f", str(DATA / "ray-crds.yaml"))
    nodes("deep-0", gpus=8)
    owners = [
        (f"deep-{i}", create_deep_raycluster(scheduler_cluster, ns, f"deep-{i}", d, tmp_path))
        for i, d in enumerate((600, 3000))
    ]
    with InProcess(options(scheduler_cluster)) as run:
        for i in range(8):
            name, uid = owners[i % 2]
            ref = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": name, "uid": uid}
            admin.create(gpu_pod(f"owned-{i}", ns, ownerReferences=[ref]))
        for i in range(8):
            warned = wait_for(
                lambda i=i: [e for e in events_for(admin, ns, f"owned-{i}") if e.reason == "PodGrouperWarning"],
                f"a PodGrouperWarning on owned-{i}",
            )
            assert "nested more than 100 levels deep" in warned[0].message, warned[0].message
            assert f"RayCluster/{owners[i % 2][0]}" in warned[0].message
        admin.create(gpu_pod("plain", ns))
        wait_for(lambda: node_of(admin, ns, "plain"), "a plain pod created after them to be bound")
        assert all(not node_of(admin, ns, f"owned-{i}") for i in range(8))
        assert run.scheduler.grouper is not None and run.scheduler.grouper.errors == 0
        assert run.scheduler.supervisor.healthy() == (True, "ok")


def test_an_unreadable_watch_event_costs_only_its_object(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """Defect 4: a Pod watch event nested deeper than the JSON decoder recurses (hostile bytes injected by
    the proxy into the live watch) used to end the Pod informer's task while ``synced`` stayed set: the
    cycles went on with frozen data, and a pod created afterwards was never bound. Now the event's object
    is reported and left out, and the watch goes on."""
    nodes("unread-0", gpus=8)
    with (
        through_proxy(scheduler_cluster, tmp_path) as (proxy, kubeconfig),
        InProcess(options(scheduler_cluster, kubeconfig=str(kubeconfig))) as run,
    ):
        line = deep_watch_line("Pod", "ghost", ns, 5000)
        proxy.add(Fault("inject", path=r"/api/v1/pods\?", watch=True, line=line, times=1))
        proxy.drop_connections()  # the Pod watch is opened again, and gets the injected line first
        wait_for(lambda: proxy.faults[0].fired == 1, "the injected event to be sent")
        admin.create(gpu_pod("after", ns))
        wait_for(lambda: node_of(admin, ns, "after"), "a pod created after the bad event to be bound")
        inf = run.scheduler.informers["Pod"]
        assert inf.running and inf.live()
        assert run.scheduler.store.get("Pod", (ns, "ghost")) is None
        assert run.scheduler.supervisor.healthy() == (True, "ok")


def test_a_failing_informer_is_restarted_holds_the_cycles_and_fails_healthz(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """Defect 4 and item 2: the Queue informer's watch raises (a bug, played by the test) every time.
    Before, the informer's task died once, ``synced`` stayed set and the cycles went on deciding on a
    frozen Queue list, with /healthz 200. Now the supervisor restarts it with backoff and counts each
    failure, no cycle decides while the kind is not live (a new pod waits), and /healthz fails once it
    keeps failing; when the bug goes, the informer lists again, the pod is bound, health comes back."""
    nodes("crash-0", gpus=8)
    with InProcess(options(scheduler_cluster, metrics_port=0)) as run:
        s = run.scheduler
        port = s.http_port
        inf = s.informers["Queue"]
        real_watch = inf._watch

        async def broken_watch() -> None:
            raise RuntimeError("a bug in the Queue watch")

        run.call(lambda: setattr(inf, "_watch", broken_watch))
        run.call(lambda: inf.resume_watch_from(inf.resource_version))  # the current watch ends: the bug runs
        wait_for(lambda: not s.synced(), "the scheduler to be not synced")
        admin.create(gpu_pod("held", ns))
        _, text = wait_for(lambda: (r := http_get(port, "/healthz"))[0] == 503 and r, "/healthz to fail", timeout=60)
        assert "informer/Queue keeps failing" in text and "a bug in the Queue watch" in text, text
        assert node_of(admin, ns, "held") == ""  # nothing decided while the Queue kind is not live
        assert http_get(port, "/readyz")[0] == 503
        metrics = http_get(port, "/metrics")[1]
        failures = next(
            float(line.split()[-1])
            for line in metrics.splitlines()
            if line.startswith('kai_task_failures_total{task="informer/Queue"}')
        )
        assert failures >= 5, metrics

        s.supervisor.stable_s = 3.0  # a run this long counts as recovered (60 s in production)
        run.call(lambda: setattr(inf, "_watch", real_watch))
        wait_for(lambda: node_of(admin, ns, "held"), "the pod to be bound once the informer runs again", timeout=90)
        wait_for(lambda: http_get(port, "/healthz") == (200, "ok"), "/healthz to recover", timeout=30)
        assert http_get(port, "/readyz") == (200, "ok")


def test_an_event_that_cannot_be_sent_costs_only_itself(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """Defect 4: an event the recorder cannot encode (a message with a lone surrogate, recorded here by
    the test as a bug elsewhere in kai would) used to end the event worker that took it; four such
    events ended all four, and no event was written again. Now each is dropped and counted."""
    nodes("events-0", gpus=8)
    with InProcess(options(scheduler_cluster)) as run:
        s = run.scheduler
        admin.create(gpu_pod("first", ns))
        wait_for(lambda: node_of(admin, ns, "first"), "a first pod to be bound")
        bad = [Event(f"Pod/{ns}/first", "Warning", "Broken", f"bad \ud800 {i}") for i in range(8)]
        assert s.events is not None
        run.call(lambda: s.events.record(bad))
        admin.create(gpu_pod("second", ns))
        wait_for(lambda: node_of(admin, ns, "second"), "a second pod to be bound")
        wait_for(
            lambda: any(e.reason == "Scheduled" for e in events_for(admin, ns, "second")),
            "the second pod's Scheduled event to be written",
        )
        assert not any(e.reason == "Broken" for e in events_for(admin, ns, "first"))
        assert s.supervisor.healthy() == (True, "ok")


def test_assumed_binds_outlive_a_silent_pod_watch(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path
) -> None:
    """Also found: binds were remembered for 30 s while a silent watch was noticed only after 330 s.

    Pod b (PodGroup pg-b, the older job) cannot run yet: its PodGroup wants 2 pods. Pod a waits for a
    node. The Pod watch goes silent (the proxy stalls it, connection up); a one-GPU node arrives and kai
    binds a; then pg-b's minMember drops to 1 (the PodGroup watch still flows), so b waits for the full
    node. Before, a's bind was forgotten after 30 s while the watch still had not shown it: a looked
    pending again, the node free, and kai bound b, the older job, onto the node a holds. Now the bind
    counts until the watch confirms it (and the silent kind is not live after the progress deadline)."""
    admin.create(
        PodGroup.from_dict(
            {"metadata": {"name": "pg-b", "namespace": ns}, "spec": {"queue": "default-queue", "minMember": 2}}
        )
    )
    admin.create(gpu_pod("b", ns, annotations={"pod-group-name": "pg-b"}))
    time.sleep(1.1)  # creation times have one-second resolution: pg-b is the older job
    with (
        through_proxy(scheduler_cluster, tmp_path) as (proxy, kubeconfig),
        InProcess(options(scheduler_cluster, kubeconfig=str(kubeconfig))) as run,
    ):
        admin.create(gpu_pod("a", ns))
        store = run.scheduler.store
        wait_for(
            lambda: (p := store.get("Pod", (ns, "a"))) is not None and "pod-group-name" in p.meta.annotations,
            "pod a grouped and seen",
        )
        proxy.add(Fault("stall", path=r"/api/v1/pods\?", watch=True))
        proxy.drop_connections()
        wait_for(lambda: proxy.faults[0].fired >= 1, "the Pod watch to be stalled")
        node = nodes("silent-0", gpus=1)
        wait_for(lambda: node_of(admin, ns, "a") == node, "pod a to be bound")
        admin.patch(PodGroup, "pg-b", {"spec": {"minMember": 1}}, namespace=ns, patch_type=PatchType.MERGE)
        time.sleep(40)  # past the old 30 s assumption, before the 45 s progress deadline
        assert node_of(admin, ns, "b") == "", "pod b was bound onto the node pod a holds"
        proxy.clear()
        wait_for(lambda: run.scheduler.synced(), "the Pod watch to come back")
        time.sleep(1.5)
        assert node_of(admin, ns, "b") == "" and node_of(admin, ns, "a") == node
