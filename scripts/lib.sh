# shellcheck shell=bash
# Shared helpers for chromafs scripts. Source it; do not run it.

CHROMAFS_CACHE="${CHROMAFS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/chromafs}"
REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

log() { printf '%s\n' "$*" >&2; }
die() { printf '%s: %s\n' "$(basename "$0")" "$*" >&2; exit 1; }

# running_pid prints the pid $PIDFILE records when that process is alive
# (the server scripts record the pid they started, and signal only it).
running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

# as_root runs a command as root, through sudo when needed.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null; then sudo "$@"
  else die "need root for: $* (run as root or install sudo)"
  fi
}

_apt_updated=""
# ensure_apt PKG... installs the Debian packages that are missing.
ensure_apt() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  command -v apt-get >/dev/null || die "apt-get not found: install ${missing[*]} by hand"
  if [ -z "$_apt_updated" ]; then
    as_root apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed: cannot reach the Debian package mirror"
    _apt_updated=1
  fi
  log "installing ${missing[*]} (apt)"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# ensure_go puts a Go toolchain on PATH (the project needs go >= 1.26, or a
# go >= 1.21 that can fetch it through the module proxy).
ensure_go() {
  export PATH="$PATH:/usr/local/go/bin:$HOME/go/bin"
  command -v go >/dev/null || die "Go not found: install Go 1.26 (https://go.dev/doc/install) and put it on PATH"
}

# ensure_node puts node and npm on PATH.
ensure_node() {
  command -v node >/dev/null && command -v npm >/dev/null && return 0
  ensure_apt nodejs npm
}

# build_bins builds the commands into DIR (default $REPO_ROOT/bin). The
# launcher chromafs-mount is built again without cgo: a binary that links
# no C starts without the dynamic loader, 1 ms of its 2.4.
build_bins() {
  local dir="${1:-$REPO_ROOT/bin}"
  ensure_go
  (cd "$REPO_ROOT" && go build -buildvcs=auto -o "$dir/" ./cmd/... &&
    CGO_ENABLED=0 go build -buildvcs=auto -o "$dir/" ./cmd/chromafs-mount) || die "go build failed"
}
