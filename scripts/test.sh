#!/usr/bin/env bash
# test.sh: the project's checks, as CI runs them: formatting, go vet, and the whole test
# suite on the CPU. Run scripts/setup.sh first (the README's test command does both).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './build/*'))
if [ -n "$unformatted" ]; then
  echo "test.sh: gofmt would change: $unformatted" >&2; exit 1
fi
go vet ./...
# The GPU scripts' archive helper (what a lent machine hands back), where python3 is.
if command -v python3 >/dev/null; then
  PYTHONDONTWRITEBYTECODE=1 python3 -m unittest discover -s scripts/gpu -p '*_test.py'
fi
. scripts/testenv.sh build/ldtorch
# Three test binaries at a time on two cores: torch/dist and the CLI's multi-process tests
# spend much of their time waiting on timeouts and child processes.
# go vet ran above with every check: -vet=off spares go test repeating its subset.
# The tensors shared with another binding (torch/internal/atentest), again under the race
# detector and cgo's pointer checks, beside the suite.
GODEBUG=cgocheck=1 go test -count=1 -race -vet=off ./torch/internal/atentest/ > "${TMPDIR:-/tmp}/ldtorch-race.$$" 2>&1 &
race=$!
status=0
go test -count=1 -timeout 25m -p 3 -vet=off ./... "$@" || status=$?
wait "$race" || status=1
cat "${TMPDIR:-/tmp}/ldtorch-race.$$"; rm -f "${TMPDIR:-/tmp}/ldtorch-race.$$"
exit "$status"
