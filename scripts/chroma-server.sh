#!/usr/bin/env bash
# chroma-server.sh start|stop|status|install|modules [--port N] [--data DIR]
#
# Runs a real Chroma 1.x server (the Rust server shipped in the npm package
# chromadb) on 127.0.0.1. Installs what it needs, idempotently, into
# $CHROMAFS_CACHE (default ~/.cache/chromafs): the npm packages and, on hosts
# whose glibc is older than 2.39, a private copy of Debian 13's libc that only
# this server uses (never installed system-wide). The server ignores SIGTERM,
# so stop escalates to SIGKILL, for the recorded pid only. `modules` prints
# the node_modules directory holding the chromadb JavaScript client (the
# integration tests write "other tools'" records with it).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

CHROMA_NPM_VERSION="${CHROMA_NPM_VERSION:-3.5.0}"
PORT=8000
DATA=""
CMD="${1:-}"
[ $# -gt 0 ] && shift
case "$CMD" in -h|--help) sed -n '2,12p' "$0"; exit 0 ;; esac
while [ $# -gt 0 ]; do
  case "$1" in
    --port) PORT="$2"; shift 2 ;;
    --port=*) PORT="${1#*=}"; shift ;;
    --data) DATA="$2"; shift 2 ;;
    --data=*) DATA="${1#*=}"; shift ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ "$PORT" =~ ^[0-9]+$ ]] || die "--port wants a number, got $PORT"
RUN="$CHROMAFS_CACHE/run"
PIDFILE="$RUN/chroma-$PORT.pid"
DATAFILE="$RUN/chroma-$PORT.data" # the --data of the server started on this port
if [ -z "${DATA:-}" ] && [ "$CMD" = status ] && [ -f "$DATAFILE" ]; then DATA="$(cat "$DATAFILE")"; fi
DATA="${DATA:-$CHROMAFS_CACHE/data-$PORT}"
LOGFILE="$RUN/chroma-$PORT.log"
NPMDIR="$CHROMAFS_CACHE/npm-chromadb-$CHROMA_NPM_VERSION"
LIBCDIR="$CHROMAFS_CACHE/glibc-trixie"
URL="http://127.0.0.1:$PORT"

heartbeat() { curl -fsS --max-time 2 "$URL/api/v2/heartbeat" >/dev/null 2>&1; }

install_npm() {
  [ -f "$NPMDIR/node_modules/chromadb/dist/cli.mjs" ] && \
    [ -d "$NPMDIR/node_modules/chromadb-js-bindings-linux-x64-gnu" ] && return 0
  ensure_node
  log "installing chromadb@$CHROMA_NPM_VERSION (npm) into $NPMDIR"
  mkdir -p "$NPMDIR"
  (cd "$NPMDIR" && [ -f package.json ] || echo '{"private":true}' > package.json)
  (cd "$NPMDIR" && npm install --no-audit --no-fund --loglevel=error \
      "chromadb@$CHROMA_NPM_VERSION" chromadb-js-bindings-linux-x64-gnu >/dev/null) \
    || die "npm install chromadb@$CHROMA_NPM_VERSION failed: cannot reach the npm registry?"
}

glibc_ok() {
  local v
  v="$(ldd --version 2>/dev/null | head -1 | grep -oE '[0-9]+\.[0-9]+$' || echo 0.0)"
  [ "$(printf '%s\n2.39\n' "$v" | sort -V | head -1)" = "2.39" ]
}

# debian_uri prints the Debian mirror this host already uses.
debian_uri() {
  local uri=""
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    uri="$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)"
  fi
  if [ -z "$uri" ] && [ -f /etc/apt/sources.list ]; then
    uri="$(awk '$1=="deb" && $0 !~ /security/ {for(i=2;i<=NF;i++) if ($i ~ /^https?:/) {print $i; exit}}' /etc/apt/sources.list)"
  fi
  [ -n "$uri" ] || die "cannot find this host's Debian mirror in /etc/apt to fetch Debian 13's libc"
  echo "$uri"
}

