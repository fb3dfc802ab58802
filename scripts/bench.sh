#!/usr/bin/env bash
# bench.sh — measure chromafs against local disk and the raw Chroma client,
# in one run, on a real local Chroma server and real mounts: the front of
# the command cmd/chromafs-bench.
#
#   scripts/bench.sh                         full run (1k and 10k files, 10k and 100k
#                                            tiny ones for tree-bound figures, 100 MiB
#                                            page, 5 reps)
#   scripts/bench.sh --smoke                 1,000 files (500 and 2,000 tiny ones),
#                                            1 repetition (run by test.sh)
#   scripts/bench.sh --files 1000 --reps 3   any flag of cmd/chromafs-bench (--help lists them)
#   scripts/bench.sh --out docs/BENCHMARKS.table.md
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
ensure_go
case " $* " in
  *" -h "*|*" -help "*|*" --help "*) ;;   # the flags only: nothing to install
  *) ensure_apt fuse3 curl ca-certificates ;;
esac
exec go run ./cmd/chromafs-bench "$@"
