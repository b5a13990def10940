"""``kai scheduler``'s command line: bad flags, a bad kubeconfig and a missing Lease namespace are
errors with exit code 2."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from pathlib import Path

from lightkube import Client
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace

from kai.k8s.envtest import ControlPlane
from tests.k8s.conftest import run_kai

KAI = Path(sys.executable).parent / "kai"


def test_bad_kubeconfig_is_an_error_naming_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("apiVersion: v1\n")
    code, _, err = run_kai("scheduler", "--kubeconfig", str(bad))
    assert code == 2
    assert str(bad) in err and "clusters" in err


def test_bad_flags_are_errors(tmp_path: Path) -> None:
    code, _, err = run_kai("scheduler", "--actions", "allocate,shuffle")
    assert code == 2 and "unknown action 'shuffle'" in err
    code, _, err = run_kai("scheduler", "--lease-duration", "5", "--renew-deadline", "8")
    assert code == 2 and "--renew-deadline must be shorter than --lease-duration" in err
    code, _, err = run_kai("scheduler", "--metrics-bind-address", "localhost")
    assert code == 2 and "is not host:port" in err
    code, _, err = run_kai("scheduler", "--event-loop", "tokio")
    assert code == 2 and "'tokio' is not one of 'uvloop', 'asyncio'" in err


def test_a_missing_lease_namespace_is_an_error_not_a_retry(control_plane: ControlPlane, client: Client) -> None:
    """The real ``kai`` process, against a real API server whose answer (404, namespace not found) is
    the only thing telling kai the namespace is missing: it exits 2 at once, saying what to do, instead
    of retrying forever. Once the namespace exists, the same command leads."""
    ns = f"kai-lease-{uuid.uuid4().hex[:6]}"
    args = [
        str(KAI),
        "scheduler",
        f"--kubeconfig={control_plane.kubeconfig}",
        f"--leader-elect-namespace={ns}",
        "--metrics-bind-address=127.0.0.1:0",
        "--event-loop=asyncio",
    ]
    t0 = time.monotonic()
    res = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 2, res.stderr
    assert f'namespace "{ns}" does not exist' in res.stderr and "kai install" in res.stderr, res.stderr
    assert time.monotonic() - t0 < 30  # the first attempt decides; no retry loop

    client.create(Namespace.from_dict({"metadata": {"name": ns}}))
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        holder = ""
        while time.monotonic() < deadline and not holder and proc.poll() is None:
            leases = list(client.list(Lease, namespace=ns))
            holder = leases[0].spec.holderIdentity if leases else ""
            time.sleep(0.2)
        assert holder and proc.poll() is None, proc.stderr.read() if proc.poll() is not None else "no lease holder"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        client.delete(Namespace, ns)


def test_a_bad_flag_after_the_first_lists_went_out_says_only_what_is_wrong(tmp_path: Path) -> None:
    """``kai scheduler`` asks for its pods and nodes before it reads its flags (kai.k8s._early): exiting on a
    bad flag then, with those requests failed or still out, prints the error and nothing else."""
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: s, cluster: {server: 'https://127.0.0.1:1', insecure-skip-tls-verify: true}}]\n"
        "users: [{name: u, user: {token: t0k}}]\ncontexts: [{name: c, context: {cluster: s, user: u}}]\n"
    )
    code, _, err = run_kai("scheduler", "--kubeconfig", str(config), "--actions", "allocate,shuffle")
    assert code == 2 and "unknown action 'shuffle'" in err
    assert "Task" not in err and "Traceback" not in err, err
