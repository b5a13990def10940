"""Admission webhook latency: 1,000 pod creates through kai's webhooks on a real API server.

Run with ``.venv/bin/python benchmarks/bench_webhook.py`` (flags: ``--pods 1000 --runs 3 --concurrency 16
--json``). Needs the control-plane binaries (``make control-plane``).

On one control plane (etcd on tmpfs + kube-apiserver, loopback), ``kai install --webhook-url
https://127.0.0.1:PORT`` registers the webhooks, and ``kai scheduler --kubeconfig K --webhook-listen
127.0.0.1:PORT`` runs as a real process (kai's ServiceAccount, leader election on). Each run creates
``--pods`` kai pods asking for ``gpu-fraction: 0.5`` in a fresh namespace, ``--concurrency`` at a time: each
create goes through the mutating webhook (env, ConfigMap references) and the validating one, while kai's
pod-grouper makes a PodGroup per pod (each through the PodGroup webhook too) and its cycles run over the
growing pending set (there are no nodes: nothing binds). Runs alternate with runs where the webhook
configurations are removed (the baseline), on the same API server.

Three figures per run, from three vantage points:

* the API server's own ``apiserver_admission_webhook_admission_duration_seconds`` histogram for kai's pod
  webhooks (time from the API server's call to its answer, TLS included): coarse buckets (5 ms, 25 ms, ...),
  so its p99 is reported as the bucket bound it falls in;
* kai's ``kai_admission_latency_milliseconds`` histogram (request read to answer written, in the server);
* the client's create latency, p50 and p99, against the baseline run without webhooks.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from kai.k8s._api import Api, load_config  # noqa: E402
from kai.k8s.envtest import Binaries, ControlPlane, free_port  # noqa: E402

POD_HOOK = "admission.kai-scheduler.svc"


LOG = Path(tempfile.gettempdir()) / "kai-bench-webhook.log"


def _kai(*args: str, **kw: Any) -> subprocess.Popen[bytes]:
    """``kai ARGS`` as a process; its log (JSON lines) goes to LOG, never to a pipe nobody reads."""
    exe = Path(sys.executable).parent / "kai"
    with open(LOG, "ab") as log:
        return subprocess.Popen([str(exe), *args], stdout=subprocess.DEVNULL, stderr=log, **kw)


def _pod(ns: str, i: int, scheduler: str = "kai-scheduler") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p{i}",
            "namespace": ns,
            "labels": {"kai.scheduler/queue": "default-queue"},
            "annotations": {"gpu-fraction": "0.5"},
        },
        "spec": {"schedulerName": scheduler, "containers": [{"name": "c", "image": "x"}]},
    }


SCHEDULER = "kai-scheduler"


def _histogram(text: str, metric: str, match: dict[str, str]) -> dict[float, float]:
    """Cumulative bucket counts (le -> count) of *metric* summed over series whose labels include *match*."""
    out: dict[float, float] = {}
    for line in text.splitlines():
        if not line.startswith(metric + "_bucket{"):
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', line[: line.rindex("}")]))
        if any(labels.get(k) != v for k, v in match.items()):
            continue
        le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
        out[le] = out.get(le, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def _quantile_bound(before: dict[float, float], after: dict[float, float], q: float) -> tuple[float, int]:
    """(the upper bound of the bucket holding quantile *q*, the number of observations) between two scrapes."""
    diff = {le: after.get(le, 0) - before.get(le, 0) for le in sorted(after)}
    total = diff.get(float("inf"), 0)
    for le, n in diff.items():
        if n >= q * total:
            return le, int(total)
    return float("inf"), int(total)


def _interpolated(before: dict[float, float], after: dict[float, float], q: float) -> float:
    """Prometheus' histogram_quantile: linear inside the bucket holding quantile *q*."""
    diff = sorted((le, after.get(le, 0) - before.get(le, 0)) for le in after)
    total = diff[-1][1]
    rank, prev_le, prev_n = q * total, 0.0, 0.0
    for le, n in diff:
        if n >= rank:
            if le == float("inf"):
                return prev_le
            return prev_le + (le - prev_le) * (rank - prev_n) / max(n - prev_n, 1e-9)
        prev_le, prev_n = le, n
    return prev_le


async def _creates(api: Api, ns: str, n: int, concurrency: int) -> list[float]:
    await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    lat: list[float] = []
    it = iter(range(n))

    async def worker() -> None:
        for i in it:
            t0 = time.perf_counter()
            await api.request("POST", f"/api/v1/namespaces/{ns}/pods", body=_pod(ns, i, SCHEDULER))
            lat.append((time.perf_counter() - t0) * 1000)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return lat


def _scrape(url: str, token: str | None = None, ca: Path | None = None) -> str:
    import ssl

    ctx = ssl.create_default_context(cafile=str(ca)) if ca else None
    if ctx is not None:
        ctx.check_hostname = False
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(req, timeout=10, context=ctx) as r:
        return r.read().decode()


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


