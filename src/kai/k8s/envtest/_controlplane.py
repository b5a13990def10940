"""A real Kubernetes control plane on loopback: etcd and kube-apiserver, and on request
kube-controller-manager and kube-scheduler, each a child process of the caller.

Theory of operation:

* Every process listens on 127.0.0.1 only, on ports picked free at start. etcd keeps its
  data on tmpfs (/dev/shm) when there is one: Debian's etcd 3.4 has no --unsafe-no-fsync,
  and fsync on a disk would dominate the API server's write latency in benchmarks.
* Authentication is a static token file with two users: ``admin`` (group system:masters)
  and the ServiceAccount identity ``system:serviceaccount:kai-scheduler:kai-scheduler``, so
  a test can run kai with exactly the permissions deploy/rbac.yaml grants. Authorization
  is RBAC. There are no kubelets and no token controller, so the ServiceAccount admission
  plugin is off (pods need no ServiceAccount object); the signing keys the API server
  insists on are generated here with openssl.
* The API server makes a self-signed serving certificate in its cert dir; the kubeconfig
  files trust exactly that certificate.
* The flags suit the release of the binaries (``Binaries.version``): the insecure-port flags,
  which 1.20 needs set to 0, were removed in 1.24.
* Each child gets PR_SET_PDEATHSIG=SIGKILL, so a test run that is killed leaves no etcd or
  kube-apiserver behind; ``stop()`` ends them in reverse order and removes the work dir.
* ``restart_apiserver()`` stops and starts only kube-apiserver, on the same port, with the
  same etcd: the "API server restarted mid-run" fault of the tests.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from kai.k8s.envtest._binaries import Binaries

ADMIN_USER = "admin"
SCHEDULER_USER = "system:serviceaccount:kai-scheduler:kai-scheduler"
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 15.0
_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """A control-plane process failed to start or died; the message carries its log tail."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _remove_orphaned_etcd_dirs(base: Path) -> None:
    """Delete etcd data dirs left in BASE by test processes that were killed (they hold up to GBs of tmpfs).

    A dir is named kai-etcd-<pid of its owner>-<random>; it is orphaned when that pid is gone.
    """
    for d in base.glob("kai-etcd-*-*"):
        try:
            os.kill(int(d.name.split("-")[2]), 0)
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except (ValueError, PermissionError):  # not ours, or owned by someone alive
            continue


