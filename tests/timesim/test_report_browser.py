"""The HTML report in a real browser: headless Chromium (Debian's package; scripts/browser/provision.sh
installs it) loads the page with no console message at all (a blocked network load, a script error or
a CSP violation would each log one), lays out every plot, and can screenshot it.

This test fails, never skips, when Chromium is missing: the report is a user-facing deliverable.
"""

from __future__ import annotations

import re
from pathlib import Path

from kai.sim.timesim._report import render_report
from tests.browser import chromium as _chromium
from tests.browser import console_lines
from tests.timesim.helpers import node, pod, queue, run, simulation


def _report(tmp_path: Path) -> Path:
    out = run(
        queue("research", 8),
        queue("team-a", 4, "research"),
        queue("team-b", 4, "research"),
        node("node-a", 4),
        node("node-b", 4),
        pod("a1", "team-a", 4, duration="2h"),
        pod("a2", "team-a", 4, duration="2h"),
        pod("b1", "team-b", 2, duration="1h", arrival="1h"),
        pod("b2", "team-b", 1, duration="30m", arrival="90m"),
        simulation(
            schedulePeriod="10s",
            duration="4h",
            checkpointInterval="15m",
            nodeEvents=[{"at": "3h", "node": "node-b", "action": "drain"}],
        ),
    )
    path = tmp_path / "report.html"
    path.write_text(render_report(out.metrics), encoding="utf-8")
    return path


def test_the_report_loads_without_console_messages_and_lays_out_every_plot(tmp_path: Path) -> None:
    page = _report(tmp_path)
    html = page.read_text()
    plots = html.count('<svg class="plot')
    assert plots >= 7  # allocation, two queue charts, waits, an occupancy map, fragmentation, pending jobs
    proc = _chromium(tmp_path, "--dump-dom", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert console_lines(proc.stderr) == []
    assert f'data-plots-rendered="{plots}"' in proc.stdout  # the page's script ran and counted laid-out plots
    assert "GPU allocation over time" in proc.stdout and "Node × GPU occupancy" in proc.stdout


def test_a_page_that_loads_from_the_network_would_be_caught(tmp_path: Path) -> None:
    """The console check above is real: the report's CSP turns any network load into a console message."""
    page = _report(tmp_path)
    bad = tmp_path / "bad.html"
    bad.write_text(page.read_text().replace("</body>", '<img src="http://192.0.2.1/x.png"></body>'))
    proc = _chromium(tmp_path, "--dump-dom", bad.as_uri())
    assert any("Content Security Policy" in line for line in proc.stderr.splitlines() if ":CONSOLE" in line)


def test_the_report_screenshots(tmp_path: Path) -> None:
    page = _report(tmp_path)
    png = tmp_path / "shot.png"
    proc = _chromium(tmp_path, "--hide-scrollbars", "--window-size=1100,1400", f"--screenshot={png}", page.as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert (width, height) == (1100, 1400)
    assert len(data) > 30_000  # charts, not a blank page (a blank 1100x1400 PNG is a few KB)
    assert re.search(rb"IDAT", data)
