#!/usr/bin/env bash
# bound.sh: AlexCifarNet meta-steps (CIFAR-10, 100 base examples, N_i 50, N_o 1024) against
# their compute bound at this machine's own peak, both measured in every round: a virtual
# machine's speed drifts by tens of percent within minutes, so a bound computed from a peak
# measured at another time (or on another machine) says little. The peak is measured between
# every two configurations' meta-steps (and before the first); each configuration's bound uses
# the mean of the peaks right before and right after it:
#   peak  one thread's float32 matrix product, torch.mm of two 2048×2048 matrices, best of 5
#         (python3-torch: the same libtorch and OpenBLAS as ldtorch, with the OpenBLAS kernel
#         set ldtorch chooses, `ldtorch version --json` "blas_core")
#   1t    ldtorch bench, one thread, LD RR and LD
#   2r    ldtorch bench --nproc 2, one thread per rank (rank 0 reports)
# The work of a meta-step (docs/benchmarks/alexcifarnet-kernels.md#the-compute-bound): one
# process LD RR 76 GFLOP, LD 213 GFLOP; each of two ranks LD RR 42.9, LD 117 (what every rank
# repeats and half of the 1,024 target images). bound = GFLOP / peak; ratio = the driving
# thread's CPU time per meta-step / bound (wall ratio: the wall time's).
# Prints one line per measurement and the medians of the ratios.
# Usage: scripts/bench/bound.sh [ROUNDS=3] [STEPS=5]   (run scripts/setup.sh --bench first: python3-torch)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} steps=${2:-5}
data=${LDTORCH_BENCH_DATA:-../shared/datasets}
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=passive
core=$(./build/ldtorch version --json | sed -n 's/.*"blas_core": *"\([^"]*\)".*/\1/p')
out=$(mktemp)
trap 'rm -f "$out" "$out.err"' EXIT
peak() {
  OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-$core} /usr/bin/python3 -c '
import time, torch
torch.set_num_threads(1)
a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
a @ b; a @ b
best = float("inf")
for _ in range(5):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
print(2 * 2048 ** 3 / best / 1e9)'
}
bench() { # method [flags...]: the driving thread's CPU and the wall seconds per meta-step (medians)
  local m=$1; shift
  ./build/ldtorch bench "$@" --method "$m" --dataset cifar10 --base 100 --steps "$steps" --warmup 1 \
    --threads 1 --data-dir "$data" 2>"$out.err" | grep '^{' |
    sed 's/.*"meta_step_median_s":\([0-9.e-]*\).*"meta_step_cpu_median_s":\([0-9.e-]*\).*/\2 \1/'
}
declare -A gflop=([1t-rr]=76 [1t-ld]=213 [2r-rr]=42.9 [2r-ld]=117)
echo "load before: $(uptime)"
p1=$(peak)
for r in $(seq "$rounds"); do
  for m in rr ld; do
    for c in 1t 2r; do
      p0=$p1
      if [ "$c" = 2r ]; then s=$(bench "$m" --nproc 2); else s=$(bench "$m"); fi
      [ -n "$s" ] || { echo "bound.sh: ldtorch bench ($c $m) failed:" >&2; tail -5 "$out.err" >&2; exit 1; }
      p1=$(peak)
      echo "$r $c $m $s $p0 $p1 ${gflop[$c-$m]}" | awk '{p = ($6 + $7) / 2; b = $8 / p
        printf "round %s  %s %s  cpu %.3f s  wall %.3f s  peak %.1f, %.1f GFLOP/s  bound %.3f s  wall ratio %.2f  ratio %.2f\n", $1, $2, $3, $4, $5, $6, $7, b, $5 / b, $4 / b}' | tee -a "$out"
    done
  done
done
echo "load after: $(uptime)"
echo "medians of the rounds' ratios, CPU (wall):"
med() { sort -g | awk '{v[NR] = $1} END {printf "%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2)}'; }
for c in 1t 2r; do for m in rr ld; do
  cpu=$(awk -v c="$c" -v m="$m" '$3 == c && $4 == m {print $NF}' "$out" | med)
  wall=$(awk -v c="$c" -v m="$m" '$3 == c && $4 == m {print $(NF - 2)}' "$out" | med)
  echo "  $c $m  $cpu ($wall), $rounds rounds"
done; done
