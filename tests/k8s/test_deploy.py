"""deploy/ as a kustomization on a fresh API server, and its RBAC: enough for every call the
scheduler makes, and nothing beyond."""

from __future__ import annotations

import datetime as _dt
import json
import re
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from lightkube import ApiError, Client, KubeConfig
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace, Pod, Secret
from lightkube.resources.events_v1 import Event
from lightkube.types import PatchType

from kai.k8s.envtest import SCHEDULER_USER, Binaries, ControlPlane, create_node
from kai.k8s.install import CRD_FILES, OBJECT_FILES, deploy_dir, load_documents
from tests.k8s.conftest import REPO, run_kai

Queue = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")
PodGroup = create_namespaced_resource("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")
DEPLOY = REPO / "deploy"
KAI_NS = "kai-scheduler"


@pytest.fixture(scope="module")
def fresh(binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane of its own: the kustomization is tested on a cluster without kai's CRDs."""
    with ControlPlane(binaries) as cp:
        yield cp


@pytest.fixture(scope="module")
def applied(fresh: ControlPlane) -> ControlPlane:
    """deploy/ applied as docs/cluster.md says: the CRDs, wait for them, then everything."""
    fresh.kubectl("apply", "-k", str(DEPLOY / "crds"))
    fresh.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "-l", "app.kubernetes.io/part-of=kai")
    fresh.kubectl("apply", "-k", str(DEPLOY))
    # The kustomization registers kai's admission webhooks at the Service of the scheduler Deployment, which
    # no kubelet runs here: with failurePolicy Fail they would refuse every pod the tests below create.
    # test_kubectl_apply_k_installs_everything checks them first; then they go.
    fresh.kubectl(
        "get",
        "mutatingwebhookconfiguration/mutating-kai-admission",
        "validatingwebhookconfiguration/validating-kai-admission",
    )
    webhooks = {
        kind: json.loads(fresh.kubectl("get", f"{kind}/{name}", "-o", "json").stdout)
        for kind, name in (
            ("mutatingwebhookconfiguration", "mutating-kai-admission"),
            ("validatingwebhookconfiguration", "validating-kai-admission"),
        )
    }
    _drop_webhooks(fresh)
    fresh.webhooks = webhooks  # type: ignore[attr-defined]
    return fresh


def _drop_webhooks(cp: ControlPlane) -> None:
    cp.kubectl(
        "delete",
        "mutatingwebhookconfiguration/mutating-kai-admission",
        "validatingwebhookconfiguration/validating-kai-admission",
    )


def test_kubectl_apply_k_installs_everything(applied: ControlPlane) -> None:
    got = applied.kubectl(
        "get",
        "ns/kai-scheduler",
        "sa/kai-scheduler",
        "deploy/kai-scheduler",
        "role/kai-scheduler-leader-election",
        "clusterrole/kai-scheduler",
        "clusterrolebinding/kai-scheduler",
        "queue/default-queue",
        "queue/default-parent-queue",
        "pc/train",
        "pc/build-preemptible",
        "pc/build",
        "pc/inference",
        "networkpolicy/kai-scheduler",
        "svc/admission",
        "role/kai-scheduler-webhook-certificate",
        "-n",
        KAI_NS,
        "-o",
        "name",
    ).stdout.split()
    assert len(got) == 15
    reservation = applied.kubectl(
        "get",
        "ns/kai-resource-reservation",
        "sa/kai-resource-reservation",
        "role/kai-resource-reservation",
        "rolebinding/kai-resource-reservation",
        "role/kai-scheduler-resource-reservation",
        "-n",
        "kai-resource-reservation",
        "-o",
        "name",
    ).stdout.split()
    assert len(reservation) == 5
    # the webhooks point at the Service, never see system pods, kai's own or its reservation pods
    hooks = {w["name"]: w for conf in applied.webhooks.values() for w in conf["webhooks"]}  # type: ignore[attr-defined]
    assert hooks["admission.kai-scheduler.svc"]["clientConfig"]["service"]["name"] == "admission"
    for name in ("admission.kai-scheduler.svc", "podgroups.admission.kai-scheduler.svc"):
        (expr,) = hooks[name]["namespaceSelector"]["matchExpressions"]
        assert expr["operator"] == "NotIn"
        assert set(expr["values"]) == {"kube-system", "kai-scheduler", "kai-resource-reservation"}
    assert {w["timeoutSeconds"] for w in hooks.values()} == {5}
    again = applied.kubectl("apply", "-k", str(DEPLOY)).stdout.splitlines()
    _drop_webhooks(applied)
    rest = [line for line in again if "webhookconfiguration" not in line]  # dropped by the fixture: made again
    assert rest and all(line.endswith(" unchanged") for line in rest), again