async def bench(pods: int, runs: int, concurrency: int) -> dict[str, Any]:
    with ControlPlane(Binaries.find()) as cp:
        port, metrics_port, hook_metrics = free_port(), free_port(), free_port()
        kubectl = [str(cp.binaries.kubectl), f"--kubeconfig={cp.kubeconfig}"]
        install = _kai("install", "--kubeconfig", str(cp.kubeconfig), "--webhook-url", f"https://127.0.0.1:{port}")
        assert install.wait(120) == 0, f"kai install failed: see {LOG}"
        subprocess.run([*kubectl, "apply", "-f", str(REPO / "deploy" / "rbac.yaml")], check=True, capture_output=True)
        saved = subprocess.run(
            [
                *kubectl,
                "get",
                "mutatingwebhookconfiguration/mutating-kai-admission",
                "validatingwebhookconfiguration/validating-kai-admission",
                "-o",
                "yaml",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        kai = _kai(
            "scheduler",
            "--kubeconfig",
            str(cp.scheduler_kubeconfig),
            "--webhook-listen",
            f"127.0.0.1:{port}",
            "--metrics-bind-address",
            f"127.0.0.1:{metrics_port}",
            "--gpu-fraction-runtime-class-name",
            "",
            "--webhook-metrics-port",
            str(hook_metrics),
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    if urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/readyz", timeout=2).status == 200:
                        break
                except OSError:
                    pass
                assert time.monotonic() < deadline and kai.poll() is None, "kai scheduler did not become ready"
                time.sleep(0.2)
            api = Api(load_config(str(cp.kubeconfig)), max_connections=concurrency + 4)
            token = cp.token()
            results: list[dict[str, Any]] = []
            for r in range(runs):
                for with_webhook in (True, False):
                    if with_webhook:
                        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
                            f.write(saved)
                            f.flush()
                            subprocess.run([*kubectl, "apply", "-f", f.name], check=True, capture_output=True)
                    else:
                        subprocess.run(
                            [
                                *kubectl,
                                "delete",
                                "mutatingwebhookconfiguration/mutating-kai-admission",
                                "validatingwebhookconfiguration/validating-kai-admission",
                            ],
                            check=True,
                            capture_output=True,
                        )
                    time.sleep(1.0)  # the API server picks the configuration change up
                    api_before = _scrape(f"{cp.url}/metrics", token, cp.ca_file)
                    kai_before = _scrape(f"http://127.0.0.1:{hook_metrics}/metrics")
                    lat = await _creates(api, f"bench-{uuid.uuid4().hex[:6]}", pods, concurrency)
                    api_after = _scrape(f"{cp.url}/metrics", token, cp.ca_file)
                    kai_after = _scrape(f"http://127.0.0.1:{hook_metrics}/metrics")
                    row: dict[str, Any] = {
                        "run": r + 1,
                        "webhook": with_webhook,
                        "create_p50_ms": round(statistics.median(lat), 2),
                        "create_p99_ms": round(_pct(lat, 0.99), 2),
                    }
                    if with_webhook:
                        metric = "apiserver_admission_webhook_admission_duration_seconds"
                        for kind in ("admit", "validating"):
                            sel = {"name": POD_HOOK, "operation": "CREATE", "type": kind}
                            le, n = _quantile_bound(
                                _histogram(api_before, metric, sel), _histogram(api_after, metric, sel), 0.99
                            )
                            row[f"apiserver_{kind}_p99_le_ms"] = le * 1000
                            row[f"apiserver_{kind}_calls"] = n
                        kb = _histogram(kai_before, "kai_admission_latency_milliseconds", {})
                        ka = _histogram(kai_after, "kai_admission_latency_milliseconds", {})
                        row["kai_server_p99_ms"] = round(_interpolated(kb, ka, 0.99), 3)
                        row["kai_server_p50_ms"] = round(_interpolated(kb, ka, 0.50), 3)
                        row["kai_server_requests"] = int(ka[float("inf")] - kb.get(float("inf"), 0))
                    results.append(row)
                    print(json.dumps(row), flush=True)
            await api.close()
        finally:
            kai.terminate()
            try:
                kai.wait(15)
            except subprocess.TimeoutExpired:
                kai.kill()
    return {"pods": pods, "concurrency": concurrency, "runs": results, "machine": platform.platform()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--json", action="store_true")
    p.add_argument(
        "--scheduler-name", default="kai-scheduler", help="schedulerName of the pods (another: kai has no work)"
    )
    a = p.parse_args()
    global SCHEDULER
    SCHEDULER = a.scheduler_name
    doc = asyncio.run(bench(a.pods, a.runs, a.concurrency))
    hooked = [r for r in doc["runs"] if r["webhook"]]
    base = [r for r in doc["runs"] if not r["webhook"]]
    summary = {
        "create_p99_ms_with_webhooks_median": statistics.median(r["create_p99_ms"] for r in hooked),
        "create_p99_ms_without_median": statistics.median(r["create_p99_ms"] for r in base),
        "create_p50_ms_with_webhooks_median": statistics.median(r["create_p50_ms"] for r in hooked),
        "create_p50_ms_without_median": statistics.median(r["create_p50_ms"] for r in base),
        "kai_server_p99_ms_median": statistics.median(r["kai_server_p99_ms"] for r in hooked),
        "apiserver_admit_p99_le_ms_max": max(r["apiserver_admit_p99_le_ms"] for r in hooked),
        "apiserver_validating_p99_le_ms_max": max(r["apiserver_validating_p99_le_ms"] for r in hooked),
    }
    doc["summary"] = summary
    print(json.dumps(doc, indent=2) if a.json else json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
