"""End-to-end fill benchmark: ``kai scheduler`` vs kube-scheduler on a real API server.

Run with ``.venv/bin/python benchmarks/e2e_fill.py`` (flags: ``--nodes 500 --gpus 8 --pods 4000``,
``--only kai|kube``, ``--json``). Needs the control-plane binaries (``make control-plane``). The
control plane and kube-scheduler are the current Kubernetes release; ``KAI_K8S_VERSION=oldest`` runs
1.20.2, the release of the figures in benchmarks/RESULTS.md so far.

For each scheduler, on a fresh control plane (etcd on tmpfs + kube-apiserver, loopback):

1. ``--nodes`` Ready nodes with ``--gpus`` nvidia.com/gpu each (no kubelets; envtest's node bodies).
2. ``--pods`` one-GPU pods are created first. For kai they carry ``schedulerName: kai-scheduler`` and
   the ``pod-group-name`` of a PodGroup created with them (one per pod, minMember 1, default-queue):
   what KAI's pod-grouper, which runs while pods are created, would have done. For kube-scheduler they
   are plain pods.
3. The scheduler starts as a real process: ``kai scheduler`` (leader election on, as deployed) or
   ``kube-scheduler --kube-api-qps=5000 --kube-api-burst=5000``. The clock runs from the process's
   start until a watch on the pods has seen every one bound.

kai's figure therefore includes Python's start-up, the Lease, and listing 500 nodes and 4,000 pods.
The ratio compares pods/s (pods / seconds to all bound).

For experiments: ``KAI_E2E_ARGS="--bind-concurrency=16"`` adds flags to ``kai scheduler``;
``KAI_E2E_PYSPY=out.txt`` runs kai under py-spy (raw collapsed stacks, written on exit).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from kai.k8s._api import Api, load_config  # noqa: E402
from kai.k8s.envtest import Binaries, ControlPlane, node_manifest, node_status  # noqa: E402

CONCURRENCY = 64


async def _bounded(calls: list[Any], limit: int = CONCURRENCY) -> None:
    sem = asyncio.Semaphore(limit)

    async def one(c: Any) -> None:
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in calls))


async def make_nodes(api: Api, n: int, gpus: int) -> None:
    async def one(i: int) -> None:
        name = f"node-{i:04d}"
        await api.request("POST", "/api/v1/nodes", body=node_manifest(name))
        await api.request(
            "PATCH",
            f"/api/v1/nodes/{name}/status",
            body={"status": node_status(gpus=gpus, cpu="64", memory="512Gi")},
            content_type="application/merge-patch+json",
        )
        # the API server's admission adds the not-ready taint at creation; a kubelet would clear it
        await api.request(
            "PATCH",
            f"/api/v1/nodes/{name}",
            body={"spec": {"taints": None}},
            content_type="application/merge-patch+json",
        )

    await _bounded([one(i) for i in range(n)])


def pod_body(name: str, ns: str, *, kai: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    }
    if kai:
        meta["labels"] = {"kai.scheduler/queue": "default-queue"}
        meta["annotations"] = {"pod-group-name": f"pg-{name}"}
        spec["schedulerName"] = "kai-scheduler"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def podgroup_body(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": f"pg-{name}", "namespace": ns},
        "spec": {"minMember": 1, "queue": "default-queue", "priorityClassName": "train"},
    }


async def make_pods(api: Api, n: int, ns: str, *, kai: bool) -> None:
    await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    names = [f"p-{i:05d}" for i in range(n)]
    if kai:
        base = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups"
        await _bounded([api.request("POST", base, body=podgroup_body(x, ns)) for x in names])
    path = f"/api/v1/namespaces/{ns}/pods"
    await _bounded([api.request("POST", path, body=pod_body(x, ns, kai=kai)) for x in names])


class _PodSpec(msgspec.Struct):
    nodeName: str = ""


class _Meta(msgspec.Struct):
    name: str = ""


class _Pod(msgspec.Struct):
    """Only what the clock needs: the harness shares the 2 cores with the scheduler it measures, so it
    decodes no more of each watch event than the pod's name and node."""

    metadata: _Meta
    spec: _PodSpec | None = None


class _Ev(msgspec.Struct):
    type: str
    object: msgspec.Raw


