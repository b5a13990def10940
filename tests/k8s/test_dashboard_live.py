"""The dashboard in headless Chromium against a real API server with kai scheduling it.

``kai scheduler --dashboard-listen`` serves the page; Chromium loads it with its network limited by the
page's Content-Security-Policy (``connect-src 'self'``: the script may talk to its own origin only), and
the test checks the rendered DOM: queue names, a waiting job's reason (the one the scheduler wrote) and
the node x GPU map, with no console message at all. A screenshot is kept as a test artifact
(``test-artifacts/dashboard.png``). ``kai dashboard --kubeconfig`` (no scheduler) serves the same
document from its own informers. What a kubelet does (mark bound pods Running) is played by the test;
the half-GPU pod goes the real shared path (kai's admission webhook gives it its env, the binder makes
a reservation pod), with the device plugin and the reservation container played by ``GpuNode``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import shutil
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from lightkube import Client
from lightkube.resources.core_v1 import Pod

from kai.k8s._gpushare import ReservationOptions
from kai.k8s.envtest import ControlPlane
from tests.browser import chromium, console_lines
from tests.k8s.gpushare import GpuNode, fake_nvml, gpu_uuids, nvidia_runtime_class, webhook_port
from tests.k8s.sched import InProcess, Kubelet, PodGroup, options, wait_for
from tests.k8s.test_explain_live import pod, queue, waiting_condition

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


def get(url: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def _cluster(admin: Client, ns: str, nodes: Any) -> None:
    nodes("db-0", gpus=4, labels={"nvidia.com/gpu.product": "NVIDIA-A100"})
    admin.create(queue("db-dept", 4))
    admin.create(queue("db-team-a", 2, "db-dept"))
    admin.create(queue("db-team-b", 2, "db-dept"))


__all__ = ["fake_nvml", "webhook_port"]  # fixtures


def test_the_dashboard_in_chromium(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path, webhook_port: int, fake_nvml: Path
) -> None:
    _cluster(admin, ns, nodes)
    nvidia_runtime_class(scheduler_cluster)
    kubelet = Kubelet(admin)
    opts = options(
        scheduler_cluster,
        dashboard_listen="127.0.0.1:0",
        webhook_listen=("127.0.0.1", webhook_port),
        reservation=ReservationOptions(timeout_s=20),
    )
    with InProcess(opts) as run, GpuNode(admin, scheduler_cluster, "db-0", gpu_uuids("db-0", 4), fake_nvml):
        wait_for(lambda: run.call(run.scheduler.webhook_serving), "the admission webhooks to serve")
        port = run.scheduler.dashboard_port
        assert port > 0
        admin.create(pod("a-runs", ns, 3, queue="db-team-a"))
        wait_for(lambda: admin.get(Pod, "a-runs", namespace=ns).spec.nodeName, "a-runs to bind")
        admin.create(pod("a-half", ns, 0, queue="db-team-a", fraction="0.5"))  # half a GPU: a shared GPU
        wait_for(lambda: admin.get(Pod, "a-half", namespace=ns).spec.nodeName, "a-half to bind")
        kubelet.run_bound(ns)
        # non-preemptible and above team-b's quota of 2: it waits (NonPreemptibleOverQuota), nobody is evicted
        admin.create(pod("b-waits", ns, 3, queue="db-team-b", prio="inference"))
        group, written = waiting_condition(admin, ns, "b-waits")
        base = f"http://127.0.0.1:{port}"
        status, headers, body = get(base + "/")
        assert status == 200 and b"<script>" in body and b"src=" not in body  # inline only: nothing to fetch
        csp = headers["Content-Security-Policy"]
        assert "connect-src 'self'" in csp and "default-src 'none'" in csp
        assert get(base + "/api/overview", "POST")[0] == 405  # read-only
        assert get(base + "/api/nope")[0] == 404
        status, _, body = get(base + "/api/overview")
        doc = json.loads(body)
        reason = next(p["reason"] for p in doc["pending"] if p["podGroup"] == f"{ns}/{group}")
        assert written.startswith(reason)
        assert doc["cycles"] and doc["cycles"][0]["real"]  # the scheduler's own cycles feed the history

        proc = chromium(tmp_path, "--dump-dom", "--virtual-time-budget=15000", base + "/")
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert console_lines(proc.stderr) == []
        dom = proc.stdout
        assert 'data-rendered="' in dom and 'data-rendered="0"' not in dom
        for name in ("db-dept", "db-team-a", "db-team-b", f"{ns}/{group}"):
            assert name in dom, name
        assert reason.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in dom
        assert 'data-gpu-cells="' in dom and 'data-gpu-cells="0"' not in dom
        cells = re.findall(r'title="db-0 GPU (\d): ([^"]*)"', dom)  # the map: who holds which GPU
        assert sorted(c[0] for c in cells) == ["0", "1", "2", "3"]
        held = sorted(c[1] for c in cells)
        assert held == [f"{ns}/a-half (db-team-a, 0.5)"] + [f"{ns}/a-runs (db-team-a, 1)"] * 3, held

        png = tmp_path / "dashboard.png"
        proc = chromium(
            tmp_path, "--hide-scrollbars", "--window-size=1200,1400", "--virtual-time-budget=15000",
            f"--screenshot={png}", base + "/",
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-2000:]
        data = png.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 30_000
        ARTIFACTS.mkdir(exist_ok=True)
        shutil.copy(png, ARTIFACTS / "dashboard.png")


def test_the_dashboard_shows_what_the_next_cycle_decides_on(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """A bind that outran its PodGroup's create: the pod-grouper decided the group, the Binding carried the
    annotation, and the create waits behind binds (docs/cluster.md, "What precedes a bind"). The Store then
    has a bound pod of kai's and no PodGroup for it; the dashboard shows what the next cycle decides on, so
    the pod holds its GPU for its queue. The window is held open by the test: the pod-grouper's writes wait
    on the test's gate (its ``quiet`` hook, which otherwise waits for binds in flight)."""
    nodes("dv-0", gpus=2)
    admin.create(queue("dv-dept", 2))
    admin.create(queue("dv-team", 2, "dv-dept"))
    gate = threading.Event()

    async def held() -> None:
        while not gate.is_set():
            await asyncio.sleep(0.05)

    with InProcess(options(scheduler_cluster, dashboard_listen="127.0.0.1:0")) as run:
        grouper = run.scheduler.grouper
        assert grouper is not None
        # the scheduler sets the grouper's hook to its applier's as it starts: the gate goes in after that
        wait_for(lambda: run.call(lambda: run.scheduler.applier is not None), "kai's applier")
        run.call(lambda: setattr(grouper, "quiet", held))
        try:
            admin.create(pod("dv-runs", ns, 1, queue="dv-team"))
            wait_for(lambda: admin.get(Pod, "dv-runs", namespace=ns).spec.nodeName, "dv-runs to bind")
            assert list(admin.list(PodGroup, namespace=ns)) == []  # its create is held
            status, _, body = get(f"http://127.0.0.1:{run.scheduler.dashboard_port}/api/overview")
            assert status == 200, body
            doc = json.loads(body)
            (row,) = [n for n in doc["gpuMap"]["nodes"] if n["name"] == "dv-0"]
            assert sorted((h["pod"], h["queue"]) for cell in row["gpus"] for h in cell) == [
                (f"{ns}/dv-runs", "dv-team")
            ]
            team = next(q for q in doc["queues"] if q["queue"] == "dv-team")
            assert team["allocated"]["gpu"] == 1  # accounted to its queue, as the cycle accounts it
        finally:
            gate.set()
        wait_for(lambda: list(admin.list(PodGroup, namespace=ns)), "its PodGroup, once the gate opens")


