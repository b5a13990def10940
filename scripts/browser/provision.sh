#!/usr/bin/env bash
# Provision headless Chromium for the HTML report test (tests/timesim/test_report_browser.py):
# Debian's `chromium` package, installed with apt when missing (CI runs as root on Debian).
# No browser is downloaded from anywhere else. Idempotent: with chromium present it exits at once.
#
# Usage: provision.sh [--quiet]     prints "chromium: PATH" on success.
set -euo pipefail
QUIET=0
[[ "${1:-}" == "--quiet" ]] && QUIET=1
say() { [[ $QUIET == 1 ]] || echo "browser: $*" >&2; }
die() { echo "browser: ERROR: $*" >&2; exit 1; }
source "$(dirname "$0")/../lib/apt.sh"

find_chromium() { command -v chromium || command -v chromium-browser || true; }

bin="$(apt_provide chromium find_chromium)"
"$bin" --version >/dev/null 2>&1 || die "$bin does not run"
echo "chromium: $bin"
