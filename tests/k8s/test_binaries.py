"""Where the control-plane binaries come from: $KUBEBUILDER_ASSETS first, then kai's cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from kai.k8s.envtest import Binaries, MissingBinaryError, default_bin_dir

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


def test_cache_dir_follows_kai_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KAI_CACHE_DIR", str(tmp_path))
    assert default_bin_dir() == tmp_path / "kubernetes-1.20.2" / "bin"
