"""Docs that show `kai sim` output: the block after `$ kai sim EXAMPLE` must be what the command prints now."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from kai.cli import main

REPO = Path(__file__).parent.parent


def doc_block(doc: str, example: str) -> list[str]:
    """The lines a doc shows under ``$ kai sim <example>``, up to the end of its code block."""
    text = (REPO / doc).read_text()
    start = text.index(f"$ kai sim {example}\n")
    block = text[start:].split("```", 1)[0]
    return [line.rstrip() for line in block.rstrip("\n").split("\n")[1:]]


def sim_output(example: str) -> list[str]:
    """`kai sim <example>` run from the repository root, as the docs show it."""
    result = CliRunner().invoke(main, ["sim", example])
    assert result.exit_code == 0, result.stderr
    return [line.rstrip() for line in result.stdout.rstrip("\n").split("\n")]