def test_kai_install_takes_over_objects_kubectl_created(applied: ControlPlane) -> None:
    """Force-apply: no field-ownership conflict with kubectl's earlier apply; then it is a no-op."""
    code, out, err = run_kai("install", "--kubeconfig", str(applied.kubeconfig))
    assert code == 0, err
    created = [line for line in out.splitlines() if line.endswith(" created")]
    # every object was already there from kubectl, but the FlowSchema, which the kustomization leaves
    # out (its API version depends on the cluster's Kubernetes release)
    assert created == ["flowschema/kai-scheduler created"], out
    code, out, _ = run_kai("install", "--kubeconfig", str(applied.kubeconfig))
    assert code == 0 and all(line.endswith(" unchanged") for line in out.splitlines()), out


def test_the_deployment_can_roll_and_is_hardened(applied: ControlPlane) -> None:
    """Two replicas rolled one at a time, never fewer ready than two (a new pod is ready as a synced
    standby: leadership is not readiness); the probes; seccomp RuntimeDefault; and only the metrics
    port open, to namespaces that scrape."""
    dep = json.loads(applied.kubectl("get", "deploy/kai-scheduler", "-n", KAI_NS, "-o", "json").stdout)
    spec = dep["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    (c,) = pod["containers"]
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz" and c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["securityContext"]["allowPrivilegeEscalation"] is False
    netpol = json.loads(applied.kubectl("get", "networkpolicy/kai-scheduler", "-n", KAI_NS, "-o", "json").stdout)
    assert netpol["spec"]["podSelector"]["matchLabels"] == spec["selector"]["matchLabels"]
    (rule,) = netpol["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8080}]


def test_kai_pdb_keeps_a_replica(applied: ControlPlane, tmp_path: Path) -> None:
    """deploy/pdb.yaml is policy/v1 (1.21+); on an API server that serves only policy/v1beta1 (1.20)
    the same spec is applied at that version. It selects the Deployment's pods and keeps one."""
    doc = yaml.safe_load((DEPLOY / "pdb.yaml").read_text())
    served = applied.kubectl("api-versions").stdout.split()
    if "policy/v1" not in served:
        doc["apiVersion"] = "policy/v1beta1"
    path = tmp_path / "pdb.yaml"
    path.write_text(yaml.safe_dump(doc))
    applied.kubectl("apply", "-f", str(path))
    pdb = json.loads(applied.kubectl("get", "pdb/kai-scheduler", "-n", KAI_NS, "-o", "json").stdout)
    dep = json.loads(applied.kubectl("get", "deploy/kai-scheduler", "-n", KAI_NS, "-o", "json").stdout)
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["minAvailable"] == 1 < dep["spec"]["replicas"]


def test_kai_install_reads_the_same_files_as_the_kustomization() -> None:
    kust = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())["resources"]
    assert set(CRD_FILES) | set(OBJECT_FILES) <= set(kust)
    assert sorted(p.name for p in (DEPLOY / "crds").glob("*_*.yaml")) == sorted(f.split("/")[1] for f in CRD_FILES)
    assert deploy_dir().resolve() == DEPLOY.resolve()  # the package's copy is deploy/ itself
    kinds = [d["kind"] for d in load_documents(OBJECT_FILES)]
    reservation = ["Namespace", "ServiceAccount", "Role", "RoleBinding"]
    assert kinds == ["Namespace", *reservation, *["PriorityClass"] * 4, *["Queue"] * 2]


def test_kai_install_restores_its_fields_and_leaves_others(applied: ControlPlane) -> None:
    admin = Client(KubeConfig.from_file(str(applied.kubeconfig)))
    edit = {"spec": {"priority": 7, "resources": {"gpu": {"overQuotaWeight": 5}}}}
    admin.patch(Queue, "default-queue", edit, patch_type=PatchType.MERGE)
    code, out, err = run_kai("install", "--kubeconfig", str(applied.kubeconfig))
    assert code == 0, err
    assert "queue/default-queue configured" in out.splitlines()
    spec = admin.get(Queue, "default-queue").spec
    assert spec["resources"]["gpu"]["overQuotaWeight"] == 1  # kai's file sets it: put back
    assert spec["priority"] == 7  # not in kai's file: the user's edit stays
    admin.close()


def _post(cp: ControlPlane, path: str, body: dict) -> int:
    """POST BODY to PATH as kai's ServiceAccount, with no client library in between: the HTTP status."""
    ctx = ssl.create_default_context(cafile=str(cp.ca_file))
    ctx.check_hostname = False  # the self-signed cert names "localhost", we dial 127.0.0.1
    req = urllib.request.Request(
        cp.url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {cp.token(SCHEDULER_USER)}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as e:
        raise AssertionError(f"POST {path}: {e.code} {e.read().decode()}") from None


def _sched(cp: ControlPlane) -> Client:
    return Client(KubeConfig.from_file(str(cp.scheduler_kubeconfig)), field_manager="kai-scheduler")


def test_scheduler_identity_can_do_its_job(applied: ControlPlane) -> None:
    """Every kind of write `kai scheduler` makes, done as the kai-scheduler ServiceAccount."""
    admin = Client(KubeConfig.from_file(str(applied.kubeconfig)))
    sched = _sched(applied)
    ns = f"rbac-{uuid.uuid4().hex[:6]}"
    admin.create(Namespace.from_dict({"metadata": {"name": ns}}))
    node = f"node-{uuid.uuid4().hex[:6]}"
    create_node(admin, node, gpus=2)
    for name in ("p0", "victim"):
        pod = {
            "metadata": {"name": name},
            "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "c", "image": "x"}]},
        }
        admin.create(Pod.from_dict(pod), namespace=ns)
    pg = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "pg-p0", "namespace": ns},
        "spec": {"minMember": 1, "queue": "default-queue"},
    }

    # Store: list + watch of what the engine reads.
    assert {n.metadata.name for n in sched.list(Pod, namespace="*")} >= {"p0", "victim"}
    # Pod-grouper: create the PodGroup, label the pod.
    sched.create(PodGroup.from_dict(pg), namespace=ns)
    sched.patch(Pod, "p0", {"metadata": {"annotations": {"pod-group-name": "pg-p0"}}}, namespace=ns)
    # Binder: pods/binding as a plain POST (the typed clients choke on the Status answer).
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": "p0"},
        "target": {"kind": "Node", "name": node},
    }
    assert _post(applied, f"/api/v1/namespaces/{ns}/pods/p0/binding", binding) == 201
    assert admin.get(Pod, "p0", namespace=ns).spec.nodeName == node
    # Condition and statuses through status subresources.
    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    sched.patch(Pod.Status, "victim", {"status": {"conditions": [cond]}}, namespace=ns, patch_type=PatchType.MERGE)
    sched.patch(PodGroup.Status, "pg-p0", {"status": {"phase": "Running"}}, namespace=ns, patch_type=PatchType.MERGE)
    sched.patch(
        Queue.Status, "default-queue", {"status": {"allocated": {"nvidia.com/gpu": "1"}}}, patch_type=PatchType.MERGE
    )
    # Events (events.k8s.io/v1), the Lease of leader election, and evicting by deletion.
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1", "namespace": ns},
        "eventTime": now,
        "reportingController": "kai-scheduler",
        "reportingInstance": "kai-0",
        "action": "Binding",
        "reason": "Scheduled",
        "note": "bound",
        "type": "Normal",
        "regarding": {"kind": "Pod", "name": "p0", "namespace": ns},
    }
    sched.create(Event.from_dict(event), namespace=ns)
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "kai-scheduler"},
        "spec": {"holderIdentity": "kai-0", "leaseDurationSeconds": 15},
    }
    sched.create(Lease.from_dict(lease), namespace=KAI_NS)
    sched.delete(Pod, "victim", namespace=ns)
    admin.close()
    sched.close()


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        (verb, res)
        for res in (
            "nodes",
            "pods",
            "queues.scheduling.run.ai",
            "podgroups.scheduling.run.ai",
            "topologies.kai.scheduler",
            "schedulingshards.kai.scheduler",
            "priorityclasses.scheduling.k8s.io",
            "poddisruptionbudgets.policy",
            "namespaces",
            "persistentvolumes",
            "persistentvolumeclaims",
            "storageclasses.storage.k8s.io",
            "csinodes.storage.k8s.io",
        )
        for verb in ("list", "watch")
    ]
    # volume binding before the pod (kube-scheduler's VolumeBinding): claimRef / selected-node, then wait
    + [(verb, res) for res in ("persistentvolumes", "persistentvolumeclaims") for verb in ("get", "patch")]
    # can-i reads "pods/eviction" as the pod named eviction: subresources take a flag.
    + [("create", "pods --subresource=eviction"), ("create", "events"), ("create", "events.events.k8s.io")]
    # GPU sharing: a fraction pod read whole, its ConfigMaps made and updated, reservation pods made and
    # deleted in their namespace, the webhook certificate's Secret, the caBundle of kai's two configurations
    + [("get", "pods"), ("create", "configmaps"), ("patch", "configmaps")]
    + [("create", "pods -n kai-resource-reservation"), ("delete", "pods -n kai-resource-reservation")]
    + [("create", "secrets -n kai-scheduler"), ("get", "secrets/kai-admission-webhook-tls-secret -n kai-scheduler")]
    + [("update", "secrets/kai-admission-webhook-tls-secret -n kai-scheduler")]
    + [("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/mutating-kai-admission")]
    + [("get", "validatingwebhookconfigurations.admissionregistration.k8s.io/validating-kai-admission")],
)
def test_scheduler_identity_may_read_and_evict(applied: ControlPlane, verb: str, resource: str) -> None:
    where = [] if " -n " in resource else ["-n", "default"]
    res = applied.kubectl(
        "auth", "can-i", verb, *resource.split(), *where, kubeconfig=applied.scheduler_kubeconfig, check=False
    )
    assert res.stdout.strip() == "yes", (verb, resource, res.stdout, res.stderr)


