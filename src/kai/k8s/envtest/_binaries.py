"""Where the control-plane binaries are: the envtest convention first, then kai's cache.

``scripts/control-plane/provision.sh`` builds what is missing into the cache; this module
only looks, so importing it or starting a control plane never builds anything by surprise.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

K8S_VERSION = "1.20.2"
K8S_BINARIES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


class MissingBinaryError(RuntimeError):
    """A control-plane binary is nowhere to be found; the message says how to provision it."""


def cache_dir() -> Path:
    """kai's cache folder: $KAI_CACHE_DIR, else $XDG_CACHE_HOME/kai, else ~/.cache/kai (as provision.sh)."""
    if d := os.environ.get("KAI_CACHE_DIR"):
        return Path(d)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "kai"


def default_bin_dir() -> Path:
    """The folder provision.sh builds the Kubernetes binaries into."""
    return cache_dir() / f"kubernetes-{K8S_VERSION}" / "bin"


@dataclass(frozen=True, slots=True)
class Binaries:
    """Absolute paths of the five programs a test control plane runs."""

    etcd: Path
    kube_apiserver: Path
    kube_controller_manager: Path
    kube_scheduler: Path
    kubectl: Path

    @classmethod
    def find(cls, bin_dir: Path | None = None) -> Binaries:
        """Resolve each binary: $KUBEBUILDER_ASSETS/NAME, then BIN_DIR/NAME (default: the cache),
        then, for etcd only, the PATH (Debian's etcd-server installs /usr/bin/etcd).

        Raises MissingBinaryError naming every binary not found and the script that provides them.
        """
        bin_dir = bin_dir or default_bin_dir()
        assets = os.environ.get("KUBEBUILDER_ASSETS")
        found: dict[str, Path] = {}
        missing: list[str] = []
        for name in ("etcd", *K8S_BINARIES):
            candidates = [Path(assets) / name] if assets else []
            candidates.append(bin_dir / name)
            path = next((p for p in candidates if p.is_file() and os.access(p, os.X_OK)), None)
            if path is None and name == "etcd" and (on_path := shutil.which("etcd")):
                path = Path(on_path)
            if path is None:
                missing.append(name)
            else:
                found[name.replace("-", "_")] = path.resolve()
        if missing:
            raise MissingBinaryError(
                f"control-plane binaries not found: {', '.join(missing)} "
                f"(looked in {'$KUBEBUILDER_ASSETS, ' if assets else ''}{bin_dir}); "
                "run scripts/control-plane/provision.sh to build them"
            )
        return cls(**found)
