#!/usr/bin/env bash
# dockerd.sh start|stop|status|env
#
# Runs a private Docker daemon for the integration tests, offline: no
# bridge, no iptables, its own data root, exec root, socket, pidfile, log
# and config under $CHROMAFS_CACHE/docker (never the system's
# /var/lib/docker, /run/docker.sock or /etc/docker/daemon.json). Installs
# Debian's docker.io and busybox-static when missing. start is idempotent:
# it waits until `docker info` answers, then builds the test image once
# (chromafs-test-busybox:1, a rootfs holding Debian's static busybox,
# imported with `docker import`: there is no registry, never a pull).
# stop removes this daemon's containers and stops the pid it started
# (SIGTERM, SIGKILL after 20 s), then the containerd that daemon ran.
# env prints DOCKER (the client), DOCKER_HOST, DOCKER_CONFIG and
# CHROMAFS_TEST_IMAGE as shell assignments: eval "$(scripts/dockerd.sh env)"
# then "$DOCKER" run --rm --network none "$CHROMAFS_TEST_IMAGE" ls /
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

CMD="${1:-}"
case "$CMD" in -h|--help) sed -n '2,17p' "$0"; exit 0 ;; esac
IMAGE="chromafs-test-busybox:1"
DIR="$CHROMAFS_CACHE/docker"
DATA="$DIR/data"       # --data-root (images, containers, containerd's root)
EXEC="$DIR/exec"       # --exec-root (runtime state, containerd's sockets)
SOCK="$DIR/docker.sock"
PIDFILE="$DIR/dockerd.pid"
LOGFILE="$DIR/dockerd.log"
CONFIG="$DIR/daemon.json"
export DOCKER_HOST="unix://$SOCK"
export DOCKER_CONFIG="$DIR/client" # the client's config, not ~/.docker
# Debian's binaries first: another docker client earlier on PATH talks to
# the same daemon, but the package's pair is the one tested.
DOCKER="$(PATH="/usr/bin:/usr/sbin:$PATH" command -v docker || true)"
DOCKERD="$(PATH="/usr/sbin:/usr/bin:$PATH" command -v dockerd || true)"

answers() { [ -n "$DOCKER" ] && timeout 10 "$DOCKER" info >/dev/null 2>&1; }

# ours PID holds when PID is a dockerd running on this script's data root
# (a pidfile outliving its process may name an unrelated pid).
ours() {
  local cmdline
  cmdline="$( { tr '\0' ' ' <"/proc/$1/cmdline"; } 2>/dev/null)" || return 1
  [[ "$cmdline" == *dockerd*"--data-root $DATA "* ]]
}

running_pid() {
  local pid
  [ -f "$PIDFILE" ] || return 1
  pid="$(cat "$PIDFILE")"
  [[ "$pid" =~ ^[0-9]+$ ]] && ours "$pid" && echo "$pid"
}

install() {
  ensure_apt docker.io busybox-static
  DOCKER="$(PATH="/usr/bin:/usr/sbin:$PATH" command -v docker)" || die "docker.io installed no docker client"
  DOCKERD="$(PATH="/usr/sbin:/usr/bin:$PATH" command -v dockerd)" || die "docker.io installed no dockerd"
}

# busybox_path prints the static busybox of Debian's busybox-static.
busybox_path() {
  local p
  p="$(dpkg -L busybox-static 2>/dev/null | grep -E '/bin/busybox$' | head -1)"
  [ -n "$p" ] && [ -x "$p" ] || die "busybox-static's /bin/busybox not found"
  echo "$p"
}

build_image() {
  "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1 && return 0
  local root="$DIR/rootfs" bb tool
  bb="$(busybox_path)"
  rm -rf "$root" && mkdir -p "$root/bin" "$root/proc" "$root/sys" "$root/dev" "$root/etc" "$root/tmp"
  chmod 1777 "$root/tmp"
  cp "$bb" "$root/bin/busybox"
  for tool in sh ls cat find md5sum sort xargs grep sleep test '[' echo wc head tr; do
    ln -s busybox "$root/bin/$tool"
  done
  log "importing $IMAGE (Debian's static busybox) into the private dockerd"
  tar -C "$root" -c . | "$DOCKER" import --change 'ENV PATH=/bin' --change 'CMD ["/bin/sh"]' - "$IMAGE" >/dev/null \
    || die "docker import $IMAGE failed"
  rm -rf "$root"
}

