#!/usr/bin/env bash
# js-clients.sh — installs the third-party JavaScript clients that the
# integration tests use to write collections the way real users do
# (LangChain.js: @langchain/community's Chroma vector store with
# @langchain/textsplitters), idempotently, in $CHROMAFS_CACHE, and prints
# the node_modules directory.
#
#   scripts/js-clients.sh langchain
set -euo pipefail
source "$(dirname "$0")/lib.sh"
LANGCHAIN_COMMUNITY=1.1.29 LANGCHAIN_SPLITTERS=1.0.2 LANGCHAIN_CORE=1.1.38 CHROMADB=3.5.0
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
  *) die "usage: js-clients.sh langchain" ;;
esac