@pytest.mark.parametrize(
    ("verb", "resource"),
    [
        ("create", "pods"),  # the scheduler never makes pods
        ("get", "secrets"),
        ("list", "configmaps"),
        ("update", "nodes"),
        ("delete", "queues.scheduling.run.ai"),
        ("update", "queues.scheduling.run.ai"),  # spec is the user's; only /status is ours
        ("create", "leases.coordination.k8s.io"),  # outside kai-scheduler's namespace (checked in default)
        ("create", "clusterroles.rbac.authorization.k8s.io"),
        ("create", "pods --subresource=exec"),
        ("update", "pods --subresource=status"),  # patch only
        ("get", "nodes"),  # the Store lists and watches; nothing is read one by one
        ("update", "podgroups.scheduling.run.ai"),  # created and patched, never replaced
        ("patch", "events.events.k8s.io"),  # events are created, never updated
        ("get", "configmaps"),  # a fraction pod's ConfigMaps are written, never read
        ("get", "secrets/kai-admission-webhook-tls-secret"),  # only in kai-scheduler (checked in default)
        ("get", "secrets/other -n kai-scheduler"),  # only the webhook certificate's Secret
        ("list", "secrets -n kai-scheduler"),
        ("patch", "mutatingwebhookconfigurations.admissionregistration.k8s.io/someone-elses"),
        ("create", "validatingwebhookconfigurations.admissionregistration.k8s.io"),
        ("update", "pods -n kai-resource-reservation"),
    ],
)
def test_scheduler_identity_has_nothing_more(applied: ControlPlane, verb: str, resource: str) -> None:
    where = [] if " -n " in resource else ["-n", "default"]
    res = applied.kubectl(
        "auth", "can-i", verb, *resource.split(), *where, kubeconfig=applied.scheduler_kubeconfig, check=False
    )
    assert res.stdout.strip() == "no", (verb, resource, res.stdout, res.stderr)


