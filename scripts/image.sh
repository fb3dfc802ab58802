#!/usr/bin/env bash
# image.sh build [--version V] [--out DIR]
# image.sh plugin --chroma-url URL --policy FILE [--token-file F] [--name N] [--version V]
#
# Builds chromafsd's container image (the Dockerfile at the repository's
# root) with the docker client on PATH and its DOCKER_HOST (for the tests'
# private daemon: eval "$(scripts/dockerd.sh env)" first). The context is
# staged in a temporary directory (or --out DIR, kept): chromafsd built
# with CGO_ENABLED=0 (-trimpath, stripped, the version set), with chromafs
# and chromafs-mount as links to it (one binary, three commands), the
# dynamic loader and libc it loads (chroma-go's purego dlopens at run time:
# Debian's libc6 files ldd names), Debian's CA bundle, /etc/passwd and
# /etc/group naming root and nobody, an empty /tmp. The base is the empty
# image: nothing is pulled. Tags chromafs/chromafsd:VERSION and chromafs/chromafsd:latest
# (VERSION: --version, else env VERSION, else git describe), labels the
# version, the VCS revision and the source, and prints the image's size.
#
# plugin builds the image, makes Docker's managed volume plugin of it
# (docker plugin create N DIR: the image's root file system and
# deploy/docker-plugin/config.json; N defaults to chromafs), sets it
# (CHROMA_URL, the policy file and the token's file as bind mounts of the
# plugin alone, never arguments, never seen by containers) and enables it:
# then docker volume create -d N -o collection=docs works with no daemon
# started by hand. A plugin N that exists already is left alone (an error
# says how to replace it).
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"

IMAGE_NAME="chromafs/chromafsd"
# temporary directories, removed however the script ends
build_tmp="" plugin_tmp="" built=""
cleanup() { rm -rf "${build_tmp:-}" "${plugin_tmp:-}"; }
trap cleanup EXIT
CMD="${1:-}"
[ $# -gt 0 ] && shift
case "$CMD" in -h|--help|"") sed -n '2,25p' "$0"; [ -n "$CMD" ] && exit 0; exit 2 ;; esac

version="${VERSION:-}"
out="" chroma_url="" policy="" token="" name="chromafs"
while [ $# -gt 0 ]; do
  case "$1" in
    --version|--out|--chroma-url|--policy|--token-file|--name)
      [ $# -ge 2 ] || die "$1 wants a value"; set -- "$1=$2" "${@:3}" ;;
    --version=*) version="${1#*=}"; shift ;;
    --out=*) out="${1#*=}"; shift ;;
    --chroma-url=*) chroma_url="${1#*=}"; shift ;;
    --policy=*) policy="${1#*=}"; shift ;;
    --token-file=*) token="${1#*=}"; shift ;;
    --name=*) name="${1#*=}"; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

