"""The fill's floor: a binder given the answer, the least any scheduler must do to bind the fill's pods.

``benchmarks/e2e_fill.py --floor`` starts this in the scheduler's place, on the same fresh control plane
and the same bare pods, with the same clock (from the process's start until the harness's watch has
seen every pod bound). What it leaves out is everything a scheduler decides: it lists no pods, groups
none, builds no snapshot and runs no engine. Pod ``p-{i:05d}`` goes to node ``node-{i // gpus:04d}``.

What it keeps is what every scheduler pays to the machine beside its binds, so that its time is a floor,
not a shortcut:

- a Python process that imports kai's HTTP client and reads the kubeconfig (the start of any Python
  scheduler);
- one Binding per pod, with kai's ``pod-group-name`` annotation (the API server's field manager and its
  copy onto the pod cost what they cost kai), ``--concurrency`` in flight over kai's ``FastHttp``, as
  ``kai scheduler`` sends them (without the pod's uid, which kai's Bindings carry as a precondition: the
  floor has not listed the pods; and without connections opened ahead, which kai opens while it decides);
- a pod watch open from the namespace's current resourceVersion, its events read and dropped: the API
  server serializes each bind's event for it, as for any scheduler's informer.

Why: ``≥ 3x kube-scheduler`` is a ratio of two processes sharing two cores with kube-apiserver and etcd.
This shows how much of the fill's time is left to a scheduler's own work once the machine's binds are
paid (benchmarks/RESULTS.md, twenty-fourth session).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path

from kai.k8s._api import load_config
from kai.k8s._fasthttp import FastHttp


def since_start() -> float:
    """Seconds since this process started (Linux: /proc, to 10 ms): the imports are part of any Python
    scheduler's start, so the figures count from the process's start, not from this module's."""
    ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
    return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")


async def drain(http: FastHttp, path: str) -> int:
    """Read the watch's events and drop them; how many lines were read."""
    lines = await http.stream_lines(path, read_timeout=60.0)
    if isinstance(lines, tuple):
        raise RuntimeError(f"the pod watch was refused: {lines[0]} {lines[1][:200]!r}")
    n = 0
    async for _ in lines:
        n += 1
    return n


async def fill(kubeconfig: str, ns: str, pods: int, gpus: int, concurrency: int) -> None:
    """Bind every pod, print when the first request went out and how long the binds took, then keep the
    watch open until stopped (the harness's clock ends at the last bind it sees: the process must outlive it)."""
    http = FastHttp.for_config(load_config(kubeconfig), max_connections=concurrency)
    if http is None:
        raise RuntimeError("the kubeconfig's credentials are not ones kai's FastHttp sends")
    base = f"/api/v1/namespaces/{ns}/pods"
    status, data = await http.request("GET", f"{base}?limit=1", None, "")
    if status != 200:
        raise RuntimeError(f"list: {status} {data[:200]!r}")
    rv = json.loads(data)["metadata"]["resourceVersion"]
    watch = asyncio.create_task(drain(http.sibling(1), f"{base}?watch=1&resourceVersion={rv}"))
    first = since_start()
    todo = iter(range(pods))

    async def worker() -> None:
        for i in todo:
            name = f"p-{i:05d}"
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": ns, "annotations": {"pod-group-name": f"pg-{name}"}},
                "target": {"apiVersion": "v1", "kind": "Node", "name": f"node-{i // gpus:04d}"},
            }
            status, data = await http.request(
                "POST", f"{base}/{name}/binding", json.dumps(body).encode(), "application/json"
            )
            if status != 201:
                raise RuntimeError(f"bind {name}: {status} {data[:200]!r}")

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    done = since_start()
    print(json.dumps({"first_bind_s": round(first, 3), "binds_s": round(done - first, 3)}), flush=True)
    try:
        await watch  # on, as a scheduler's informer is, until the harness stops the process
    finally:
        await http.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", default="fill")
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--concurrency", type=int, default=64)
    args = ap.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(fill(args.kubeconfig, args.namespace, args.pods, args.gpus, args.concurrency))
    return 0


if __name__ == "__main__":
    sys.exit(main())
