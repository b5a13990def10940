"""``kai resource-reservation``'s NVML discovery against a fake NVML library (a C shim built with gcc and
loaded in place of libnvidia-ml.so.1: there is no GPU here), and its errors when no GPU is visible."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.unit.fakenvml import build, env, kai_command

UUID = "GPU-5c0a7e5e-1b7a-4f3e-9d55-2f1d8c3a9b10"


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("fake-nvml"))


def _run(environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*kai_command(), "resource-reservation", "--print-only"],
        env=environ,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_one_visible_gpu_is_printed(fake: Path) -> None:
    res = _run(env(fake, [UUID]))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == UUID


def test_no_gpu_visible_is_a_clear_error(fake: Path) -> None:
    res = _run(env(fake, []))
    assert res.returncode == 1
    assert "no GPU is visible: NVML found 0 devices, 1 was expected" in res.stderr
    assert "Traceback" not in res.stderr


def test_two_gpus_visible_is_an_error(fake: Path) -> None:
    res = _run(env(fake, [UUID, "GPU-other"]))
    assert res.returncode == 1
    assert "more than one GPU is visible: NVML found 2 devices" in res.stderr


def test_without_the_nvml_library_the_error_says_so(tmp_path: Path) -> None:
    res = _run(env(tmp_path, []))  # LD_LIBRARY_PATH has no libnvidia-ml.so.1 (nor has the machine)
    assert res.returncode == 1
    assert "no GPU is visible: the NVML library (libnvidia-ml.so.1) is not in this container" in res.stderr


def test_nvml_that_does_not_start_is_an_error(fake: Path) -> None:
    res = _run(env(fake, [UUID], FAKE_NVML_INIT_ERROR="9"))
    assert res.returncode == 1
    assert "NVML did not start: Driver Not Loaded" in res.stderr


def test_the_pod_must_be_named(fake: Path) -> None:
    environ = env(fake, [UUID])
    environ.pop("POD_NAME", None)
    res = subprocess.run(
        [*kai_command(), "resource-reservation"], env=environ, capture_output=True, text=True, timeout=60, check=False
    )
    assert res.returncode == 1 and "POD_NAME and POD_NAMESPACE must name this pod" in res.stderr
