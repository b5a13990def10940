"""kai sim shows GPU sharing delivered as on a cluster: the reservation pod of each GPU group in use and each
shared pod's NVIDIA_VISIBLE_DEVICES / GPU_PORTION, with a stable symbolic UUID per GPU (docs/sim-contract.md)."""

from __future__ import annotations

from pathlib import Path

from kai.api.sharedgpu import reservation_pod_name, symbolic_uuid
from tests.conftest import run_sim

EXAMPLE = Path(__file__).parents[1] / "examples" / "gpu-sharing" / "cluster.yaml"

CLUSTER = """
apiVersion: v1
kind: Node
metadata: {name: n0, labels: {nvidia.com/gpu.memory: "40000"}}
status: {allocatable: {cpu: "32", memory: 256Gi, nvidia.com/gpu: "4"}}
---
apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: q}
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    cpu: {quota: -1, limit: -1, overQuotaWeight: 1}
    memory: {quota: -1, limit: -1, overQuotaWeight: 1}
""" + "".join(
    f"""---
apiVersion: v1
kind: Pod
metadata: {{name: {name}, labels: {{kai.scheduler/queue: q}}, annotations: {annotations}}}
spec: {{schedulerName: kai-scheduler, containers: [{{name: c}}]}}
"""
    for name, annotations in (
        ("two-halves", '{gpu-fraction: "0.5", gpu-fraction-num-devices: "2"}'),
        ("by-memory", '{gpu-memory: "10000"}'),
        ("whole", "{}"),
    )
)


def _doc(path: Path, *args: str) -> dict:
    code, doc, err = run_sim([str(path), *args])
    assert code == 0 and doc is not None, err
    return doc


def test_two_pods_on_one_gpu_see_the_same_stable_uuid_and_one_reservation_pod() -> None:
    doc = _doc(EXAMPLE)
    pods = {p["name"]: p for p in doc["pods"]}
    uuid = symbolic_uuid("gpu-node", "gpu-node-gpu0")
    for name in ("chat-small", "embedder"):
        assert pods[name]["gpuEnv"] == {
            "NVIDIA_VISIBLE_DEVICES": uuid,
            "GPU_PORTION": "0.50",
            "RUNAI_NUM_OF_GPUS": "0.50",
        }
    assert doc["reservations"] == [
        {
            "namespace": "kai-resource-reservation",
            "name": reservation_pod_name("gpu-node", "gpu-node-gpu0"),
            "node": "gpu-node",
            "gpuGroup": "gpu-node-gpu0",
            "uuid": uuid,
        }
    ]
    assert reservation_pod_name("gpu-node", "gpu-node-gpu0").startswith("gpu-reservation-")
    assert len(reservation_pod_name("gpu-node", "gpu-node-gpu0")) == len("gpu-reservation-") + 16
    later = _doc(EXAMPLE, "--cycles", "3")  # Running now: the same GPU, the same UUID
    assert {p["gpuEnv"]["NVIDIA_VISIBLE_DEVICES"] for p in later["pods"]} == {uuid}
    assert later["reservations"] == doc["reservations"]


def test_multi_device_and_gpu_memory_pods(tmp_path: Path) -> None:
    f = tmp_path / "c.yaml"
    f.write_text(CLUSTER)
    doc = _doc(f)
    pods = {p["name"]: p for p in doc["pods"]}
    two = pods["two-halves"]
    assert len(two["gpuGroups"]) == 2
    devices = two["gpuEnv"]["NVIDIA_VISIBLE_DEVICES"].split(",")
    assert devices == [symbolic_uuid("n0", g) for g in two["gpuGroups"]] and len(set(devices)) == 2
    assert two["gpuEnv"]["GPU_PORTION"] == "0.50"  # per device
    mem = pods["by-memory"]
    assert mem["gpuEnv"]["GPU_PORTION"] == "0.25"  # 10000 MiB of a 40000 MiB GPU
    assert pods["whole"]["gpuEnv"] == {}  # whole GPUs come from the device plugin, not kai
    groups = {g for p in doc["pods"] for g in p["gpuGroups"]}
    assert {r["gpuGroup"] for r in doc["reservations"]} == groups
    assert {r["uuid"] for r in doc["reservations"]} == {symbolic_uuid("n0", g) for g in groups}