async def wait_all_bound(api: Api, ns: str, n: int, started: float, deadline_s: float) -> float:
    """Seconds from *started* until a watch has seen *n* pods of *ns* with a nodeName."""
    data = await api.get_raw(f"/api/v1/namespaces/{ns}/pods")
    lst = msgspec.json.decode(data)
    bound = {p["metadata"]["name"] for p in lst["items"] if (p.get("spec") or {}).get("nodeName")}
    rv = lst["metadata"]["resourceVersion"]
    if len(bound) >= n:
        return time.perf_counter() - started
    dec = msgspec.json.Decoder(_Ev)
    pod = msgspec.json.Decoder(_Pod)
    params = {"watch": "1", "resourceVersion": rv, "timeoutSeconds": str(int(deadline_s))}
    async for line in api.stream_lines(f"/api/v1/namespaces/{ns}/pods", params, read_timeout=deadline_s):
        ev = dec.decode(line)
        if ev.type not in ("ADDED", "MODIFIED"):
            continue
        p = pod.decode(ev.object)
        if p.spec is not None and p.spec.nodeName:
            bound.add(p.metadata.name)
            if len(bound) >= n:
                return time.perf_counter() - started
    raise TimeoutError(f"only {len(bound)} of {n} pods bound after {deadline_s:.0f} s")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_one(binaries: Binaries, which: str, args: argparse.Namespace) -> dict[str, Any]:
    cp = ControlPlane(binaries)
    cp.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        if which == "kai":
            out = subprocess.run(
                [sys.executable, "-c", "from kai.cli import main; main()", "install", f"--kubeconfig={cp.kubeconfig}"],
                capture_output=True,
                text=True,
                check=True,
            )
            assert "namespace/kai-scheduler created" in out.stdout  # the Lease's namespace

        async def setup() -> None:
            api = Api(load_config(str(cp.kubeconfig)))
            try:
                t = time.perf_counter()
                await make_nodes(api, args.nodes, args.gpus)
                await make_pods(api, args.pods, "fill", kai=which == "kai")
                print(f"  [{which}] {args.nodes} nodes and {args.pods} pods made in {time.perf_counter() - t:.1f} s")
            finally:
                await api.close()

        asyncio.run(setup())
        log = cp.workdir / f"{which}-scheduler.log"  # type: ignore[operator]
        if which == "kai":
            cmd = [
                str(Path(sys.executable).parent / "kai"),
                "scheduler",
                f"--kubeconfig={cp.kubeconfig}",
                "--metrics-bind-address=127.0.0.1:0",
                *os.environ.get("KAI_E2E_ARGS", "").split(),
            ]
            if os.environ.get("KAI_E2E_PYSPY"):  # profile kai: py-spy writes a speedscope file there
                spy = Path(sys.executable).parent / "py-spy"
                cmd = [str(spy), "record", "-r", "200", "-f", "raw", "-o", os.environ["KAI_E2E_PYSPY"], "--", *cmd]
        else:
            cmd = [
                str(binaries.kube_scheduler),
                f"--kubeconfig={cp.kubeconfig}",
                "--bind-address=127.0.0.1",
                "--port=0",
                "--secure-port=0",
                "--leader-elect=false",
                "--kube-api-qps=5000",
                "--kube-api-burst=5000",
            ]

        cpu: dict[str, float] = {}

        async def measure() -> float:
            nonlocal proc
            api = Api(load_config(str(cp.kubeconfig)))
            apiserver = cp.pids()["kube-apiserver"]
            etcd = cp.pids()["etcd"]
            before = cpu_seconds(apiserver), cpu_seconds(etcd)
            try:
                with open(log, "wb") as fh:
                    started = time.perf_counter()
                    cpu["started_wall"] = time.time()
                    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
                seconds = await wait_all_bound(api, "fill", args.pods, started, deadline_s=600)
                cpu["scheduler_cpu_s"] = round(cpu_seconds(proc.pid), 2)
                cpu["apiserver_cpu_s"] = round(cpu_seconds(apiserver) - before[0], 2)
                cpu["etcd_cpu_s"] = round(cpu_seconds(etcd) - before[1], 2)
                return seconds
            finally:
                await api.close()

        seconds = asyncio.run(measure())
        time.sleep(args.linger)  # let kai log its cycle (the watch may see the last bind first)
        result: dict[str, Any] = {
            "scheduler": which,
            "seconds": round(seconds, 2),
            "pods_per_s": round(args.pods / seconds),
            **{k: v for k, v in cpu.items() if k != "started_wall"},
        }
        if which == "kai":
            result.update(_kai_log_figures(log, cpu.pop("started_wall")))
            if args.log:
                print(log.read_text(errors="replace"))
        return result
    finally:
        if proc is not None:
            if os.environ.get("KAI_E2E_PYSPY"):
                proc.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
            else:
                proc.terminate()
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
        cp.stop()