def _die_with_parent() -> None:  # runs in the child between fork and exec
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class _Proc:
    name: str
    args: list[str]
    log: Path
    popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with open(self.log, "ab") as out:
            self.popen = subprocess.Popen(
                self.args,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT_S; always reaps the process."""
        p = self.popen
        if p is None:
            return
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.popen = None

    def tail(self, lines: int = 30) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return "\n".join(text[-lines:])


@dataclass
class ControlPlane:
    """etcd + kube-apiserver (+ optional controller-manager and scheduler) for one test session.

    Use as a context manager or call start()/stop(). After start(), ``kubeconfig`` is an
    admin kubeconfig file and ``scheduler_kubeconfig`` one for kai's ServiceAccount identity.
    """

    binaries: Binaries
    workdir: Path | None = None
    apiserver_extra_args: Sequence[str] = ()
    _procs: dict[str, _Proc] = field(default_factory=dict, repr=False)
    _owns_workdir: bool = field(default=False, repr=False)
    _etcd_dir: Path | None = field(default=None, repr=False)
    _tokens: dict[str, str] = field(default_factory=dict, repr=False)
    apiserver_port: int = 0
    etcd_port: int = 0
    _etcd_peer_port: int = field(default=0, repr=False)

    # ---- life cycle -------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start etcd and kube-apiserver and wait until /readyz answers ok. Idempotent."""
        if "kube-apiserver" in self._procs:
            return
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="kai-control-plane-"))
            self._owns_workdir = True
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._write_credentials()
            self._start_etcd()
            self.apiserver_port = free_port()
            self._start_apiserver()
            self._write_kubeconfigs()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """End every child process, newest first, and delete the work dir if we made it."""
        for proc in reversed(list(self._procs.values())):
            proc.stop()
        self._procs.clear()
        if self._etcd_dir is not None:
            shutil.rmtree(self._etcd_dir, ignore_errors=True)
            self._etcd_dir = None
        if self._owns_workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None
            self._owns_workdir = False

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver and start it again on the same port with the same etcd.

        Watches and connections of clients break, as they do when a real API server restarts.
        """
        self._procs.pop("kube-apiserver").stop()
        self._start_apiserver()

    def restart_etcd(self, down_s: float = 0.0) -> None:
        """Stop etcd and start it again (after *down_s* seconds) on the same ports with the same data:
        the API server loses its storage meanwhile, as when etcd restarts under a real cluster."""
        self._procs.pop("etcd").stop()
        if down_s:
            time.sleep(down_s)
        proc = self._spawn("etcd", self._etcd_args(self._etcd_peer_port))
        if not self._wait_http(proc, f"{self.etcd_url}/health", ok=lambda body: '"health":"true"' in body):
            raise ControlPlaneError(f"etcd did not come back:\n{proc.tail()}")

    def stop_apiserver(self) -> None:
        """Stop only kube-apiserver (for tests of an unreachable API server); start_apiserver() brings it back."""
        self._procs.pop("kube-apiserver").stop()

    def start_apiserver(self) -> None:
        """Start kube-apiserver again after stop_apiserver(), on the same port."""
        self._start_apiserver()

    def pids(self) -> dict[str, int]:
        """Process ids of the running children, by program name (for tests of clean teardown)."""
        return {n: p.popen.pid for n, p in self._procs.items() if p.popen is not None and p.alive()}

    # ---- addresses and credentials ----------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.etcd_port}"

    @property
    def kubeconfig(self) -> Path:
        """Admin kubeconfig (group system:masters)."""
        return self._dir / "admin.kubeconfig"

    @property
    def scheduler_kubeconfig(self) -> Path:
        """Kubeconfig of kai's ServiceAccount identity: only what deploy/rbac.yaml grants."""
        return self._dir / "scheduler.kubeconfig"

    @property
    def ca_file(self) -> Path:
        """The API server's self-signed serving certificate, which is its own CA."""
        return self._dir / "certs" / "apiserver.crt"

    def token(self, user: str = ADMIN_USER) -> str:
        return self._tokens[user]

    @property
    def _dir(self) -> Path:
        if self.workdir is None:
            raise ControlPlaneError("control plane not started")
        return self.workdir

    # ---- optional components ----------------------------------------------------------------

    def start_controller_manager(self, extra_args: Sequence[str] = ()) -> None:
        """Run kube-controller-manager (Jobs, ReplicaSets, garbage collection, ...).

        The node lifecycle controllers are off: nodes here have no kubelet, so they would be
        marked NotReady and tainted after the grace period.
        """
        if "kube-controller-manager" in self._procs:
            return
        args = [
            str(self.binaries.kube_controller_manager),
            f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            *self.insecure_port_off("--port=0"),
            "--secure-port=0",
            "--leader-elect=false",
            "--controllers=*,-nodelifecycle,-nodeipam,-serviceaccount-token,-csrsigning",
            f"--service-account-private-key-file={self._dir / 'sa.key'}",
            "--use-service-account-credentials=false",
            "--kube-api-qps=1000",
            "--kube-api-burst=2000",
            *extra_args,
        ]
        self._spawn("kube-controller-manager", args)
        self._expect_alive("kube-controller-manager", seconds=1.0)

    def stop_controller_manager(self) -> None:
        """Stop kube-controller-manager if it runs (a test that plays a controller's part itself)."""
        proc = self._procs.pop("kube-controller-manager", None)
        if proc is not None:
            proc.stop()

    def start_kube_scheduler(self, extra_args: Sequence[str] = ()) -> None:
        """Run the stock kube-scheduler (as the baseline of benchmarks); it schedules only pods
        whose schedulerName is default-scheduler."""
        if "kube-scheduler" in self._procs:
            return
        args = [
            str(self.binaries.kube_scheduler),
            f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            *self.insecure_port_off("--port=0"),
            "--secure-port=0",
            "--leader-elect=false",
            *extra_args,
        ]
        self._spawn("kube-scheduler", args)
        self._expect_alive("kube-scheduler", seconds=1.0)

    def stop_component(self, name: str) -> None:
        """Stop kube-controller-manager or kube-scheduler (started by the methods above)."""
        if name in ("etcd", "kube-apiserver"):
            raise ValueError(f"use stop() or restart_apiserver() for {name}")
        if proc := self._procs.pop(name, None):
            proc.stop()

    def kubectl(
        self, *args: str, check: bool = True, kubeconfig: Path | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run the control plane's own kubectl (of the same release) against it; output captured as text."""
        # A fresh discovery cache for each call: kubectl keeps one for 10 minutes and does not
        # refresh it for a short name (pg) of a CRD installed meanwhile.
        with tempfile.TemporaryDirectory(prefix="kubectl-cache-", dir=self._dir) as cache:
            cmd = [
                str(self.binaries.kubectl),
                f"--kubeconfig={kubeconfig or self.kubeconfig}",
                f"--cache-dir={cache}",
                *args,
            ]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if check and res.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed ({res.returncode}):\n{res.stdout}{res.stderr}")
        return res

    def insecure_port_off(self, flag: str) -> list[str]:
        """FLAG (turning an insecure port off) for releases before 1.24, which had one; nothing after."""
        return [flag] if self.binaries.version < (1, 24) else []

    # ---- internals --------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str]) -> _Proc:
        proc = _Proc(name, args, self._dir / f"{name}.log")
        self._procs[name] = proc
        proc.start()
        return proc

    def _expect_alive(self, name: str, seconds: float) -> None:
        time.sleep(seconds)
        proc = self._procs[name]
        if not proc.alive():
            self._procs.pop(name)
            raise ControlPlaneError(f"{name} exited at start:\n{proc.tail()}")

    def _write_credentials(self) -> None:
        d = self._dir
        self._tokens = {ADMIN_USER: os.urandom(16).hex(), SCHEDULER_USER: os.urandom(16).hex()}
        (d / "tokens.csv").write_text(
            f'{self._tokens[ADMIN_USER]},{ADMIN_USER},admin-uid,"system:masters"\n'
            f"{self._tokens[SCHEDULER_USER]},{SCHEDULER_USER},kai-scheduler-uid,"
            '"system:serviceaccounts,system:serviceaccounts:kai-scheduler"\n'
        )
        key = d / "sa.key"
        if not key.exists():
            try:
                subprocess.run(
                    ["openssl", "genrsa", "-out", str(key), "2048"],
                    capture_output=True,
                    check=True,
                )
                subprocess.run(
                    ["openssl", "rsa", "-in", str(key), "-pubout", "-out", str(d / "sa.pub")],
                    capture_output=True,
                    check=True,
                )
            except (OSError, subprocess.CalledProcessError) as e:
                raise ControlPlaneError(f"cannot make the ServiceAccount signing key with openssl: {e}") from e

    def _start_etcd(self) -> None:
        shm = Path("/dev/shm")
        base = shm if shm.is_dir() and os.access(shm, os.W_OK) else self._dir
        _remove_orphaned_etcd_dirs(base)
        self._etcd_dir = Path(tempfile.mkdtemp(prefix=f"kai-etcd-{os.getpid()}-", dir=base))
        for attempt in range(3):
            self.etcd_port, self._etcd_peer_port = free_port(), free_port()
            proc = self._spawn("etcd", self._etcd_args(self._etcd_peer_port))
            if self._wait_http(proc, f"{self.etcd_url}/health", ok=lambda body: '"health":"true"' in body):
                return
            proc.stop()
            self._procs.pop("etcd")
            if attempt == 2 or "address already in use" not in proc.tail():
                raise ControlPlaneError(f"etcd did not become healthy:\n{proc.tail()}")
            shutil.rmtree(self._etcd_dir, ignore_errors=True)

    def _etcd_args(self, peer_port: int) -> list[str]:
        return [
            str(self.binaries.etcd),
            f"--data-dir={self._etcd_dir}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
            f"--initial-cluster=default=http://127.0.0.1:{peer_port}",
            "--logger=zap",
            "--log-level=warn",
            "--quota-backend-bytes=8589934592",
        ]

    def _start_apiserver(self) -> None:
        d = self._dir
        args = [
            str(self.binaries.kube_apiserver),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={self.apiserver_port}",
            *self.insecure_port_off("--insecure-port=0"),
            f"--cert-dir={d / 'certs'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--disable-admission-plugins=ServiceAccount",
            "--service-account-issuer=https://kubernetes.default.svc",
            f"--service-account-key-file={d / 'sa.pub'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            "--service-cluster-ip-range=10.0.0.0/24",
            # The master Service's endpoint would be 127.0.0.1, which Endpoints reject.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=true",
            "--profiling=false",
            "--v=1",
            *self.apiserver_extra_args,
        ]
        proc = self._spawn("kube-apiserver", args)
        if not self._wait_http(proc, f"{self.url}/readyz", ok=lambda body: body.strip() == "ok"):
            raise ControlPlaneError(f"kube-apiserver not ready within {START_TIMEOUT_S:.0f} s:\n{proc.tail()}")

    def _wait_http(self, proc: _Proc, url: str, ok: Callable[[str], bool]) -> bool:
        """Poll URL until ok(body) holds; False if PROC dies or START_TIMEOUT_S passes."""
        headers = {"Authorization": f"Bearer {self._tokens[ADMIN_USER]}"} if url.startswith("https") else {}
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the cert is made by the server we are waiting for
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if not proc.alive():
                return False
            with contextlib.suppress(OSError, urllib.error.URLError):
                req = urllib.request.Request(url, headers=headers)
                with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
                    if resp.status == 200 and ok(resp.read().decode()):
                        return True
            time.sleep(0.1)
        return False

    def _write_kubeconfigs(self) -> None:
        ca_data = base64.b64encode(self.ca_file.read_bytes()).decode()
        for path, user in ((self.kubeconfig, ADMIN_USER), (self.scheduler_kubeconfig, SCHEDULER_USER)):
            doc = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "kai-test", "cluster": {"server": self.url, "certificate-authority-data": ca_data}}
                ],
                "users": [{"name": user, "user": {"token": self._tokens[user]}}],
                "contexts": [{"name": "kai-test", "context": {"cluster": "kai-test", "user": user}}],
                "current-context": "kai-test",
            }
            path.write_text(yaml.safe_dump(doc, sort_keys=False))
            path.chmod(0o600)
