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
case "${1:-}" in
  langchain)
    dir="$CHROMAFS_CACHE/npm-langchain-$LANGCHAIN_COMMUNITY"
    if [ ! -f "$dir/node_modules/@langchain/community/dist/vectorstores/chroma.cjs" ]; then
      ensure_node
      log "installing @langchain/community@$LANGCHAIN_COMMUNITY, @langchain/textsplitters, @langchain/core, chromadb (npm) into $dir"
      mkdir -p "$dir"
      [ -f "$dir/package.json" ] || echo '{"private":true}' > "$dir/package.json"
      (cd "$dir" && npm install --no-audit --no-fund --loglevel=error \
          "@langchain/community@$LANGCHAIN_COMMUNITY" "@langchain/textsplitters@$LANGCHAIN_SPLITTERS" \
          "@langchain/core@^$LANGCHAIN_CORE" "chromadb@$CHROMADB" >/dev/null) \
        || die "npm install of the LangChain.js clients failed: cannot reach the npm registry?"
    fi
    echo "$dir/node_modules" ;;
  llamaindex)
    dir="$CHROMAFS_CACHE/npm-llamaindex-$LLAMAINDEX_CHROMA"
    if [ ! -f "$dir/node_modules/@llamaindex/chroma/package.json" ]; then
      ensure_node
      log "installing @llamaindex/chroma@$LLAMAINDEX_CHROMA, @llamaindex/core (npm) into $dir"
      mkdir -p "$dir"
      [ -f "$dir/package.json" ] || echo '{"private":true}' > "$dir/package.json"
      # --ignore-scripts: a dependency (sharp, for images) downloads a binary
      # from outside the registry at install; the text path never loads it
      (cd "$dir" && npm install --no-audit --no-fund --loglevel=error --ignore-scripts \
          "@llamaindex/chroma@$LLAMAINDEX_CHROMA" "@llamaindex/core@$LLAMAINDEX_CORE" >/dev/null) \
        || die "npm install of the LlamaIndex.TS clients failed: cannot reach the npm registry?"
    fi
    echo "$dir/node_modules" ;;
  *) die "usage: js-clients.sh langchain|llamaindex" ;;
esac
