# Sourced by the provisioning scripts that build Go programs from the Go module proxy (the current
# Kubernetes release, Helm). Callers define die().
#
# go_cmd MODULE_DIR: the Go toolchain that can build MODULE_DIR/go.mod: $KAI_GO, else the machine's
#   /usr/local/go (Debian's golang-go, installed for Kubernetes 1.20, is 1.19 and may come first on
#   the PATH), else `go` on the PATH. GOTOOLCHAIN=local: the go command never fetches another.
# go_build MODULE_DIR OUT_DIR LDFLAGS PACKAGE...: one `go build` of the packages (shared packages
#   compile once) into OUT_DIR, static (CGO off), -trimpath, no debug info; the module and build
#   caches live under kai's cache ($CACHE/go), where CI keeps them.

go_cmd() {
  local module="$1" go
  for go in "${KAI_GO:-}" /usr/local/go/bin/go "$(command -v go || true)"; do
    [[ -n $go && -x $go ]] || continue
    if GOTOOLCHAIN=local "$go" list -C "$module" -m >/dev/null 2>&1; then echo "$go"; return 0; fi
  done
  die "no Go that can build $module/go.mod (go $(sed -n 's/^go //p' "$module/go.mod") or newer); set KAI_GO=/path/to/go"
}

go_build() {
  local module="$1" out="$2" ldflags="$3" go
  shift 3
  go="$(go_cmd "$module")"
  mkdir -p "$out" "$CACHE/go"
  (
    cd "$module"
    # -modcacherw: the module cache stays deletable with rm -rf.
    export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build" GOTOOLCHAIN=local CGO_ENABLED=0
    export GOFLAGS="-mod=readonly -modcacherw -buildvcs=false"
    echo "go build with $("$go" env GOVERSION): $*"
    # grpcnotrace drops golang.org/x/net/trace from gRPC (nothing here serves its debug pages).
    "$go" build -trimpath -tags=grpcnotrace -ldflags="-s -w $ldflags" -o "$out/" "$@"
  )
}
