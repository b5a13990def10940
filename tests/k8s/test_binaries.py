"""Where the control-plane binaries come from: $KUBEBUILDER_ASSETS first, then kai's cache."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kai.k8s.envtest import CURRENT_VERSION, OLDEST_VERSION, Binaries, MissingBinaryError, default_bin_dir

GO_MOD = Path(__file__).resolve().parents[2] / "scripts" / "control-plane" / "current" / "go.mod"

NAMES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")


def _fake(folder: Path, *names: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n in names:
        (folder / n).write_text("#!/bin/sh\n")
        (folder / n).chmod(0o755)


def test_kubebuilder_assets_win_over_the_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assets, cache = tmp_path / "assets", tmp_path / "cache"
    _fake(assets, "etcd", "kube-apiserver", "kubectl")  # what envtest's archives hold
    _fake(cache, *NAMES)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets))
    monkeypatch.delenv("KAI_K8S_VERSION", raising=False)  # envtest's assets stand in for the current release
    b = Binaries.find(cache)
    assert (b.etcd.parent, b.kube_apiserver.parent, b.kubectl.parent) == (assets, assets, assets)
    assert (b.kube_controller_manager.parent, b.kube_scheduler.parent) == (cache, cache)


def test_missing_binaries_are_named_with_the_remedy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no etcd on the PATH either
    _fake(tmp_path / "cache", "kube-apiserver")
    with pytest.raises(MissingBinaryError) as e:
        Binaries.find(tmp_path / "cache")
    msg = str(e.value)
    assert "etcd, kube-controller-manager, kube-scheduler, kubectl" in msg
    assert "scripts/control-plane/provision.sh" in msg


def test_a_file_without_exec_permission_does_not_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    _fake(tmp_path, *NAMES)
    (tmp_path / "kubectl").chmod(0o644)
    with pytest.raises(MissingBinaryError, match="kubectl"):
        Binaries.find(tmp_path)


def test_cache_dir_follows_kai_cache_dir_and_the_selected_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KAI_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("KAI_K8S_VERSION", raising=False)
    assert default_bin_dir() == tmp_path / f"kubernetes-{CURRENT_VERSION}" / "bin"
    monkeypatch.setenv("KAI_K8S_VERSION", "oldest")
    assert default_bin_dir() == tmp_path / "kubernetes-1.20.2" / "bin"
    monkeypatch.setenv("KAI_K8S_VERSION", f"v{CURRENT_VERSION}")
    assert default_bin_dir() == tmp_path / f"kubernetes-{CURRENT_VERSION}" / "bin"


def test_an_unprovisioned_release_is_refused_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_K8S_VERSION", "1.27.0")
    with pytest.raises(MissingBinaryError, match=f"KAI_K8S_VERSION=1.27.0: .*current \\({CURRENT_VERSION}\\)"):
        default_bin_dir()


def test_current_release_is_the_one_go_mod_builds() -> None:
    """provision.sh builds what current/go.mod requires; the Python side must look for that same release."""
    required = re.findall(r"^\s*(?:require\s+)?k8s\.io/kubernetes (v\S+)", GO_MOD.read_text(), re.MULTILINE)
    assert required == [f"v{CURRENT_VERSION}"]
    assert OLDEST_VERSION == "1.20.2"  # Debian's kubernetes source package, which provision.sh checks it builds


def test_the_oldest_release_uses_debian_s_etcd_from_the_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The current release runs the etcd built with it; only the oldest falls back to etcd on the PATH."""
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    _fake(tmp_path / "path", "etcd")
    _fake(tmp_path / "cache", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.setenv("KAI_K8S_VERSION", "oldest")
    assert Binaries.find(tmp_path / "cache").etcd == tmp_path / "path" / "etcd"
    monkeypatch.setenv("KAI_K8S_VERSION", "current")
    with pytest.raises(MissingBinaryError, match="not found: etcd "):
        Binaries.find(tmp_path / "cache")
