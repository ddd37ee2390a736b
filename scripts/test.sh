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
# One libtorch thread: the default on CI, and what the reproducibility tests assume.
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
go test -count=1 -timeout 25m ./... "$@"
