"""Static predicates over a small embedded cluster: which nodes a pod may ever use, and why not the others.

Nodes come from real manifests through the embedded cluster's snapshot; pods are parsed from manifests too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import yaml

from kai.api.manifests import load_manifests
from kai.api.objects import parse_pod
from kai.scheduler.model import NodeTable
from kai.scheduler.predicates import NodeLabels, StaticFit, static_fit
from kai.sim.cluster import EmbeddedCluster

NOW = 1_767_225_600.0


def node(
    name: str,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    unschedulable: bool = False,
    ready: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "4"}},
    }
    if taints:
        doc["spec"]["taints"] = taints
    if unschedulable:
        doc["spec"]["unschedulable"] = True
    if ready is not None:
        doc["status"]["conditions"] = [{"type": "Ready", "status": ready}]
    return doc


def nodes_of(*docs: dict[str, Any]) -> NodeTable:
    objects, _ = load_manifests([("nodes.yaml", yaml.safe_dump_all(list(docs)))])
    cluster = EmbeddedCluster(now=NOW)
    cluster.apply(objects)
    return cluster.snapshot().nodes


def fit(nodes: NodeTable, spec: dict[str, Any]) -> StaticFit:
    pod = parse_pod(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c"}], **spec},
        }
    )
    return static_fit(nodes, NodeLabels(nodes), pod)


def fits(nodes: NodeTable, spec: dict[str, Any]) -> list[str]:
    """Names of the nodes the pod may use."""
    sf = fit(nodes, spec)
    return [n for n, ok in zip(nodes.names, sf.mask) if ok]


def affinity(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


@pytest.fixture(scope="module")
def labelled() -> NodeTable:
    return nodes_of(
        node("a100-1", {"gpu": "a100", "cores": "64", "zone": "z1"}),
        node("a100-2", {"gpu": "a100", "cores": "32", "zone": "z2"}),
        node("h100-1", {"gpu": "h100", "cores": "128"}),
        node("plain", {"cores": "many"}),
    )


def test_no_constraints_fits_everywhere(labelled: NodeTable) -> None:
    sf = fit(labelled, {})
    assert sf.mask.all()
    assert sf.failures == ()
    assert sf.mask.dtype == bool
    assert sf.mask.shape == (labelled.n,)


def test_node_selector(labelled: NodeTable) -> None:
    assert fits(labelled, {"nodeSelector": {"gpu": "a100"}}) == ["a100-1", "a100-2"]
    assert fits(labelled, {"nodeSelector": {"gpu": "a100", "zone": "z2"}}) == ["a100-2"]
    assert fits(labelled, {"nodeSelector": {"gpu": "v100"}}) == []
    assert fits(labelled, {"nodeSelector": {"gpu": ""}}) == []  # an empty value still needs the label present


def test_node_selector_failure_reason(labelled: NodeTable) -> None:
    sf = fit(labelled, {"nodeSelector": {"gpu": "a100"}})
    assert len(sf.failures) == 1
    reason, failing = sf.failures[0]
    assert "nodeSelector" in reason
    assert "gpu=a100" in reason
    assert [n for n, f in zip(labelled.names, failing) if f] == ["h100-1", "plain"]


@pytest.mark.parametrize(
    ("requirement", "expected"),
    [
        (expr("gpu", "In", "a100"), ["a100-1", "a100-2"]),
        (expr("gpu", "In", "a100", "h100"), ["a100-1", "a100-2", "h100-1"]),
        # NotIn matches nodes that lack the label altogether
        (expr("gpu", "NotIn", "a100"), ["h100-1", "plain"]),
        (expr("zone", "NotIn", "z1"), ["a100-2", "h100-1", "plain"]),
        (expr("gpu", "Exists"), ["a100-1", "a100-2", "h100-1"]),
        (expr("gpu", "DoesNotExist"), ["plain"]),
        (expr("zone", "DoesNotExist"), ["h100-1", "plain"]),
        # Gt / Lt compare integers; a non-integer label value ("many") and a missing label never match
        (expr("cores", "Gt", "32"), ["a100-1", "h100-1"]),
        (expr("cores", "Gt", "128"), []),
        (expr("cores", "Lt", "64"), ["a100-2"]),
        (expr("cores", "Lt", "1000"), ["a100-1", "a100-2", "h100-1"]),
        (expr("zone", "Gt", "0"), []),
        (expr("cores", "Gt", "-1"), ["a100-1", "a100-2", "h100-1"]),
    ],
)
def test_affinity_operators(labelled: NodeTable, requirement: dict[str, Any], expected: list[str]) -> None:
    assert fits(labelled, affinity({"matchExpressions": [requirement]})) == expected


def test_affinity_gt_lt_do_not_compare_as_strings() -> None:
    nodes = nodes_of(node("n9", {"cores": "9"}), node("n10", {"cores": "10"}), node("n100", {"cores": "100"}))
    assert fits(nodes, affinity({"matchExpressions": [expr("cores", "Gt", "9")]})) == ["n10", "n100"]
    assert fits(nodes, affinity({"matchExpressions": [expr("cores", "Lt", "10")]})) == ["n9"]


def test_affinity_gt_on_huge_labels() -> None:
    # int64-sized label values are compared exactly
    nodes = nodes_of(node("big", {"mem": "9007199254740993"}), node("small", {"mem": "9007199254740992"}))
    assert fits(nodes, affinity({"matchExpressions": [expr("mem", "Gt", "9007199254740992")]})) == ["big"]


def test_affinity_gt_lt_parse_label_values_as_go_does() -> None:
    # kube-scheduler parses the label with strconv.ParseInt(v, 10, 64): "1_000" is a valid label value but
    # not an integer there, so it never matches Gt/Lt
    nodes = nodes_of(node("underscored", {"cores": "1_000"}), node("plain", {"cores": "1000"}))
    assert fits(nodes, affinity({"matchExpressions": [expr("cores", "Gt", "999")]})) == ["plain"]


def test_affinity_expressions_in_a_term_are_anded(labelled: NodeTable) -> None:
    term = {"matchExpressions": [expr("gpu", "In", "a100"), expr("cores", "Gt", "40")]}
    assert fits(labelled, affinity(term)) == ["a100-1"]


def test_affinity_terms_are_ored(labelled: NodeTable) -> None:
    terms = (
        {"matchExpressions": [expr("gpu", "In", "h100")]},
        {"matchExpressions": [expr("zone", "In", "z2")]},
    )
    assert fits(labelled, affinity(*terms)) == ["a100-2", "h100-1"]


def test_affinity_match_fields_metadata_name(labelled: NodeTable) -> None:
    assert fits(labelled, affinity({"matchFields": [expr("metadata.name", "In", "plain", "h100-1")]})) == [
        "h100-1",
        "plain",
    ]
    assert fits(labelled, affinity({"matchFields": [expr("metadata.name", "NotIn", "plain")]})) == [
        "a100-1",
        "a100-2",
        "h100-1",
    ]
    both = {
        "matchExpressions": [expr("gpu", "Exists")],
        "matchFields": [expr("metadata.name", "In", "a100-2", "plain")],
    }
    assert fits(labelled, affinity(both)) == ["a100-2"]


def test_affinity_failure_reason(labelled: NodeTable) -> None:
    sf = fit(labelled, affinity({"matchExpressions": [expr("gpu", "In", "h100")]}))
    assert len(sf.failures) == 1
    reason, failing = sf.failures[0]
    assert "node affinity" in reason
    assert "gpu" in reason and "h100" in reason
    assert int(failing.sum()) == 3


def test_selector_and_affinity_combine(labelled: NodeTable) -> None:
    spec = {"nodeSelector": {"gpu": "a100"}, **affinity({"matchExpressions": [expr("zone", "In", "z2")]})}
    sf = fit(labelled, spec)
    assert [n for n, ok in zip(labelled.names, sf.mask) if ok] == ["a100-2"]
    reasons = [r for r, _ in sf.failures]
    assert any("nodeSelector" in r for r in reasons)
    assert any("node affinity" in r for r in reasons)


# ---------------------------------------------------------------------------------------------
# Taints and tolerations
# ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tainted() -> NodeTable:
    return nodes_of(
        node("clean"),
        node("gpu-ns", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        node("ded-ne", taints=[{"key": "dedicated", "value": "ml", "effect": "NoExecute"}]),
        node("soft", taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
        node("novalue", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
    )


def test_blocking_taints_without_tolerations(tainted: NodeTable) -> None:
    # PreferNoSchedule does not block
    assert fits(tainted, {}) == ["clean", "soft"]


def test_taint_failure_reasons_name_the_taint(tainted: NodeTable) -> None:
    sf = fit(tainted, {})
    reasons = {r: [n for n, f in zip(tainted.names, m) if f] for r, m in sf.failures}
    assert all("taint" in r for r in reasons)
    assert {tuple(v) for v in reasons.values()} == {("gpu-ns",), ("ded-ne",), ("novalue",)}
    text = " | ".join(reasons)
    assert "nvidia.com/gpu=present:NoSchedule" in text
    assert "dedicated=ml:NoExecute" in text
    assert "maintenance:NoSchedule" in text
    assert "spot" not in text


@pytest.mark.parametrize(
    ("toleration", "also_fits"),
    [
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, ["gpu-ns"]),
        ({"key": "nvidia.com/gpu", "value": "present"}, ["gpu-ns"]),  # operator defaults to Equal, any effect
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, []),  # value must match
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, ["gpu-ns"]),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, []),  # effect must match
        ({"key": "dedicated", "operator": "Equal", "value": "ml", "effect": "NoExecute"}, ["ded-ne"]),
        ({"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}, []),
        ({"key": "maintenance", "operator": "Exists"}, ["novalue"]),
        ({"key": "maintenance", "operator": "Equal", "value": ""}, ["novalue"]),
        ({"key": "maintenance", "operator": "Equal"}, ["novalue"]),
        ({"operator": "Exists"}, ["gpu-ns", "ded-ne", "novalue"]),  # empty key + Exists tolerates everything
        ({"operator": "Exists", "effect": "NoSchedule"}, ["gpu-ns", "novalue"]),
        ({"operator": "Exists", "effect": "NoExecute"}, ["ded-ne"]),
        ({"key": "other", "operator": "Exists"}, []),
    ],
)
def test_tolerations(tainted: NodeTable, toleration: dict[str, str], also_fits: list[str]) -> None:
    expected = sorted(["clean", "soft", *also_fits], key=tainted.names.index)
    assert fits(tainted, {"tolerations": [toleration]}) == expected


def test_several_taints_need_several_tolerations() -> None:
    nodes = nodes_of(
        node(
            "double",
            taints=[
                {"key": "a", "value": "1", "effect": "NoSchedule"},
                {"key": "b", "value": "2", "effect": "NoExecute"},
            ],
        )
    )
    assert fits(nodes, {"tolerations": [{"key": "a", "operator": "Exists"}]}) == []
    both = [{"key": "a", "operator": "Exists"}, {"key": "b", "value": "2", "effect": "NoExecute"}]
    assert fits(nodes, {"tolerations": both}) == ["double"]


# ---------------------------------------------------------------------------------------------
# Cordoned and not-ready nodes
# ---------------------------------------------------------------------------------------------


def test_cordoned_and_not_ready_nodes() -> None:
    nodes = nodes_of(
        node("ok", ready="True"),
        node("cordoned", unschedulable=True),
        node("not-ready", ready="False"),
        node("unknown", ready="Unknown"),
    )
    sf = fit(nodes, {})
    assert [n for n, ok in zip(nodes.names, sf.mask) if ok] == ["ok"]
    reasons = {r: sorted(n for n, f in zip(nodes.names, m) if f) for r, m in sf.failures}
    ready_reasons = [r for r in reasons if "not ready" in r]
    assert len(ready_reasons) == 1
    assert reasons[ready_reasons[0]] == ["not-ready", "unknown"]
    # a cordon is the node.kubernetes.io/unschedulable:NoSchedule taint the API server adds
    cordon_reasons = [r for r in reasons if "node.kubernetes.io/unschedulable" in r]
    assert len(cordon_reasons) == 1
    assert "taint" in cordon_reasons[0]
    assert reasons[cordon_reasons[0]] == ["cordoned"]


def test_cordon_is_tolerable_but_not_ready_is_not() -> None:
    nodes = nodes_of(node("ok"), node("cordoned", unschedulable=True), node("not-ready", ready="False"))
    cordon = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert fits(nodes, {"tolerations": [cordon]}) == ["cordoned", "ok"]
    assert fits(nodes, {"tolerations": [{"operator": "Exists"}]}) == ["cordoned", "ok"]
    assert fits(
        nodes,
        {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoExecute"}]},
    ) == ["ok"]


def test_cordoned_node_with_explicit_unschedulable_taint_is_not_doubled() -> None:
    nodes = nodes_of(
        node(
            "cordoned", unschedulable=True, taints=[{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
        )
    )
    sf = fit(nodes, {})
    assert len(sf.failures) == 1
    assert not sf.mask.any()


def test_failures_are_in_check_order() -> None:
    nodes = nodes_of(
        node("down", {"gpu": "a100"}, ready="False"),
        node("tainted", {"gpu": "a100"}, taints=[{"key": "x", "effect": "NoSchedule"}]),
        node("wrong-label", {"gpu": "t4"}),
        node("other-zone", {"gpu": "a100", "zone": "z9"}),
        node("good", {"gpu": "a100", "zone": "z1"}),
    )
    spec = {"nodeSelector": {"gpu": "a100"}, **affinity({"matchExpressions": [expr("zone", "NotIn", "z9")]})}
    sf = fit(nodes, spec)
    assert [n for n, ok in zip(nodes.names, sf.mask) if ok] == ["good"]
    reasons = [r for r, _ in sf.failures]
    assert len(reasons) == 4
    assert "not ready" in reasons[0]
    assert "nodeSelector" in reasons[1]
    assert "node affinity" in reasons[2]
    assert "taint" in reasons[3]
    # every failing mask is a boolean mask over all nodes
    for _, m in sf.failures:
        assert m.dtype == bool and m.shape == (nodes.n,)
    # a node passes iff it is in no failing mask
    combined = np.zeros(nodes.n, dtype=bool)
    for _, m in sf.failures:
        combined |= m
    assert np.array_equal(sf.mask, ~combined)
