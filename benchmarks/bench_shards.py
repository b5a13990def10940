"""SchedulingShards: two ``kai scheduler --shard`` processes fill two node pools vs one process filling both.

Run with ``.venv/bin/python benchmarks/bench_shards.py`` (flags: ``--nodes 50`` per pool, ``--gpus 8``,
``--pods 400`` per pool, ``--rounds 3``, ``--json``). Needs the control-plane binaries
(``make control-plane``); the current Kubernetes release.

Each measurement has a fresh control plane (etcd + kube-apiserver on loopback) holding two pools, ``a`` and
``b``: ``--nodes`` Ready nodes each, labelled ``kai.scheduler/node-pool=<pool>``, a Queue per pool with the
same label, and ``--pods`` one-GPU pods per pool, each with its PodGroup made beforehand (what the
pod-grouper would have done, as in ``e2e_fill.py``), both labelled with the pool. Then either

* ``one``: one ``kai scheduler`` (no SchedulingShard: the whole cluster) fills both pools, or
* ``two``: SchedulingShards ``shard-a`` and ``shard-b`` exist and ``kai scheduler --shard shard-a`` and
  ``--shard shard-b`` start together, each filling its own pool.

The clock runs from the start of the process(es) until a watch has seen every pod bound. The modes
alternate within a round, so a ratio compares runs made minutes apart on the same machine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from e2e_fill import _bounded, wait_all_bound  # noqa: E402
from kai.k8s._api import Api, load_config  # noqa: E402
from kai.k8s.envtest import Binaries, ControlPlane, node_manifest, node_status  # noqa: E402

KEY = "kai.scheduler/node-pool"
POOLS = ("a", "b")
NS = "fill"


async def make_pools(api: Api, nodes: int, gpus: int, pods: int) -> None:
    async def node(pool: str, i: int) -> None:
        name = f"{pool}-{i:04d}"
        await api.request("POST", "/api/v1/nodes", body=node_manifest(name, {KEY: pool}))
        await api.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            body={"status": node_status(gpus=gpus, cpu="64", memory="512Gi")},
            content_type="application/merge-patch+json",
        )
        await api.request(  # the admission's not-ready taint; a kubelet would clear it
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"spec": {"taints": None}},
            content_type="application/merge-patch+json",
        )

    await _bounded([node(p, i) for p in POOLS for i in range(nodes)])
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    for pool in POOLS:
        await api.request(
            "POST",
            "/apis/scheduling.run.ai/v2/queues",
            body={
                "apiVersion": "scheduling.run.ai/v2",
                "kind": "Queue",
                "metadata": {"name": f"q-{pool}", "labels": {KEY: pool}},
                "spec": {"resources": {r: unlimited for r in ("gpu", "cpu", "memory")}},
            },
        )
    await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
    names = [(p, f"{p}-{i:05d}") for p in POOLS for i in range(pods)]
    base = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{NS}/podgroups"
    await _bounded(
        [
            api.request(
                "POST",
                base,
                body={
                    "apiVersion": "scheduling.run.ai/v2alpha2",
                    "kind": "PodGroup",
                    "metadata": {"name": f"pg-{n}", "namespace": NS, "labels": {KEY: p}},
                    "spec": {"minMember": 1, "queue": f"q-{p}", "priorityClassName": "train"},
                },
            )
            for p, n in names
        ]
    )
    await _bounded(
        [
            api.request(
                "POST",
                f"/api/v1/namespaces/{NS}/pods",
                body={
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": n,
                        "namespace": NS,
                        "labels": {KEY: p, "kai.scheduler/queue": f"q-{p}"},
                        "annotations": {"pod-group-name": f"pg-{n}"},
                    },
                    "spec": {
                        "schedulerName": "kai-scheduler",
                        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                    },
                },
            )
            for p, n in names
        ]
    )


async def make_shards(api: Api) -> None:
    for pool in POOLS:
        await api.request(
            "POST",
            "/apis/kai.scheduler/v1/schedulingshards",
            body={
                "apiVersion": "kai.scheduler/v1",
                "kind": "SchedulingShard",
                "metadata": {"name": f"shard-{pool}"},
                "spec": {"partitionLabelValue": pool},
            },
        )


async def _wait_bound(api: Api, total: int, started: float, deadline_s: float) -> float:
    """e2e_fill's watch, opened again (after a fresh list) whenever the API server ends it early."""
    while True:
        left = deadline_s - (time.perf_counter() - started)
        if left <= 0:
            raise TimeoutError(f"not all {total} pods bound after {deadline_s:.0f} s")
        try:
            return await wait_all_bound(api, NS, total, started, deadline_s=left)
        except TimeoutError:
            continue