start() {
  install
  if running_pid >/dev/null && answers; then
    build_image
    log "dockerd already running on $DOCKER_HOST (pid $(running_pid))"
    return 0
  fi
  running_pid >/dev/null && die "dockerd pid $(running_pid) is running but does not answer on $DOCKER_HOST; run $0 stop"
  rm -f "$PIDFILE" # stale: its process is gone or not ours
  mkdir -p "$DIR" "$DATA" "$EXEC" "$DOCKER_CONFIG"
  chmod 0700 "$DIR"
  [ -f "$CONFIG" ] || echo '{}' >"$CONFIG"
  local pid i
  setsid "$DOCKERD" --data-root "$DATA" --exec-root "$EXEC" --host "$DOCKER_HOST" --pidfile "$PIDFILE" \
    --config-file "$CONFIG" --bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
    --userland-proxy=false --shutdown-timeout 5 </dev/null >"$LOGFILE" 2>&1 &
  pid=$!
  for i in $(seq 1 300); do
    answers && { log "dockerd running on $DOCKER_HOST (pid $pid, data $DATA, log $LOGFILE)"; build_image; return 0; }
    kill -0 "$pid" 2>/dev/null || { tail -5 "$LOGFILE" >&2; die "dockerd exited during start-up (log $LOGFILE)"; }
    sleep 0.2
  done
  stop_pid
  die "dockerd did not answer on $DOCKER_HOST within 60s (log $LOGFILE)"
}

# stop_pid stops the dockerd this script started, and only it: its
# containers first (so no shim outlives it), then SIGTERM, SIGKILL after
# 20 s; then the containerd it ran (recorded under its exec root) if that
# survived, and the mounts it left under $DIR. (A dockerd killed by
# someone else leaves its containers' shims: the next start ends them.)
stop_pid() {
  local pid cpid="" i mp
  pid="$(running_pid)" || { rm -f "$PIDFILE"; log "dockerd not running"; return 0; }
  if [ -f "$EXEC/containerd/containerd.pid" ]; then cpid="$(cat "$EXEC/containerd/containerd.pid")"; fi
  if answers; then
    "$DOCKER" ps -aq | xargs -r timeout 30 "$DOCKER" rm -f >/dev/null 2>&1 || true
  fi
  kill -TERM "$pid" 2>/dev/null || true
  for i in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  for i in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if [[ "$cpid" =~ ^[0-9]+$ ]] && { tr '\0' ' ' <"/proc/$cpid/cmdline"; } 2>/dev/null | grep -qF "$EXEC/containerd"; then
    kill -TERM "$cpid" 2>/dev/null || true
    for i in $(seq 1 50); do kill -0 "$cpid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$cpid" 2>/dev/null || true
  fi
  # the last mounted first
  for mp in $(awk -v d="$DIR" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | tac); do
    umount -l "$mp" 2>/dev/null || true
  done
  rm -f "$PIDFILE"
  log "dockerd on $DOCKER_HOST stopped (pid $pid)"
}

case "$CMD" in
  start) start ;;
  stop) stop_pid ;;
  status)
    if pid="$(running_pid)" && answers; then echo "running: $DOCKER_HOST pid $pid data $DATA"
    else echo "stopped: $DOCKER_HOST"; exit 3; fi ;;
  env)
    [ -n "$DOCKER" ] || die "no docker client: run $0 start"
    printf 'DOCKER=%q\nDOCKER_HOST=%q\nDOCKER_CONFIG=%q\nCHROMAFS_TEST_IMAGE=%q\n' "$DOCKER" "$DOCKER_HOST" "$DOCKER_CONFIG" "$IMAGE" ;;
  *) die "usage: dockerd.sh start|stop|status|env" ;;
esac
