#!/usr/bin/env bash
# Provision Helm for the chart's tests (deploy/chart): helm.sh/helm/v4's `helm` command at the
# version go.mod beside this script requires, built with the machine's Go from the Go module proxy
# (no registry this project may use ships a helm binary), cached under
# ~/.cache/kai/helm-VERSION/helm (KAI_CACHE_DIR moves it). Idempotent; concurrent runs wait on a lock.
#
# Usage: provision.sh [--quiet]    prints "helm: PATH" on success.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CACHE="${KAI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kai}"
VERSION="$(sed -n 's/^[[:space:]]*helm\.sh\/helm\/v4 v\([0-9.]*\).*/\1/p' "$HERE/go.mod")"
DEST="$CACHE/helm-$VERSION"
QUIET=0
[[ "${1:-}" == "--quiet" ]] && QUIET=1

say() { [[ $QUIET == 1 ]] || echo "helm: $*" >&2; }
die() { echo "helm: ERROR: $*" >&2; exit 1; }
# shellcheck source=../lib/gobuild.sh
source "$HERE/../lib/gobuild.sh"

[[ -n $VERSION ]] || die "no helm.sh/helm/v4 requirement in $HERE/go.mod"
mkdir -p "$DEST"
exec 9>"$DEST/.lock"
flock 9
if [[ ! -x $DEST/helm ]]; then
  started=$SECONDS
  echo "helm: building helm $VERSION from the Go module proxy (first run only, ~5 CPU-minutes; log: $DEST/build.log)" >&2
  # `helm version` says the release instead of the source's "v4.3".
  go_build "$HERE" "$DEST/build" "-X helm.sh/helm/v4/internal/version.version=v$VERSION" helm.sh/helm/v4/cmd/helm \
    >"$DEST/build.log" 2>&1 || { tail -n 40 "$DEST/build.log" >&2; die "build failed; full log: $DEST/build.log"; }
  install -m 0755 "$DEST/build/helm" "$DEST/helm"
  rm -rf "$DEST/build"
  echo "helm: built helm $VERSION in $((SECONDS - started)) s" >&2
fi
"$DEST/helm" version --short >/dev/null 2>&1 || die "$DEST/helm does not run"
say "helm $VERSION ready"
echo "helm: $DEST/helm"
