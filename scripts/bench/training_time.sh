#!/usr/bin/env bash
# training_time.sh: the paper's training-time table (DD, LD, LD RR, Our DD, Our DD RR; MNIST)
# measured side by side: `ldtorch bench` of each method, one intra-op thread, interleaved
# round by round (A B C … A B C …), N = 100 with the defaults (N_i 50, N_o 1024; dd: 10
# steps × 3 epochs, both backward passes). A full run takes the same number of meta-steps
# with every method (epochs × ⌈target set / N_o⌉), so the ratio of meta-step times is the
# ratio of the distillations' times (validations, the final test and the baselines aside).
# Prints each run's JSON line to $LDTORCH_BENCH_LOG (default: a temporary file) and the
# table: median over the rounds of each run's median meta-step time, wall and CPU (the
# driving thread), and the ratio to LD's.
# Usage: scripts/bench/training_time.sh [ROUNDS] [STEPS] [WARMUP]   (default 3 10 2)
# LDTORCH_BENCH_DATASET picks the dataset (default mnist; cifar10 for the paper's CIFAR-10
# column, through AlexCifarNet), LDTORCH_BIN the binary (default build/ldtorch).
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} steps=${2:-10} warmup=${3:-2}
data=${LDTORCH_BENCH_DATA:-../shared/datasets}
dataset=${LDTORCH_BENCH_DATASET:-mnist}
bin=${LDTORCH_BIN:-./build/ldtorch}
log=${LDTORCH_BENCH_LOG:-$(mktemp)}
: >"$log"
methods=(
  "DD|--method dd"
  "DD (graph)|--method dd --dd-backward graph"
  "LD|--method ld"
  "LD RR|--method rr"
  "Our DD|--method ld --learn images"
  "Our DD RR|--method rr --learn images"
)
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
  for m in "${methods[@]}"; do
    label=${m%%|*}
    # shellcheck disable=SC2086 # the flags split on purpose
    line=$(OMP_NUM_THREADS=1 "$bin" bench --dataset "$dataset" --data-dir "$data" --base 100 \
      --steps "$steps" --warmup "$warmup" --threads 1 ${m#*|})
    printf '%s\t%s\t%s\n' "$r" "$label" "$line" >>"$log"
  done
  echo "round $r done: $(uptime)"
done
echo "load after: $(uptime)"
echo "JSON lines: $log"
python3 - "$log" <<'PY'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    _, label, js = line.rstrip("\n").split("\t", 2)
    rows.setdefault(label, []).append(json.loads(js))
med = lambda runs, k: statistics.median(r[k] for r in runs)
ld_wall, ld_cpu = med(rows["LD"], "meta_step_median_s"), med(rows["LD"], "meta_step_cpu_median_s")
print("| method | meta-step, wall | ratio to LD | meta-step, CPU | ratio to LD | runs (CPU medians) |")
print("|---|---|---|---|---|---|")
for label, runs in rows.items():
    w, c = med(runs, "meta_step_median_s"), med(runs, "meta_step_cpu_median_s")
    each = " ".join("%.3f" % r["meta_step_cpu_median_s"] for r in runs)
    print(f"| {label} | {w:.3f} s | {w / ld_wall:.2f}× | {c:.3f} s | {c / ld_cpu:.2f}× | {each} |")
PY
