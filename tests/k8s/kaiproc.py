"""``kai scheduler`` as a process of its own for the tests: the installed command, as kai's ServiceAccount."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

from kai.k8s.envtest import ControlPlane, free_port
from tests.k8s.sched import KAI, KaiProcess, _die_with_parent


class KaiCommand(KaiProcess):
    """One ``kai scheduler ARGS...`` (KaiProcess's probes and stop) with the arguments the test chooses: no
    Lease name unless given (kai derives it from the shard), a fixed metrics port if asked (a Prometheus
    scrapes it across restarts). The Lease timings are kai's defaults: these tests start one process per
    Lease at a time (a clean stop gives it up), and a loaded machine must not make a leader lose it."""

    def __init__(self, cp: ControlPlane, name: str, log_dir: Path, *args: str, port: int | None = None) -> None:
        self.port = port or free_port()
        self.identity = name
        self.log = log_dir / f"kai-{name}.log"
        argv = [
            str(KAI),
            "scheduler",
            f"--kubeconfig={cp.scheduler_kubeconfig}",
            "--schedule-period=0.5",
            f"--identity={name}",
            f"--metrics-bind-address=127.0.0.1:{self.port}",
            *args,
        ]
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)

    def metric(self, line_start: str) -> float | None:
        """The value of the first /metrics line starting with *line_start* (name and labels), or None."""
        for line in self.get("/metrics")[1].splitlines():
            if line.startswith(line_start):
                return float(line.rsplit(" ", 1)[1])
        return None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.stop(signal.SIGKILL)
