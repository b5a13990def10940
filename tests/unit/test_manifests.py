"""Unit tests for kai.api.manifests: YAML streams in, typed objects out, every error located."""

from __future__ import annotations

import textwrap

import pytest

from kai.api.errors import ManifestError
from kai.api.manifests import Ignored, document_ref, iter_documents, load_manifests, parse_document
from kai.api.objects import Node, Pod, PodGroup, PriorityClass, Queue, SchedulingShard, Topology

ALL_KINDS = textwrap.dedent(
    """\
    apiVersion: v1
    kind: Node
    metadata: {name: node0}
    status: {allocatable: {cpu: "4"}}
    ---
    apiVersion: scheduling.run.ai/v2
    kind: Queue
    metadata: {name: q}
    ---
    apiVersion: scheduling.run.ai/v2alpha2
    kind: PodGroup
    metadata: {name: pg}
    spec: {queue: q}
    ---
    apiVersion: v1
    kind: Pod
    metadata: {name: p, annotations: {pod-group-name: pg}}
    spec: {containers: [{name: c}]}
    ---
    apiVersion: scheduling.k8s.io/v1
    kind: PriorityClass
    metadata: {name: high}
    value: 1000
    ---
    apiVersion: kai.scheduler/v1alpha1
    kind: Topology
    metadata: {name: t}
    spec: {levels: [{nodeLabel: rack}]}
    ---
    apiVersion: kai.scheduler/v1
    kind: SchedulingShard
    metadata: {name: default}
    """
)


def test_multi_document_yaml_in_order() -> None:
    objects, ignored = load_manifests([("all.yaml", ALL_KINDS)])
    assert ignored == []
    assert [type(o) for _, o in objects] == [Node, Queue, PodGroup, Pod, PriorityClass, Topology, SchedulingShard]
    assert all(src == "all.yaml" for src, _ in objects)
    assert [o.meta.name for _, o in objects] == ["node0", "q", "pg", "p", "high", "t", "default"]


def test_several_sources_keep_their_names_and_order() -> None:
    a = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n"
    b = "apiVersion: v1\nkind: Node\nmetadata: {name: b}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: c}\n"
    objects, _ = load_manifests([("a.yaml", a), ("b.yaml", b)])
    assert [(src, o.meta.name) for src, o in objects] == [("a.yaml", "a"), ("b.yaml", "b"), ("b.yaml", "c")]


def test_empty_documents_are_skipped() -> None:
    text = "---\n---\napiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\n# only a comment\n---\n"
    objects, ignored = load_manifests([("f.yaml", text)])
    assert len(objects) == 1
    assert ignored == []
    assert load_manifests([("empty.yaml", "")]) == ([], [])


