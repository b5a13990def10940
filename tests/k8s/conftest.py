"""Fixtures for tests against a real kube-apiserver.

One control plane per pytest-xdist worker (session scope): each worker runs its tests one
after another, so a test may restart its worker's API server without disturbing others.
The binaries come from scripts/control-plane/provision.sh, which builds them on the first
run and serialises concurrent callers on a lock; if it fails, every test here errors with
its output: a missing control plane is a failure, never a skip.

The release is the current one unless $KAI_K8S_VERSION says ``oldest`` (1.20.2): `make test`
runs this whole folder on the current release, then once more on the oldest supported release.
A test of an API the oldest release does not serve (DRA, say) carries ``@pytest.mark.k8s_min("1.34")``
and is deselected there (reported as deselected, never skipped).
"""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from lightkube import Client, KubeConfig

from kai.cli import main
from kai.k8s.envtest import Binaries, ControlPlane, release_name, selected_version

REPO = Path(__file__).resolve().parents[2]
PROVISION = REPO / "scripts" / "control-plane" / "provision.sh"
DATA = Path(__file__).parent / "data"
PROVISION_TIMEOUT_S = 60 * 60  # a cold build is ~7-10 min on 2 cores; leave room for a slow mirror


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "k8s_min(version): needs this Kubernetes release or newer; deselected on older ones"
    )


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.removeprefix("v").split("."))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the tests whose ``k8s_min`` release is newer than the one this run tests against."""
    running = _release(selected_version())
    kept, dropped = [], []
    for item in items:
        marker = item.get_closest_marker("k8s_min")
        (dropped if marker and _release(marker.args[0]) > running else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def provision() -> Binaries:
    """Run the provisioning script (idempotent; fast once cached) and locate its binaries."""
    release = release_name(selected_version())
    res = subprocess.run(
        ["bash", str(PROVISION), "--quiet", release],
        capture_output=True,
        text=True,
        timeout=PROVISION_TIMEOUT_S,
        check=False,
    )
    if res.returncode != 0:
        pytest.fail(f"{PROVISION} failed ({res.returncode}):\n{res.stdout}\n{res.stderr}", pytrace=False)
    bin_dir = next(
        (line.split(":", 1)[1].strip() for line in res.stdout.splitlines() if line.startswith("bin-dir:")), None
    )
    return Binaries.find(Path(bin_dir) if bin_dir else None)


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    return provision()


@pytest.fixture(scope="session")
def control_plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    cp = ControlPlane(binaries, workdir=tmp_path_factory.mktemp("control-plane"))
    cp.start()
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def client(control_plane: ControlPlane) -> Iterator[Client]:
    """Admin lightkube client. Re-reads nothing: the kubeconfig stays valid across apiserver restarts."""
    c = Client(KubeConfig.from_file(str(control_plane.kubeconfig)), field_manager="kai-tests")
    yield c
    c.close()


def run_kai(*args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of the real ``kai`` command, in-process."""
    result = CliRunner().invoke(main, list(args))
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="session")
def installed(control_plane: ControlPlane) -> ControlPlane:
    """The worker's control plane with ``kai install`` applied (CRDs, PriorityClasses, Queues)."""
    code, out, err = run_kai("install", "--kubeconfig", str(control_plane.kubeconfig))
    assert code == 0, f"kai install failed:\n{out}\n{err}"
    return control_plane


@pytest.fixture
def namespace(client: Client) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (nothing waits for the deletion)."""
    from lightkube.resources.core_v1 import Namespace

    name = f"t-{uuid.uuid4().hex[:8]}"
    client.create(Namespace.from_dict({"metadata": {"name": name}}))
    yield name
    client.delete(Namespace, name)


# The fixtures of the `kai scheduler` tests (a control plane per module, namespaces, nodes).
# The GPU-sharing tests' fixtures (a fake NVML library, webhooks registered at a free port).
from tests.k8s.gpushare import fake_nvml, webhook_port  # noqa: E402, F401
from tests.k8s.sched import admin, cluster_scoped, nodes, ns, scheduler_cluster  # noqa: E402, F401
