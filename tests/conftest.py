"""Shared fixtures: run the real ``kai sim`` command in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from kai.cli import main

NOW = "2026-01-01T00:00:00Z"


def run_sim(args: list[str], stdin: str | None = None) -> tuple[int, dict[str, Any] | None, str]:
    """(exit code, parsed JSON output or None, stderr) of ``kai sim ARGS -o json``."""
    if "--now" not in args:
        args = [*args, "--now", NOW]
    result = CliRunner().invoke(main, ["sim", *args, "-o", "json"], input=stdin)
    doc = json.loads(result.stdout) if result.exit_code == 0 else None
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, doc, result.stderr


@pytest.fixture
def sim() -> Callable[..., tuple[int, dict[str, Any] | None, str]]:
    return run_sim
