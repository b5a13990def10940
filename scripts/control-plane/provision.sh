#!/usr/bin/env bash
# Provision the binaries of kai's test control plane: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl, for one of the two
# Kubernetes releases kai is tested on:
#
#   current (default)  the release named in current/go.mod, built with the
#                      machine's Go (1.26, /usr/local/go/bin/go or $KAI_GO) from
#                      the Go module proxy: k8s.io/kubernetes and its staging
#                      modules, pinned by current/go.sum, and etcd at the
#                      version that release requires; one `go build` of the
#                      five programs (-trimpath, no debug info), so shared
#                      packages compile once. Module and build caches live
#                      under the cache too ($CACHE/go), for CI to keep.
#   oldest / 1.20.2    the oldest supported release: Debian's kubernetes 1.20.2
#                      source package built with Debian's Go, the way its
#                      debian/rules does; etcd is Debian's etcd-server (3.4).
#
# Why build: no registry this project may use ships a kube-apiserver. Binaries
# are cached under ~/.cache/kai/kubernetes-VERSION/bin (override the root with
# KAI_CACHE_DIR). If KUBEBUILDER_ASSETS names a folder with some of the binaries
# (the envtest convention), those are used and only the missing ones are built.
#
# Idempotent: with everything in place it prints where the binaries are and
# exits in well under a second. Concurrent runs (two pytest-xdist workers,
# make and a fixture) serialise on a lock file per release. Apt packages are
# installed when running as root; otherwise the script names the command to run.
#
# Usage: provision.sh [--quiet] [current|oldest|VERSION]   prints "bin-dir: DIR" on success.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OLDEST_VERSION=1.20.2
# The current release is the one current/go.mod requires (one place to bump it).
CURRENT_VERSION="$(sed -n 's/^\(require\)\?[[:space:]]*k8s\.io\/kubernetes v\([0-9.]*\).*/\2/p' "$HERE/current/go.mod")"
QUIET=0
RELEASE=current
for arg in "$@"; do
  case "$arg" in
    --quiet) QUIET=1 ;;
    current) RELEASE=current ;;
    oldest | "$OLDEST_VERSION") RELEASE=oldest ;;
    "$CURRENT_VERSION") RELEASE=current ;;
    *) echo "control-plane: ERROR: unknown release '$arg' (current = $CURRENT_VERSION, oldest = $OLDEST_VERSION)" >&2; exit 2 ;;
  esac
done
[[ -n $CURRENT_VERSION ]] || { echo "control-plane: ERROR: no 'k8s.io/kubernetes vX' requirement in $HERE/current/go.mod" >&2; exit 1; }
if [[ $RELEASE == current ]]; then K8S_VERSION=$CURRENT_VERSION; else K8S_VERSION=$OLDEST_VERSION; fi
CACHE="${KAI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kai}"
DEST="$CACHE/kubernetes-$K8S_VERSION"
BIN="$DEST/bin"
K8S_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
# The current release brings its own etcd (3.4, Debian's, is older than any it supports).
[[ $RELEASE == current ]] && K8S_BINS+=(etcd)

say() { [[ $QUIET == 1 ]] || echo "control-plane: $*" >&2; }
die() { echo "control-plane: ERROR: $*" >&2; exit 1; }
# shellcheck source=../lib/gobuild.sh
source "$HERE/../lib/gobuild.sh"

# has_assets NAME: true if KUBEBUILDER_ASSETS holds an executable NAME (envtest's archives are
# of current releases, so they stand in for the current release only).
has_assets() { [[ $RELEASE == current && -n "${KUBEBUILDER_ASSETS:-}" && -x "$KUBEBUILDER_ASSETS/$1" ]]; }

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

# build_current NAME...: go build the named programs of the current release (one invocation).
build_current() {
  local what=("$@") work="$DEST/build" started=$SECONDS pkgs=() b minor
  echo "control-plane: building ${what[*]} $K8S_VERSION from the Go module proxy (first run only, ~8 min on 2 cores; log: $DEST/build.log)" >&2
  for b in "${what[@]}"; do
    if [[ $b == etcd ]]; then pkgs+=(go.etcd.io/etcd/server/v3); else pkgs+=("k8s.io/kubernetes/cmd/$b"); fi
  done
  minor="${K8S_VERSION#*.}"; minor="${minor%%.*}"
  # What Kubernetes' own build stamps in (hack/lib/version.sh): `kube-apiserver --version`,
  # /version and kubectl's client version name the release instead of v0.0.0-master.
  local stamp="" pkg
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    stamp+=" -X $pkg.gitVersion=v$K8S_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
  done
  rm -rf "$work"; mkdir -p "$BIN"
  (
    go_build "$HERE/current" "$work" "$stamp" "${pkgs[@]}"
    [[ ! -e "$work/v3" ]] || mv "$work/v3" "$work/etcd"  # go names go.etcd.io/etcd/server/v3's binary v3
    [[ ! -e "$work/server" ]] || mv "$work/server" "$work/etcd"
    for b in "${what[@]}"; do install -m 0755 "$work/$b" "$BIN/$b"; done
  ) >"$DEST/build.log" 2>&1 || { tail -n 40 "$DEST/build.log" >&2; die "build failed; full log: $DEST/build.log"; }
  rm -rf "$work"
  echo "control-plane: built ${what[*]} $K8S_VERSION in $((SECONDS - started)) s" >&2
}

# build_oldest NAME...: build the named programs of 1.20.2 from Debian's kubernetes source package.
build_oldest() {
  local what=("$@") work="$DEST/build" started=$SECONDS
  echo "control-plane: building ${what[*]} $K8S_VERSION from Debian's source (first run only, ~8 min on 2 cores; log: $DEST/build.log)" >&2
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
  if [[ $RELEASE == oldest ]]; then
    command -v etcd >/dev/null || apt_install etcd-server
    command -v etcd >/dev/null || die "no etcd after installing etcd-server"
  fi
  local missing
  mapfile -t missing < <(missing_k8s)
  if [[ ${#missing[@]} != 0 ]]; then
    if [[ $RELEASE == current ]]; then build_current "${missing[@]}"; else build_oldest "${missing[@]}"; fi
  fi
  local b
  for b in "${K8S_BINS[@]}"; do
    has_assets "$b" && continue
    if [[ $b == kubectl ]]; then "$BIN/$b" version --client >/dev/null 2>&1 || die "$BIN/$b does not run"
    else "$BIN/$b" --version >/dev/null 2>&1 || die "$BIN/$b does not run"; fi
  done
  say "binaries of $K8S_VERSION ready (cache $BIN${KUBEBUILDER_ASSETS:+, KUBEBUILDER_ASSETS $KUBEBUILDER_ASSETS})"
  echo "bin-dir: $BIN"
}

main
