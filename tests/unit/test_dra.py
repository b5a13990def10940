"""DRA at the edge and in the snapshot: the resource.k8s.io/v1 kinds are parsed strictly (what kai does not model
is refused naming the field, a selector that does not compile refuses its claim), CEL selectors never raise and
are evaluated once per device, and DRA GPUs count as GPUs of nodes and pods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kai.api.cel import compile_selector, device_value
from kai.api.dra import claim_gpus, parse_device_class, parse_resource_claim, parse_resource_slice
from kai.api.errors import ManifestError
from kai.api.manifests import load_manifests
from kai.api.objects import parse_pod
from kai.scheduler.conf import SchedulerConf
from kai.scheduler.cycle import run_cycle
from kai.scheduler.dra import build_dra
from kai.scheduler.model import GPU, MILLI
from kai.sim.cluster import EmbeddedCluster
from tests.conftest import run_sim
from tests.unit.builders import node, pod, podgroup, queue, snapshot_of

V1 = "resource.k8s.io/v1"


def claim(requests: list[dict[str, Any]], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceClaim",
        "metadata": {"name": "c", "namespace": "default"},
        "spec": {"devices": {"requests": requests, **devices}},
    }


def gpu_slice(node: str, models: list[str], generation: int = 1, driver: str = "gpu.example.com") -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{generation}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": generation},
            "devices": [
                {"name": f"gpu-{i}", "attributes": {"model": {"string": m}}, "capacity": {"memory": {"value": "16Gi"}}}
                for i, m in enumerate(models)
            ],
        },
    }


def gpu_class(selectors: list[str] = ()) -> dict[str, Any]:
    return {
        "apiVersion": V1,
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.example.com"},
        "spec": {"selectors": [{"cel": {"expression": e}} for e in selectors]},
    }


def test_a_selector_that_does_not_compile_refuses_the_claim_naming_the_field() -> None:
    doc = claim(
        [{"name": "g", "exactly": {"deviceClassName": "x", "selectors": [{"cel": {"expression": "device.("}}]}}]
    )
    with pytest.raises(ManifestError) as e:
        parse_resource_claim(doc)
    assert e.value.field == "spec.devices.requests[0].exactly.selectors[0].cel.expression"
    assert "does not compile" in str(e.value)


@pytest.mark.parametrize(
    ("request_", "devices", "field"),
    [
        ({"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": "x"}]}, {}, "requests[0].firstAvailable"),
        ({"name": "g", "exactly": {"deviceClassName": "x", "adminAccess": True}}, {}, "exactly.adminAccess"),
        ({"name": "g", "exactly": {"deviceClassName": "x", "allocationMode": "Some"}}, {}, "exactly.allocationMode"),
        ({"name": "g", "exactly": {"deviceClassName": "x", "count": 0}}, {}, "exactly.count"),
        ({"name": "g", "exactly": {"deviceClassName": "x", "allocationMode": "All", "count": 2}}, {}, "exactly.count"),
        (
            {"name": "g", "exactly": {"deviceClassName": "x"}},
            {"constraints": [{"matchAttribute": "a/b"}]},
            "devices.constraints",
        ),
    ],
)
def test_what_kai_does_not_model_is_refused_naming_the_field(
    request_: dict[str, Any], devices: dict[str, Any], field: str
) -> None:
    with pytest.raises(ManifestError) as e:
        parse_resource_claim(claim([request_], **devices))
    assert e.value.field is not None and e.value.field.endswith(field)


def test_a_slice_not_local_to_one_node_is_refused() -> None:
    doc = gpu_slice("n1", ["A100"])
    del doc["spec"]["nodeName"]
    doc["spec"]["allNodes"] = True
    with pytest.raises(ManifestError) as e:
        parse_resource_slice(doc)
    assert e.value.field == "spec.allNodes"


def test_a_selector_that_fails_at_runtime_matches_nothing_and_does_not_raise() -> None:
    sel = compile_selector('device.attributes["gpu.example.com"].missing == 1', "x")
    dev = device_value("gpu.example.com", {"gpu.example.com/model": "A100"}, {})
    assert sel.matches(dev) is False
    not_bool = compile_selector("1 + 1", "x")
    assert not_bool.matches(dev) is False


def test_matching_devices_class_and_request_selectors_newest_pool_generation_only() -> None:
    cls = parse_device_class(gpu_class(['device.driver == "gpu.example.com"']))
    slices = [
        parse_resource_slice(gpu_slice("n1", ["T4", "A100"], generation=1)),
        parse_resource_slice(gpu_slice("n1", ["A100", "A100", "T4"], generation=2)),  # replaces generation 1
        parse_resource_slice(gpu_slice("n2", ["A100"], driver="other.example.com")),
    ]
    dra = build_dra([cls], slices)
    assert dra.devices == (
        ("gpu.example.com", "n1", "gpu-0"),
        ("gpu.example.com", "n1", "gpu-1"),
        ("gpu.example.com", "n1", "gpu-2"),
        ("other.example.com", "n2", "gpu-0"),
    )
    sel = compile_selector('device.attributes["gpu.example.com"].model == "A100"', "x")
    assert dra.matching("gpu.example.com", (sel,)).tolist() == [True, True, False, False]
    assert dra.matching("nope", ()).tolist() == [False] * 4  # a class that does not exist matches nothing
    assert dra.node_gpus() == {"n1": 3}  # drivers named *gpu* only (KAI's populateDRAGPUs)


def test_claim_gpus_counts_gpu_classes_as_kai() -> None:
    c = parse_resource_claim(
        claim(
            [
                {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
                {"name": "b", "exactly": {"deviceClassName": "big-GPU", "allocationMode": "All"}},
                {"name": "c", "exactly": {"deviceClassName": "nic.example.com", "count": 4}},
            ]
        )
    )
    assert claim_gpus(c) == 3  # 2, All counts 1, a NIC counts nothing


def test_dra_gpus_count_in_node_capacity_and_pod_requests() -> None:
    path = Path(__file__).parents[1] / "scenarios" / "dra" / "cel_selector_picks_node" / "cluster.yaml"
    cluster = EmbeddedCluster(now=0.0)
    objects, _ = load_manifests([(str(path), path.read_text())])
    cluster.apply(objects)
    snap = cluster.snapshot()
    assert snap.nodes.allocatable[:, GPU].tolist() == [2 * MILLI, 2 * MILLI]  # two DRA GPUs on each node
    (task,) = snap.tasks
    assert int(task.request[GPU]) == MILLI  # its template claims one GPU
    assert not snap.gpus.sharing_nodes.any()  # DRA GPUs are never shared by gpu-fraction pods
    assert np.array_equal(snap.total[:1], np.array([4.0 * MILLI]))


def test_kai_sim_refuses_a_bad_selector_naming_file_object_and_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: broken}\n"
        "spec: {devices: {requests: [{name: g, exactly: {deviceClassName: x, "
        "selectors: [{cel: {expression: 'device.attributes['}}]}}]}}\n"
    )
    code, _, err = run_sim([str(f)])
    assert code != 0
    assert "ResourceClaim/default/broken" in err and "selectors[0].cel.expression" in err


def test_an_allocated_gpu_claim_shared_by_pods_counts_for_its_first_consumer_only() -> None:
    # KAI's DRASharedDeviceRefCount: the pods of one allocated claim share its devices, so a pod joining it (the
    # second consumer, or a pending pod naming it) asks for no GPU of its own; an unallocated claim counts for each
    shared = claim([{"name": "request", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}])
    shared["metadata"].update(name="shared", namespace="default")
    shared["status"] = {
        "allocation": {"devices": {"results": [{"request": "request", "driver": "gpu.example.com", "pool": "n1",
                                                 "device": "gpu-0"}]}},
        "reservedFor": [{"resource": "pods", "name": "first"}, {"resource": "pods", "name": "second"}],
    }  # fmt: skip
    fresh = claim([{"name": "request", "exactly": {"deviceClassName": "gpu.example.com", "count": 1}}])
    fresh["metadata"].update(name="fresh", namespace="default")
    dra = build_dra(claims=[parse_resource_claim(shared), parse_resource_claim(fresh)])

    def gpus(name: str, claim_name: str) -> int:
        doc = pod(name, "pg", gpu=0)
        doc["metadata"]["namespace"] = "default"
        doc["spec"]["resourceClaims"] = [{"name": "g", "resourceClaimName": claim_name}]
        return dra.pod_gpus(parse_pod(doc))

    assert [gpus("first", "shared"), gpus("second", "shared"), gpus("joiner", "shared")] == [1, 0, 0]
    assert [gpus("a", "fresh"), gpus("b", "fresh")] == [1, 1]


# --- the dynamicresources rule in the engine --------------------------------------------------------------


def nic_slice(node: str, count: int) -> dict[str, Any]:
    devices = [{"name": f"nic-{i}"} for i in range(count)]
    spec = {"driver": "nic.example.com", "nodeName": node, "pool": {"name": node, "generation": 1}, "devices": devices}
    return {"apiVersion": V1, "kind": "ResourceSlice", "metadata": {"name": f"{node}-nics"}, "spec": spec}


NIC_CLASS = {"apiVersion": V1, "kind": "DeviceClass", "metadata": {"name": "nic"}, "spec": {}}


def nic_claim(name: str, *counts: int, node: str | None = None, devices: tuple[str, ...] = (), user: str = "") -> dict:
    doc = claim([{"name": f"r{i}", "exactly": {"deviceClassName": "nic", "count": c}} for i, c in enumerate(counts)])
    doc["metadata"]["name"] = name
    if node is not None:
        results = [{"request": "r0", "driver": "nic.example.com", "pool": node, "device": d} for d in devices]
        match = [{"key": "metadata.name", "operator": "In", "values": [node]}]
        doc["status"] = {
            "allocation": {
                "devices": {"results": results},
                "nodeSelector": {"nodeSelectorTerms": [{"matchFields": match}]},
            },
            "reservedFor": [{"resource": "pods", "name": user}] if user else [],
        }
    return doc


def claiming(doc: dict[str, Any], claim_name: str) -> dict[str, Any]:
    doc["metadata"]["namespace"] = "default"
    doc["spec"]["resourceClaims"] = [{"name": "nics", "resourceClaimName": claim_name}]
    return doc


def dra_docs(*extra: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        queue("root"),
        queue("q", "root"),
        node("n1", gpu=0),
        node("n2", gpu=0),
        NIC_CLASS,
        nic_slice("n1", 3),
        nic_slice("n2", 4),
        *extra,
    ]


def test_requests_of_one_pod_that_compete_for_devices_are_counted_together() -> None:
    # two requests of 2 NICs each: each alone fits n1's three NICs, together only n2's four
    docs = dra_docs(nic_claim("pair", 2, 2), podgroup("pg", "q"), claiming(pod("p", "pg", gpu=0), "pair"))
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("allocate",)))
    (bind,) = result.binds
    assert bind.node == "n2"
    (alloc,) = bind.claims
    assert sorted(d[3] for d in alloc.devices) == ["nic-0", "nic-1", "nic-2", "nic-3"]
    assert sorted({d[0] for d in alloc.devices}) == ["r0", "r1"]


def test_a_gang_that_does_not_fit_keeps_no_device_and_the_next_job_gets_them() -> None:
    # gang: three pods of 3 NICs (one fits per node: 2 of 3); then a single pod of 4 NICs must still get n2's four
    gang = [claiming(pod(f"g{i}", "gang", gpu=0), f"g{i}") for i in range(3)]
    docs = dra_docs(
        *(nic_claim(f"g{i}", 3) for i in range(3)),
        nic_claim("solo", 4),
        podgroup("gang", "q", min_member=3),
        *gang,
        podgroup("solo", "q"),
        claiming(pod("s", "solo", gpu=0), "solo"),
    )
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("allocate",)))
    assert [(b.pod.name, b.node) for b in result.binds] == [("s", "n2")]
    assert [len(c.devices) for c in result.binds[0].claims] == [4]


def test_devices_of_a_claim_whose_pods_are_all_released_are_free_later_not_now() -> None:
    # n1's three NICs are held by "old"'s claim; old is being evicted (releasing): a pod wanting three NICs may be
    # pipelined onto n1 but not bound there; n2 is full (a claim holds its four)
    docs = dra_docs(
        nic_claim("held1", 3, node="n1", devices=("nic-0", "nic-1", "nic-2"), user="old"),
        nic_claim("held2", 4, node="n2", devices=("nic-0", "nic-1", "nic-2", "nic-3")),
        nic_claim("want", 3),
        podgroup("old", "q"),
        claiming(pod("old", "old", gpu=0, node_name="n1", releasing=True), "held1"),
        podgroup("new", "q"),
        claiming(pod("new", "new", gpu=0), "want"),
    )
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("allocate",)))
    assert not result.binds
    assert [(p.pod.name, p.node) for p in result.pipelines] == [("new", "n1")]


def test_an_allocated_claim_holds_its_devices_without_any_pod() -> None:
    docs = dra_docs(
        nic_claim("left", 3, node="n1", devices=("nic-0", "nic-1", "nic-2")),  # allocated, reserved for nobody
        nic_claim("want", 3),
        podgroup("new", "q"),
        claiming(pod("new", "new", gpu=0), "want"),
    )
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("allocate",)))
    assert [(b.pod.name, b.node) for b in result.binds] == [("new", "n2")]


def test_the_timeline_shows_the_devices_a_bind_allocates() -> None:
    case = Path(__file__).parents[1] / "scenarios" / "dra" / "reclaim_frees_devices"
    args = ["--actions", "allocate,reclaim", "--cycles", "2", "--at", f"1:{case / 'empty.yaml'}"]
    code, doc, err = run_sim([str(case / "cluster.yaml"), *args])
    assert code == 0, err
    assert doc is not None
    binds = [
        (r["cycle"], d["pod"], d.get("claims")) for r in doc["timeline"] for d in r["decisions"] if d["type"] == "bind"
    ]
    assert binds == [(2, "default/b0", ["default/b0-gpu -> node-a/gpu-1"])]


def _shared_claim_with_consumers(consumers: int) -> dict[str, Any]:
    """One NIC claim shared by the pods that name it, allocated on n1, reserved for *consumers* other pods."""
    doc = nic_claim("shared", 1, node="n1", devices=("nic-0",))
    doc["metadata"]["namespace"] = "default"
    doc["status"]["reservedFor"] = [{"resource": "pods", "name": f"other-{i}"} for i in range(consumers)]
    return doc


@pytest.mark.parametrize(("consumers", "placed"), [(253, 3), (254, 0), (256, 0)])
def test_a_claims_consumers_count_the_pods_placed_this_cycle(consumers: int, placed: int) -> None:
    # KAI's dynamicresources preFilter: reservedFor holds at most 256 consumers. A gang of three pods sharing the
    # claim fits beside 253 consumers; beside 254 its third pod would be the 257th, so the gang does not start
    # (KAI's allocate_dra_test.go 'Partially over claim max consumers limit'); beside 256 no pod may join
    gang = [claiming(pod(f"g{i}", "gang", gpu=0), "shared") for i in range(3)]
    docs = dra_docs(_shared_claim_with_consumers(consumers), podgroup("gang", "q", min_member=3), *gang)
    result = run_cycle(snapshot_of(docs), SchedulerConf(actions=("allocate",)))
    assert len(result.binds) == placed
    assert all(b.node == "n1" for b in result.binds)
    if not placed:
        (pg,) = result.podgroups
        assert "256 consumers already" in pg.conditions[0].message
