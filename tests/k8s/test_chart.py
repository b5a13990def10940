"""deploy/chart, kai's Helm chart: rendered by a real Helm (helm.sh/helm/v4, built by
scripts/helm/provision.sh), and installed on a real API server where kai then schedules as the
chart's ServiceAccount."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client, KubeConfig
from lightkube.generic_resource import create_global_resource
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import ServiceAccount
from lightkube.resources.rbac_authorization_v1 import ClusterRole

from kai.k8s.envtest import Binaries, ControlPlane
from kai.k8s.install import load_documents
from tests.k8s.conftest import REPO
from tests.k8s.sched import InProcess, Queue, options, wait_for
from tests.k8s.test_scheduler import bound, gpu_pod

CHART = REPO / "deploy" / "chart"
PROVISION = REPO / "scripts" / "helm" / "provision.sh"
SchedulingShard = create_global_resource("kai.scheduler", "v1", "SchedulingShard", "schedulingshards")


@pytest.fixture(scope="session")
def helm() -> Path:
    res = subprocess.run(["bash", str(PROVISION), "--quiet"], capture_output=True, text=True, timeout=3600)
    if res.returncode != 0:
        pytest.fail(f"{PROVISION} failed:\n{res.stdout}\n{res.stderr}", pytrace=False)
    return Path(res.stdout.strip().splitlines()[-1].removeprefix("helm: "))


def template(helm: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = [str(helm), "template", "kai", str(CHART), "--namespace", "kai-scheduler", *args]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def objects(text: str) -> dict[tuple[str, str], dict[str, Any]]:
    return {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text) if d}


def kustomization() -> dict[tuple[str, str], dict[str, Any]]:
    files = yaml.safe_load((REPO / "deploy" / "kustomization.yaml").read_text())["resources"]
    return {(d["kind"], d["metadata"]["name"]): d for d in load_documents(files, REPO / "deploy")}


def test_defaults_render_what_the_kustomization_installs(helm: Path) -> None:
    """Every object of deploy/ but the namespace (Helm's --create-namespace makes it), with the same
    content: the CRDs, RBAC rules and PriorityClasses are deploy/'s files, the rest is templated."""
    got = objects(template(helm, "--include-crds").stdout)
    want = kustomization()
    assert set(want) - set(got) == {("Namespace", "kai-scheduler")}
    same = ("CustomResourceDefinition", "ClusterRole", "PriorityClass", "Service", "RoleBinding")
    same += ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")  # in the release's namespace: below
    same += ("NetworkPolicy",)
    for key in [k for k in want if k[0] in same]:
        strip = {"metadata", "status"}
        assert {k: v for k, v in got[key].items() if k not in strip} == {
            k: v for k, v in want[key].items() if k not in strip
        }, key
    for name in ("default-parent-queue", "default-queue"):
        assert got[("Queue", name)]["spec"] == want[("Queue", name)]["spec"]
    pod, kpod = (d[("Deployment", "kai-scheduler")]["spec"]["template"]["spec"] for d in (got, want))
    (c,), (kc,) = pod["containers"], kpod["containers"]
    assert c["image"] == kc["image"] == "kai:0.1.0"
    for field in ("command", "env", "ports", "livenessProbe", "readinessProbe", "resources", "securityContext"):
        assert c[field] == kc[field], field
    assert (pod["securityContext"], pod["volumes"], pod["priorityClassName"]) == (
        kpod["securityContext"],
        kpod["volumes"],
        kpod["priorityClassName"],
    )
    # a rolling update that cannot deadlock, replicas spread where they can be (docs/cluster.md)
    deployments = [d[("Deployment", "kai-scheduler")] for d in (got, want)]
    assert deployments[0]["spec"]["strategy"] == deployments[1]["spec"]["strategy"]
    assert pod["affinity"] == kpod["affinity"]
    assert ("PodDisruptionBudget", "kai-scheduler") not in got  # one replica by default: a budget would block drains
    assert got[("SchedulingShard", "default")]["spec"]["placementStrategy"] == {"gpu": "binpack", "cpu": "binpack"}


def test_values_do_what_kai_s_chart_says(helm: Path) -> None:
    sets = {
        "global.registry": "registry.example/ml",
        "global.tag": "0.1.0-rc1",
        "global.leaderElection": "false",
        "global.nodeSelector.pool": "system",
        "operator.replicaCount": "2",
        "scheduler.placementStrategy": "spread",
        "scheduler.args.schedule-period": "2",
        "defaultQueue.childName": "team-a",
        "defaultPriorityClasses.enabled": "false",
    }
    args = [a for k, v in sets.items() for a in ("--set-string" if k.endswith("period") else "--set", f"{k}={v}")]
    got = objects(template(helm, *args, "--namespace", "ml-system").stdout)
    dep = got[("Deployment", "kai-scheduler")]
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "registry.example/ml/kai:0.1.0-rc1"
    assert dep["spec"]["replicas"] == 2 and dep["metadata"]["namespace"] == "ml-system"
    assert dep["spec"]["template"]["spec"]["nodeSelector"] == {"pool": "system"}
    assert {"--no-leader-elect", "--leader-elect-namespace=ml-system", "--schedule-period=2"} <= set(c["args"])
    assert got[("SchedulingShard", "default")]["spec"]["placementStrategy"] == {"gpu": "spread", "cpu": "spread"}
    assert got[("Queue", "team-a")]["spec"]["parentQueue"] == "default-parent-queue"
    assert not [k for k in got if k[0] == "PriorityClass"]
    binding = got[("ClusterRoleBinding", "kai-scheduler")]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "kai-scheduler", "namespace": "ml-system"}]
    assert got[("Role", "kai-scheduler-leader-election")]["metadata"]["namespace"] == "ml-system"
    # the webhooks call the Service beside the scheduler, and never see the scheduler's own namespace
    assert got[("Service", "admission")]["metadata"]["namespace"] == "ml-system"
    assert "--webhook-listen=0.0.0.0:9443" in c["args"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        (conf,) = [d for k, d in got.items() if k[0] == kind]
        for hook in conf["webhooks"]:
            assert hook["clientConfig"]["service"]["namespace"] == "ml-system"
            for e in (hook.get("namespaceSelector") or {}).get("matchExpressions", []):
                assert "ml-system" in e["values"] and "kai-scheduler" not in e["values"], e
    # two replicas: a budget keeps one through drains (policy/v1, as `helm template` assumes by default)
    assert got[("PodDisruptionBudget", "kai-scheduler")]["spec"]["minAvailable"] == 1
    # the reservation pods' namespace keeps KAI's fixed name (the binder names it)
    assert got[("ServiceAccount", "kai-resource-reservation")]["metadata"]["namespace"] == "kai-resource-reservation"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("prometheus.enabled=true", "prometheus.enabled: kai's chart does not deploy Prometheus"),
        ("scheduler.placementStrategy=fgd", 'scheduler.placementStrategy: "fgd" is not binpack or spread'),
    ],
)
def test_values_kai_cannot_honour_are_refused(helm: Path, value: str, message: str) -> None:
    res = template(helm, "--set", value, check=False)
    assert res.returncode != 0 and message in res.stderr, res.stderr


