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

find_chromium() { command -v chromium || command -v chromium-browser || true; }

bin="$(find_chromium)"
if [[ -z $bin ]]; then
  [[ $(id -u) == 0 ]] || die "chromium is missing (run as root: apt-get install -y chromium)"
  exec 9>/tmp/kai-browser-provision.lock
  flock 9
  bin="$(find_chromium)"
  if [[ -z $bin ]]; then
    say "apt-get install chromium"
    apt-get update -qq || apt-get update -qq  # once more: a mirror hiccup is common and harmless
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
    bin="$(find_chromium)"
  fi
  [[ -n $bin ]] || die "no chromium after apt-get install chromium"
fi
"$bin" --version >/dev/null 2>&1 || die "$bin does not run"
echo "chromium: $bin"
