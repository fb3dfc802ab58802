#!/usr/bin/env bash
# quickstart.sh — on a fresh Debian 12 machine: install what is needed, start
# a local Chroma server, ingest examples/docs, mount it with chromafs and show
# real ls, find, grep and cat working on it. Then the fleet's way (as root):
# start chromafsd, attach a conversation's public and admin views, and run
# commands in a bubblewrap sandbox over each.
#
#   CHROMA_PORT=8000                      port of the local Chroma server
#   CHROMAFS_COLLECTION=acme-docs         collection to ingest and mount
#   CHROMAFS_MOUNT=~/.cache/chromafs/mnt/acme-docs   where to mount
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
PORT="${CHROMA_PORT:-8000}"
COLLECTION="${CHROMAFS_COLLECTION:-acme-docs}"
MNT="${CHROMAFS_MOUNT:-$CHROMAFS_CACHE/mnt/$COLLECTION}"
export CHROMA_URL="http://127.0.0.1:$PORT" CHROMAFS_COLLECTION="$COLLECTION"

say() { printf '\n\033[1m$ %s\033[0m\n' "$*"; }

log "==> installing FUSE and building chromafs-ingest and chromafs-mount"
ensure_apt fuse3 curl ca-certificates
build_bins
log "==> starting Chroma on $CHROMA_URL"
scripts/chroma-server.sh start --port "$PORT"
log "==> ingesting examples/docs into collection $COLLECTION"
bin/chromafs-ingest --quiet examples/docs

log "==> mounting it at $MNT"
mkdir -p "$MNT"
if grep -qs " $MNT fuse" /proc/mounts; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -u -z "$MNT"; fi
bin/chromafs-mount --daemon --log-file "$CHROMAFS_CACHE/run/mount-$COLLECTION.log" "$MNT"

cd "$MNT"
say "ls -la"; ls -la
say "find . -type f | sort"; find . -type f | sort
say "grep -rn 'Authorization' ."; grep -rn 'Authorization' .
say "cat getting-started/installation.md"; cat getting-started/installation.md
say "ls internal   # private pages (groups admin, finance, sre) are not there for this mount"; ls internal 2>&1 || true
say "ls -l '.search/rotate api keys/'   # unlisted: pages ranked for a query (cat .search/.README)"
ls -l '.search/rotate api keys/' | tail -n +2
head -4 '.search/rotate api keys/.results'
cd "$REPO_ROOT"

# The fleet's way: one chromafsd per host hands each conversation its view,
# and the conversation's agent runs in a sandbox over it.
D="$CHROMAFS_CACHE/quickstart-daemon"
SOCK="$D/chromafsd.sock"
CONV="$D/conv/42"
daemon_msg=""
if [ "$(id -u)" -ne 0 ]; then
  log "==> not root: skipping chromafsd (it mounts each conversation's view as root); run scripts/quickstart.sh as root to see it"
else
  ensure_apt bubblewrap
  mkdir -p "$D"
  if ! bin/chromafs --socket "$SOCK" list >/dev/null 2>&1; then
    log "==> starting chromafsd (socket $SOCK, log $D/chromafsd.log)"
    setsid bin/chromafsd --socket "$SOCK" --state-dir "$D/state" --cache-dir "$D/cache" --log-file "$D/chromafsd.log" \
      --linger 0 --refresh 0 </dev/null >/dev/null 2>&1 &
    echo $! > "$D/chromafsd.pid"
    for _ in $(seq 1 100); do bin/chromafs --socket "$SOCK" list >/dev/null 2>&1 && break; sleep 0.1; done
    bin/chromafs --socket "$SOCK" list >/dev/null || die "chromafsd did not answer within 10s (log $D/chromafsd.log)"
  fi
  for view in public admin; do
    bin/chromafs --socket "$SOCK" detach "$CONV/$view" >/dev/null 2>&1 || true
  done
  groups=""
  for view in public admin; do
    say "chromafs attach --collection $COLLECTION $groups$CONV/$view"
    # shellcheck disable=SC2086
    bin/chromafs --socket "$SOCK" attach --collection "$COLLECTION" $groups "$CONV/$view"
    groups="--groups admin "
  done
  sandbox() { # the README's recipe: the view at /docs, nothing else of chromafs
    bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 \
      --proc /proc --dev /dev --tmpfs /tmp --ro-bind "$1" /docs --unshare-all --die-with-parent \
      sh -c 'ls /docs/internal/billing; head -3 /docs/internal/billing/pricing-model.mdx' 2>&1 || true
  }
  for view in public admin; do
    say "bwrap --ro-bind $CONV/$view /docs ... sh -c 'ls /docs/internal/billing; head -3 /docs/internal/billing/pricing-model.mdx'"
    sandbox "$CONV/$view"
  done
  daemon_msg="
chromafsd serves conversation 42's views at $CONV/public and $CONV/admin:
  a sandbox:         bwrap --ro-bind $CONV/admin /docs --unshare-all ... sh
  its state:         bin/chromafs --socket $SOCK list
  detach:            bin/chromafs --socket $SOCK detach $CONV/public; bin/chromafs --socket $SOCK detach $CONV/admin
  stop chromafsd:    kill \$(cat $D/chromafsd.pid)   (it keeps attachments: detach first to leave no mount)"
fi

cat >&2 <<MSG

examples/docs is mounted read-only at $MNT (collection "$COLLECTION" on $CHROMA_URL).
  use it:            cd $MNT && grep -rn token .
  search it:         ls "$MNT/.search/rotate api keys/"; cat "$MNT/.search/.README"
  admin view:        mkdir -p /tmp/admin-docs && bin/chromafs-mount --chroma-url $CHROMA_URL --collection $COLLECTION --groups admin --daemon /tmp/admin-docs
  unmount:           fusermount3 -u $MNT
  stop Chroma:       scripts/chroma-server.sh stop --port $PORT
$daemon_msg
MSG
