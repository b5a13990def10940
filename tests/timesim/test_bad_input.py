"""Bad time-simulation input: every error names the file, the object and the field, exit code 2, and
nothing runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from kai.cli import main
from tests.timesim.helpers import node, pod, queue, simulation

BASE = [queue("team-a", 8), node("n1", 8)]
GEN = {"name": "g", "queue": "team-a", "jobs": 3, "interArrival": "1m", "duration": "10m"}


def kai_sim(tmp_path: Path, docs: list[str], *args: str) -> tuple[int, str, str]:
    f = tmp_path / "in.yaml"
    f.write_text("---\n".join(docs))
    result = CliRunner().invoke(main, ["sim", str(f), *args])
    return result.exit_code, result.stdout, result.stderr


def _gen(**changes: object) -> dict:
    g = {**GEN, **changes}
    return {k: v for k, v in g.items() if v is not None}


@pytest.mark.parametrize(
    ("spec", "where", "message"),
    [
        ({"bogus": 1}, "spec.bogus", "unknown field"),
        ({"seed": -1}, "spec.seed", "expected a non-negative whole number, got -1"),
        ({"duration": "soon"}, "spec.duration", "'soon' is not a duration"),
        ({"schedulePeriod": "0s"}, "spec.schedulePeriod", "'0s' must be positive"),
        ({"generators": [_gen(interArrival=None)]}, "spec.generators[0].interArrival", "is required"),
        ({"generators": [_gen(jobs=None)]}, "spec.generators[0].jobs", "give jobs (how many) or end"),
        (
            {"generators": [_gen(gpusPerPod={"choices": [1, 2], "weights": [1]})]},
            "spec.generators[0].gpusPerPod.weights",
            "expected a list of 2 numbers, one per choice",
        ),
        (
            {"generators": [_gen(duration={"lognormal": {"median": "1h", "sigma": -1}})]},
            "spec.generators[0].duration.lognormal.sigma",
            "expected a non-negative number, got -1",
        ),
        (
            {"generators": [_gen(duration={"gamma": {"k": 2}})]},
            "spec.generators[0].duration.gamma",
            "unknown key",
        ),
        ({"generators": [_gen(pods=0)]}, "spec.generators[0].pods", "expected a whole number >= 1, got 0"),
        ({"generators": [_gen(queue="nobody")]}, "spec.generators[0].queue", "queue 'nobody' does not exist"),
        ({"generators": [_gen(), _gen()]}, "spec.generators[1].name", "'g' is used by an earlier generator"),
        (
            {"generators": [_gen(priorityClassName="urgent")]},
            "spec.generators[0].priorityClassName",
            "priority class 'urgent' does not exist",
        ),
        (
            {"nodeEvents": [{"at": "1h", "node": "n1", "action": "explode"}]},
            "spec.nodeEvents[0].action",
            "expected one of drain, uncordon, fail, repair, got 'explode'",
        ),
        (
            {"nodeEvents": [{"at": "1h", "node": "n9", "action": "fail"}]},
            "spec.nodeEvents[0].node",
            "node 'n9' is not in the input (nor in a node pool)",
        ),
        (
            {"nodePools": [{"name": "Big_Nodes", "count": 2}]},
            "spec.nodePools[0].name",
            "expected a DNS label",
        ),
    ],
)
def test_bad_simulation_documents_name_the_field(tmp_path: Path, spec: dict, where: str, message: str) -> None:
    code, out, err = kai_sim(tmp_path, [*BASE, simulation(**spec)], "-o", "json")
    assert code == 2
    assert out == ""
    assert f"in.yaml: Simulation/t: {where}: " in err.replace("\n", "")
    assert message in err.replace("\n", "")


@pytest.mark.parametrize(
    ("annotation", "value", "message"),
    [
        ("arrival", "soon", "'soon' is not a duration"),
        ("arrival", "-1h", "'-1h' must not be negative"),
        ("checkpoint_interval", "0s", "'0s' must be positive"),
        ("duration", "forever", "'forever' is not a duration"),
    ],
)
@pytest.mark.parametrize("mode", [["--until", "1h"], []])
def test_bad_kai_sim_annotations_name_the_pod_and_field(
    tmp_path: Path, annotation: str, value: str, message: str, mode: list[str]
) -> None:
    """Checked in both modes: a static run (no time flags) rejects them too."""
    key = "kai.sim/checkpoint-interval" if annotation == "checkpoint_interval" else annotation
    docs = [*BASE, pod("p", "team-a", 1, **{key: value})]
    code, out, err = kai_sim(tmp_path, docs, *mode)
    assert code == 2 and out == ""
    field = "kai.sim/" + annotation.replace("_", "-")
    assert f"in.yaml: Pod/default/p: metadata.annotations.{field}: {message}" in err.replace("\n", "")


def test_two_simulation_documents_are_refused(tmp_path: Path) -> None:
    code, _, err = kai_sim(tmp_path, [*BASE, simulation(seed=1), simulation(seed=2)])
    assert code == 2
    assert "a second Simulation document (Simulation/t came first)" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--until", "1 day"], "--until: '1 day' is not a duration"),
        (["--until", "1h", "--cycles", "3"], "--cycles: counts the cycles of a static run"),
        (["--until", "1h", "--at", "2:x.yaml"], "--at: applies files before cycles of a static run"),
        (["--period", "0s"], "--period: '0s' must be positive"),
        (
            ["--report", "/nonexistent/dir/r.html"],
            "--report /nonexistent/dir/r.html: folder /nonexistent/dir does not exist",
        ),
    ],
)
def test_bad_time_flags_are_errors(tmp_path: Path, args: list[str], message: str) -> None:
    code, out, err = kai_sim(tmp_path, [*BASE, pod("p", "team-a", 1, duration="1m")], *args)
    assert code == 2 and out == ""
    assert message in err.replace("\n", "")


def test_a_pod_arriving_before_its_queue_exists_is_an_error_naming_the_time(tmp_path: Path) -> None:
    late_queue = queue("team-b", 4).replace("name: team-b", "name: team-b\n  annotations: {kai.sim/arrival: 2h}")
    docs = [*BASE, late_queue, pod("p", "team-b", 1, arrival="1h")]
    code, _, err = kai_sim(tmp_path, docs, "--until", "3h")
    assert code == 2
    text = err.replace("\n", "")
    assert "queue 'team-b' does not exist (applied at 3600s of the simulation)" in text


def test_a_node_with_a_bad_arrival_is_an_error_in_both_modes(tmp_path: Path) -> None:
    late = node("n2", 8).replace("name: n2", "name: n2\n  annotations: {kai.sim/arrival: tomorrow}")
    for mode in (["--until", "1h"], []):
        code, out, err = kai_sim(tmp_path, [*BASE, late], *mode)
        assert code == 2 and out == ""
        assert "in.yaml: Node/n2: metadata.annotations.kai.sim/arrival: 'tomorrow' is not a duration" in err.replace(
            "\n", ""
        )
