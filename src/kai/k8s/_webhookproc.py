"""The admission webhooks in a process of their own, started and supervised by ``kai scheduler``.

Why a process: an answer must not wait for the scheduler. In one process it would, whatever the event
loop: the scheduler's loop and the engine's worker thread are busy in Python exactly when pods arrive in
bursts (grouping them, snapshots of thousands of pods), and a webhook thread waits for the GIL each time
it needs it. Measured on the 2-core test machine, 1,000 kai pod creates (benchmarks/RESULTS.md): a thread
in the scheduler process answered in p99 ~25 ms; the process answers in a few milliseconds.

Theory of operation: the child has its own API connection and Store, filled by one informer (Queues: the
only kind the rules read besides the object under review), and serves ``_webhook.AdmissionServer``. It
makes, renews and rotates the certificate itself (every replica may: the Secret is written with its
resourceVersion, so two replicas never both win) and keeps the caBundle current. It tells the parent it
serves through a pipe, exits when the parent's end closes (the parent died), and the parent starts it
again when it exits (``WebhookProcess.supervise``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import signal
from dataclasses import dataclass
from typing import Any

log = logging.getLogger("kai.k8s.webhookproc")
RESTART_DELAY_S = 1.0


@dataclass(frozen=True)
class WebhookConfig:
    kubeconfig: str | None
    host: str
    port: int
    cert_namespace: str
    gpu_fraction_runtime_class: str
    metrics_port: int | None = None  # the child's own /metrics (kai_admission_*); None: not served
    refresh_s: float = 60.0
    log_level: str = "info"


def child_main(config: WebhookConfig, conn: multiprocessing.connection.Connection) -> None:
    """The child process: serve until SIGTERM or until the parent is gone."""
    from kai.k8s._logging import setup_logging

    setup_logging(config.log_level)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us (SIGTERM), not the terminal's ^C
    asyncio.run(_serve(config, conn))


async def _serve(config: WebhookConfig, conn: multiprocessing.connection.Connection) -> None:
    from kai.k8s._admission import Admission, AdmissionConfig
    from kai.k8s._api import Api, load_config
    from kai.k8s._decode import KINDS
    from kai.k8s._informer import Informer
    from kai.k8s._metrics import Metrics, serve_http
    from kai.k8s._webhook import AdmissionServer
    from kai.k8s._webhookcert import CertStore
    from kai.store import Store

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_reader(conn.fileno(), stop.set)  # the parent's end closed (or wrote): we are done
    api = Api(load_config(config.kubeconfig))
    store = Store(feed_limit=100)
    metrics = Metrics()
    queues = Informer(api, next(k for k in KINDS if k.kind == "Queue"), store)
    informer = asyncio.ensure_future(queues.run())
    server = None
    http = None
    try:
        await queues.synced.wait()
        admission = Admission(store, AdmissionConfig(gpu_fraction_runtime_class=config.gpu_fraction_runtime_class))
        server = AdmissionServer(
            api,
            admission,
            metrics,
            host=config.host,
            port=config.port,
            certs=CertStore(api, namespace=config.cert_namespace),
            refresh_s=config.refresh_s,
        )
        port = await server.start()
        if config.metrics_port is not None:
            http = await serve_http(
                config.host, config.metrics_port, metrics, healthz=lambda: (True, "ok"), readyz=lambda: (True, "ok")
            )
        conn.send(("serving", port))
        await stop.wait()
    except Exception as e:  # the parent logs it and starts a new child
        with contextlib.suppress(OSError):
            conn.send(("failed", f"{type(e).__name__}: {e}"))
        raise
    finally:
        informer.cancel()
        await asyncio.gather(informer, return_exceptions=True)
        if server is not None:
            await server.close()
        if http is not None:
            http.close()
        await api.close()


class WebhookProcess:
    """The parent's handle: start the child, know whether it serves, restart it when it exits, stop it."""

    def __init__(self, config: WebhookConfig) -> None:
        self.config = config
        self.port = 0
        self.serving = False
        self.last_error = ""
        self.starts = 0
        self._proc: Any = None
        self._conn: multiprocessing.connection.Connection | None = None
        self._stopping = False

    def _start(self) -> None:
        ctx = multiprocessing.get_context("spawn")  # a fresh interpreter: no threads or loops inherited
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=child_main, args=(self.config, child), name="kai-webhook", daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self.starts += 1

    async def supervise(self) -> None:
        """Run the child, and a new one whenever it exits, until ``stop``."""
        loop = asyncio.get_running_loop()
        while not self._stopping:
            self._start()
            conn = self._conn
            assert conn is not None
            while not self._stopping:
                ready = await loop.run_in_executor(None, conn.poll, 0.5)
                if ready:
                    try:
                        kind, value = conn.recv()
                    except (EOFError, OSError):
                        break
                    if kind == "serving":
                        self.port, self.serving = int(value), True
                        log.info("admission webhooks serving", extra={"port": self.port, "pid": self._proc.pid})
                    else:
                        self.last_error = str(value)
                        log.error("admission webhooks failed", extra={"error": self.last_error})
                if not self._proc.is_alive():
                    break
            self.serving = False
            if not self._stopping:
                log.warning("admission webhook process exited; starting it again", extra={"code": self._proc.exitcode})
                await asyncio.sleep(RESTART_DELAY_S)

    async def stop(self) -> None:
        self._stopping = True
        self.serving = False
        if self._conn is not None:
            with contextlib.suppress(OSError):
                self._conn.close()  # the child sees its end close and stops
        if self._proc is not None and self._proc.is_alive():
            self._proc.terminate()
            await asyncio.get_running_loop().run_in_executor(None, self._proc.join, 10)
            if self._proc.is_alive():
                self._proc.kill()
