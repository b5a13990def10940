"""End-to-end fill benchmark: ``kai scheduler`` vs kube-scheduler on a real API server.

Run with ``.venv/bin/python benchmarks/e2e_fill.py`` (flags: ``--nodes 500 --gpus 8 --pods 4000``,
``--mode bare|pregrouped|job``, ``--only kai|kube|floor``, ``--floor``, ``--runs N``, ``--json``). Needs the
control-plane binaries (``make control-plane``). The control plane and kube-scheduler are the current Kubernetes
release; ``KAI_K8S_VERSION=oldest`` runs 1.20.2, the release of the figures in benchmarks/RESULTS.md.

For each scheduler, on a fresh control plane (etcd on tmpfs + kube-apiserver, loopback):

1. ``--nodes`` Ready nodes with ``--gpus`` nvidia.com/gpu each (no kubelets; envtest's node bodies).
2. ``--pods`` one-GPU pods are created first. For kai, ``--mode bare`` (the default) makes them as users
   do: the label ``kai.scheduler/queue: default-queue`` and ``schedulerName: kai-scheduler``, nothing
   else, so kai's pod-grouper makes every PodGroup; ``--mode pregrouped`` (a labelled variant) gives each
   a PodGroup made beforehand (minMember 1, default-queue) and the annotation naming it, so the
   pod-grouper does nothing. For kube-scheduler they are plain pods.
3. The scheduler starts as a real process: ``kai scheduler`` (leader election on, as deployed) or
   ``kube-scheduler --kube-api-qps=5000 --kube-api-burst=5000``. The clock runs from the process's
   start until a watch on the pods has seen every one bound. That watch (and the list it starts from) is
   opened before the scheduler starts, and the API server's and etcd's CPU are counted from then, so the
   clock's own list is not served beside the scheduler's start.

``--mode job`` is the other path users take: one Job of ``--pods`` one-GPU pods (parallelism = completions),
made by the real kube-controller-manager (the control plane runs it in this mode). For kai the Job carries
the queue label and its pod template the label and ``schedulerName: kai-scheduler``; for kube-scheduler it
is a plain Job. The scheduler starts first and is given ``--settle`` seconds (kai: and until its log says
its informers synced); the clock then runs from the Job's create until every pod is seen bound, the path
of a user who submits a Job to a running scheduler. That clock includes kube-controller-manager making
the pods (reported as ``pods_made_s``), and excludes the scheduler's start-up. Also reported: the PodGroups
kai made (one for the Job), kai's binding cycles, writes by verb and resource, and the CPU of
kube-controller-manager too.

kai's figure therefore includes Python's start-up, the Lease, and listing 500 nodes and 4,000 pods.
``--floor`` (bare mode) runs, after kai and kube-scheduler in each round, benchmarks/e2e_floor.py in the
scheduler's place: a binder given the answer (no list, no decisions; a pod watch open, kai's Bindings), timed
by the same clock. Its time is what the machine's binds cost a Python scheduler that knew everything at its
start; the gap between it and a target is what a scheduler has left for its own work.
The ratio compares pods/s (pods / seconds to all bound). Also reported: the API server's write requests
per pod (``apiserver_request_total``, by resource) until all are bound and after ``--linger`` seconds
more, the CPU seconds of each process while filling, and (bare mode) when every PodGroup exists.

For experiments: ``KAI_E2E_ARGS="--bind-concurrency=16"`` adds flags to ``kai scheduler``;
``KAI_E2E_BURN=0.15`` runs, beside either scheduler, a process that keeps that fraction of one core busy for
``KAI_E2E_BURN_S`` seconds (4) from the scheduler's start (``start_burner``: how much CPU taken beside the fill
costs it);
``KAI_E2E_PYSPY=out.txt`` runs kai under py-spy (raw collapsed stacks, written on exit; with
``KAI_E2E_PYSPY_FORMAT=speedscope`` its samples in order, idle ones included, for a timeline);
``KAI_E2E_APISERVER_PPROF=prefix`` profiles kube-apiserver while the scheduler fills (``_apiserver_profile``).
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
from collections.abc import Callable
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


def pod_body(name: str, ns: str, *, kai: bool, grouped: bool = False) -> dict[str, Any]:
    """A one-GPU pod. For kai: bare, as users create them (queue label and schedulerName, nothing else),
    or *grouped* (annotated with a PodGroup made beforehand)."""
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
    }
    if kai:
        meta["labels"] = {"kai.scheduler/queue": "default-queue"}
        if grouped:
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


async def make_pods(api: Api, n: int, ns: str, *, kai: bool, grouped: bool = False) -> None:
    await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": ns}})
    names = [f"p-{i:05d}" for i in range(n)]
    if kai and grouped:
        base = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups"
        await _bounded([api.request("POST", base, body=podgroup_body(x, ns)) for x in names])
    path = f"/api/v1/namespaces/{ns}/pods"
    await _bounded([api.request("POST", path, body=pod_body(x, ns, kai=kai, grouped=grouped)) for x in names])


def job_body(name: str, ns: str, size: int, *, kai: bool) -> dict[str, Any]:
    """A Job of *size* one-GPU pods, all at once (parallelism = completions = size). For kai the Job carries
    the queue label and its pod template the label and ``schedulerName: kai-scheduler``, as users write
    them; for kube-scheduler it is a plain Job."""
    template = pod_body("x", ns, kai=kai)
    template["metadata"] = {k: v for k, v in template["metadata"].items() if k in ("labels",)}
    template["spec"]["restartPolicy"] = "Never"
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if kai:
        meta["labels"] = {"kai.scheduler/queue": "default-queue"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"parallelism": size, "completions": size, "template": template},
    }


WRITE_VERBS = ("POST", "PATCH", "PUT", "DELETE")


async def apiserver_writes(api: Api, *, by_verb: bool = False) -> dict[str, int]:
    """The API server's count of write requests so far, by resource (``apiserver_request_total``); keyed
    ``VERB resource`` with *by_verb* (job mode: the pods' POSTs are kube-controller-manager's, not the
    scheduler's)."""
    text = (await api.get_raw("/metrics")).decode()
    out: dict[str, int] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{"):
            continue
        labels_s, _, value = line.rpartition(" ")
        labels = dict(kv.split("=", 1) for kv in labels_s[len("apiserver_request_total{") : -1].split(",") if "=" in kv)
        labels = {k: v.strip('"') for k, v in labels.items()}
        if labels.get("verb") not in WRITE_VERBS:
            continue
        what = labels.get("resource", "") + ("/" + labels["subresource"] if labels.get("subresource") else "")
        if by_verb:
            what = f"{labels['verb']} {what}"
        out[what] = out.get(what, 0) + int(float(value))
    return out


def _delta(after: dict[str, int], before: dict[str, int]) -> dict[str, int]:
    return {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0) > 0}


async def wait_podgroups(api: Api, ns: str, n: int, started: float, deadline_s: float) -> tuple[float | None, int]:
    """Seconds from *started* until *ns* holds *n* PodGroups (kai's pod-grouper made them all), None if not
    within *deadline_s*; and how many it holds then."""
    end = time.perf_counter() + deadline_s
    path = f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups"
    count = 0
    while time.perf_counter() < end:
        lst = msgspec.json.decode(await api.get_raw(path, {"limit": "1"}))
        meta = lst.get("metadata") or {}
        count = len(lst.get("items") or []) + int(meta.get("remainingItemCount") or 0)
        if count >= n:
            return time.perf_counter() - started, count
        await asyncio.sleep(0.1)
    return None, count


class _PodSpec(msgspec.Struct):
    nodeName: str = ""


class _Meta(msgspec.Struct):
    name: str = ""
    resourceVersion: str = ""


class _Pod(msgspec.Struct):
    """Only what the clock needs: the harness shares the 2 cores with the scheduler it measures, so it
    decodes no more of each watch event than the pod's name and node."""

    metadata: _Meta
    spec: _PodSpec | None = None


class _Ev(msgspec.Struct):
    type: str
    object: msgspec.Raw


async def watch_pods(
    api: Api, ns: str, n: int, deadline_s: float, on_open: Callable[[], None] | None = None
) -> tuple[float, float]:
    """Watch the pods of *ns* until *n* of them have a nodeName: the harness's clock (``perf_counter``) when
    the *n*-th pod was first seen (made; job mode: by kube-controller-manager) and when the *n*-th was
    first seen bound. A watch the API server ends early (1.37 does under load, likely closing a watcher that
    falls behind a fast scheduler's events) is resumed from a fresh list: the pods bound in the gap count as
    seen bound when that list is read, later than they were, never earlier. *on_open* is called once the
    first list is read and its watch accepted: a caller that starts the scheduler then has its clock in
    place, and the clock's own list (4,000 pods from etcd) is not served while the scheduler starts."""
    end = time.perf_counter() + deadline_s
    seen: set[str] = set()
    bound: set[str] = set()
    all_seen: float | None = None
    dec = msgspec.json.Decoder(_Ev)
    pod = msgspec.json.Decoder(_Pod)
    lists = 0
    while (left := end - time.perf_counter()) > 0:
        if lists:
            print(f"  [harness] the pod watch ended at {len(bound)} bound: listing again", file=sys.stderr)
        lists += 1
        lst = msgspec.json.decode(await api.get_raw(f"/api/v1/namespaces/{ns}/pods"))
        seen |= {p["metadata"]["name"] for p in lst["items"]}
        bound |= {p["metadata"]["name"] for p in lst["items"] if (p.get("spec") or {}).get("nodeName")}
        now = time.perf_counter()
        if all_seen is None and len(seen) >= n:
            all_seen = now
        if len(bound) >= n:
            return all_seen or now, now
        params = {"watch": "1", "resourceVersion": lst["metadata"]["resourceVersion"], "timeoutSeconds": str(int(left))}
        opened, on_open = on_open, None  # once: a resumed watch is not news
        async for line in api.stream_lines(f"/api/v1/namespaces/{ns}/pods", params, read_timeout=left, on_open=opened):
            ev = dec.decode(line)
            if ev.type == "ERROR":  # 410 Gone and the like: list again
                break
            if ev.type not in ("ADDED", "MODIFIED"):
                continue
            p = pod.decode(ev.object)
            if all_seen is None:
                seen.add(p.metadata.name)
                if len(seen) >= n:
                    all_seen = time.perf_counter()
            if p.spec is not None and p.spec.nodeName:
                bound.add(p.metadata.name)
                if len(bound) >= n:
                    now = time.perf_counter()
                    return all_seen or now, now
    raise TimeoutError(f"only {len(bound)} of {n} pods bound after {deadline_s:.0f} s")


async def wait_all_bound(api: Api, ns: str, n: int, started: float, deadline_s: float) -> float:
    """Seconds from *started* until a watch has seen *n* pods of *ns* with a nodeName."""
    return (await watch_pods(api, ns, n, deadline_s))[1] - started


async def clock_in_place(api: Api, ns: str, n: int, deadline_s: float) -> asyncio.Future[tuple[float, float]]:
    """``watch_pods`` started, returned once its first list is read and its watch is open: the scheduler is
    started after this, so the clock observes the fill without adding its own list to the scheduler's
    start (until the twenty-second session it listed the namespace's pods at the scheduler's start, and
    the API server served that list beside the scheduler's own)."""
    opened = asyncio.get_running_loop().create_future()
    clock = asyncio.ensure_future(watch_pods(api, ns, n, deadline_s, on_open=lambda: opened.set_result(None)))
    await asyncio.wait({opened, clock}, return_when=asyncio.FIRST_COMPLETED)
    if clock.done():
        clock.result()  # the list or the watch failed: raise it here
        raise RuntimeError(f"all {n} pods of {ns} were bound before the scheduler started")
    return clock


async def while_alive(watch: Any, proc: subprocess.Popen[bytes], log: Path) -> Any:
    """Await *watch* unless the scheduler exits first (kai exits 1 when it loses its Lease, as deployed a
    Deployment would restart it): then fail the run at once, naming the exit, instead of at the deadline."""
    task = asyncio.ensure_future(watch)
    while not task.done():
        await asyncio.wait({task}, timeout=0.5)
        if not task.done() and proc.poll() is not None:
            task.cancel()
            raise RuntimeError(f"the scheduler exited ({proc.returncode}) before every pod was bound: see {log}")
    return task.result()


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kai_install(cp: ControlPlane) -> None:
    """``kai install``: CRDs, the default queues and the Lease's namespace."""
    out = subprocess.run(
        [sys.executable, "-c", "from kai.cli import main; main()", "install", f"--kubeconfig={cp.kubeconfig}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "namespace/kai-scheduler created" in out.stdout  # the Lease's namespace


_BURN = """
import sys, time
duty, end = float(sys.argv[1]), time.perf_counter() + float(sys.argv[2])
while time.perf_counter() < end:
    t = time.perf_counter()
    while time.perf_counter() - t < 0.001:
        pass
    time.sleep(0.001 * (1 - duty) / duty)
"""


def burn_duty() -> float:
    """``KAI_E2E_BURN``, the fraction of one core the burner takes; 0 (no burner) when unset or outside (0, 1).
    One reading serves the burner and the result's ``burn``, so the result never names a burner that did not run."""
    duty = float(os.environ.get("KAI_E2E_BURN") or 0)
    return duty if 0 < duty < 1 else 0.0


def start_burner(duty: float) -> subprocess.Popen[bytes] | None:
    """With *duty* (``burn_duty``) above 0: a process busy 1 ms, then asleep, in that proportion for
    ``KAI_E2E_BURN_S`` seconds. Started with the scheduler, it takes CPU from the machine the fill runs on
    without touching the API server: the twenty-second session measured with it that the binds are paced by
    the CPU the machine has left (benchmarks/RESULTS.md)."""
    if not duty:
        return None
    return subprocess.Popen([sys.executable, "-c", _BURN, str(duty), os.environ.get("KAI_E2E_BURN_S", "4")])


def floor_cmd(cp: ControlPlane, args: argparse.Namespace) -> list[str]:
    """The floor (``--floor``, benchmarks/e2e_floor.py): a binder given the answer, in the scheduler's place."""
    return [
        sys.executable,
        str(REPO / "benchmarks" / "e2e_floor.py"),
        f"--kubeconfig={cp.kubeconfig}",
        f"--pods={args.pods}",
        f"--gpus={args.gpus}",
    ]


def scheduler_cmd(which: str, binaries: Binaries, cp: ControlPlane) -> list[str]:
    """The command line of ``kai scheduler`` (leader election on, as deployed; ``KAI_E2E_ARGS`` added,
    under py-spy with ``KAI_E2E_PYSPY``) or of kube-scheduler (client rate limits raised to 5,000/s)."""
    if which == "kai":
        cmd = [
            str(Path(sys.executable).parent / "kai"),
            "scheduler",
            f"--kubeconfig={cp.kubeconfig}",
            "--metrics-bind-address=127.0.0.1:0",
            *os.environ.get("KAI_E2E_ARGS", "").split(),
        ]
        if os.environ.get("KAI_E2E_PYSPY"):  # profile kai: py-spy writes raw collapsed stacks there
            spy = Path(sys.executable).parent / "py-spy"
            fmt = os.environ.get("KAI_E2E_PYSPY_FORMAT", "raw")  # speedscope (with --idle) keeps the samples' order
            extra = ["--idle"] if fmt == "speedscope" else []
            cmd = [str(spy), "record", "-r", "200", "-f", fmt, *extra, "-o", os.environ["KAI_E2E_PYSPY"], "--", *cmd]
        return cmd
    return [
        str(binaries.kube_scheduler),
        f"--kubeconfig={cp.kubeconfig}",
        "--bind-address=127.0.0.1",
        *cp.insecure_port_off("--port=0"),  # a flag of releases before 1.24 only
        "--secure-port=0",
        "--leader-elect=false",
        "--kube-api-qps=5000",
        "--kube-api-burst=5000",
    ]


def _apiserver_profile(api: Api, which: str) -> asyncio.Task[None] | None:
    """With ``KAI_E2E_APISERVER_PPROF=<prefix>``: kube-apiserver's CPU profile (Go pprof, its default
    ``--profiling``) of the first ``KAI_E2E_PPROF_S`` seconds (default 4) after the scheduler starts, written
    to ``<prefix>-<which>.pb.gz`` for ``go tool pprof``: where the API server's time goes during the binds."""
    prefix = os.environ.get("KAI_E2E_APISERVER_PPROF")
    if not prefix:
        return None
    seconds = os.environ.get("KAI_E2E_PPROF_S", "4")

    async def fetch() -> None:
        data = await api.get_raw("/debug/pprof/profile", {"seconds": seconds})
        Path(f"{prefix}-{which}.pb.gz").write_bytes(data)

    return asyncio.create_task(fetch())


def _control_plane(binaries: Binaries) -> ControlPlane:
    """A fresh control plane; its API server profiling on with ``KAI_E2E_APISERVER_PPROF`` (envtest turns it off)."""
    profiling = ("--profiling=true",) if os.environ.get("KAI_E2E_APISERVER_PPROF") else ()
    return ControlPlane(binaries, apiserver_extra_args=profiling)


def stop_scheduler(proc: subprocess.Popen[bytes]) -> None:
    if os.environ.get("KAI_E2E_PYSPY"):
        proc.send_signal(signal.SIGINT)  # py-spy writes its profile on SIGINT
    else:
        proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()


def run_one(binaries: Binaries, which: str, args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()[0]
    cp = _control_plane(binaries)
    cp.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        if which == "kai":
            kai_install(cp)

        async def setup() -> None:
            api = Api(load_config(str(cp.kubeconfig)))
            try:
                t = time.perf_counter()
                await make_nodes(api, args.nodes, args.gpus)
                kai = which in ("kai", "floor")  # the floor binds kai's bare pods
                await make_pods(api, args.pods, "fill", kai=kai, grouped=args.mode == "pregrouped")
                print(f"  [{which}] {args.nodes} nodes and {args.pods} pods made in {time.perf_counter() - t:.1f} s")
            finally:
                await api.close()

        asyncio.run(setup())
        log = cp.workdir / f"{which}-scheduler.log"  # type: ignore[operator]
        cmd = floor_cmd(cp, args) if which == "floor" else scheduler_cmd(which, binaries, cp)
        duty = burn_duty()  # read once: the burner and the result's "burn" agree

        cpu: dict[str, Any] = {}
        writes: dict[str, dict[str, int]] = {}

        async def measure() -> float:
            nonlocal proc
            api = Api(load_config(str(cp.kubeconfig)))
            apiserver = cp.pids()["kube-apiserver"]
            etcd = cp.pids()["etcd"]
            clock: asyncio.Future[tuple[float, float]] | None = None
            burner: subprocess.Popen[bytes] | None = None
            try:
                clock = await clock_in_place(api, "fill", args.pods, deadline_s=args.deadline)
                before = cpu_seconds(apiserver), cpu_seconds(etcd)
                writes0 = await apiserver_writes(api)
                with open(log, "wb") as fh:
                    started = time.perf_counter()
                    cpu["started_wall"] = time.time()
                    proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
                burner = start_burner(duty)
                profile = _apiserver_profile(api, which)
                seconds = (await while_alive(clock, proc, log))[1] - started
                if profile is not None:
                    await profile
                cpu["scheduler_cpu_s"] = round(cpu_seconds(proc.pid), 2)
                cpu["apiserver_cpu_s"] = round(cpu_seconds(apiserver) - before[0], 2)
                cpu["etcd_cpu_s"] = round(cpu_seconds(etcd) - before[1], 2)
                writes["until_bound"] = _delta(await apiserver_writes(api), writes0)
                if which == "kai" and args.mode == "bare":
                    done, made = await wait_podgroups(api, "fill", args.pods, started, args.podgroups_wait)
                    cpu["podgroups_done_s"], cpu["podgroups_made"] = done, made
                await asyncio.sleep(args.linger)
                writes["after_linger"] = _delta(await apiserver_writes(api), writes0)
                return seconds
            finally:
                if clock is not None:
                    clock.cancel()
                if burner is not None:
                    burner.kill()
                    burner.wait()
                await api.close()

        seconds = asyncio.run(measure())  # lingers: kai logs its cycle (the watch may see the last bind first)
        result: dict[str, Any] = {
            "scheduler": which,
            "seconds": round(seconds, 2),
            "pods_per_s": round(args.pods / seconds),
            **{k: v for k, v in cpu.items() if k != "started_wall"},
            "writes_per_pod_until_bound": round(sum(writes["until_bound"].values()) / args.pods, 2),
            "writes_per_pod": round(sum(writes["after_linger"].values()) / args.pods, 2),
            "writes": writes["after_linger"],
            "load": [round(load_before, 1), round(os.getloadavg()[0], 1)],  # 1-min load average at start, end
        }
        if duty:
            result["burn"] = duty
        if which == "kai":
            result.update(_kai_log_figures(log, cpu.pop("started_wall")))
            if args.log:
                print(log.read_text(errors="replace"))
        if which == "floor":  # its one JSON line (a warning on stderr may come first)
            report = [x for x in log.read_text(errors="replace").splitlines() if x.startswith("{")]
            result.update(json.loads(report[0]) if report else {})
        return result
    finally:
        if proc is not None:
            stop_scheduler(proc)
        cp.stop()


async def wait_ready(which: str, log: Path, proc: subprocess.Popen[bytes], settle_s: float) -> float:
    """Wait until the scheduler is up: at least *settle_s* after its start, and for kai until its log says
    its informers synced (kube-scheduler logs nothing comparable at this verbosity; it lists 500 nodes in
    well under a second). Returns the seconds waited."""
    t0 = time.perf_counter()
    while which == "kai" and b'"informers synced"' not in log.read_bytes():
        if proc.poll() is not None:
            raise RuntimeError(f"kai scheduler exited ({proc.returncode}) before it synced: see {log}")
        if time.perf_counter() - t0 > 120:
            raise TimeoutError(f"kai scheduler did not sync in 120 s: see {log}")
        await asyncio.sleep(0.1)
    await asyncio.sleep(max(0.0, t0 + settle_s - time.perf_counter()))
    return time.perf_counter() - t0


async def count_podgroups(api: Api, ns: str) -> int:
    lst = msgspec.json.decode(await api.get_raw(f"/apis/scheduling.run.ai/v2alpha2/namespaces/{ns}/podgroups"))
    return len(lst.get("items") or [])


def run_job(binaries: Binaries, which: str, args: argparse.Namespace) -> dict[str, Any]:
    """``--mode job``: one Job of ``--pods`` pods, made by the real kube-controller-manager, on a fresh
    control plane. The scheduler is started first and left to sync (``--settle``); the clock runs from the
    Job's create until a watch has seen every pod bound: the user's path (a scheduler already running, a
    Job submitted), which includes kube-controller-manager making the pods (``pods_made_s``)."""
    load_before = os.getloadavg()[0]
    cp = _control_plane(binaries)
    cp.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        cp.start_controller_manager()
        if which == "kai":
            kai_install(cp)
        log = cp.workdir / f"{which}-scheduler.log"  # type: ignore[operator]
        out: dict[str, Any] = {"scheduler": which}

        async def measure() -> None:
            nonlocal proc
            api = Api(load_config(str(cp.kubeconfig)))
            try:
                await make_nodes(api, args.nodes, args.gpus)
                await api.request("POST", "/api/v1/namespaces", body={"metadata": {"name": "fill"}})
                with open(log, "wb") as fh:
                    proc = subprocess.Popen(scheduler_cmd(which, binaries, cp), stdout=fh, stderr=subprocess.STDOUT)
                out["ready_after_s"] = round(await wait_ready(which, log, proc, args.settle), 2)
                pids = cp.pids()
                control = ("kube-apiserver", "etcd", "kube-controller-manager")
                procs = {"scheduler": proc.pid, **{k: pids[k] for k in control}}
                before = {k: cpu_seconds(pid) for k, pid in procs.items()}
                writes0 = await apiserver_writes(api, by_verb=True)
                # the watch lists, then watches from the list's resourceVersion: no pod escapes it, whether
                # the list runs before or after the Job's create
                watcher = asyncio.ensure_future(watch_pods(api, "fill", args.pods, deadline_s=args.deadline))
                started = time.perf_counter()
                out["started_wall"] = time.time()
                body = job_body("big", "fill", args.pods, kai=which == "kai")
                await api.request("POST", "/apis/batch/v1/namespaces/fill/jobs", body=body)
                made_at, bound_at = await while_alive(watcher, proc, log)
                out["seconds"] = round(bound_at - started, 2)
                out["pods_made_s"] = round(made_at - started, 2)
                out["cpu_s"] = {k: round(cpu_seconds(pid) - before[k], 2) for k, pid in procs.items()}
                until_bound = _delta(await apiserver_writes(api, by_verb=True), writes0)
                await asyncio.sleep(args.linger)
                after = _delta(await apiserver_writes(api, by_verb=True), writes0)
                out["writes_per_pod_until_bound"] = round(sum(until_bound.values()) / args.pods, 2)
                out["writes_per_pod"] = round(sum(after.values()) / args.pods, 2)
                # what the scheduler wrote, less what kube-controller-manager surely wrote (the pods, the
                # Job's status); events are both's (kcm's SuccessfulCreate, the schedulers' Scheduled)
                kcm = sum(v for k, v in after.items() if k == "POST pods" or k.split(" ")[1].startswith("jobs"))
                out["writes_per_pod_less_kcm"] = round((sum(after.values()) - kcm) / args.pods, 2)
                out["writes"] = after
                if which == "kai":
                    out["podgroups"] = await count_podgroups(api, "fill")
            finally:
                await api.close()

        asyncio.run(measure())
        out["pods_per_s"] = round(args.pods / out["seconds"])
        out["load"] = [round(load_before, 1), round(os.getloadavg()[0], 1)]
        started_wall = out.pop("started_wall")
        if which == "kai":
            figures = _kai_log_figures(log, started_wall)  # seconds after the Job's create
            cycles = figures.pop("cycles")
            out.update(figures)
            out["binding_cycles"] = len(cycles)
            out["cycles_bound"] = [c["bound"] for c in cycles]
            if args.log:
                print(log.read_text(errors="replace"))
        return out
    finally:
        if proc is not None:
            stop_scheduler(proc)
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


def alternate(args: argparse.Namespace, run: Callable[[Binaries, str, argparse.Namespace], dict[str, Any]]) -> list:
    """*run* kai and kube-scheduler in turn (``args.only``: one of them), ``args.runs`` times; with
    ``args.floor`` the floor (benchmarks/e2e_floor.py) after them in each round."""
    binaries = Binaries.find()
    byte_compile()
    results = []
    for i in range(args.runs):
        for w in ("kai", "kube", "floor"):
            if args.only == w or (args.only is None and (w != "floor" or args.floor)):
                results.append({"run": i + 1, **run(binaries, w, args)})
                print(json.dumps(results[-1]), file=sys.stderr, flush=True)  # each run as it ends
    return results


def machine() -> str:
    return f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"


def print_fill(r: dict[str, Any], run: str, args: argparse.Namespace) -> None:
    extra = f" (informers synced in {r['sync_s']} s)" if "sync_s" in r else ""
    print(f"  {run}{r['scheduler']:5s} all bound in {r['seconds']:6.2f} s = {r['pods_per_s']} pods/s{extra}")
    print(
        f"        CPU s while filling: scheduler {r['scheduler_cpu_s']}, kube-apiserver "
        f"{r['apiserver_cpu_s']}, etcd {r['etcd_cpu_s']}; load {r['load'][0]} -> {r['load'][1]}"
    )
    print(
        f"        API writes per pod: {r['writes_per_pod_until_bound']} until all bound, "
        f"{r['writes_per_pod']} after {args.linger:g} s more: {r['writes']}"
    )
    if r.get("podgroups_done_s") is not None:
        print(f"        every PodGroup made {r['podgroups_done_s']:.2f} s after start")
    elif "podgroups_made" in r:
        print(f"        {r['podgroups_made']} PodGroups made {args.podgroups_wait:g} s after all were bound")
    for c in r.get("cycles", []):
        print(f"        cycle: {c}")
    if "first_bind_s" in r:
        first, binds = r["first_bind_s"], r["binds_s"]
        print(f"        the floor's first bind sent {first} s after its start; its binds took {binds} s")
    if r.get("timeline"):
        print("        seconds after start: " + ", ".join(f"{k} {v}" for k, v in r["timeline"].items()))


def print_job(r: dict[str, Any], run: str, args: argparse.Namespace) -> None:
    print(
        f"  {run}{r['scheduler']:5s} all bound {r['seconds']:6.2f} s after the Job's create = {r['pods_per_s']} "
        f"pods/s (kube-controller-manager made every pod by {r['pods_made_s']} s; scheduler up "
        f"{r['ready_after_s']} s before the Job)"
    )
    print(f"        CPU s while filling: {r['cpu_s']}; load {r['load'][0]} -> {r['load'][1]}")
    print(
        f"        API writes per pod: {r['writes_per_pod_until_bound']} until all bound, {r['writes_per_pod']} "
        f"after {args.linger:g} s more ({r['writes_per_pod_less_kcm']} less the pods' creates and the Job's "
        f"writes): {r['writes']}"
    )
    if r["scheduler"] == "kai":
        print(
            f"        PodGroups: {r['podgroups']}; {r['binding_cycles']} binding cycles, bound {r['cycles_bound']}; "
            "seconds after the Job's create: " + ", ".join(f"{k} {v}" for k, v in r["timeline"].items())
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--gpus", type=int, default=8)
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument(
        "--mode",
        choices=["bare", "pregrouped", "job"],
        default="bare",
        help="bare: kai's pods as users create them (kai's pod-grouper makes the PodGroups); pregrouped: "
        "each with a PodGroup made beforehand (the pod-grouper does nothing); job: one Job of --pods pods "
        "made by kube-controller-manager, the clock from the Job's create",
    )
    ap.add_argument("--settle", type=float, default=5.0, help="job mode: seconds the scheduler runs before the Job")
    ap.add_argument("--only", choices=["kai", "kube", "floor"], default=None)
    ap.add_argument(
        "--floor",
        action="store_true",
        help="bare mode: also run the floor, a binder given the answer (benchmarks/e2e_floor.py), each round",
    )
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--log", action="store_true", help="print kai's log")
    ap.add_argument("--linger", type=float, default=3.0, help="seconds the scheduler runs on after the fill")
    ap.add_argument("--runs", type=int, default=1, help="alternate kai and kube-scheduler this many times")
    ap.add_argument(
        "--podgroups-wait",
        type=float,
        default=120.0,
        help="bare mode: seconds to wait for every PodGroup after all bound",
    )
    ap.add_argument("--deadline", type=float, default=1200.0, help="seconds a run may take to bind every pod")
    args = ap.parse_args()
    if (args.floor or args.only == "floor") and args.mode != "bare":
        ap.error("the floor binds bare pods: --floor and --only floor need --mode bare")
    results = alternate(args, run_job if args.mode == "job" else run_one)
    summary: dict[str, Any] = {
        "machine": machine(),
        "setup": f"{args.nodes} nodes x {args.gpus} GPUs, {args.pods} one-GPU pods ({args.mode})"
        + (", the clock from the Job's create" if args.mode == "job" else ", the clock from the scheduler's start"),
        "results": results,
    }
    medians = {
        w: statistics.median(r["seconds"] for r in results if r["scheduler"] == w)
        for w in ("kai", "kube", "floor")
        if any(r["scheduler"] == w for r in results)
    }
    if "kai" in medians and "kube" in medians:
        # pods/s ratio = inverse ratio of the times (same number of pods)
        summary["ratio_pods_per_s"] = round(medians["kube"] / medians["kai"], 2)
        summary["median_seconds"] = medians
    if "floor" in medians and "kube" in medians:
        summary["floor_ratio_pods_per_s"] = round(medians["kube"] / medians["floor"], 2)
        summary["median_seconds"] = medians
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(summary["machine"], "|", summary["setup"])
        for r in results:
            run = f"run {r['run']} " if args.runs > 1 else ""
            (print_job if args.mode == "job" else print_fill)(r, run, args)
        if "ratio_pods_per_s" in summary:
            m = summary["median_seconds"]
            what = f"medians of {args.runs} runs, " if args.runs > 1 else ""
            ratio = summary["ratio_pods_per_s"]
            print(f"  kai / kube-scheduler pods/s: {ratio}x ({what}kai {m['kai']} s, kube {m['kube']} s)")
        if "floor_ratio_pods_per_s" in summary:
            m = summary["median_seconds"]
            print(f"  floor / kube-scheduler pods/s: {summary['floor_ratio_pods_per_s']}x (floor {m['floor']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
