"""Headless Chromium for the tests that look at a page (Debian's package; scripts/browser/provision.sh
installs it). The tests fail, never skip, when Chromium is missing: the pages are user-facing deliverables.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

CHROMIUM = os.environ.get("KAI_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile under *tmp_path*; its console goes to stderr."""
    assert CHROMIUM, "chromium is missing: run scripts/browser/provision.sh (as root it apt-installs chromium)"
    cmd = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-background-networking",  # no traffic but the page's own
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        *args,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, check=False)


def console_lines(stderr: str) -> list[str]:
    """The page's console messages and uncaught errors in Chromium's log."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
