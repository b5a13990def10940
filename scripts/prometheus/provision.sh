#!/usr/bin/env bash
# Provision Prometheus for the time-based fair share test (tests/k8s/test_usage_prometheus.py):
# Debian's `prometheus` package, installed with apt when missing (CI runs as root on Debian). The package's
# own service is not used: the tests start `prometheus` themselves on loopback, with a config of their own.
# Idempotent: with prometheus present it exits at once.
#
# Usage: provision.sh [--quiet]     prints "prometheus: PATH" on success.
set -euo pipefail
QUIET=0
[[ "${1:-}" == "--quiet" ]] && QUIET=1
say() { [[ $QUIET == 1 ]] || echo "prometheus: $*" >&2; }
die() { echo "prometheus: ERROR: $*" >&2; exit 1; }

find_prometheus() { command -v prometheus || { [[ -x /usr/bin/prometheus ]] && echo /usr/bin/prometheus; } || true; }

bin="$(find_prometheus)"
if [[ -z $bin ]]; then
  [[ $(id -u) == 0 ]] || die "prometheus is missing (run as root: apt-get install -y prometheus)"
  exec 9>/tmp/kai-prometheus-provision.lock
  flock 9
  bin="$(find_prometheus)"
  if [[ -z $bin ]]; then
    say "apt-get install prometheus"
    apt-get update -qq || apt-get update -qq  # once more: a mirror hiccup is common and harmless
    # policy-rc.d 101: the package's own service is not started (the tests run their own Prometheus)
    policy=/usr/sbin/policy-rc.d
    had_policy=0
    [[ -e $policy ]] && had_policy=1
    [[ $had_policy == 1 ]] || printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod +x "$policy"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    [[ $had_policy == 1 ]] || rm -f "$policy"
    bin="$(find_prometheus)"
  fi
  [[ -n $bin ]] || die "no prometheus after apt-get install prometheus"
fi
"$bin" --version >/dev/null 2>&1 || die "$bin does not run"
echo "prometheus: $bin"