# paths are the caller's: absolute before the cd
abspath() { [ -z "$1" ] && return 0; case "$1" in /*) echo "$1" ;; *) echo "$PWD/$1" ;; esac; }
out="$(abspath "$out")" policy="$(abspath "$policy")" token="$(abspath "$token")"
cd "$REPO_ROOT"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ -z "$version" ]; then
  version="$(git describe --tags --always --dirty 2>/dev/null || echo dev)"
fi
# a tag: letters, digits, _ . -, at most 128, not starting with . or -
[[ "$version" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "version $version is not a valid image tag ([A-Za-z0-9_][A-Za-z0-9_.-]*, at most 128)"

# stage writes the build context into $1.
stage() {
  local ctx="$1" root="$1/rootfs"
  ensure_go
  ensure_apt ca-certificates binutils libc-bin
  if [ -e "$ctx" ] && [ -n "$(ls -A "$ctx")" ]; then
    # a context this script staged before is replaced; anything else is not ours
    [ -f "$ctx/Dockerfile" ] && [ -d "$ctx/rootfs" ] && [ -z "$(ls -A "$ctx" | grep -v -x -e Dockerfile -e rootfs)" ] \
      || die "--out $ctx is not empty and not a context this script staged: not touching it"
    rm -rf "$ctx/rootfs" "$ctx/Dockerfile"
  fi
  mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/tmp"
  chmod 1777 "$root/tmp"
  log "building chromafsd $version (CGO off; chromafs and chromafs-mount are links to it)"
  CGO_ENABLED=0 go build -trimpath -buildvcs=auto -ldflags "-s -w -X main.version=$version" \
    -o "$root/usr/local/bin/chromafsd" ./cmd/chromafsd || die "go build failed"
  # one binary, called by three names (cmd/chromafsd's main): three
  # binaries would weigh twice as much, past the image's 40 MB
  ln -s chromafsd "$root/usr/local/bin/chromafs-mount"
  ln -s chromafsd "$root/usr/local/bin/chromafs"
  # chroma-go's purego makes even a CGO-off binary load libc at run time:
  # the dynamic loader and the libraries ldd names, from Debian's libc6
  local lib
  while read -r lib; do
    [ -n "$lib" ] && cp -L --parents "$lib" "$root/"
  done < <(ldd "$root/usr/local/bin/chromafsd" 2>/dev/null | grep -o '/[^ ]*' | sort -u)
  local interp
  interp="$(readelf -l "$root/usr/local/bin/chromafsd" 2>/dev/null | sed -n 's/.*interpreter: \(.*\)]/\1/p')"
  [ -z "$interp" ] || [ -e "$root$interp" ] || die "chromafsd loads $interp, which ldd did not name: cannot stage it"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/ca-certificates.crt"
  printf 'root:x:0:0:root:/:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n' > "$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' > "$root/etc/group"
  cp Dockerfile "$ctx/Dockerfile"
}

build() {
  local docker ctx
  docker="${DOCKER:-docker}"
  command -v "$docker" >/dev/null || die "no docker client ($docker): install docker.io, or set DOCKER"
  "$docker" info >/dev/null 2>&1 || die "the docker daemon does not answer (DOCKER_HOST=${DOCKER_HOST:-default}); for the private one: eval \"\$(scripts/dockerd.sh env)\""
  if [ -n "$out" ]; then ctx="$out"; else build_tmp="$(mktemp -d)"; ctx="$build_tmp/context"; fi
  stage "$ctx"
  log "building $IMAGE_NAME:$version"
  DOCKER_BUILDKIT=0 "$docker" build -q --build-arg "VERSION=$version" --build-arg "REVISION=$revision" \
    -t "$IMAGE_NAME:$version" -t "$IMAGE_NAME:latest" "$ctx" >/dev/null || die "docker build failed"
  local size
  size="$("$docker" image inspect --format '{{.Size}}' "$IMAGE_NAME:$version")"
  log "built $IMAGE_NAME:$version and :latest, $((size / 1000000)) MB ($size bytes)"
  built="$IMAGE_NAME:$version"
}

# plugin makes and enables the managed plugin $name from the image.
plugin() {
  local docker tag dir cid
  docker="${DOCKER:-docker}"
  [ -n "$chroma_url" ] || die "plugin wants --chroma-url URL (the Chroma server the plugin reads)"
  [ -n "$policy" ] || die "plugin wants --policy FILE (rules with docker: true grant volumes; see the README)"
  [ -f "$policy" ] || die "--policy $policy: no such file"
  policy="$(cd "$(dirname "$policy")" && pwd)/$(basename "$policy")"
  [ "$(( 8#$(stat -c %a "$policy") & 8#022 ))" -eq 0 ] || die "--policy $policy is writable by group or others: chromafsd refuses it (chmod go-w)"
  if [ -n "$token" ]; then
    [ -f "$token" ] || die "--token-file $token: no such file"
    token="$(cd "$(dirname "$token")" && pwd)/$(basename "$token")"
    [ "$(( 8#$(stat -c %a "$token") & 8#077 ))" -eq 0 ] || die "--token-file $token may be read by group or others: chromafsd refuses it (chmod 600)"
  fi
  [[ "$name" =~ ^[a-z0-9][a-z0-9_.-]*$ ]] || die "--name $name: want lower-case letters, digits, _ . -"
  if "$docker" plugin inspect "$name" >/dev/null 2>&1; then
    die "a plugin $name exists already; to replace it: $docker plugin rm -f $name (containers on its volumes lose them)"
  fi
  build # in this shell, not a $(...) subshell: its EXIT trap removes build_tmp
  tag="$built"
  plugin_tmp="$(mktemp -d)"
  dir="$plugin_tmp"
  mkdir "$dir/rootfs"
  cid="$("$docker" create "$tag")" || die "docker create $tag failed"
  "$docker" export "$cid" | tar -x -C "$dir/rootfs" || { "$docker" rm "$cid" >/dev/null; die "docker export failed"; }
  "$docker" rm "$cid" >/dev/null
  cp "$REPO_ROOT/deploy/docker-plugin/config.json" "$dir/config.json"
  "$docker" plugin create "$name" "$dir" >/dev/null || die "docker plugin create $name failed"
  local settings=("CHROMA_URL=$chroma_url" "policy.source=$policy")
  [ -n "$token" ] && settings+=("token.source=$token" "CHROMA_TOKEN_FILE=/run/secrets/chromafs-token")
  if ! "$docker" plugin set "$name" "${settings[@]}"; then
    "$docker" plugin rm -f "$name" >/dev/null 2>&1 || true
    die "docker plugin set $name failed (the plugin was removed again)"
  fi
  if ! "$docker" plugin enable "$name" >/dev/null; then
    "$docker" plugin rm -f "$name" >/dev/null 2>&1 || true
    die "docker plugin enable $name failed (the plugin was removed again; dockerd's log says why)"
  fi
  log "plugin $name enabled: docker volume create -d $name -o collection=COLLECTION [-o groups=G] NAME"
  echo "$name"
}

case "$CMD" in
  build) build && echo "$built" ;;
  plugin) plugin ;;
  *) die "usage: image.sh build|plugin ... (see --help)" ;;
esac
