"""A fake NVML for tests: tests/unit/data/fake_nvml.c built with gcc into a folder as libnvidia-ml.so.1,
which a process started with that folder on LD_LIBRARY_PATH loads in place of the driver's library (no
GPU or NVIDIA driver exists on the test machines). It shows the devices listed in FAKE_NVML_UUIDS."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).parent / "data" / "fake_nvml.c"


def build(folder: Path) -> Path:
    """Compile the fake into *folder*/libnvidia-ml.so.1; the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "gcc is needed to build the fake NVML library"
    out = folder / "libnvidia-ml.so.1"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(out), str(SOURCE)], check=True, capture_output=True)
    return folder


def kai_command() -> list[str]:
    """The ``kai`` command of this interpreter's environment."""
    exe = Path(sys.executable).parent / "kai"
    return [str(exe)] if exe.exists() else [sys.executable, "-c", "from kai.cli import main; main()"]


def env(folder: Path | None, uuids: list[str], **extra: str) -> dict[str, str]:
    """The environment of a process that sees *uuids* through the fake (folder None: no NVML at all)."""
    out = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "FAKE_NVML_UUIDS")}
    if folder is not None:
        out["LD_LIBRARY_PATH"] = str(folder)
    out["FAKE_NVML_UUIDS"] = ",".join(uuids)
    out.update(extra)
    return out
