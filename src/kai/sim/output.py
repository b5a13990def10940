"""``kai sim`` output: the JSON/YAML document of the sim contract, and a table for people."""

from __future__ import annotations

import json
from typing import Any

import yaml
from rich.console import Console
from rich.table import Table

from kai.api import constants as C
from kai.api.dra import ResourceClaim
from kai.api.objects import Pod
from kai.api.quantity import format_bytes
from kai.api.storage import PersistentVolume
from kai.scheduler.decisions import CycleResult, Event
from kai.scheduler.dra import dra_of
from kai.scheduler.gpusharing import parse_share
from kai.scheduler.model import MILLI
from kai.sim.cluster import EmbeddedCluster
from kai.sim.gpushare import gpu_env, reservations


def node_resources(cluster: EmbeddedCluster) -> list[dict[str, Any]]:
    """Each node's allocatable, idle and releasing resources as the next cycle would see them (the cluster after
    the last cycle's decisions: binds hold their resources, evicted pods are releasing, pipelined pods wait):
    GPU in GPUs (a shared GPU counts whole once it has a group; releasing once all its pods are), CPU in
    millicores, memory in bytes. KAI's test harness checks the same after its rounds (IdleGPUs, ReleasingGPUs)."""
    snap = cluster.snapshot(cluster.last_conf)
    nodes = snap.nodes
    cols = {r: snap.resources.index(r) for r in ("nvidia.com/gpu", "cpu", "memory")}

    def amounts(row: Any) -> dict[str, float]:
        values = row.tolist()
        return {
            "gpu": values[cols["nvidia.com/gpu"]] / MILLI,
            "cpu": values[cols["cpu"]],
            "memory": values[cols["memory"]],
        }

    idle = nodes.allocatable - nodes.used
    return [
        {
            "name": name,
            "allocatable": amounts(nodes.allocatable[i]),
            "idle": amounts(idle[i]),
            "releasing": amounts(nodes.releasing[i]),
        }
        for i, name in enumerate(nodes.names)
    ]


