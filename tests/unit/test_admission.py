"""kai's admission webhooks as pure functions of an AdmissionRequest and the Store (kai.k8s._admission)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import pytest

from kai.api.objects import parse_queue
from kai.k8s._admission import (
    MUTATE_POD,
    VALIDATE_POD,
    VALIDATE_PODGROUP,
    VALIDATE_QUEUE,
    VALIDATE_TOPOLOGY,
    Admission,
    AdmissionConfig,
)
from kai.store import Store


def _apply_patch(doc: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON patch "add" operations the webhook answers with (RFC 6902 for objects and list indices)."""
    out = copy.deepcopy(doc)
    for op in patch:
        assert op["op"] == "add"
        *parents, last = op["path"].lstrip("/").split("/")
        node: Any = out
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node.setdefault(p, {})
        node[last] = op["value"]
    return out


def _pod(annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "team-a", "annotations": annotations or {}, "labels": {}},
        "spec": {"schedulerName": "kai-scheduler", "containers": [{"name": "main", "image": "x"}], **spec},
    }


def _review(adm: Admission, path: str, obj: dict[str, Any], op: str = "CREATE", old: dict | None = None) -> dict:
    req = {"uid": "u1", "operation": op, "namespace": "team-a", "object": obj, "oldObject": old}
    return adm.review(path, req)


