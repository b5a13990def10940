"""Parsing the pod rules and the storage kinds (kai.api.podspec, kai.api.storage): what they mean, and bad
input as an error naming the object and the field (issue 16's Bad input: an unknown selector operator, maxSkew
0, a hostPort out of range, ...)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from kai.api.errors import ManifestError
from kai.api.manifests import load_manifests
from kai.api.objects import parse_pod
from kai.api.podspec import HostPort
from kai.api.selectors import SelectorRequirement
from kai.api.storage import parse_csinode, parse_persistent_volume_claim, parse_storage_class
from tests.conftest import run_sim

TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}


def _pod(spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    base = {"containers": [{"name": "c"}]}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": labels or {}},
        "spec": {**base, **spec},
    }


def _anti(term: dict[str, Any]) -> dict[str, Any]:
    return {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}}


def test_terms_default_to_the_pods_namespace_and_merge_match_label_keys() -> None:
    term = {**TERM, "matchLabelKeys": ["pod-template-hash", "absent"], "mismatchLabelKeys": ["tenant"]}
    pod = parse_pod(_pod(_anti(term), {"pod-template-hash": "abc", "tenant": "t1"}))
    assert pod.pod_affinity is not None
    (t,) = pod.pod_affinity.anti_required
    assert t.namespaces == ("default",)
    assert t.selector is not None
    assert t.selector.match_labels == (("app", "web"),)
    assert set(t.selector.match_expressions) == {
        SelectorRequirement("pod-template-hash", "In", ("abc",)),  # a key the pod lacks ("absent") is left out
        SelectorRequirement("tenant", "NotIn", ("t1",)),
    }
    assert t.selector.matches({"app": "web", "pod-template-hash": "abc", "tenant": "t2"})
    assert not t.selector.matches({"app": "web", "pod-template-hash": "old", "tenant": "t2"})


def test_a_namespace_selector_replaces_the_default_namespace() -> None:
    pod = parse_pod(_pod(_anti({**TERM, "namespaceSelector": {}})))
    assert pod.pod_affinity is not None
    (t,) = pod.pod_affinity.anti_required
    assert t.namespaces == ()
    assert t.namespace_selector is not None and t.namespace_selector.everything


def test_host_ports_of_containers_and_sidecars_only() -> None:
    spec = {
        "containers": [{"name": "c", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]}],
        "initContainers": [
            {
                "name": "sidecar",
                "restartPolicy": "Always",
                "ports": [{"containerPort": 53, "hostPort": 53, "protocol": "UDP"}],
            },
            {"name": "init", "ports": [{"containerPort": 9, "hostPort": 9999}]},  # done before the pod runs
        ],
    }
    pod = parse_pod(_pod(spec))
    assert set(pod.host_ports) == {HostPort("0.0.0.0", "UDP", 53), HostPort("0.0.0.0", "TCP", 8080)}
    assert HostPort("10.0.0.1", "TCP", 8080).conflicts(HostPort("0.0.0.0", "TCP", 8080))
    assert not HostPort("10.0.0.1", "TCP", 8080).conflicts(HostPort("10.0.0.2", "TCP", 8080))
    assert not HostPort("0.0.0.0", "UDP", 8080).conflicts(HostPort("0.0.0.0", "TCP", 8080))


def test_claims_of_volumes_and_ephemeral_volumes() -> None:
    spec = {
        "volumes": [
            {"name": "data", "persistentVolumeClaim": {"claimName": "data-0"}},
            {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "cfg", "configMap": {"name": "x"}},
        ]
    }
    assert parse_pod(_pod(spec)).claims == ("data-0", "p-scratch")


ANTI = "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
PREF = f"spec.affinity.podAffinity.{PREFERRED}[0]"
TSC = "spec.topologySpreadConstraints"


def _tsc(**c: Any) -> dict[str, Any]:
    return {
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "z", "whenUnsatisfiable": "DoNotSchedule", **c}]
    }


def _ports(*ports: dict[str, Any]) -> dict[str, Any]:
    return {"containers": [{"name": "c", "ports": list(ports)}]}


BAD: list[tuple[dict[str, Any], str]] = [
    (
        _anti({**TERM, "labelSelector": {"matchExpressions": [{"key": "app", "operator": "Equals", "values": ["x"]}]}}),
        f"{ANTI}.labelSelector.matchExpressions[0].operator",
    ),
    (_anti({"labelSelector": {"matchLabels": {"app": "web"}}}), f"{ANTI}.topologyKey"),
    (_anti({**TERM, "labelSelector": {"matchLabels": {"app": 1}}}), f"{ANTI}.labelSelector.matchLabels.app"),
    (
        {"affinity": {"podAffinity": {PREFERRED: [{"weight": 0, "podAffinityTerm": TERM}]}}},
        f"{PREF}.weight",
    ),
    (_anti({"topologyKey": "k", "matchLabelKeys": ["a"]}), f"{ANTI}.labelSelector"),
    (_tsc(maxSkew=0), f"{TSC}[0].maxSkew"),
    (_tsc(whenUnsatisfiable="Never"), f"{TSC}[0].whenUnsatisfiable"),
    (_tsc(whenUnsatisfiable="ScheduleAnyway", minDomains=2), f"{TSC}[0].minDomains"),
    (_tsc(nodeTaintsPolicy="Always"), f"{TSC}[0].nodeTaintsPolicy"),
    ({"topologySpreadConstraints": _tsc()["topologySpreadConstraints"] * 2}, f"{TSC}[1]"),
    (_ports({"containerPort": 80, "hostPort": 70000}), "spec.containers[0].ports[0].hostPort"),
    (_ports({"containerPort": 0}), "spec.containers[0].ports[0].containerPort"),
    (_ports({"containerPort": 80, "hostPort": 80, "protocol": "ICMP"}), "spec.containers[0].ports[0].protocol"),
    (
        _ports({"containerPort": 80, "hostPort": 80}, {"containerPort": 81, "hostPort": 80}),
        "spec.containers[0].ports[1].hostPort",
    ),
    ({"volumes": [{"name": "d", "persistentVolumeClaim": {}}]}, "spec.volumes[0].persistentVolumeClaim.claimName"),
]


@pytest.mark.parametrize(("spec", "field"), BAD, ids=[f for _, f in BAD])
def test_bad_pod_rules_name_the_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as err:
        load_manifests([("bad.yaml", yaml.safe_dump(_pod(spec)))])
    assert err.value.field == field
    assert err.value.obj == "Pod/default/p" and err.value.source == "bad.yaml"


CLAIM = {"metadata": {"name": "c"}}
STORAGE_BAD = [
    (parse_storage_class, {"metadata": {"name": "s"}}, "provisioner"),
    (
        parse_storage_class,
        {"metadata": {"name": "s"}, "provisioner": "x", "volumeBindingMode": "Later"},
        "volumeBindingMode",
    ),
    (parse_persistent_volume_claim, {**CLAIM, "spec": {"accessModes": ["ReadWriteSome"]}}, "spec.accessModes[0]"),
    (
        parse_persistent_volume_claim,
        {**CLAIM, "spec": {"resources": {"requests": {"storage": "10Xi"}}}},
        "spec.resources.requests.storage",
    ),
    (
        parse_csinode,
        {"metadata": {"name": "n"}, "spec": {"drivers": [{"name": "d", "allocatable": {"count": -1}}]}},
        "spec.drivers[0].allocatable.count",
    ),
]


@pytest.mark.parametrize(("parse", "doc", "field"), STORAGE_BAD)
def test_bad_storage_kinds_name_the_field(parse: Any, doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as err:
        parse(doc)
    assert err.value.field == field


def test_kai_sim_refuses_a_bad_spread_with_the_file_object_and_field(tmp_path: Any) -> None:
    bad = _pod(
        {"topologySpreadConstraints": [{"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]}
    )
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(bad))
    code, doc, err = run_sim([str(path)])
    assert code == 2 and doc is None
    assert "bad.yaml: Pod/default/p: spec.topologySpreadConstraints[0].maxSkew" in err
