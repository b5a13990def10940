#!/usr/bin/env bash
# Build kai's container image as an OCI image layout, without a Docker engine or a registry.
#
#   base layer  Debian bookworm's Essential packages, python3, ca-certificates and libstdc++6, made by
#               mmdebstrap (Debian's package) from Debian's archive; cached as a tarball under
#               ~/.cache/kai/image/ (KAI_CACHE_DIR moves it), built once.
#   kai layer   /opt/kai: a venv of Debian's python3 with the kai wheel built from this checkout
#               and its dependencies at the versions of the wheels in .venv (pip freeze as
#               constraints), installed by pip running inside the root filesystem (chroot), .pyc
#               files compiled with unchecked hashes (no timestamps).
#   image       written by umoci (Debian's package): the two layers, entrypoint `kai`, user
#               65532, PATH to the venv. Timestamps are SOURCE_DATE_EPOCH (default: the last
#               commit's time), so the same inputs give the same digests.
#
# The layout is tagged with the version in pyproject.toml; deploy/scheduler.yaml names it as
# `kai:VERSION` (tests/image/test_image.py checks they agree). Root is needed (chroot, file
# ownership in the layers), as is network access to Debian's archive and PyPI on the first run.
#
# Usage: build.sh [OUT_DIR]    writes OUT_DIR/kai (an OCI layout; default build/oci) and prints
#                              "image: OUT_DIR/kai:VERSION".
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$REPO/build/oci}")"
CACHE="${KAI_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kai}/image"
SUITE=bookworm
BASE_PACKAGES=python3,ca-certificates,libstdc++6  # numpy's wheels link libstdc++
PY="$REPO/.venv/bin/python"
VERSION="$(sed -n 's/^version = "\(.*\)"/\1/p' "$REPO/pyproject.toml")"
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git -C "$REPO" log -1 --format=%ct 2>/dev/null || echo 0)}"
CREATED="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"

say() { echo "image: $*" >&2; }
die() { echo "image: ERROR: $*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "run as root (chroot and the layers' file ownership need it)"
[[ -x $PY ]] || die "no $PY: run 'make .venv/.installed' first"

# Debian's tools, installed when missing (runc: tests/image runs the image with it).
want=()
for p in mmdebstrap umoci runc; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || want+=("$p")
done
if [[ ${#want[@]} != 0 ]]; then
  say "apt-get install ${want[*]}"
  apt-get update -qq || apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" >/dev/null
fi

mkdir -p "$CACHE" "$OUT"
exec 9>"$CACHE/.lock"
flock 9

# 1. The base root filesystem, once.
BASE="$CACHE/base-$SUITE-${BASE_PACKAGES//,/-}.tar"
if [[ ! -s $BASE ]]; then
  say "building the base root filesystem ($SUITE: Essential + $BASE_PACKAGES) with mmdebstrap; first run only"
  started=$SECONDS
  # Base timestamps: the epoch of kai's first image, so the cached tarball is the same for every commit.
  SOURCE_DATE_EPOCH=0 mmdebstrap --quiet --format=tar --variant=essential --include="$BASE_PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$SUITE" "$BASE.tmp" || die "mmdebstrap failed"
  mv "$BASE.tmp" "$BASE"
  say "base root filesystem built in $((SECONDS - started)) s ($(du -h "$BASE" | cut -f1))"
fi

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kai-image-XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
ROOT="$WORK/rootfs"
mkdir -p "$ROOT" "$WORK/wheels"

# 2. Wheels: kai from this checkout, its dependencies at the versions tested here.
"$PY" -m pip freeze --exclude-editable >"$WORK/constraints.txt"
"$PY" -m pip wheel --quiet --disable-pip-version-check --constraint "$WORK/constraints.txt" \
  --wheel-dir "$WORK/wheels" "$REPO" >&2
PIP_WHEEL="$(ls "$WORK"/wheels/pip-*.whl 2>/dev/null || true)"
[[ -n $PIP_WHEEL ]] || "$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$WORK/wheels" \
  "pip==$("$PY" -m pip --version | cut -d' ' -f2)" >&2
PIP_WHEEL="$(ls "$WORK"/wheels/pip-*.whl)"

# 3. The kai layer: a venv of the image's own python3, filled by pip run inside the root filesystem.
tar -C "$ROOT" -xf "$BASE"
mkdir -p "$ROOT/tmp/kai"
cp "$WORK"/wheels/*.whl "$ROOT/tmp/kai/"
# In the root filesystem, with nothing of this machine's environment (PIP_* settings, say).
in_root() { chroot "$ROOT" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }
in_root /usr/bin/python3 -m venv --without-pip /opt/kai
in_root /opt/kai/bin/python "/tmp/kai/$(basename "$PIP_WHEEL")/pip" install --quiet --no-index \
  --no-compile --disable-pip-version-check --no-warn-script-location --find-links /tmp/kai kai
# pip itself is not installed into /opt/kai (it ran from its wheel): the image has no installer.
in_root /opt/kai/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/kai/lib >/dev/null
find "$ROOT/opt/kai" -name RECORD -path '*.dist-info/*' -exec sed -i '/\.pyc,/d' {} +
find "$ROOT/opt/kai" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
rm -rf "$ROOT/tmp/kai"

# 4. The OCI layout: base layer, kai layer, config. (umoci repack, not insert: 0.4.7's insert leaves
# the layer's tar stream without its end, which tar readers refuse.)
LAYOUT="$OUT/kai"
rm -rf "$LAYOUT"
umoci init --layout "$LAYOUT"
umoci new --image "$LAYOUT:$VERSION"
umoci unpack --image "$LAYOUT:$VERSION" "$WORK/bundle" >/dev/null
tar -C "$WORK/bundle/rootfs" -xf "$BASE"
umoci repack --image "$LAYOUT:$VERSION" --refresh-bundle --history.created "$CREATED" \
  --history.created_by "mmdebstrap --variant=essential --include=$BASE_PACKAGES $SUITE" "$WORK/bundle"
mv "$ROOT/opt/kai" "$WORK/bundle/rootfs/opt/kai"
touch -h -d "@$SOURCE_DATE_EPOCH" "$WORK/bundle/rootfs/opt"
umoci repack --image "$LAYOUT:$VERSION" --history.created "$CREATED" \
  --history.created_by "pip install kai $VERSION into /opt/kai" "$WORK/bundle"
umoci config --image "$LAYOUT:$VERSION" --created "$CREATED" \
  --author "kai" \
  --config.user 65532:65532 \
  --config.entrypoint /opt/kai/bin/kai \
  --config.cmd scheduler \
  --config.workingdir / \
  --config.env PATH=/opt/kai/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --config.env PYTHONDONTWRITEBYTECODE=1 \
  --config.label org.opencontainers.image.title=kai \
  --config.label "org.opencontainers.image.version=$VERSION" \
  --history.created "$CREATED" --history.created_by "umoci config"
umoci gc --layout "$LAYOUT"
echo "image: $LAYOUT:$VERSION"
