"""README.md's "What `make demo` shows" is the real output of `make demo`, so it cannot go stale.

The test reads the demo command from the Makefile (expanding its variables), checks that the README
shows that same command, runs it in-process from the repository root and compares the output with the
README's block line by line. Also: the README's first lines are the two make commands, and the
two-teams example it mentions still tells its story.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from kai.cli import main
from tests.conftest import run_sim

REPO = Path(__file__).parent.parent
SECTION = "## What `make demo` shows"


def _demo_command() -> str:
    """The demo recipe of the Makefile as a user types it (``kai sim ...``)."""
    text = (REPO / "Makefile").read_text()
    variables = dict(re.findall(r"^(\w+)\s*:?=\s*(.*)$", text, flags=re.M))
    recipe = re.search(r"^demo:.*\n\t(.*)$", text, flags=re.M)
    assert recipe is not None, "no demo recipe in the Makefile"
    line = recipe.group(1).lstrip("@")
    line = re.sub(r"\$\((\w+)\)", lambda m: variables[m.group(1)].strip(), line)
    command = line.replace(variables["BIN"].strip() + "/", "", 1)
    assert command.startswith("kai sim "), command
    return command


def _readme_block() -> tuple[str, list[str]]:
    """(the ``$ `` command, the output lines) of the first code block of the demo section."""
    text = (REPO / "README.md").read_text()
    section = text[text.index(SECTION) :]
    block = section.split("```\n", 2)[1]
    first, *output = block.rstrip("\n").split("\n")
    assert first.startswith("$ "), first
    return first[2:], output


def test_readme_starts_with_the_two_make_commands() -> None:
    lines = (REPO / "README.md").read_text().split("\n")
    commands = [line for line in lines[:8] if line.startswith("make ")]
    assert [c.split()[:2] for c in commands] == [["make", "demo"], ["make", "test"]]


def test_readme_shows_the_makefile_demo_command() -> None:
    assert _readme_block()[0] == _demo_command()


def test_readme_demo_block_is_the_demo_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    args = shlex.split(_demo_command())[1:]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.stderr
    got = result.stdout.rstrip("\n").split("\n")
    _, want = _readme_block()
    assert got == want, "README.md's demo block is stale: paste the output of `make demo`"


def test_demo_story_is_in_the_output() -> None:
    """What the README's prose claims, read from the same output."""
    _, out = _readme_block()
    text = "\n".join(out)
    cycles = text.split("\n\n")
    assert len(cycles) == 4
    assert cycles[0].count("ContainerCreating") == 2
    assert cycles[1].count(" (preempt): ") == 2 and cycles[1].count("Terminating") == 2
    assert cycles[2].count("    bind ") == 2 and "wait  pg-raycluster-sample Unschedulable" in cycles[2]
    assert "wait  pg-raycluster-sample Unschedulable" in cycles[3]


def test_two_teams_example_still_tells_its_story() -> None:
    code, doc, err = run_sim([str(REPO / "examples" / "two-teams" / "cluster.yaml")])
    assert code == 0, err
    assert doc is not None
    status = {p["name"]: (p["status"], p["node"]) for p in doc["pods"]}
    assert status["chat-server"] == status["finetune"] == ("Binding", "node-a")
    assert {status[f"llm-pretrain-{i}"] for i in range(3)} == {("Pending", None)}
    (gang,) = [g for g in doc["podGroups"] if g["name"] == "llm-pretrain"]
    message = gang["conditions"][0]["message"]
    assert "Resources were found for 2 pods while 3 are required for gang scheduling" in message