def test_the_page_is_blocked_from_any_other_origin(tmp_path: Path) -> None:
    """The CSP the server sends is real: the same page served with a script that fetches another origin
    logs a CSP violation (and the console check above would catch it)."""
    from kai.dashboard import CSP, page

    html = page().replace("<body>", "<body><script>fetch('http://127.0.0.1:9/x').catch(function(){});</script>")
    doc = tmp_path / "page.html"
    doc.write_text(html.replace("<head>", f'<head><meta http-equiv="Content-Security-Policy" content="{CSP}">'))
    proc = chromium(tmp_path, "--dump-dom", "--virtual-time-budget=3000", doc.as_uri())
    assert any("Content Security Policy" in line for line in console_lines(proc.stderr)), proc.stderr[-2000:]


def test_kai_dashboard_serves_a_cluster_read_only(
    scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes
) -> None:
    """``kai dashboard --kubeconfig``: its own informers, dry runs, loopback, GET only."""
    from kai.dashboard.command import run_dashboard

    nodes("kd-0", gpus=2)
    admin.create(pod("solo", ns, 4))  # 4 GPUs on a 2-GPU node: it waits (no scheduler runs here)
    loop = asyncio.new_event_loop()
    ports: list[int] = []
    task: list[asyncio.Task[None]] = []

    def main() -> None:
        asyncio.set_event_loop(loop)
        t = loop.create_task(run_dashboard(str(scheduler_cluster.kubeconfig), "127.0.0.1:0", "default", ports.append))
        task.append(t)
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(t)

    thread = threading.Thread(target=main, daemon=True)
    thread.start()
    try:
        port = wait_for(lambda: ports and ports[0], "kai dashboard to listen")
        status, _, body = get(f"http://127.0.0.1:{port}/api/overview")
        assert status == 200, body
        doc = json.loads(body)
        assert doc["source"].startswith("kai dashboard (read-only")
        assert {"default-queue", "default-parent-queue"} <= {q["queue"] for q in doc["queues"]}
        assert doc["cycles"][0]["real"] is False  # a dry run, marked as such
        # the pod is not grouped (no scheduler, so no pod-grouper ran): the dashboard does not invent a group
        assert all(p["podGroup"] != f"{ns}/solo" for p in doc["pending"])
        assert get(f"http://127.0.0.1:{port}/", "DELETE")[0] == 405
    finally:
        loop.call_soon_threadsafe(lambda: task and task[0].cancel())
        thread.join(timeout=30)