def test_scheduler_identity_cannot_read_secrets(applied: ControlPlane) -> None:
    with pytest.raises(ApiError) as e:
        list(_sched(applied).list(Secret, namespace=KAI_NS))
    assert e.value.status.code == 403


@pytest.mark.parametrize(
    ("verb", "resource", "answer"),
    [
        ("get", "pods", "yes"),  # its own pod, in its namespace
        ("patch", "pods", "yes"),  # the run.ai/reserve_for_gpu_index annotation
        ("create", "pods", "no"),
        ("delete", "pods", "no"),
        ("list", "secrets", "no"),
    ],
)
def test_the_reservation_pods_identity_may_annotate_pods_of_its_namespace_only(
    applied: ControlPlane, verb: str, resource: str, answer: str
) -> None:
    who = "--as=system:serviceaccount:kai-resource-reservation:kai-resource-reservation"
    res = applied.kubectl("auth", "can-i", verb, resource, "-n", "kai-resource-reservation", who, check=False)
    assert res.stdout.strip() == answer, (verb, resource, res.stdout, res.stderr)
    elsewhere = applied.kubectl("auth", "can-i", verb, resource, "-n", "default", who, check=False)
    assert elsewhere.stdout.strip() == "no"


@pytest.mark.k8s_min("1.29")
def test_flowschema_file_applies_as_written_on_a_current_release(fresh: ControlPlane) -> None:
    """deploy/flowschema.yaml says flowcontrol v1 (served from 1.29 on), so `kubectl apply -f` of the
    file as shipped works on a current cluster; on older ones `kai install` or the chart pick the version."""
    res = fresh.kubectl("apply", "--dry-run=server", "-f", str(DEPLOY / "flowschema.yaml"))  # raises if refused
    # created, or configured when another test of the module installed it already (at the same version)
    assert re.search(r"flowschema.flowcontrol.apiserver.k8s.io/kai-scheduler \w+ \(server dry run\)", res.stdout), (
        res.stdout
    )
