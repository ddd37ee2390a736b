#!/usr/bin/env bash
# parallel.sh: data-parallel meta-steps (ldtorch bench --nproc) against one process, on this
# machine, interleaved round by round so all configurations see the same load:
#   1r1t  one rank, one thread            1r2t  one rank, two threads
#   2r1t  two ranks (--nproc 2), one thread each, polling for the all-reduce's end (default)
#   2r1s  the same, each rank sleeping at once in the all-reduce (LDTORCH_DIST_SPIN=0)
#   half  one rank, one thread, the share of one of two ranks: half the target batch (N_o/2)
#         and the whole base batch, as LeNet's ranks keep it by default; with
#         LDTORCH_BASE_SPLIT=on, which splits the ranks' base rows, half of that too (N_i/2):
#         with 1r1t it splits a meta-step into the part that shards and the part that does not
#   2lone two lone processes at once, one thread and one rank's share each: the two ranks'
#         work without their exchange, so 1r1t / 2lone is what two ranks could reach on this
#         machine
# for LD and LD RR on MNIST with N = 100 (N_i 50, N_o 1024). Prints one JSON line per run and
# a summary of medians, speed-ups, the split fraction and the all-reduce's share.
# Usage: scripts/bench/parallel.sh [ROUNDS=3] [STEPS=20]
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3} steps=${2:-20}
data=${LDTORCH_BENCH_DATA:-../shared/datasets}
export OMP_WAIT_POLICY=passive
out=$(mktemp)
# bench METHOD [flags...] is one `ldtorch bench` of MNIST-100 (its JSON line on stdout).
bench() {
  local m=$1; shift
  ./build/ldtorch bench "$@" --method "$m" --dataset mnist --base 100 --steps "$steps" --warmup 3 --data-dir "$data"
}
# record CONFIG FILE... adds the JSON lines of FILE... to the results, tagged with CONFIG.
record() {
  local c=$1 line; shift
  grep -h '^{' "$@" | while IFS= read -r line; do echo "{\"config\":\"$c\",${line#\{}" | tee -a "$out"; done
}
failed() { echo "parallel.sh: $1 $2 failed:" >&2; tail -5 "$out.err" >&2; return 1; }
run() { # config method [extra flags...]
  local c=$1 m=$2; shift 2
  { bench "$m" "$@" >"$out.a" 2>"$out.err" && grep -q '^{' "$out.a"; } || { failed "$c" "$m"; return 1; }
  record "$c" "$out.a"
}
# run2 runs two lone processes at once and records both.
run2() { # config method [extra flags...]
  local c=$1 m=$2; shift 2
  bench "$m" "$@" >"$out.a" 2>"$out.err" &
  local pid=$!
  { bench "$m" "$@" >"$out.b" 2>>"$out.err" && wait "$pid"; } || { failed "$c" "$m"; return 1; }
  record "$c" "$out.a" "$out.b"
}
# One of two ranks' share of MNIST-100's batches (N_i 50, N_o 1024), for half and 2lone: half
# the target batch, and half the base batch only where the ranks split it.
half_share=(--outer-batch 512)
case ${LDTORCH_BASE_SPLIT:-auto} in
  on) half_share+=(--inner-batch 25) ;;
  auto|off) ;;
  *) echo "parallel.sh: LDTORCH_BASE_SPLIT=$LDTORCH_BASE_SPLIT: want auto, on or off" >&2; exit 2 ;;
esac
echo "one rank's share: ${half_share[*]} (LDTORCH_BASE_SPLIT=${LDTORCH_BASE_SPLIT:-auto})"
echo "load before: $(uptime)"
for r in $(seq "$rounds"); do
  for m in ld rr; do
    OMP_NUM_THREADS=1 run 1r1t "$m" --threads 1
    OMP_NUM_THREADS=2 run 1r2t "$m" --threads 2
    OMP_NUM_THREADS=1 run 2r1t "$m" --nproc 2 --threads 1
    OMP_NUM_THREADS=1 LDTORCH_DIST_SPIN=0 run 2r1s "$m" --nproc 2 --threads 1
    OMP_NUM_THREADS=1 run half "$m" --threads 1 "${half_share[@]}"
    OMP_NUM_THREADS=1 run2 2lone "$m" --threads 1 "${half_share[@]}"
  done
done
echo "load after: $(uptime)"
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def med(c, m, k):
    v = [r[k] for r in rows if r["config"] == c and r["method"] == m]
    return statistics.median(v) if v else float("nan")
# Wall time is what a user waits for, but on a loaded machine every extra process or thread
# also buys a larger share of the cores. The driving thread's CPU time (rank 0's in 2r1t)
# is the work on the critical path, nearly independent of the load.
for k, what in (("meta_step_median_s", "wall"), ("meta_step_cpu_median_s", "thread CPU")):
    print(f"\nmeta-step, {what} (median of the runs' medians), seconds")
    print("method    1r1t     1r2t     2r1t     2r1s     half    2lone  2r1t vs 1r1t  2r1s vs 1r1t  1r2t vs 1r1t  2lone vs 1r1t  split fraction")
    for m in ("ld", "rr"):
        a, b, c, d, h, p = (med(x, m, k) for x in ("1r1t", "1r2t", "2r1t", "2r1s", "half", "2lone"))
        split = 2 * (a - h) / a  # the sharded part halves: t(whole) − t(half) is half of it
        print(f"{m:6s}  {a:7.4f}  {b:7.4f}  {c:7.4f}  {d:7.4f}  {h:7.4f}  {p:7.4f}   {a/c:6.2f}x       {a/d:6.2f}x       {a/b:6.2f}x        {a/p:6.2f}x        {split:5.1%}")
print("\nall-reduce inside a 2-rank meta-step (rank 0, waiting for rank 1 included)")
for m in ("ld", "rr"):
    for cfg in ("2r1t", "2r1s"):
        ar, c = med(cfg, m, "all_reduce_median_s"), med(cfg, m, "meta_step_median_s")
        print(f"{m:6s} {cfg}  {ar*1e3:7.2f} ms  ({ar/c:5.1%} of the wall meta-step)")
# The ranks' arrival skew has a long tail: a few meta-steps where one rank was held up cost
# the other its whole wait. Means show it where medians hide it: what two ranks lose
# against the two lone processes (2r1t - 2lone) beside rank 0's mean wait.
print("\nmeans (median over the runs of each run's mean), ms")
print("method   2r1t step   2lone step   difference   2r1t all-reduce")
for m in ("ld", "rr"):
    s2, sl, ar = (med(c, m, k) * 1e3 for c, k in (("2r1t", "meta_step_mean_s"), ("2lone", "meta_step_mean_s"), ("2r1t", "all_reduce_mean_s")))
    print(f"{m:6s}   {s2:8.2f}    {sl:8.2f}     {s2 - sl:8.2f}      {ar:8.2f}")
PY
rm -f "$out" "$out.err" "$out.a" "$out.b"
