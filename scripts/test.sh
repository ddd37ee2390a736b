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
# The test binaries run libtorch in-process, as the ldtorch command does: give them the
# allocator settings the command applies to itself (cmd/ldtorch/malloc.go; glibc reads them
# only at start). Without them a third of the suite's kernel time is page faults. Tests of
# the built binary start it without these (binaryCommand), as a user's shell would.
export MALLOC_ARENA_MAX=1 MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824 MALLOC_TOP_PAD_=268435456
# And OpenBLAS's kernel set, which the command names where OpenBLAS took the CPU for its
# generic one (cmd/ldtorch/blas.go): tests compare runs in the test process with runs of the
# built binary, bit for bit, and other kernels round otherwise.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x build/ldtorch ]; then
  core=$(./build/ldtorch version --json 2>/dev/null | sed -n 's/.*"blas_core": *"\([^"]*\)".*/\1/p')
  if [ -n "$core" ]; then export OPENBLAS_CORETYPE=$core; fi
fi
# Three test binaries at a time on two cores: torch/dist and the CLI's multi-process tests
# spend much of their time waiting on timeouts and child processes.
# go vet ran above with every check: -vet=off spares go test repeating its subset.
go test -count=1 -timeout 25m -p 3 -vet=off ./... "$@"
# The tensors shared with another binding (torch/internal/atentest), again under the race
# detector and cgo's pointer checks.
GODEBUG=cgocheck=1 go test -count=1 -race -vet=off ./torch/internal/atentest/
