"""``kai install`` against a real API server: idempotent, CRDs Established, and the CRD
schemas accept what KAI users write and reject what is malformed."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import ApiError, Client
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources.apiextensions_v1 import CustomResourceDefinition
from lightkube.resources.core_v1 import Namespace, ServiceAccount
from lightkube.resources.rbac_authorization_v1 import Role, RoleBinding
from lightkube.resources.scheduling_v1 import PriorityClass

from kai.api import constants as C
from kai.api.errors import ManifestError
from kai.api.manifests import parse_document
from kai.k8s.envtest import SCHEDULER_USER, ControlPlane
from kai.k8s.install import CRD_FILES, load_documents
from tests.k8s.conftest import DATA, REPO, run_kai

Queue = create_global_resource("scheduling.run.ai", "v2", "Queue", "queues")
PodGroup = create_namespaced_resource("scheduling.run.ai", "v2alpha2", "PodGroup", "podgroups")
Topology = create_global_resource("kai.scheduler", "v1alpha1", "Topology", "topologies")
SchedulingShard = create_global_resource("kai.scheduler", "v1", "SchedulingShard", "schedulingshards")
KINDS = {"Queue": Queue, "PodGroup": PodGroup, "Topology": Topology, "SchedulingShard": SchedulingShard}
CRD_NAMES = [d["metadata"]["name"] for d in load_documents(CRD_FILES)]


def _flowcontrol(cp: ControlPlane, kind: str, plural: str) -> Any:
    """KIND of flowcontrol.apiserver.k8s.io at the newest version the release serves, where kai install
    must put its FlowSchema: v1beta1 on 1.20 (its only one), v1 on 1.29 and later (the current release)."""
    version = "v1" if cp.binaries.version >= (1, 29) else "v1beta1"
    return create_global_resource("flowcontrol.apiserver.k8s.io", version, kind, plural)


def _versions(client: Client, cp: ControlPlane) -> dict[str, str]:
    """resourceVersion of every object kai install owns, by kind/name."""
    out = {f"crd/{n}": client.get(CustomResourceDefinition, n).metadata.resourceVersion for n in CRD_NAMES}
    out |= {f"pc/{n}": client.get(PriorityClass, n).metadata.resourceVersion for n in C.DEFAULT_PRIORITY_CLASSES}
    out |= {
        f"queue/{n}": client.get(Queue, n).metadata.resourceVersion for n in ("default-parent-queue", "default-queue")
    }
    flowschema = _flowcontrol(cp, "FlowSchema", "flowschemas")
    out["flowschema/kai-scheduler"] = client.get(flowschema, "kai-scheduler").metadata.resourceVersion
    for n in ("kai-scheduler", "kai-resource-reservation"):
        out[f"ns/{n}"] = client.get(Namespace, n).metadata.resourceVersion
    rr = "kai-resource-reservation"
    out["sa/" + rr] = client.get(ServiceAccount, rr, namespace=rr).metadata.resourceVersion
    out["role/" + rr] = client.get(Role, rr, namespace=rr).metadata.resourceVersion
    out["rolebinding/" + rr] = client.get(RoleBinding, rr, namespace=rr).metadata.resourceVersion
    return out


def test_install_twice_changes_nothing(installed: ControlPlane, client: Client) -> None:
    before = _versions(client, installed)
    code, out, err = run_kai("install", "--kubeconfig", str(installed.kubeconfig))
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == len(before) == 16
    assert all(line.endswith(" unchanged") for line in lines), out
    assert _versions(client, installed) == before


def test_install_creates_the_kai_scheduler_namespace(installed: ControlPlane, client: Client) -> None:
    """kai scheduler keeps its Lease there and refuses to start without it (test_scheduler_cli.py)."""
    ns = client.get(Namespace, "kai-scheduler")
    assert ns.metadata.labels["app.kubernetes.io/part-of"] == "kai"
    assert "kai-install" in {m.manager for m in ns.metadata.managedFields or []}
    code, out, _ = run_kai("install", "--kubeconfig", str(installed.kubeconfig))
    assert code == 0 and "namespace/kai-scheduler unchanged" in out.splitlines(), out


def test_kai_s_service_account_gets_kube_scheduler_s_api_priority(installed: ControlPlane, client: Client) -> None:
    """API Priority and Fairness classifies a request made with kai's ServiceAccount token by the
    FlowSchema kai install applied, into workload-high; the API server says so in response headers."""
    import ssl
    import urllib.error
    import urllib.request

    fs = client.get(_flowcontrol(installed, "FlowSchema", "flowschemas"), "kai-scheduler")
    assert fs.spec["priorityLevelConfiguration"]["name"] == "workload-high"
    level = client.get(
        _flowcontrol(installed, "PriorityLevelConfiguration", "prioritylevelconfigurations"), "workload-high"
    )
    ctx = ssl.create_default_context(cafile=str(installed.ca_file))
    token = installed.token(SCHEDULER_USER)
    req = urllib.request.Request(f"{installed.url}/api/v1/nodes", headers={"Authorization": f"Bearer {token}"})
    try:  # RBAC may refuse it (deploy/rbac.yaml is not applied here): APF classifies the request first
        with urllib.request.urlopen(req, context=ctx, timeout=10) as resp:
            headers = resp.headers
    except urllib.error.HTTPError as e:
        headers = e.headers
    assert headers["X-Kubernetes-PF-FlowSchema-UID"] == fs.metadata.uid
    assert headers["X-Kubernetes-PF-PriorityLevel-UID"] == level.metadata.uid


def test_crds_are_established_with_kai_names(installed: ControlPlane, client: Client) -> None:
    got = {}
    for name in CRD_NAMES:
        crd = client.get(CustomResourceDefinition, name)
        conds = {c.type: c.status for c in crd.status.conditions}
        assert conds.get("Established") == "True" and conds.get("NamesAccepted") == "True", (name, conds)
        got[crd.spec.names.kind] = (crd.spec.group, [v.name for v in crd.spec.versions], crd.spec.scope)
    assert got == {
        "Queue": ("scheduling.run.ai", ["v2"], "Cluster"),
        "PodGroup": ("scheduling.run.ai", ["v2alpha2"], "Namespaced"),
        "Topology": ("kai.scheduler", ["v1alpha1"], "Cluster"),
        "SchedulingShard": ("kai.scheduler", ["v1"], "Cluster"),
    }
    # shortName pg works through discovery, as KAI users type it.
    assert installed.kubectl("get", "pg", "-A").returncode == 0


def test_priority_classes_and_default_queues(installed: ControlPlane, client: Client) -> None:
    values = {n: client.get(PriorityClass, n).value for n in C.DEFAULT_PRIORITY_CLASSES}
    assert values == {"train": 50, "build-preemptible": 75, "build": 100, "inference": 125}
    parent, leaf = client.get(Queue, "default-parent-queue"), client.get(Queue, C.DEFAULT_QUEUE)
    assert "parentQueue" not in parent.spec
    assert leaf.spec["parentQueue"] == "default-parent-queue"
    for q in (parent, leaf):
        for r in ("gpu", "cpu", "memory"):
            assert q.spec["resources"][r] == {"quota": 0, "limit": -1, "overQuotaWeight": 1}


def test_walkthrough_queues_and_a_podgroup_are_accepted(installed: ControlPlane, client: Client) -> None:
    # kubectl, as the walkthrough's user does; the files are copies of shared/reference/walkthrough.
    res = installed.kubectl("apply", "-f", str(DATA / "00-queues.yaml"), "-f", str(DATA / "podgroup.yaml"))
    assert "queue.scheduling.run.ai/team-a" in res.stdout
    team_a = client.get(Queue, "team-a")
    assert team_a.spec["parentQueue"] == "department-1"
    assert team_a.spec["resources"]["gpu"] == {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    sent = yaml.safe_load((DATA / "podgroup.yaml").read_text())
    pg = client.get(PodGroup, sent["metadata"]["name"], namespace="default")
    assert pg.spec == sent["spec"]  # nothing pruned: the schema knows every field


def _dry_run_create(client: Client, doc: dict[str, Any]) -> dict[str, Any]:
    """Create DOC with dryRun=All under a fresh name (so objects other tests made don't collide). The
    name is made a valid Kubernetes name: the scenarios transcribed from KAI's Go tests keep its names
    (``reclaimer_queue``), which only the engine reads; the schema, not the name, is what this checks."""
    kind = KINDS[doc["kind"]]
    ns = doc["metadata"].get("namespace", "default") if doc["kind"] == "PodGroup" else None
    name = f"{doc['metadata']['name'].lower().replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    body = {**doc, "metadata": {**doc["metadata"], "name": name, **({"namespace": ns} if ns else {})}}
    obj = client.create(kind.from_dict(body), namespace=ns, dry_run=True)
    return obj.to_dict()


def _crd_documents_in_repo() -> list[tuple[str, dict[str, Any]]]:
    """Every Queue/PodGroup/Topology/SchedulingShard in the scenario and example manifests that
    kai's own parser accepts (a scenario about bad input may hold one it rejects on purpose)."""
    out = []
    for path in sorted([*REPO.glob("tests/scenarios/**/*.yaml"), *REPO.glob("examples/**/*.yaml")]):
        for doc in yaml.safe_load_all(path.read_text()):
            if not (isinstance(doc, dict) and doc.get("kind") in KINDS):
                continue
            try:
                parse_document(doc, str(path))
            except ManifestError:
                continue
            out.append((str(path.relative_to(REPO)), doc))
    return out


def test_schemas_keep_every_field_the_engine_reads(installed: ControlPlane, client: Client) -> None:
    """The scenarios are manifests kai's engine accepts; the API server must accept them too and
    prune nothing (a 1.20 server silently drops fields a structural schema does not declare)."""
    docs = _crd_documents_in_repo()
    assert len(docs) > 100  # the sweep really covers the scenario suite
    namespaces = {d["metadata"].get("namespace", "default") for _, d in docs if d["kind"] == "PodGroup"}
    existing = {n.metadata.name for n in client.list(Namespace)}
    for ns in namespaces - existing:
        client.create(Namespace.from_dict({"metadata": {"name": ns}}))
    problems = []
    for src, doc in docs:
        try:
            got = _dry_run_create(client, doc)
        except ApiError as e:
            problems.append(f"{src}: {doc['kind']} {doc['metadata']['name']} rejected: {e.status.message}")
            continue
        if got.get("spec", {}) != doc.get("spec", {}):
            diff = json.dumps({"sent": doc.get("spec"), "stored": got.get("spec")})
            problems.append(f"{src}: {doc['kind']} {doc['metadata']['name']} changed by the schema: {diff}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize(
    ("kind", "spec", "field"),
    [
        ("Queue", {"resources": {"gpu": {"quota": "lots"}}}, "spec.resources.gpu.quota"),
        ("Queue", {"priority": "high"}, "spec.priority"),
        ("Queue", {"parentQueue": 7}, "spec.parentQueue"),
        ("PodGroup", {"minMember": -1, "queue": "q"}, "spec.minMember"),
        ("PodGroup", {"preemptibility": "sometimes"}, "spec.preemptibility"),
        ("PodGroup", {"subGroups": [{"minMember": 1}]}, "spec.subGroups.name"),
        ("Topology", {"levels": []}, "spec.levels"),
        ("SchedulingShard", {"placementStrategy": {"gpu": "scatter"}}, "spec.placementStrategy.gpu"),
    ],
)
def test_schema_rejects_malformed_objects(
    installed: ControlPlane, client: Client, kind: str, spec: dict, field: str
) -> None:
    api_version = {"Queue": "scheduling.run.ai/v2", "PodGroup": "scheduling.run.ai/v2alpha2"}.get(kind)
    doc = {
        "apiVersion": api_version or ("kai.scheduler/v1alpha1" if kind == "Topology" else "kai.scheduler/v1"),
        "kind": kind,
        "metadata": {"name": f"bad-{uuid.uuid4().hex[:6]}"},
        "spec": spec,
    }
    with pytest.raises(ApiError) as e:
        _dry_run_create(client, doc)
    assert e.value.status.code == 422
    # 1.20 names a list item's field spec.subGroups.name, later releases spec.subGroups[0].name
    assert field in re.sub(r"\[\d+\]", "", e.value.status.message), e.value.status.message


def test_invalid_queue_file_is_rejected_by_kubectl(installed: ControlPlane, tmp_path: Path) -> None:
    bad = tmp_path / "bad-queue.yaml"
    bad.write_text(
        "apiVersion: scheduling.run.ai/v2\nkind: Queue\nmetadata: {name: broken}\n"
        "spec:\n  resources:\n    gpu: {quota: eight, limit: -1}\n"
    )
    # kubectl checks against the schema the API server publishes (once the OpenAPI document
    # has caught up with the CRD), else the API server refuses it; either names the field ...
    res = installed.kubectl("apply", "-f", str(bad), check=False)
    assert res.returncode != 0
    assert "spec.resources.gpu.quota" in res.stderr, res.stderr
    # ... and without kubectl's check, the API server refuses it itself.
    res = installed.kubectl("apply", "--validate=false", "-f", str(bad), check=False)
    assert res.returncode != 0
    assert "spec.resources.gpu.quota" in res.stderr and "Invalid value" in res.stderr, res.stderr
    assert installed.kubectl("get", "queue", "broken", check=False).returncode != 0


def test_install_reports_an_unreachable_api_server(tmp_path: Path) -> None:
    from kai.k8s.envtest import free_port

    cfg = tmp_path / "kubeconfig"
    cfg.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"https://127.0.0.1:{free_port()}"}}],
                "users": [{"name": "u", "user": {"token": "x"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    code, _out, err = run_kai("install", "--kubeconfig", str(cfg), "--timeout", "2")
    assert code == 1
    assert "cannot reach the API server" in err
