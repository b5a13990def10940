#!/usr/bin/env bash
# Provision Prometheus for the time-based fair share test (tests/k8s/test_usage_prometheus.py):
# Debian's `prometheus` package, installed with apt when missing (CI runs as root on Debian). The tests
# start `prometheus` themselves on loopback with a configuration of their own; the package's service
# and configuration are not used. Idempotent: with prometheus present it exits at once.
#
# Usage: provision.sh [--quiet]     prints "prometheus: PATH" on success.
set -euo pipefail
QUIET=0
[[ "${1:-}" == "--quiet" ]] && QUIET=1
say() { [[ $QUIET == 1 ]] || echo "prometheus: $*" >&2; }
die() { echo "prometheus: ERROR: $*" >&2; exit 1; }
source "$(dirname "$0")/../lib/apt.sh"

find_prometheus() { command -v prometheus || { [[ -x /usr/bin/prometheus ]] && echo /usr/bin/prometheus; } || true; }

bin="$(apt_provide prometheus find_prometheus)"
"$bin" --version >/dev/null 2>&1 || die "$bin does not run"
echo "prometheus: $bin"
