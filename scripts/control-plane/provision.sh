#!/usr/bin/env bash
# Provision the binaries of kai's test control plane: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl, Kubernetes 1.20.2.
#
# Why build: no registry this project may use ships a kube-apiserver, but
# Debian ships the Kubernetes 1.20.2 source and a Go toolchain, so we build the
# binaries once, the way Debian's own debian/rules does, and cache them under
# ~/.cache/kai (override with KAI_CACHE_DIR). etcd comes from Debian's
# etcd-server. If KUBEBUILDER_ASSETS names a folder with some of the binaries
# (the envtest convention), those are used and only the missing ones are built.
#
# Idempotent: with everything in place it prints where the binaries are and
# exits in well under a second. Concurrent runs (two pytest-xdist workers,
# make and a fixture) serialise on a lock file. Apt packages are installed
# when running as root; otherwise the script names the command to run.
#
# Usage: provision.sh [--quiet]     prints "bin-dir: DIR" on success.
set -euo pipefail

K8S_VERSION=1.20.2
CACHE="${KAI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kai}"
DEST="$CACHE/kubernetes-$K8S_VERSION"
BIN="$DEST/bin"
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
QUIET=0
[[ "${1:-}" == "--quiet" ]] && QUIET=1

say() { [[ $QUIET == 1 ]] || echo "control-plane: $*" >&2; }
die() { echo "control-plane: ERROR: $*" >&2; exit 1; }

# has_assets NAME: true if KUBEBUILDER_ASSETS holds an executable NAME.
has_assets() { [[ -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$1" ]]; }

missing_k8s() {
  local b
  for b in "${K8S_BINS[@]}"; do
    has_assets "$b" || [[ -x "$BIN/$b" ]] || echo "$b"
  done
}

# apt_install PKG...: install the Debian packages that are not installed yet.
apt_install() {
  local want=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || want+=("$p")
  done
  [[ ${#want[@]} == 0 ]] && return 0
  if [[ $(id -u) != 0 ]]; then
    die "missing Debian packages: ${want[*]} (run as root: apt-get install -y ${want[*]})"
  fi
  say "apt-get install ${want[*]}"
  # Don't let a package's init script start a system etcd: ours run on free ports, on demand.
  local policy=/usr/sbin/policy-rc.d created=0
  if [[ ! -e $policy ]]; then printf '#!/bin/sh\nexit 101\n' >"$policy"; chmod +x "$policy"; created=1; fi
  apt-get update -qq || apt-get update -qq  # once more: a mirror hiccup is common and harmless
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
  [[ $created == 1 ]] && rm -f "$policy"
  return 0
}

# enable_deb_src: add a deb-src twin of Debian's own sources entry (needed by apt-get source).
enable_deb_src() {
  local src=/etc/apt/sources.list.d/debian.sources dst=/etc/apt/sources.list.d/kai-deb-src.sources
  [[ -e $dst ]] && return 0
  grep -rqs '^deb-src\|^Types:.*deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/ && return 0
  [[ $(id -u) == 0 ]] || die "apt has no deb-src entry; as root, copy $src with 'Types: deb-src'"
  [[ -e $src ]] || die "no $src to copy a deb-src entry from"
  say "enabling deb-src ($dst)"
  sed 's/^Types: deb$/Types: deb-src/' "$src" >"$dst"
  apt-get update -qq
}

build_k8s() {
  local what=("$@") work="$DEST/build" started=$SECONDS
  echo "control-plane: building ${what[*]} $K8S_VERSION from Debian's source (first run only, ~10-15 min on 2 cores; log: $DEST/build.log)" >&2
  apt_install golang-go golang-github-modern-go-reflect2-dev dpkg-dev make rsync jq
  enable_deb_src
  rm -rf "$work"; mkdir -p "$work" "$BIN"
  (
    cd "$work"
    apt-get source --download-only kubernetes
    dpkg-source --no-check -x ./kubernetes_*.dsc src
    cd src
    grep -q "tag: v$K8S_VERSION" hack/lib/version.sh || die "Debian's kubernetes source is not $K8S_VERSION"
    # The vendored reflect2 1.0.1 crashes the apiserver under Go >= 1.18 on the first
    # custom resource (it reads runtime map internals); Debian's 1.0.2 is fixed.
    rm -rf vendor/github.com/modern-go/reflect2
    cp -rL /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
    rm -f vendor/github.com/modern-go/reflect2/go.mod
    # As debian/rules: GOPATH mode with the tree symlinked in, CGO off.
    mkdir -p .go/src/k8s.io
    [[ -L .go/src/k8s.io/kubernetes ]] || ln -s ../../.. .go/src/k8s.io/kubernetes
    local targets=() b
    for b in "${what[@]}"; do targets+=("cmd/$b"); done
    env GOPATH="$PWD/.go" CGO_ENABLED=0 PATH="/usr/lib/go/bin:$PATH" make WHAT="${targets[*]}"
    for b in "${what[@]}"; do install -m 0755 "_output/bin/$b" "$BIN/$b"; done
  ) >"$DEST/build.log" 2>&1 || { tail -n 40 "$DEST/build.log" >&2; die "build failed; full log: $DEST/build.log"; }
  rm -rf "$work"  # ~2 GB of source and Go build cache; only the binaries are kept
  echo "control-plane: built ${what[*]} in $((SECONDS - started)) s" >&2
}

main() {
  mkdir -p "$CACHE" "$DEST"
  exec 9>"$DEST/.lock"
  flock 9
  command -v openssl >/dev/null || apt_install openssl  # the fixture makes ServiceAccount keys with it
  has_assets etcd || command -v etcd >/dev/null || apt_install etcd-server
  has_assets etcd || command -v etcd >/dev/null || die "no etcd after installing etcd-server"
  local missing
  mapfile -t missing < <(missing_k8s)
  [[ ${#missing[@]} == 0 ]] || build_k8s "${missing[@]}"
  local b
  for b in "${K8S_BINS[@]}"; do
    has_assets "$b" && continue
    if [[ $b == kubectl ]]; then "$BIN/$b" version --client >/dev/null 2>&1 || die "$BIN/$b does not run"
    else "$BIN/$b" --version >/dev/null 2>&1 || die "$BIN/$b does not run"; fi
  done
  say "binaries ready (cache $BIN${KUBEBUILDER_ASSETS:+, KUBEBUILDER_ASSETS $KUBEBUILDER_ASSETS})"
  echo "bin-dir: $BIN"
}

main