@pytest.fixture(scope="module")
def released(binaries: Binaries, helm: Path) -> Iterator[ControlPlane]:
    """A fresh control plane with the chart installed by `helm install` (CRDs first, then the rest,
    rendered against what this API server serves)."""
    with ControlPlane(binaries) as cp:
        install = [str(helm), "install", "kai", str(CHART), "--namespace", "kai-scheduler", "--create-namespace"]
        res = subprocess.run(
            [*install, f"--kubeconfig={cp.kubeconfig}"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert res.returncode == 0, res.stderr
        # The chart registers kai's admission webhooks at the Service of the scheduler Deployment, which no
        # kubelet runs here: with failurePolicy Fail they would refuse every pod the tests below create.
        # test_helm_install_on_a_real_api_server checks them first (cp.webhooks), then they go.
        names = (
            "mutatingwebhookconfiguration/mutating-kai-admission",
            "validatingwebhookconfiguration/validating-kai-admission",
        )
        cp.webhooks = cp.kubectl("get", *names, "-o", "name").stdout.split()  # type: ignore[attr-defined]
        cp.kubectl("delete", *names)
        yield cp


def test_helm_install_on_a_real_api_server(released: ControlPlane) -> None:
    admin = Client(KubeConfig.from_file(str(released.kubeconfig)))
    dep = admin.get(Deployment, "kai-scheduler", namespace="kai-scheduler")
    assert dep.spec.template.spec.containers[0].image == "kai:0.1.0"
    rbac = {d["kind"]: d for d in load_documents(["rbac.yaml"], REPO / "deploy")}
    assert [r.to_dict() for r in admin.get(ClusterRole, "kai-scheduler").rules] == rbac["ClusterRole"]["rules"]
    assert admin.get(SchedulingShard, "default").spec["placementStrategy"] == {"gpu": "binpack", "cpu": "binpack"}
    assert admin.get(Queue, "default-queue").spec["parentQueue"] == "default-parent-queue"
    assert sorted(released.webhooks) == [  # type: ignore[attr-defined]
        "mutatingwebhookconfiguration.admissionregistration.k8s.io/mutating-kai-admission",
        "validatingwebhookconfiguration.admissionregistration.k8s.io/validating-kai-admission",
    ]
    assert admin.get(ServiceAccount, "kai-resource-reservation", namespace="kai-resource-reservation")
    # The FlowSchema at the newest flowcontrol version served: v1 on the current release, v1beta1 on 1.20.
    version = "v1" if released.binaries.version >= (1, 29) else "v1beta1"
    flowschema = create_global_resource("flowcontrol.apiserver.k8s.io", version, "FlowSchema", "flowschemas")
    assert admin.get(flowschema, "kai-scheduler").spec["priorityLevelConfiguration"]["name"] == "workload-high"
    admin.close()


def test_kai_schedules_with_the_chart_s_rbac(released: ControlPlane, tmp_path: Path) -> None:
    """kai scheduler as the chart's ServiceAccount (the control plane's scheduler identity is
    kai-scheduler/kai-scheduler): the chart's RBAC lets it lead, group and bind."""
    from kai.k8s.envtest import create_node

    admin = Client(KubeConfig.from_file(str(released.kubeconfig)), field_manager="kai-tests")
    create_node(admin, "chart-0", gpus=1)
    admin.create(gpu_pod("via-chart", "default"))
    with InProcess(options(released)):
        wait_for(lambda: bound(admin, "default").get("via-chart") == "chart-0", "the pod bound by kai")
    admin.close()
