#!/usr/bin/env bash
# quickstart.sh — on a fresh Debian 12 machine: install what is needed, start
# a local Chroma server, ingest examples/docs, mount it with chromafs and show
# real ls, find, grep and cat working on it.
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

cat >&2 <<MSG

examples/docs is mounted read-only at $MNT (collection "$COLLECTION" on $CHROMA_URL).
  use it:            cd $MNT && grep -rn token .
  search it:         ls "$MNT/.search/rotate api keys/"; cat "$MNT/.search/.README"
  admin view:        mkdir -p /tmp/admin-docs && bin/chromafs-mount --chroma-url $CHROMA_URL --collection $COLLECTION --groups admin --daemon /tmp/admin-docs
  unmount:           fusermount3 -u $MNT
  stop Chroma:       scripts/chroma-server.sh stop --port $PORT
MSG