def _queue(name: str, parent: str = "", allowed: str | None = None, **res: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if allowed:
        meta["annotations"] = {"kai.scheduler/allowed-namespaces": allowed}
    resources = res or {r: {"quota": -1, "limit": -1, "overQuotaWeight": 1} for r in ("gpu", "cpu", "memory")}
    return {"metadata": meta, "spec": {"parentQueue": parent, "resources": resources}}


@pytest.fixture
def adm() -> Admission:
    store = Store()
    for q in (_queue("dept", allowed="team-*"), _queue("team-a", parent="dept"), _queue("open")):
        store.put(parse_queue(q))
    return Admission(store)


def test_a_fraction_pod_gets_kais_sharing_env_configmaps_volume_and_runtime_class(adm: Admission) -> None:
    pod = _pod({"gpu-fraction": "0.5"})
    pod["spec"]["containers"][0]["env"] = [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
        {"name": "K", "value": "v"},
    ]
    resp = _review(adm, MUTATE_POD, pod)
    assert resp["allowed"] and resp["patchType"] == "JSONPatch"
    out = _apply_patch(pod, json.loads(base64.b64decode(resp["patch"])))
    prefix = out["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert prefix.startswith("p-") and prefix.endswith("-shared-gpu") and len(prefix) == len("p-") + 7 + 11
    env = {e["name"]: e for e in out["spec"]["containers"][0]["env"]}
    assert env["K"] == {"name": "K", "value": "v"}  # the user's own env stays
    for name in ("NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION"):
        assert env[name]["valueFrom"]["configMapKeyRef"] == {"name": f"{prefix}-0", "key": name}
    assert out["spec"]["containers"][0]["envFrom"] == [
        {"configMapRef": {"name": f"{prefix}-0-evar", "optional": False}}
    ]
    assert out["spec"]["volumes"] == [{"name": f"{prefix}-0-vol", "configMap": {"name": f"{prefix}-0"}}]
    assert out["spec"]["runtimeClassName"] == "nvidia"


def test_the_named_init_container_gets_the_env_and_its_configmap_is_i_indexed(adm: Admission) -> None:
    pod = _pod({"gpu-memory": "2000", "gpu-fraction-container-name": "warmup"})
    pod["spec"]["initContainers"] = [{"name": "setup"}, {"name": "warmup"}]
    pod["spec"]["runtimeClassName"] = "mine"
    out = _apply_patch(pod, json.loads(base64.b64decode(_review(adm, MUTATE_POD, pod)["patch"])))
    prefix = out["metadata"]["annotations"]["runai/shared-gpu-configmap"]
    assert "env" not in out["spec"]["containers"][0]
    names = {e["name"] for e in out["spec"]["initContainers"][1]["env"]}
    assert names == {"NVIDIA_VISIBLE_DEVICES", "RUNAI_NUM_OF_GPUS", "GPU_PORTION"}
    assert out["spec"]["initContainers"][1]["envFrom"][0]["configMapRef"]["name"] == f"{prefix}-i1-evar"
    assert out["spec"]["runtimeClassName"] == "mine"  # a runtime class the pod names is kept


@pytest.mark.parametrize(
    "pod",
    [
        _pod(),  # no fraction
        {**_pod({"gpu-fraction": "0.5"}), "spec": {"schedulerName": "default-scheduler", "containers": [{}]}},
    ],
)
def test_other_pods_are_not_mutated(adm: Admission, pod: dict[str, Any]) -> None:
    resp = _review(adm, MUTATE_POD, pod)
    assert resp == {"uid": "u1", "allowed": True}


def test_no_runtime_class_when_none_is_configured() -> None:
    adm = Admission(Store(), AdmissionConfig(gpu_fraction_runtime_class=""))
    patch = json.loads(base64.b64decode(_review(adm, MUTATE_POD, _pod({"gpu-fraction": "0.5"}))["patch"]))
    assert all(op["path"] != "/spec/runtimeClassName" for op in patch)


@pytest.mark.parametrize(
    ("annotations", "limits", "words"),
    [
        ({"gpu-fraction": "1.5"}, None, "metadata.annotations.gpu-fraction: '1.5' must be a number between 0 and 1"),
        ({"gpu-fraction": "0.5", "gpu-memory": "10"}, None, "cannot request both GPU and GPU memory"),
        ({"gpu-fraction": "0.5"}, {"nvidia.com/gpu": "1"}, "cannot have both GPU fraction request and whole GPU"),
        ({"gpu-memory": "0"}, None, "metadata.annotations.gpu-memory: '0' must be a positive integer"),
        ({"gpu-fraction-num-devices": "2"}, None, "gpu-fraction-num-devices: '2' needs a gpu-fraction"),
        ({"gpu-fraction": "0.5", "gpu-fraction-num-devices": "0"}, None, "must be an integer >= 1"),
        ({"gpu-fraction": "0.5", "gpu-fraction-container-name": "nope"}, None, "'nope' is not a container"),
        ({"mps": "true"}, None, "MPS is only supported with GPU fraction request"),
    ],
)
def test_bad_gpu_sharing_annotations_are_refused_naming_the_annotation(
    adm: Admission, annotations: dict[str, str], limits: dict | None, words: str
) -> None:
    pod = _pod(annotations)
    if limits:
        pod["spec"]["containers"][0]["resources"] = {"limits": limits}
    resp = _review(adm, VALIDATE_POD, pod)
    assert not resp["allowed"]
    assert resp["status"]["code"] == 403 and words in resp["status"]["message"], resp


def test_an_update_that_leaves_the_gpu_annotations_alone_is_not_checked_again(adm: Admission) -> None:
    old = _pod({"gpu-fraction": "1.5"})  # (admitted before the webhook existed)
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["runai-gpu-group"] = "n-gpu0"
    assert _review(adm, VALIDATE_POD, new, op="UPDATE", old=old)["allowed"]
    new["metadata"]["annotations"]["gpu-fraction"] = "2.5"
    assert not _review(adm, VALIDATE_POD, new, op="UPDATE", old=old)["allowed"]


def test_the_queue_access_rule_for_pods_and_podgroups(adm: Admission) -> None:
    pod = _pod()
    pod["metadata"]["namespace"] = "finance"
    pod["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    resp = _review(adm, VALIDATE_POD, pod)
    assert not resp["allowed"]
    message = resp["status"]["message"]
    assert message.startswith("metadata.labels.kai.scheduler/queue: namespace 'finance' may not use queue 'team-a'")
    assert "ancestor 'dept'" in message
    pod["metadata"]["namespace"] = "team-x"
    assert _review(adm, VALIDATE_POD, pod)["allowed"]
    pod["metadata"]["labels"] = {"kai.scheduler/queue": "open"}
    pod["metadata"]["namespace"] = "finance"
    assert _review(adm, VALIDATE_POD, pod)["allowed"]  # a queue without a rule admits everyone
    pg = {"metadata": {"name": "pg", "namespace": "finance"}, "spec": {"minMember": 1, "queue": "team-a"}}
    resp = _review(adm, VALIDATE_PODGROUP, pg)
    assert not resp["allowed"] and resp["status"]["message"].startswith("spec.queue: namespace 'finance'")
    # kai's own later writes (the stale-gang annotation) are not refused by a rule added meanwhile
    later = copy.deepcopy(pg)
    later["metadata"]["annotations"] = {"kai.scheduler/stale-podgroup-timestamp": "2026-01-01T00:00:00Z"}
    assert _review(adm, VALIDATE_PODGROUP, later, op="UPDATE", old=pg)["allowed"]


def test_queue_rules(adm: Admission) -> None:
    def check(doc: dict[str, Any], op: str = "CREATE") -> dict[str, Any]:
        return _review(adm, VALIDATE_QUEUE, doc, op=op)

    cycle = _queue("dept", parent="team-a")
    resp = check(cycle, "UPDATE")
    assert (
        not resp["allowed"]
        and "spec.parentQueue: parent queue cycle: dept -> team-a -> dept" in resp["status"]["message"]
    )
    low = _queue("q", gpu={"quota": 4, "limit": 2, "overQuotaWeight": 1})
    assert "spec.resources.gpu.limit: 2 is below the quota 4" in check(low)["status"]["message"]
    assert "resources must be specified" in check({"metadata": {"name": "q"}, "spec": {}})["status"]["message"]
    assert "spec.resources.gpu.quota" in check(_queue("q", gpu={"quota": "x"}))["status"]["message"]
    ok = check(_queue("q", parent="ghost", gpu={"quota": 4}))
    assert ok["allowed"]
    assert any("parent queue 'ghost' does not exist" in w for w in ok["warnings"])
    assert any("spec.resources.gpu.limit is not set" in w for w in ok["warnings"])
    over = check(_queue("q", parent="open", **{r: {"quota": 2, "limit": -1} for r in ("gpu", "cpu", "memory")}))
    assert over["allowed"] and not any("exceeds" in w for w in over.get("warnings", []))  # open's quota is -1
    resp = _review(adm, VALIDATE_QUEUE, {}, op="DELETE", old={"metadata": {"name": "dept"}})
    assert (
        not resp["allowed"] and "cannot delete queue dept: it has child queues ['team-a']" in resp["status"]["message"]
    )


def test_podgroup_subgroup_rules(adm: Admission) -> None:
    def pg(**spec: Any) -> dict[str, Any]:
        return {"metadata": {"name": "pg", "namespace": "team-x"}, "spec": {"queue": "team-a", **spec}}

    cyclic = pg(subGroups=[{"name": "a", "parent": "b", "minMember": 1}, {"name": "b", "parent": "a"}])
    assert "parent cycle" in _review(adm, VALIDATE_PODGROUP, cyclic)["status"]["message"]
    both = pg(minMember=1, minSubGroup=1)
    assert (
        "minMember and minSubGroup are mutually exclusive" in _review(adm, VALIDATE_PODGROUP, both)["status"]["message"]
    )
    mid = pg(subGroups=[{"name": "a", "minMember": 2}, {"name": "b", "parent": "a", "minMember": 1}])
    resp = _review(adm, VALIDATE_PODGROUP, mid)
    assert not resp["allowed"] and "minMember cannot be set on a mid-level SubGroup" in resp["status"]["message"]
    upd = _review(adm, VALIDATE_PODGROUP, mid, op="UPDATE", old=mid)
    assert upd["allowed"] and "minMember cannot be set on a mid-level SubGroup" in upd["warnings"][0]
    wide = pg(minSubGroup=3, minMember=None, subGroups=[{"name": "a", "minMember": 1}])
    wide["spec"].pop("minMember")
    resp = _review(adm, VALIDATE_PODGROUP, wide)
    assert resp["allowed"] and "minSubGroup (3) exceeds the number of direct child SubGroups (1)" in resp["warnings"][0]
    ghost = _review(adm, VALIDATE_PODGROUP, {**pg(minMember=1), "spec": {"queue": "nope", "minMember": 1}})
    assert ghost["allowed"] and "Queue 'nope' does not exist" in ghost["warnings"][0]


def test_topology_rules(adm: Admission) -> None:
    def topo(*levels: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": "t"}, "spec": {"levels": list(levels)}}

    good = topo({"nodeLabel": "rack", "alias": "r"}, {"nodeLabel": "kubernetes.io/hostname"})
    assert _review(adm, VALIDATE_TOPOLOGY, good)["allowed"]
    host_first = topo({"nodeLabel": "kubernetes.io/hostname"}, {"nodeLabel": "rack"})
    assert "may only be the last level" in _review(adm, VALIDATE_TOPOLOGY, host_first)["status"]["message"]
    dup = topo({"nodeLabel": "a", "alias": "x"}, {"nodeLabel": "b", "alias": "x"})
    assert (
        "aliases must be unique within the topology; duplicated: ['x']"
        in _review(adm, VALIDATE_TOPOLOGY, dup)["status"]["message"]
    )
    clash = topo({"nodeLabel": "a", "alias": "b"}, {"nodeLabel": "b"})
    assert "an alias must not equal a nodeLabel" in _review(adm, VALIDATE_TOPOLOGY, clash)["status"]["message"]
    renamed = topo({"nodeLabel": "rack", "alias": "rr"}, {"nodeLabel": "kubernetes.io/hostname"})
    assert _review(adm, VALIDATE_TOPOLOGY, renamed, op="UPDATE", old=good)["allowed"]  # aliases may change
    moved = topo({"nodeLabel": "zone"}, {"nodeLabel": "kubernetes.io/hostname"})
    resp = _review(adm, VALIDATE_TOPOLOGY, moved, op="UPDATE", old=good)
    assert not resp["allowed"] and "the sequence of nodeLabels is immutable" in resp["status"]["message"]


def test_an_unknown_path_is_refused() -> None:
    resp = Admission(Store()).review("/nope", {"uid": "x"})
    assert resp["allowed"] is False and "no admission webhook at /nope" in resp["status"]["message"]
