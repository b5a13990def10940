"""``kai scheduler``'s command line: bad flags and a bad kubeconfig are errors with exit code 2."""

from __future__ import annotations

from pathlib import Path

from tests.k8s.conftest import run_kai


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
