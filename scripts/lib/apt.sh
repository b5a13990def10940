# Sourced by the provisioning scripts that install one Debian package when its program is missing
# (CI runs as root on Debian). Callers define die() and say().
#
# apt_provide PACKAGE FINDER: FINDER is a function that prints the program's path, or nothing. When it
#   finds nothing, PACKAGE is installed with apt-get (as root; a lock serialises concurrent callers) and
#   FINDER asked again. Prints the path; dies when there is still none. Idempotent: a no-op once present.

apt_provide() {
  local package="$1" finder="$2" bin
  bin="$("$finder")"
  if [[ -z $bin ]]; then
    [[ $(id -u) == 0 ]] || die "$package is missing (run as root: apt-get install -y $package)"
    exec 9>"/tmp/kai-$package-provision.lock"
    flock 9
    bin="$("$finder")"
    if [[ -z $bin ]]; then
      say "apt-get install $package"
      apt-get update -qq || apt-get update -qq  # once more: a mirror hiccup is common and harmless
      DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$package" >/dev/null
      bin="$("$finder")"
    fi
    [[ -n $bin ]] || die "no $package after apt-get install $package"
  fi
  echo "$bin"
}
