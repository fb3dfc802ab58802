#!/usr/bin/env bash
# test.sh — the whole test suite: format, vet, staticcheck, unit tests with
# -race, each fuzz target briefly, the integration tests (also under -race)
# against a real Chroma server that they start themselves
# (scripts/chroma-server.sh), and a smoke run of the benchmark.
#
#   scripts/test.sh                 everything (what .ci/run calls)
#   FUZZTIME=5m scripts/test.sh     fuzz longer (default 10s per target)
#   SKIP_INTEGRATION=1 ...          unit tests only (not under CI=true)
#   SKIP_BENCH=1 ...                no benchmark smoke run (not under CI=true)
#
# Under CI=true nothing is skipped: a missing prerequisite (FUSE, the Chroma
# server, dockerd, ...) fails the test that needs it, and SKIP_* are refused.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$REPO_ROOT"
FUZZTIME="${FUZZTIME:-10s}"
if [ "${CI:-}" = true ]; then
  for v in SKIP_INTEGRATION SKIP_BENCH; do
    [ -z "${!v:-}" ] || die "CI=true runs everything: unset $v"
  done
fi

ensure_go
ensure_apt fuse3 curl ca-certificates attr ripgrep redis-server rsync file bubblewrap docker.io busybox-static
export PATH="$PATH:$(go env GOPATH)/bin"

step() { printf '\n=== %s\n' "$*"; }

step "gofmt"
unformatted="$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))"
[ -z "$unformatted" ] || die "gofmt needed: $unformatted"

step "go vet"
go vet ./...

step "staticcheck"
command -v staticcheck >/dev/null || go install honnef.co/go/tools/cmd/staticcheck@v0.8.2
staticcheck ./...

step "unit tests (-race)"
go test -race -count=1 $(go list ./... | grep -v /integration_test)

step "fuzz ($FUZZTIME per target)"
# A failure that wrote no failing input (the fuzzing engine itself gave up,
# e.g. a worker starved on a busy machine) is shown and run once more; a
# failing input is always fatal.
fuzz() { go test -run '^$' -fuzz "^${2}\$" -fuzztime "$FUZZTIME" "./$1/" 2>&1; }
for target in tree:FuzzDecode tree:FuzzFastScan tree:FuzzRawInts tree:FuzzSnapshot ingest:FuzzSplit ingest:FuzzParseAccess chroma:FuzzAssemble lexical:FuzzUnmarshal lexical:FuzzTokenize treeload:FuzzViewSafety policy:FuzzParse daemon:FuzzAttachRequest; do
  pkg="${target%%:*}" fn="${target##*:}"
  if out="$(fuzz "$pkg" "$fn")"; then echo "${out##*$'\n'}"; continue; fi
  grep -v '^fuzz: elapsed' <<<"$out" | tail -20
  found="$(git status --porcelain --untracked-files=all "$pkg/testdata/fuzz" 2>/dev/null || true)"
  [ -z "$found" ] || die "fuzz $fn found a failing input: $found"
  echo "fuzz $fn failed without a failing input; running it once more"
  out="$(fuzz "$pkg" "$fn")" || { grep -v '^fuzz: elapsed' <<<"$out" | tail -20; die "fuzz $fn failed twice"; }
  echo "${out##*$'\n'}"
done

if [ -n "${SKIP_INTEGRATION:-}" ]; then
  echo "integration tests skipped (SKIP_INTEGRATION set)"
  exit 0
fi
step "integration tests (real Chroma server, real FUSE mounts)"
scripts/chroma-server.sh install
scripts/embed-server.sh install
log_file="$(mktemp -t chromafs-integration.XXXXXX)"
# TestDockerSandbox starts the private dockerd (scripts/dockerd.sh) and stops
# it; one a killed run leaves behind is stopped here, unless it ran before
scripts/dockerd.sh status >/dev/null 2>&1 || trap 'scripts/dockerd.sh stop >/dev/null 2>&1 || true' EXIT
# -race: the tests' own code (proxies, the readers of a mount's output)
# runs under the race detector too
go test -race -count=1 -timeout 30m -v ./integration_test/ 2>&1 | tee "$log_file" \
  | grep -E '^(--- |    --- (FAIL|SKIP)|ok|FAIL|PASS|panic|INGEST|BENCH)|SKIPPED|_test.go:'
echo "full log: $log_file"
if [ "${CI:-}" = true ] && grep -q -- '--- SKIP' "$log_file"; then
  grep -- '--- SKIP' "$log_file"
  die "CI=true: integration tests were skipped (above)"
fi

if [ -z "${SKIP_BENCH:-}" ]; then
  step "benchmark smoke run (1,000 files and 500 and 2,000 tiny ones, 1 repetition; targets not enforced)"
  bench_log="$(mktemp -t chromafs-bench.XXXXXX)"
  bench_table="$(mktemp -t chromafs-bench-table.XXXXXX)"
  go run ./cmd/chromafs-bench --smoke --out "$bench_table" >"$bench_log" 2>&1 || { cat "$bench_log"; die "benchmark smoke run failed"; }
  rows="$(grep '^| ' "$bench_table" | grep -v '^| corpus |' || true)"
  echo "bench harness ran: $(grep -c . <<<"$rows") figures measured (table: $bench_table, log: $bench_log)"
  missed="$(grep '❌' <<<"$rows" || true)"
  if [ -n "$missed" ]; then
    echo "rows under their target (shown, not enforced: a smoke run is 1 repetition of small corpora, and a busy machine misses):"
    printf '%s\n' "$missed"
  fi
fi
echo
echo "scripts/test.sh: all checks passed"
