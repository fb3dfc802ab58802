#!/usr/bin/env bash
# js-clients.sh — installs the third-party JavaScript clients that the
# integration tests use to write collections the way real users do
# (LangChain.js: @langchain/community's Chroma vector store with
# @langchain/textsplitters), idempotently, in $CHROMAFS_CACHE, and prints
# the node_modules directory.
#
#   scripts/js-clients.sh langchain
#   scripts/js-clients.sh llamaindex   (LlamaIndex.TS: @llamaindex/chroma, @llamaindex/core)
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LANGCHAIN_COMMUNITY=1.1.29 LANGCHAIN_SPLITTERS=1.0.2 LANGCHAIN_CORE=1.1.38 CHROMADB=3.5.0
LLAMAINDEX_CHROMA=0.0.37 LLAMAINDEX_CORE=0.6.23
# install DIR MARKER WHAT [npm flags and packages...]: npm install into DIR
# unless MARKER (a file below DIR/node_modules) shows it was done; prints
# DIR/node_modules.
install() {
  local dir="$1" marker="$2" what="$3"
  shift 3
  if [ ! -f "$dir/node_modules/$marker" ]; then
    ensure_node
    log "installing $what (npm) into $dir"
    mkdir -p "$dir"
    [ -f "$dir/package.json" ] || echo '{"private":true}' > "$dir/package.json"
    (cd "$dir" && npm install --no-audit --no-fund --loglevel=error "$@" >/dev/null) \
      || die "npm install of $what failed: cannot reach the npm registry?"
  fi
  echo "$dir/node_modules"
}

case "${1:-}" in
  langchain)
    install "$CHROMAFS_CACHE/npm-langchain-$LANGCHAIN_COMMUNITY" "@langchain/community/dist/vectorstores/chroma.cjs" \
      "the LangChain.js clients (@langchain/community@$LANGCHAIN_COMMUNITY, @langchain/textsplitters, @langchain/core, chromadb)" \
      "@langchain/community@$LANGCHAIN_COMMUNITY" "@langchain/textsplitters@$LANGCHAIN_SPLITTERS" \
      "@langchain/core@^$LANGCHAIN_CORE" "chromadb@$CHROMADB" ;;
  llamaindex)
    # --ignore-scripts: a dependency (sharp, for images) downloads a binary
    # from outside the registry at install; the text path never loads it
    install "$CHROMAFS_CACHE/npm-llamaindex-$LLAMAINDEX_CHROMA" "@llamaindex/chroma/package.json" \
      "the LlamaIndex.TS clients (@llamaindex/chroma@$LLAMAINDEX_CHROMA, @llamaindex/core)" \
      --ignore-scripts "@llamaindex/chroma@$LLAMAINDEX_CHROMA" "@llamaindex/core@$LLAMAINDEX_CORE" ;;
  *) die "usage: js-clients.sh langchain|llamaindex" ;;
esac
