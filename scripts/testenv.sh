# testenv.sh LDTORCH: sourced by scripts/test.sh and scripts/check-libtorch2.sh: the
# environment the test binaries run in, which is the one the ldtorch command (its binary
# LDTORCH) gives itself.
#
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
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x "$1" ]; then
  core=$("$1" version --json 2>/dev/null | sed -n 's/.*"blas_core": *"\([^"]*\)".*/\1/p')
  if [ -n "$core" ]; then export OPENBLAS_CORETYPE=$core; fi
fi