def _kai_log_figures(log: Path, started_wall: float) -> dict[str, Any]:
    """From kai's JSON log: the sync time, the cycles that bound pods, and when (seconds after the process
    started) kai held the Lease, had synced, and finished its first binding cycle."""
    out: dict[str, Any] = {"cycles": [], "timeline": {}}
    for line in log.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        ts = rec.get("ts")
        at = round(datetime.fromisoformat(ts).timestamp() - started_wall, 2) if isinstance(ts, str) else None
        if rec.get("msg") in ("became leader", "informers synced", "cycle"):
            out["timeline"].setdefault(rec["msg"], at)
        if rec.get("msg") == "informers synced":
            out["sync_s"] = rec.get("seconds")
        elif rec.get("msg") == "cycle":
            out["cycles"].append(
                {k: rec.get(k) for k in ("bound", "snapshot_s", "engine_s", "bind_s", "bind_cpu_s", "status_s")}
            )
    return out


def byte_compile() -> None:
    """Byte-compile kai's modules, as pip does when it installs a wheel: an editable install under
    PYTHONDONTWRITEBYTECODE would otherwise compile every module from source at each start, a cost no
    deployed scheduler pays."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "src" / "kai")], env=env, check=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument("--only", choices=["kai", "kube"], default=None)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--log", action="store_true", help="print kai's log")
    ap.add_argument("--linger", type=float, default=3.0, help="seconds the scheduler runs on after the fill")
    ap.add_argument("--runs", type=int, default=1, help="alternate kai and kube-scheduler this many times")
    args = ap.parse_args()
    binaries = Binaries.find()
    byte_compile()
    results = []
    for run in range(args.runs):
        for w in ("kai", "kube"):
            if args.only in (None, w):
                results.append({"run": run + 1, **run_one(binaries, w, args)})
    summary: dict[str, Any] = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}",
        "setup": f"{args.nodes} nodes x {args.gpus} GPUs, {args.pods} one-GPU pods",
        "results": results,
    }
    medians = {
        w: statistics.median(r["seconds"] for r in results if r["scheduler"] == w)
        for w in ("kai", "kube")
        if any(r["scheduler"] == w for r in results)
    }
    if len(medians) == 2:
        # pods/s ratio = inverse ratio of the times (same number of pods)
        summary["ratio_pods_per_s"] = round(medians["kube"] / medians["kai"], 2)
        summary["median_seconds"] = medians
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(summary["machine"], "|", summary["setup"])
        for r in results:
            extra = f" (informers synced in {r['sync_s']} s)" if "sync_s" in r else ""
            run = f"run {r['run']} " if args.runs > 1 else ""
            print(f"  {run}{r['scheduler']:5s} all bound in {r['seconds']:6.2f} s = {r['pods_per_s']} pods/s{extra}")
            print(
                f"        CPU s while filling: scheduler {r['scheduler_cpu_s']}, kube-apiserver "
                f"{r['apiserver_cpu_s']}, etcd {r['etcd_cpu_s']}"
            )
            for c in r.get("cycles", []):
                print(f"        cycle: {c}")
            if r.get("timeline"):
                print("        seconds after start: " + ", ".join(f"{k} {v}" for k, v in r["timeline"].items()))
        if "ratio_pods_per_s" in summary:
            m = summary["median_seconds"]
            what = f"medians of {args.runs} runs, " if args.runs > 1 else ""
            ratio = summary["ratio_pods_per_s"]
            print(f"  kai / kube-scheduler pods/s: {ratio}x ({what}kai {m['kai']} s, kube {m['kube']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
