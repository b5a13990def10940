"""Where the control-plane binaries are, and which Kubernetes release they are.

kai is tested on two releases: the current one (``CURRENT_VERSION``, built from the Go module
proxy with its own etcd) and the oldest it supports (``OLDEST_VERSION``, built from Debian's
source, with Debian's etcd 3.4). ``$KAI_K8S_VERSION`` (``current``, ``oldest`` or a version)
picks the one a test run uses; the default is the current release.

``scripts/control-plane/provision.sh`` builds what is missing into the cache; this module
only looks, so importing it or starting a control plane never builds anything by surprise.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

# scripts/control-plane/current/go.mod requires this release (tests/k8s/test_binaries.py checks they agree).
CURRENT_VERSION = "1.37.2"
OLDEST_VERSION = "1.20.2"
RELEASES = {"current": CURRENT_VERSION, "oldest": OLDEST_VERSION}
K8S_VERSION = CURRENT_VERSION  # the default release
K8S_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class MissingBinaryError(RuntimeError):
    """A control-plane binary is nowhere to be found; the message says how to provision it."""


def selected_version() -> str:
    """The release this run tests against: $KAI_K8S_VERSION (``current``, ``oldest`` or a version), else current."""
    want = os.environ.get("KAI_K8S_VERSION", "current").strip() or "current"
    version = RELEASES.get(want, want.removeprefix("v"))
    if version not in RELEASES.values():
        raise MissingBinaryError(
            f"KAI_K8S_VERSION={want}: kai's control plane is provisioned for "
            + ", ".join(f"{k} ({v})" for k, v in RELEASES.items())
        )
    return version


def release_name(version: str) -> str:
    """``current`` or ``oldest``: the word provision.sh takes for VERSION."""
    return next(k for k, v in RELEASES.items() if v == version)


def cache_dir() -> Path:
    """kai's cache folder: $KAI_CACHE_DIR, else $XDG_CACHE_HOME/kai, else ~/.cache/kai (as provision.sh)."""
    if d := os.environ.get("KAI_CACHE_DIR"):
        return Path(d)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kai"


def default_bin_dir(version: str | None = None) -> Path:
    """The folder provision.sh builds VERSION's binaries into (default: the selected release)."""
    return cache_dir() / f"kubernetes-{version or selected_version()}" / "bin"


@functools.cache
def _apiserver_version(path: Path) -> tuple[int, int]:
    out = subprocess.run([str(path), "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    if m := re.search(r"v(\d+)\.(\d+)", out):
        return int(m.group(1)), int(m.group(2))
    raise MissingBinaryError(f"{path} --version printed no Kubernetes version: {out.strip()!r}")


@dataclass(frozen=True, slots=True)
class Binaries:
    """Absolute paths of the five programs a test control plane runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path

    @property
    def version(self) -> tuple[int, int]:
        """(major, minor) of kube-apiserver, as it reports itself: flags and APIs differ between releases."""
        return _apiserver_version(self.kube_apiserver)

    @classmethod
    def find(cls, bin_dir: Path | None = None) -> Binaries:
        """Resolve each binary: $KUBEBUILDER_ASSETS/NAME (current release only), then BIN_DIR/NAME
        (default: the cache of the selected release), then, for the oldest release's etcd only,
        the PATH (Debian's etcd-server installs /usr/bin/etcd; the current release has its own).

        Raises MissingBinaryError naming every binary not found and the script that provides them.
        """
        version = selected_version()
        bin_dir = bin_dir or default_bin_dir(version)
        assets = os.environ.get("KUBEBUILDER_ASSETS") if version == CURRENT_VERSION else None
        found: dict[str, Path] = {}
        missing: list[str] = []
        for name in ("etcd", *K8S_BINARIES):
            candidates = [Path(assets) / name] if assets else []
            candidates.append(bin_dir / name)
            path = next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)
            if path is None and name == "etcd" and version == OLDEST_VERSION and (on_path := shutil.which("etcd")):
                path = Path(on_path)
            if path is None:
                missing.append(name)
            else:
                found[name.replace("-", "_")] = path.resolve()
        if missing:
            raise MissingBinaryError(
                f"control-plane binaries not found: {', '.join(missing)} "
                f"(looked in {'$KUBEBUILDER_ASSETS, ' if assets else ''}{bin_dir}); "
                f"run scripts/control-plane/provision.sh {release_name(version)} to build them"
            )
        return cls(**found)
