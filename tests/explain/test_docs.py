"""README.md's `kai explain` block is what the command prints now (it cannot go stale)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from click.testing import CliRunner

from kai.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_the_readme_shows_kai_explain_as_it_prints() -> None:
    text = (REPO / "README.md").read_text()
    start = text.index("$ kai explain ")
    block = text[start:].split("```", 1)[0].rstrip("\n").split("\n")
    command, shown = block[0][2:], [line.rstrip() for line in block[1:]]
    args = shlex.split(command)
    assert args[:2] == ["kai", "explain"] and "--cycle" in args
    cwd = Path.cwd()
    try:
        os.chdir(REPO)  # the README's paths are relative to the repository
        result = CliRunner().invoke(main, args[1:])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.stderr
    assert [line.rstrip() for line in result.stdout.rstrip("\n").split("\n")] == shown
    assert any(line.startswith("  What would make it run:") for line in shown)