def test_v1_list_is_expanded() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
          metadata: {name: n1}
        - apiVersion: v1
          kind: Node
          metadata: {name: n2}
        - apiVersion: v1
          kind: Secret
          metadata: {name: s}
        ---
        apiVersion: v1
        kind: Node
        metadata: {name: n3}
        """
    )
    objects, ignored = load_manifests([("list.yaml", text)])
    assert [o.meta.name for _, o in objects] == ["n1", "n2", "n3"]
    assert ignored == [Ignored("list.yaml", "Secret", "s")]


def test_error_inside_a_list_names_the_item() -> None:
    text = textwrap.dedent(
        """\
        apiVersion: v1
        kind: List
        items:
        - apiVersion: v1
          kind: Node
          metadata: {name: n1}
          status: {allocatable: {cpu: lots}}
        """
    )
    with pytest.raises(ManifestError) as info:
        load_manifests([("list.yaml", text)])
    assert (info.value.source, info.value.obj, info.value.field) == ("list.yaml", "Node/n1", "status.allocatable.cpu")


@pytest.mark.parametrize("kind", ["Secret", "ConfigMap", "Service", "ServiceAccount"])
def test_ignored_kinds(kind: str) -> None:
    text = f"apiVersion: v1\nkind: {kind}\nmetadata: {{name: x, namespace: ns}}\ndata: {{a: b}}\n"
    objects, ignored = load_manifests([("f.yaml", text)])
    assert objects == []
    assert ignored == [Ignored("f.yaml", kind, "x")]


def test_unknown_kind_names_file_object_and_field() -> None:
    text = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\napiVersion: apps/v1\nkind: Widget\n"
        "metadata: {name: w, namespace: ns}\n"
    )
    with pytest.raises(ManifestError) as info:
        load_manifests([("cluster.yaml", text)])
    err = info.value
    assert (err.source, err.obj, err.field) == ("cluster.yaml", "Widget/ns/w", "kind")
    msg = str(err)
    assert msg.startswith("cluster.yaml: Widget/ns/w: kind: ")
    assert "Widget" in err.message


def test_known_kind_with_wrong_api_version_hints_the_right_one() -> None:
    text = "apiVersion: scheduling.run.ai/v1\nkind: Queue\nmetadata: {name: q}\n"
    with pytest.raises(ManifestError) as info:
        load_manifests([("q.yaml", text)])
    assert info.value.field == "kind"
    assert info.value.obj == "Queue/q"
    assert "scheduling.run.ai/v2" in str(info.value)


def test_missing_kind_and_api_version() -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests([("f.yaml", "apiVersion: v1\nmetadata: {name: a}\n")])
    assert (info.value.source, info.value.field) == ("f.yaml", "kind")
    with pytest.raises(ManifestError) as info:
        load_manifests([("f.yaml", "kind: Node\nmetadata: {name: a}\n")])
    assert (info.value.source, info.value.obj, info.value.field) == ("f.yaml", "Node/a", "apiVersion")


def test_parse_errors_are_located() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: team}\n"
        "spec: {containers: [{name: c, resources: {requests: {cpu: 1.2.3}}}]}\n"
    )
    with pytest.raises(ManifestError) as info:
        load_manifests([("pods.yaml", text)])
    err = info.value
    assert (err.source, err.obj, err.field) == ("pods.yaml", "Pod/team/p", "spec.containers[0].resources.requests.cpu")
    assert str(err).startswith("pods.yaml: Pod/team/p: spec.containers[0].resources.requests.cpu: ")


def test_malformed_yaml_names_the_line() -> None:
    text = "apiVersion: v1\nkind: Node\nmetadata:\n  name: [unclosed\n  labels: {a: b}\n"
    with pytest.raises(ManifestError) as info:
        load_manifests([("broken.yaml", text)])
    err = info.value
    assert err.source == "broken.yaml"
    assert "malformed YAML" in str(err)
    assert "line " in str(err)


def test_malformed_yaml_line_number_is_one_based() -> None:
    # a tab used for indentation on line 4
    text = "apiVersion: v1\nkind: Node\nmetadata:\n\tname: a\n"
    with pytest.raises(ManifestError) as info:
        load_manifests([("tab.yaml", text)])
    assert "line 4" in str(info.value)


def test_malformed_yaml_in_a_later_document() -> None:
    text = "apiVersion: v1\nkind: Node\nmetadata: {name: a}\n---\nkey: [1, 2\n"
    with pytest.raises(ManifestError) as info:
        load_manifests([("f.yaml", text)])
    assert info.value.source == "f.yaml"
    assert "line " in str(info.value)


@pytest.mark.parametrize("text", ["- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_document(text: str) -> None:
    with pytest.raises(ManifestError) as info:
        load_manifests([("odd.yaml", text)])
    assert info.value.source == "odd.yaml"
    assert "mapping" in str(info.value)


def test_non_mapping_item_in_a_list() -> None:
    text = "apiVersion: v1\nkind: List\nitems: [hello]\n"
    with pytest.raises(ManifestError) as info:
        load_manifests([("list.yaml", text)])
    assert "mapping" in str(info.value)


def test_parse_document_and_document_ref() -> None:
    assert document_ref({"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"}}) == "Pod/ns/p"
    assert document_ref({"kind": "Node", "metadata": {"name": "n"}}) == "Node/n"
    assert document_ref({"metadata": "x"}) == "?/?"
    assert document_ref([1]) == ""
    node = parse_document({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}, "src")
    assert isinstance(node, Node)


def test_iter_documents_expands_lists_and_skips_nulls() -> None:
    text = "apiVersion: v1\nkind: List\nitems: [{a: 1}, null, {b: 2}]\n---\n{c: 3}\n"
    assert list(iter_documents(text, "f")) == [{"a": 1}, {"b": 2}, {"c": 3}]