def run_one(binaries: Binaries, mode: str, args: argparse.Namespace) -> dict[str, Any]:
    cp = ControlPlane(binaries)
    cp.start()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        kai = str(Path(sys.executable).parent / "kai")
        subprocess.run([kai, "install", f"--kubeconfig={cp.kubeconfig}"], capture_output=True, check=True)

        async def setup() -> None:
            api = Api(load_config(str(cp.kubeconfig)))
            try:
                await make_pools(api, args.nodes, args.gpus, args.pods)
                if mode == "two":
                    await make_shards(api)
            finally:
                await api.close()

        asyncio.run(setup())
        shards = [f"--shard=shard-{p}" for p in POOLS] if mode == "two" else [""]
        total = args.pods * len(POOLS)

        async def measure() -> float:
            api = Api(load_config(str(cp.kubeconfig)))
            try:
                started = time.perf_counter()
                for i, shard in enumerate(shards):
                    log = open(cp.workdir / f"kai-{mode}-{i}.log", "wb")  # type: ignore[operator]  # noqa: SIM115
                    cmd = [kai, "scheduler", f"--kubeconfig={cp.kubeconfig}", "--metrics-bind-address=127.0.0.1:0"]
                    procs.append(subprocess.Popen([*cmd, *([shard] if shard else [])], stdout=log, stderr=log))
                return await _wait_bound(api, total, started, deadline_s=600)
            finally:
                await api.close()

        seconds = asyncio.run(measure())
        return {"mode": mode, "seconds": round(seconds, 2), "pods_per_s": round(total / seconds)}
    finally:
        logs = Path(args.logs) if args.logs else None
        if logs is not None:  # the scheduler logs outlive the control plane's workdir
            logs.mkdir(parents=True, exist_ok=True)
            for f in cp.workdir.glob("kai-*.log"):  # type: ignore[union-attr]
                shutil.copy(f, logs / f"{int(time.time())}-{f.name}")
        for p in procs:
            p.terminate()
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
        cp.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=50, help="nodes per pool")
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--pods", type=int, default=400, help="one-GPU pods per pool")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--logs", default="", help="copy the kai scheduler logs into this directory")
    args = parser.parse_args()
    binaries = Binaries.find()
    runs: list[dict[str, Any]] = []
    for r in range(args.rounds):
        for mode in ("one", "two") if r % 2 == 0 else ("two", "one"):
            res = run_one(binaries, mode, args)
            res["round"] = r + 1
            runs.append(res)
            print(f"round {r + 1} {mode}: {res['seconds']} s, {res['pods_per_s']} pods/s", flush=True)
    med = {m: statistics.median(x["seconds"] for x in runs if x["mode"] == m) for m in ("one", "two")}
    ratios = [
        round(one["seconds"] / two["seconds"], 2)
        for r in range(1, args.rounds + 1)
        for one in runs
        for two in runs
        if one["round"] == two["round"] == r and one["mode"] == "one" and two["mode"] == "two"
    ]
    summary = {
        "machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cores",
        "pools": len(POOLS),
        "nodes_per_pool": args.nodes,
        "pods_per_pool": args.pods,
        "runs": runs,
        "median_seconds": med,
        "speedup_per_round": ratios,
        "median_speedup": statistics.median(ratios),
    }
    print(json.dumps(summary, indent=2) if args.json else summary)


if __name__ == "__main__":
    main()
