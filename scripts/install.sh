#!/usr/bin/env bash
# install.sh — build and install chromafs-mount (and chromafs-mount-serve,
# which it runs), chromafs-ingest, chromafs-cache, chromafsd and chromafs,
# and the mount(8) helper links, so that fstab lines and
# "mount -t chromafs COLLECTION DIR -o chroma_url=..." work. Idempotent.
#
#   scripts/install.sh                      to /usr/local/bin, helpers in /sbin (root)
#   scripts/install.sh --prefix ~/.local    binaries only (no helpers without root)
#   scripts/install.sh --sbin DIR           helper links somewhere else
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
prefix=/usr/local sbin=/sbin
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="$2"; shift 2 ;;
    --sbin) sbin="$2"; shift 2 ;;
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
ensure_apt fuse3
bin="$prefix/bin"
mkdir -p "$bin"
build_bins "$bin"
log "installed chromafs-mount, chromafs-mount-serve, chromafs-ingest, chromafs-cache, chromafsd, chromafs in $bin"
if [ -w "$sbin" ] || [ "$(id -u)" = 0 ]; then
  for helper in mount.chromafs mount.fuse.chromafs; do
    target="$sbin/$helper"
    if [ -e "$target" ] && [ "$(readlink "$target")" != "$bin/chromafs-mount" ]; then
      die "$target exists and is not a link to $bin/chromafs-mount: not replacing it"
    fi
    ln -sfn "$bin/chromafs-mount" "$target"
  done
  log "mount helpers: $sbin/mount.chromafs, $sbin/mount.fuse.chromafs -> $bin/chromafs-mount"
else
  log "not root: no mount helpers in $sbin (run as root for fstab and mount -t chromafs)"
fi
