#!/usr/bin/env bash
# quickstart.sh — on a fresh Debian 12 machine: install what is needed, start
# a local Chroma server, ingest examples/docs and show it working.
#
#   CHROMA_PORT=8000            port of the local Chroma server
#   CHROMAFS_COLLECTION=acme-docs
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
PORT="${CHROMA_PORT:-8000}"
COLLECTION="${CHROMAFS_COLLECTION:-acme-docs}"
export CHROMA_URL="http://127.0.0.1:$PORT" CHROMAFS_COLLECTION="$COLLECTION"

log "==> building chromafs-ingest and chromafs-mount"
build_bins
log "==> starting Chroma on $CHROMA_URL"
scripts/chroma-server.sh start --port "$PORT"
log "==> ingesting examples/docs into collection $COLLECTION"
bin/chromafs-ingest --quiet examples/docs
log "==> ingesting again: nothing changed, nothing written"
bin/chromafs-ingest --quiet examples/docs

cat >&2 <<MSG

Chroma is running on $CHROMA_URL with collection "$COLLECTION".
  re-ingest after edits:  CHROMA_URL=$CHROMA_URL bin/chromafs-ingest --collection $COLLECTION examples/docs
  stop the server:        scripts/chroma-server.sh stop --port $PORT
MSG
