"""kai's container image, built by scripts/image/build.sh and started for real.

The image is an OCI layout (umoci, from Debian's packages and the kai wheel); the test unpacks it with
umoci into a runtime bundle and runs it with runc, Debian's OCI runtime, as the Deployment would run
it: user 65532, a read-only root filesystem. What is not the Deployment's: the container shares the
host's network namespace (the test API server listens on loopback) and its kubeconfig is bind-mounted
(in a cluster it would use its ServiceAccount's token). The base root filesystem is cached under
~/.cache/kai/image, so a warm build takes a minute or two; the first one also runs mmdebstrap.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from lightkube import Client

from kai.k8s.envtest import ControlPlane, free_port
from tests.k8s.conftest import REPO
from tests.k8s.sched import wait_for
from tests.k8s.test_scheduler import bound, gpu_pod

BUILD = REPO / "scripts" / "image" / "build.sh"
BUILD_TIMEOUT_S = 30 * 60  # a cold base (mmdebstrap) is a few minutes; a slow mirror gets room


def _version() -> str:
    return re.search(r'^version = "(.+)"', (REPO / "pyproject.toml").read_text(), re.MULTILINE).group(1)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    """``LAYOUT:TAG`` of a freshly built image."""
    out = tmp_path_factory.mktemp("oci")
    res = subprocess.run(
        ["bash", str(BUILD), str(out)], capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
    )
    assert res.returncode == 0, f"{BUILD} failed:\n{res.stdout}\n{res.stderr[-4000:]}"
    ref = res.stdout.strip().splitlines()[-1].removeprefix("image: ")
    return ref


def _blob(layout: Path, digest: str) -> dict[str, Any]:
    return json.loads((layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_text())


class Container:
    """The image unpacked into an OCI runtime bundle and run by runc."""

    def __init__(self, image: str, workdir: Path, kubeconfig: Path | None = None) -> None:
        self.id = f"kai-test-{uuid.uuid4().hex[:8]}"
        self.bundle = workdir / self.id
        subprocess.run(["umoci", "unpack", "--image", image, str(self.bundle)], capture_output=True, check=True)
        cfg = json.loads((self.bundle / "config.json").read_text())
        cfg["process"]["terminal"] = False
        cfg["root"]["readonly"] = True  # as the Deployment's readOnlyRootFilesystem
        # The host's network namespace: the test API server is on the host's loopback.
        cfg["linux"]["namespaces"] = [n for n in cfg["linux"]["namespaces"] if n["type"] != "network"]
        # The Deployment's emptyDir at /tmp: lightkube writes a kubeconfig's inline CA into a temp file.
        cfg["mounts"].append(
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "size=16m"]}
        )
        if kubeconfig is not None:
            cfg["mounts"].append(
                {
                    "destination": "/etc/kai/kubeconfig",
                    "type": "bind",
                    "source": str(kubeconfig),
                    "options": ["rbind", "ro"],
                }
            )
        self.cfg = cfg
        self.proc: subprocess.Popen[str] | None = None
        self.log = workdir / f"{self.id}.log"

    def run(self, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ARGS (after the image's entrypoint) to completion."""
        self._write(args)
        return subprocess.run(
            ["runc", "run", "--bundle", str(self.bundle), self.id], capture_output=True, text=True, timeout=timeout
        )

    def start(self, *args: str) -> None:
        """Start ARGS (after the entrypoint) in the background; its output goes to self.log."""
        self._write(args)
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen(
                ["runc", "run", "--bundle", str(self.bundle), self.id], stdout=out, stderr=subprocess.STDOUT, text=True
            )

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            subprocess.run(["runc", "kill", self.id, "TERM"], capture_output=True, check=False)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                subprocess.run(["runc", "kill", self.id, "KILL"], capture_output=True, check=False)
                self.proc.wait(timeout=30)
        subprocess.run(["runc", "delete", "--force", self.id], capture_output=True, check=False)
        return self.proc.returncode

    def _write(self, args: tuple[str, ...]) -> None:
        self.cfg["process"]["args"] = [*self.cfg["process"]["args"][:1], *args]
        (self.bundle / "config.json").write_text(json.dumps(self.cfg))


@pytest.fixture
def containers(tmp_path: Path) -> Iterator[list[Container]]:
    made: list[Container] = []
    yield made
    for c in made:
        c.stop()
        shutil.rmtree(c.bundle, ignore_errors=True)


def test_the_image_is_the_one_deploy_names(image: str) -> None:
    layout, tag = image.rsplit(":", 1)
    assert tag == _version()
    (manifest,) = json.loads((Path(layout) / "index.json").read_text())["manifests"]
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == tag
    config = _blob(Path(layout), _blob(Path(layout), manifest["digest"])["config"]["digest"])
    assert config["config"]["Entrypoint"] == ["/opt/kai/bin/kai"] and config["config"]["User"] == "65532:65532"
    deployment = yaml.safe_load((REPO / "deploy" / "scheduler.yaml").read_text())
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"{Path(layout).name}:{tag}"  # kai:VERSION
    assert container["command"][0] == "kai"  # on the image's PATH


def test_the_image_runs_kai(image: str, tmp_path: Path, containers: list[Container]) -> None:
    c = Container(image, tmp_path)
    containers.append(c)
    res = c.run("--version")
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"kai, version {_version()}"
    res = c.run("sim", "/opt/kai/lib/python3.11/site-packages/kai/k8s/deploy/queues.yaml", "--cycles", "1")
    assert res.returncode == 0 and "default-parent-queue" in res.stdout, res.stdout + res.stderr  # the engine ran


def test_the_image_schedules_on_a_real_api_server(
    image: str, scheduler_cluster: ControlPlane, admin: Client, ns: str, nodes, tmp_path: Path, containers
) -> None:
    """``kai scheduler`` in the container, as kai's ServiceAccount (deploy/rbac.yaml applied): it leads,
    reports ready on its metrics port, and binds a pod."""
    kubeconfig = tmp_path / "kubeconfig"
    shutil.copy(scheduler_cluster.scheduler_kubeconfig, kubeconfig)
    kubeconfig.chmod(0o644)  # readable by the container's user 65532
    port = free_port()
    c = Container(image, tmp_path, kubeconfig)
    containers.append(c)
    c.start(
        "scheduler",
        "--kubeconfig=/etc/kai/kubeconfig",
        f"--metrics-bind-address=127.0.0.1:{port}",
        f"--leader-elect-name=kai-image-{uuid.uuid4().hex[:6]}",
        "--schedule-period=0.5",
    )
    nodes("img-0", gpus=2)
    admin.create(gpu_pod("in-image", ns))
    wait_for(lambda: "in-image" in bound(admin, ns) or c.proc.poll() is not None, "the containerized kai to bind")
    assert c.proc.poll() is None, c.log.read_text()[-3000:]
    assert bound(admin, ns) == {"in-image": "img-0"}
    assert c.stop() == 0, c.log.read_text()[-3000:]  # SIGTERM: a clean exit, the Lease given up
    assert '"became leader"' in c.log.read_text()
