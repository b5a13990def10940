"""Arrival-stream benchmark: pods arriving at a steady rate, latency from creation to bind, on a real API server.

Run with ``.venv/bin/python benchmarks/e2e_arrival.py`` (flags: ``--rate 200 --seconds 60 --nodes 1600
--gpus 8 --job-share 0.5``, ``--only kai|kube``, ``--runs``, ``--json``). Needs the control-plane binaries
(``make control-plane``); ``KAI_K8S_VERSION=oldest`` runs 1.20.2.

For each scheduler, on a fresh control plane (etcd on tmpfs + kube-apiserver + kube-controller-manager):

1. ``--nodes`` Ready nodes with ``--gpus`` GPUs each, enough for every pod (no kubelet runs, so no pod
   ever finishes).
2. The scheduler starts as a real process (``kai scheduler`` as deployed; or kube-scheduler) and is
   given 5 s to start and sync.
3. For ``--seconds``, one-GPU pods arrive at ``--rate`` per second, in ticks of 50 ms: a share
   (``--job-share``) as Jobs of ``--job-size`` pods made by kube-controller-manager, the rest as bare
   pods, as users create them (for kai: the queue label and schedulerName, nothing else).
4. One watch on the pods stamps each pod when it is first seen (ADDED: its creation) and when it is
   first seen bound; the latency is the difference, both on the harness's clock. The sustained rate is
   pods bound per second between the first and the last bind.

Figures: p50, p99 and max latency (p99 also for the bare pods and the Jobs' pods apart), the sustained rate,
and the CPU seconds of each process. For a closer look: ``KAI_E2E_LOG=FILE`` keeps the scheduler's log (kai
logs each binding cycle's phases), ``KAI_E2E_LATENCIES=FILE`` writes each pod's creation (seconds after the
first) and latency, ``KAI_E2E_PYSPY=FILE`` profiles kai (as in ``e2e_fill.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

from e2e_fill import (  # noqa: E402
    _Ev,
    _Pod,
    alternate,
    cpu_seconds,
    job_body,
    kai_install,
    machine,
    make_nodes,
    pod_body,
    scheduler_cmd,
    stop_scheduler,
)
from kai.k8s._api import Api, load_config  # noqa: E402
from kai.k8s.envtest import Binaries, ControlPlane  # noqa: E402

TICK_S = 0.05
NS = "arrive"


async def arrive(api: Api, args: argparse.Namespace, *, kai: bool) -> int:
    """Create pods at ``args.rate`` per second for ``args.seconds``; how many pods were asked for."""
    ticks = int(args.seconds / TICK_S)
    per_tick = args.rate * TICK_S
    job_every = max(1, round(args.job_size / (per_tick * args.job_share))) if args.job_share > 0 else 0
    owed = 0.0
    pods = jobs = made = 0
    t0 = time.perf_counter()
    pending: set[asyncio.Task[Any]] = set()
    for tick in range(ticks):
        owed += per_tick * (1 - args.job_share)
        calls = []
        while owed >= 1:
            owed -= 1
            body = pod_body(f"p-{pods:06d}", NS, kai=kai)
            calls.append(api.request("POST", f"/api/v1/namespaces/{NS}/pods", body=body))
            pods += 1
        if job_every and tick % job_every == 0:
            body = job_body(f"j-{jobs:05d}", NS, args.job_size, kai=kai)
            calls.append(api.request("POST", f"/apis/batch/v1/namespaces/{NS}/jobs", body=body))
            jobs += 1
            made += args.job_size
        for c in calls:
            task = asyncio.ensure_future(c)
            pending.add(task)
            task.add_done_callback(pending.discard)
        await asyncio.sleep(max(0.0, t0 + (tick + 1) * TICK_S - time.perf_counter()))
    await asyncio.gather(*pending)
    return pods + made


KINDS = (("bare", "p-"), ("job", "j-"))


def _quantiles(lat: list[float]) -> list[float]:
    return statistics.quantiles(lat, n=100) if len(lat) >= 2 else lat * 99


async def watch_latencies(api: Api, stop_after: asyncio.Future[int], deadline_s: float) -> dict[str, Any]:
    """Stamp each pod when first seen and when first seen bound, until every pod asked for is bound. A watch
    the API server ends early (1.37 does under load: likely a watcher that falls behind) is opened again from
    the last resourceVersion seen, and the events since are replayed: a pod bound in the gap is stamped bound
    late (its latency overstated), and a pod made in the gap is left out of the latencies, its creation not
    seen in time (``gap_pods``; ``watch_resumed`` counts the reopenings)."""
    seen: dict[str, float] = {}
    bound: dict[str, float] = {}
    dec = msgspec.json.Decoder(_Ev)
    pod = msgspec.json.Decoder(_Pod)
    end = time.perf_counter() + deadline_s
    rv = ""
    resumed = -1
    gap: set[str] = set()  # pods first seen in a replay: made while no watch was open
    while not (stop_after.done() and len(bound) >= stop_after.result()):
        left = end - time.perf_counter()
        if left <= 0:
            raise RuntimeError(f"only {len(bound)} pods bound after {deadline_s:.0f} s: no figures")
        resumed += 1
        replayed_to = 0  # events up to this resourceVersion (an etcd revision) happened while none was open
        if rv:
            head = msgspec.json.decode(await api.get_raw(f"/api/v1/namespaces/{NS}/pods", {"limit": "1"}))
            replayed_to = int(head["metadata"]["resourceVersion"])
        params = {"watch": "1", "timeoutSeconds": str(int(left)), **({"resourceVersion": rv} if rv else {})}
        async for line in api.stream_lines(f"/api/v1/namespaces/{NS}/pods", params, read_timeout=left):
            now = time.perf_counter()
            ev = dec.decode(line)
            if ev.type == "ERROR":  # 410 Gone: the events since rv are lost, and the stamps with them
                raise RuntimeError(f"the pod watch could not resume from {rv}: {bytes(ev.object)[:200]!r}")
            if ev.type not in ("ADDED", "MODIFIED"):
                continue
            p = pod.decode(ev.object)
            rv = p.metadata.resourceVersion or rv
            name = p.metadata.name
            if name not in seen and int(rv or 0) <= replayed_to:
                gap.add(name)
            seen.setdefault(name, now)
            if p.spec is not None and p.spec.nodeName and name not in bound:
                bound[name] = now
            if stop_after.done() and len(bound) >= stop_after.result():
                break
    timed = [n for n in bound if n not in gap]
    lat = sorted(bound[n] - seen[n] for n in timed)
    q = _quantiles(lat)
    first, last = min(bound.values()), max(bound.values())
    if os.environ.get("KAI_E2E_LATENCIES"):  # each pod's creation (s after the first) and latency, for a look
        t0 = min(seen.values())
        rows = sorted((seen[n] - t0, bound[n] - seen[n], n) for n in timed)
        Path(os.environ["KAI_E2E_LATENCIES"]).write_text("".join(f"{a:.3f} {b:.3f} {n}\n" for a, b, n in rows))
    # bare pods (p-*) and the Jobs' pods (j-*, made by kube-controller-manager, grouped by their owner) apart
    by_kind = {kind: sorted(bound[n] - seen[n] for n in timed if n.startswith(prefix)) for kind, prefix in KINDS}
    return {
        "pods": len(bound),
        "p50_s": round(q[49], 3),
        "p99_s": round(q[98], 3),
        "max_s": round(lat[-1], 3),
        **{f"p99_{kind}_s": round(_quantiles(v)[98], 3) for kind, v in by_kind.items() if v},
        "sustained_pods_per_s": round(len(bound) / (last - first), 1) if last > first else None,
        "watch_resumed": resumed,
        "gap_pods": len(gap),
    }


def run_one(binaries: Binaries, which: str, args: argparse.Namespace) -> dict[str, Any]:
    cp = ControlPlane(binaries)
    cp.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        cp.start_controller_manager()
        if which == "kai":
            kai_install(cp)

        async def measure() -> dict[str, Any]:
            nonlocal proc
            api = Api(load_config(str(cp.kubeconfig)))
            try:
                await make_nodes(api, args.nodes, args.gpus)
                await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": NS}})
                log = cp.workdir / f"{which}-scheduler.log"  # type: ignore[operator]
                with open(log, "wb") as fh:
                    proc = subprocess.Popen(scheduler_cmd(which, binaries, cp), stdout=fh, stderr=subprocess.STDOUT)
                await asyncio.sleep(5.0)  # start-up and sync, outside the figure
                pids = cp.pids()
                before = {k: cpu_seconds(pids[k]) for k in ("kube-apiserver", "etcd", "kube-controller-manager")}
                before["scheduler"] = cpu_seconds(proc.pid)
                asked: asyncio.Future[int] = asyncio.get_running_loop().create_future()
                watcher = asyncio.ensure_future(watch_latencies(api, asked, args.seconds + 300))
                await asyncio.sleep(0.2)  # the watch is open before the first pod
                asked.set_result(await arrive(api, args, kai=which == "kai"))
                out = await watcher
                out["cpu_s"] = {
                    "scheduler": round(cpu_seconds(proc.pid) - before["scheduler"], 1),
                    **{k: round(cpu_seconds(pids[k]) - v, 1) for k, v in before.items() if k != "scheduler"},
                }
                return out
            finally:
                await api.close()

        return {"scheduler": which, **asyncio.run(measure())}
    finally:
        if proc is not None:
            stop_scheduler(proc)
            if os.environ.get("KAI_E2E_LOG") and cp.workdir is not None:  # the scheduler's log, kept for a look
                shutil.copy(cp.workdir / f"{which}-scheduler.log", os.environ["KAI_E2E_LOG"])
        cp.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=200.0, help="pods per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--nodes", type=int, default=1600)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--job-share", type=float, default=0.5, help="share of the pods that come in Jobs")
    ap.add_argument("--job-size", type=int, default=20, help="pods per Job")
    ap.add_argument("--only", choices=["kai", "kube"], default=None)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    need = int(args.rate * args.seconds) + args.job_size
    if args.nodes * args.gpus < need:
        ap.error(f"{args.nodes} nodes x {args.gpus} GPUs cannot hold {need} pods: no pod finishes here")
    results = alternate(args, run_one)
    summary = {
        "machine": machine(),
        "setup": f"{args.nodes} nodes x {args.gpus} GPUs; {args.rate:g} one-GPU pods/s for {args.seconds:g} s, "
        f"{args.job_share:.0%} in Jobs of {args.job_size}",
        "results": results,
    }
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(summary["machine"], "|", summary["setup"])
        for r in results:
            print(
                f"  run {r['run']} {r['scheduler']:5s} {r['pods']} pods: creation to bind p50 {r['p50_s']} s, "
                f"p99 {r['p99_s']} s (bare {r.get('p99_bare_s')} s, Jobs' {r.get('p99_job_s')} s), "
                f"max {r['max_s']} s; sustained {r['sustained_pods_per_s']} pods/s; "
                f"CPU s {r['cpu_s']}"
                + (f"; watch resumed {r['watch_resumed']}x, {r['gap_pods']} left out" if r["watch_resumed"] else "")
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
