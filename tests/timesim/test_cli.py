"""``kai sim`` in time mode through the real command: outputs on stdout, files, progress on stderr only."""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from kai.cli import main
from kai.sim.timesim._progress import SimProgress

EXAMPLE = sorted(
    str(p) for p in (Path(__file__).parent.parent.parent / "examples" / "two-teams-over-time").glob("*.yaml")
)


def test_json_output_files_and_report(tmp_path: Path) -> None:
    metrics, report, folder = tmp_path / "m.json", tmp_path / "r.html", tmp_path / "csv"
    args = ["sim", *EXAMPLE, "--until", "3h", "-o", "json", "--metrics", str(metrics), "--report", str(report)]
    result = CliRunner().invoke(main, [*args, "--csv", str(folder)])
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)  # stdout is the document and nothing else
    assert set(doc) == {"cycles", "pods", "podGroups", "queues", "nodes", "reservations", "events", "time", "summary"}
    assert doc["time"] == 3 * 3600
    assert doc["summary"]["jobs"]["submitted"] > 0
    assert all(e["cycle"] == doc["cycles"] for e in doc["events"])  # the last cycle's events only
    assert f"metrics: {metrics}" in result.stderr and f"report: {report}" in result.stderr
    m = json.loads(metrics.read_text())
    assert m["summary"] == doc["summary"]
    assert m["simulation"]["horizon"] == 3 * 3600 and m["simulation"]["seed"] == 7
    assert len(m["timeseries"]["time"]) == m["simulation"]["cycles"]
    with open(folder / "timeseries.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0][:4] == ["time_s", "capacity_gpu", "allocated_gpu", "pending_jobs"]
    assert "team-a_fair_share_gpu" in rows[0]
    assert len(rows) == 1 + m["simulation"]["cycles"]
    with open(folder / "jobs.csv") as fh:
        jobs = list(csv.DictReader(fh))
    assert len(jobs) == m["summary"]["jobs"]["submitted"]
    html = report.read_text()
    assert html.count('<svg class="plot') >= 6
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)  # nothing loaded from anywhere


def test_table_output_is_a_summary(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["sim", *EXAMPLE, "--until", "2h"])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "two-teams-day: simulated 2h in" in out
    assert "Queues (GPUs)" in out and "team-a" in out and "team-b" in out
    assert result.stderr == ""  # no files asked, not a terminal: nothing on stderr


def test_static_mode_is_unchanged_without_time_flags() -> None:
    two_teams = str(Path(__file__).parent.parent.parent / "examples" / "two-teams" / "cluster.yaml")
    result = CliRunner().invoke(main, ["sim", two_teams, "-o", "json", "--now", "2026-01-01T00:00:00Z"])
    assert result.exit_code == 0
    keys = {"cycles", "pods", "podGroups", "queues", "nodes", "reservations", "events"}
    assert set(json.loads(result.stdout)) == keys


def test_progress_shows_only_after_a_second_and_only_on_its_console() -> None:
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=100)
    wall = iter([0.0, 0.4, 1.5, 1.6])
    progress = SimProgress(3600.0, console=console, clock=lambda: next(wall))
    with progress as update:
        update(60.0)
        assert buf.getvalue() == "" and not progress.shown
        update(1800.0)  # 1.5 s of wall time: the bar appears
        assert progress.shown
        assert "simulated 30m0s / 1h0m0s" in buf.getvalue()


def test_progress_stays_silent_off_a_terminal() -> None:
    buf = io.StringIO()
    wall = iter([0.0, 5.0, 10.0])
    with SimProgress(None, console=Console(file=buf), clock=lambda: next(wall)) as update:
        update(100.0)
        update(200.0)
    assert buf.getvalue() == ""