def build_document(cluster: EmbeddedCluster, last: CycleResult | None, events: list[tuple[int, Event]]) -> dict:
    """The sim contract's output document after the last cycle."""
    pgs = {(pg.meta.namespace, pg.meta.name): pg for pg in cluster.store.list("PodGroup")}
    gpu_memory = {n.meta.name: n.meta.labels.get(C.LABEL_GPU_MEMORY, "") for n in cluster.nodes()}
    pods = []
    dra = dra_of(cluster.store)  # GPUs claimed through DRA count in a pod's GPUs, as queues count them
    views = cluster.pod_views()
    for v in views:
        pg_name = v.pod.meta.annotations.get(C.ANNOTATION_POD_GROUP_NAME, "")
        pg = pgs.get((v.pod.meta.namespace, pg_name))
        pods.append(
            {
                "namespace": v.pod.meta.namespace,
                "name": v.pod.meta.name,
                "podGroup": pg_name or None,
                "queue": pg.queue if pg else None,
                "status": v.status,
                "node": v.node or None,
                "gpus": pod_gpus(v.pod, gpu_memory.get(v.node or "", "")) + dra.pod_gpus(v.pod),
                "gpuGroups": list(v.gpu_groups),
                "gpuEnv": gpu_env(v, gpu_memory.get(v.node or "", "")),
            }
        )
    conditions = {(s.namespace, s.name): s.conditions for s in (last.podgroups if last else [])}
    podgroups = [
        {
            "namespace": pg.meta.namespace,
            "name": pg.meta.name,
            "queue": pg.queue,
            "minMember": pg.min_member,
            "priorityClassName": pg.priority_class_name or None,
            "conditions": [
                {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                for c in conditions.get((pg.meta.namespace, pg.meta.name), ())
            ],
        }
        for pg in cluster.store.list("PodGroup")
    ]
    queues = [
        {
            "name": q.name,
            **({"displayName": q.display_name} if q.display_name else {}),
            "parent": q.parent or None,
            "fairShare": q.fair_share,
            "allocated": q.allocated,
            "requested": q.requested,
            "quota": q.deserved,
            "limit": q.limit,
        }
        for q in (last.queues if last else [])
    ]
    doc = {
        "cycles": cluster.cycle,
        "pods": pods,
        "podGroups": podgroups,
        "queues": queues,
        "nodes": node_resources(cluster),
        "reservations": reservations(views),
        "events": [
            {"cycle": c, "object": e.object, "type": e.type, "reason": e.reason, "message": e.message}
            for c, e in events
        ],
    }
    claims = cluster.store.list("PersistentVolumeClaim")
    if claims:  # only when the input has claims: documents without storage stay as they were
        volumes = {v.meta.name: v for v in cluster.store.list("PersistentVolume")}
        doc["persistentVolumeClaims"] = [
            {
                "namespace": c.meta.namespace,
                "name": c.meta.name,
                "phase": c.phase,
                "volume": c.volume_name or None,
                "node": _pinned_node(volumes.get(c.volume_name)),
            }
            for c in claims
        ]
    resource_claims = cluster.store.list("ResourceClaim")
    if resource_claims:  # only when the input has DRA claims (or templates made some)
        doc["resourceClaims"] = [claim_view(c) for c in resource_claims]
    return doc


def claim_view(claim: ResourceClaim) -> dict[str, Any]:
    """A ResourceClaim in the output: where it is allocated, its devices, and the pods it is reserved for."""
    a = claim.allocation
    node = None
    if a is not None:
        node = next((f.values[0] for t in a.node_selector for f in t.match_fields if len(f.values) == 1), None)
    return {
        "namespace": claim.meta.namespace,
        "name": claim.meta.name,
        "allocated": a is not None,
        "node": node,
        "devices": [
            {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
            for r in (a.results if a is not None else ())
        ],
        "reservedFor": [c.name for c in claim.reserved_for],
    }


def _pinned_node(volume: PersistentVolume | None) -> str | None:
    """The node a volume is pinned to (a kubernetes.io/hostname requirement with one value), if any."""
    if volume is None:
        return None
    for term in volume.node_affinity:
        for r in term.match_expressions:
            if r.key == C.LABEL_HOSTNAME and r.operator == "In" and len(r.values) == 1:
                return r.values[0]
    return None


def pod_gpus(pod: Pod, node_gpu_memory: str) -> float:
    """The pod's GPU amount: whole GPUs, or a fraction summed over devices (a gpu-memory request as the
    share of its node's GPUs, rounded up to 0.01 as KAI does; before it is placed, of a default GPU)."""
    share, _ = parse_share(pod)
    if share is None:
        return float(pod.requests.get(C.RESOURCE_GPU, 0))
    try:
        memory = int(node_gpu_memory)
    except ValueError:
        memory = C.DEFAULT_GPU_MEMORY_MIB
    return share.accounted_milli(memory if memory > 0 else C.DEFAULT_GPU_MEMORY_MIB) / MILLI


def render_json(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2)


def render_yaml(doc: dict[str, Any]) -> str:
    return yaml.safe_dump(doc, sort_keys=False, width=120)


def _g(x: float) -> str:
    return "∞" if x == -1 else (f"{x:g}" if x == int(x) else f"{x:.2f}")


def _cpu(m: float) -> str:
    return "∞" if m == -1 else f"{m / 1000:g}"


def _mem(b: float) -> str:
    return "∞" if b == -1 else format_bytes(b)


def render_table(doc: dict[str, Any], console: Console) -> None:
    """Pods with status and node, queues with fair share vs allocated, and why pods wait."""
    pods = Table(title=f"Pods after {doc['cycles']} cycle(s)", title_justify="left")
    shared = any(p["gpuGroups"] for p in doc["pods"])  # the GPU GROUPS column only when GPUs are shared
    columns = ("NAMESPACE", "NAME", "STATUS", "NODE", "QUEUE", "PODGROUP", "GPUS")
    for col in (*columns, "GPU GROUPS") if shared else columns:
        pods.add_column(col)
    style = {"Binding": "green", "Running": "green", "Pipelined": "cyan", "Releasing": "yellow", "Pending": "red"}
    for p in doc["pods"]:
        st = p["status"]
        pods.add_row(
            p["namespace"],
            p["name"],
            f"[{style.get(st, 'white')}]{st}[/]",
            p["node"] or "-",
            p["queue"] or "-",
            p["podGroup"] or "-",
            _g(p["gpus"]),
            *((", ".join(p["gpuGroups"]) or "-",) if shared else ()),
        )
    console.print(pods)
    queues = Table(title="Queues (fair share / allocated / requested)", title_justify="left")
    for col in ("QUEUE", "PARENT", "GPU", "CPU (cores)", "MEMORY"):
        queues.add_column(col)
    for q in doc["queues"]:
        fs, al, rq = q["fairShare"], q["allocated"], q["requested"]
        queues.add_row(
            q["name"],
            q["parent"] or "-",
            f"{_g(fs['gpu'])} / {_g(al['gpu'])} / {_g(rq['gpu'])}",
            f"{_cpu(fs['cpu'])} / {_cpu(al['cpu'])} / {_cpu(rq['cpu'])}",
            f"{_mem(fs['memory'])} / {_mem(al['memory'])} / {_mem(rq['memory'])}",
        )
    console.print(queues)
    waiting = [pg for pg in doc["podGroups"] if pg["conditions"]]
    if waiting:
        console.print("[bold]Why pods wait[/]")
        for pg in waiting:
            for c in pg["conditions"]:
                console.print(f"  {pg['namespace']}/{pg['name']} [yellow]{c['reason']}[/]: {c['message']}")