install_glibc() {
  local lib="$LIBCDIR/root/usr/lib/x86_64-linux-gnu"
  [ -x "$lib/ld-linux-x86-64.so.2" ] && [ -f "$lib/libstdc++.so.6" ] && return 0
  ensure_apt ca-certificates debian-archive-keyring
  log "fetching Debian 13 libc6, libstdc++6, libgcc-s1 into $LIBCDIR (private; not installed)"
  local apt="$LIBCDIR/apt"
  rm -rf "$LIBCDIR" && mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$LIBCDIR/debs" "$LIBCDIR/root"
  printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s trixie main\n' "$(debian_uri)" > "$apt/sources.list"
  local opts=(-o "Dir::Etc::SourceList=$apt/sources.list" -o Dir::Etc::SourceParts=/nonexistent
              -o "Dir::State::Lists=$apt/lists" -o "Dir::Cache=$apt/cache" -o APT::Sandbox::User=root)
  apt-get "${opts[@]}" update -qq >/dev/null 2>&1 || die "apt-get update (trixie, private lists) failed: cannot reach the Debian mirror"
  (cd "$LIBCDIR/debs" && apt-get "${opts[@]}" download libc6 libstdc++6 libgcc-s1 >/dev/null 2>&1) \
    || die "apt-get download libc6 libstdc++6 libgcc-s1 (trixie) failed"
  local deb
  for deb in "$LIBCDIR"/debs/*.deb; do dpkg-deb -x "$deb" "$LIBCDIR/root"; done
  rm -rf "$apt"
}

start() {
  if running_pid >/dev/null; then
    heartbeat && { log "chroma already running on $URL (pid $(running_pid))"; return 0; }
  fi
  heartbeat && die "port $PORT already answers but not from a server this script started; pick another --port"
  ensure_apt curl
  install_npm
  local cmd=("$(command -v node)" "$NPMDIR/node_modules/chromadb/dist/cli.mjs" run --path "$DATA" --host 127.0.0.1 --port "$PORT")
  if ! glibc_ok; then
    install_glibc
    local lib="$LIBCDIR/root/usr/lib/x86_64-linux-gnu"
    cmd=("$lib/ld-linux-x86-64.so.2" --library-path "$lib" "${cmd[@]}")
  fi
  mkdir -p "$RUN" "$DATA"
  setsid "${cmd[@]}" </dev/null >"$LOGFILE" 2>&1 &
  echo $! > "$PIDFILE"
  echo "$DATA" > "$DATAFILE"
  local i
  for i in $(seq 1 150); do
    heartbeat && { log "chroma running on $URL (pid $(cat "$PIDFILE"), data $DATA, log $LOGFILE)"; return 0; }
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -5 "$LOGFILE" >&2; rm -f "$PIDFILE"; die "chroma exited during start-up (log $LOGFILE)"; }
    sleep 0.2
  done
  stop_pid; die "chroma did not answer $URL/api/v2/heartbeat within 30s (log $LOGFILE)"
}

stop_pid() {
  local pid i
  pid="$(running_pid)" || { rm -f "$PIDFILE" "$DATAFILE"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$PIDFILE" "$DATAFILE"
  log "chroma on port $PORT stopped (pid $pid)"
}

case "$CMD" in
  start) start ;;
  stop) stop_pid ;;
  status)
    if pid="$(running_pid)" && heartbeat; then echo "running: $URL pid $pid data $DATA"
    else echo "stopped: $URL"; exit 3; fi ;;
  install) install_npm; glibc_ok || install_glibc ;;
  modules) install_npm; echo "$NPMDIR/node_modules" ;;
  *) die "usage: chroma-server.sh start|stop|status|install|modules [--port N] [--data DIR]" ;;
esac
