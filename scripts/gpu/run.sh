#!/usr/bin/env bash
# gpu/run.sh: runs ldtorch on a GPU machine that has PyTorch (python3 imports torch), nvcc,
# CMake and Ninja but no Go and no network, from the bundle scripts/gpu/prepare.sh packed
# into .gpu/ where Go is. Steps, each logged under RESULTS/ (default .gpu/results/):
#
#   0. with --restore FILE, an earlier run's results (a --pack archive, or its parts FILE.00,
#      FILE.01, ... where FILE is absent) unpacked into RESULTS first, so that its protocols
#      and sweep continue from their checkpoints on a machine that starts bare.
#   1. libtorch: the installed PyTorch's (torch.utils.cmake_prefix_path); a failing
#      `import torch` is shown and stops the run. --libtorch DIR uses an unpacked libtorch;
#      --libtorch system the distribution's (Debian's libtorch-dev: the CPU rehearsal).
#   2. the shim, built with CMake into .gpu/build-shim (cmake-configure.log, cmake-build.log
#      kept), then checked with ldd: for CUDA it must need libtorch_cuda, and nothing may be
#      "not found"; copied beside the binaries (.gpu/bin/lib/, their RUNPATH's $ORIGIN/lib),
#      and the binaries checked to load that copy.
#   3. `ldtorch version` (CUDA must be available for --device cuda); a binary that cannot run
#      beside the new shim (a bundle packed before a change of its ABI) stops the run here.
#   4. the device-parametrised tests of torch, nets, nets/augment, labeldistill/engine and
#      labeldistill/train with LDTORCH_TEST_DEVICE=DEVICE (--tests REGEXP chooses others;
#      --tests none skips them).
#   5. the benchmarks (--bench none skips them): `ldtorch bench` LD and LD RR on MNIST-100
#      and CIFAR-10-100, --bench-steps meta-steps (30), and the final evaluation of
#      --bench-models models (20) for --bench-eval-steps steps (300), batched against
#      sequential; one JSON line each in bench.jsonl. On MNIST on a GPU also the same with
#      LDTORCH_CUDA_GRAPHS=off (fresh models' steps taken eagerly, not replayed from CUDA
#      graphs), and the operator calls per meta-step and evaluation step (`ldtorch bench
#      --op-census`), one JSON line each in census.jsonl.
#   6. with --protocol NAME[,NAME...], full protocol runs (mnist-ld, mnist-rr, cifar10-ld,
#      cifar10-rr, cifar100-rr: see protocol_args), one after another, each into
#      RESULTS/NAME. Each continues from the newest checkpoint there (--resume) when one
#      exists; one that finished (its report.json written) is not run again. With
#      --side-by-side they run at once, one process each (their logs' wall times are then
#      those of a shared device).
#   7. with --sweep GRID (a grid file, e.g. scripts/paper/ipc-mnist.json; --rows and --columns
#      choose cells as ldtorch sweep's flags do), the cells into RESULTS/sweep-<grid name> on
#      DEVICE (--sweep-jobs K: K cells at once, one process each, `ldtorch sweep --jobs K`;
#      --sweep-together K: K cells of one shape in one process, their meta-steps computed
#      together, `ldtorch sweep --together K`; scripts/paper/many-runs-mnist.json measures
#      what each gains against K=1); finished cells are kept and a cut one is checkpointed, so the same command
#      continues the sweep. With --ddranking ARCH, every finished cell without a DD-Ranking
#      score is then scored (ldtorch evaluate --protocol ddranking --arch ARCH; the full-data
#      models cached in RESULTS/ddranking-cache; --ddranking-epochs E, for quick checks, trains
#      E epochs instead of the recipe's). An evaluation cut at the time limit keeps its progress
#      (the cell's evaluations/ddranking-partial-*/, the cache's *.training.npz, saved every
#      5 minutes), which the same command, or a --restore of the pack, goes on from.
#   8. with --pack FILE, RESULTS packed into FILE (tar.xz, by scripts/gpu/pack.py) on every
#      exit, a failed step's included: what a lent machine hands back before it is returned
#      bare. Of each run's checkpoints only the newest goes in (it continues the run). An
#      archive over --pack-limit MiB (default 15: a lent machine hands back at most 16 per
#      file) is cut into FILE.00, FILE.01, ... of that size, at most --pack-parts of them
#      (default 3: one CIFAR checkpoint alone is about 18 MiB packed); one that needs more is
#      packed again without the checkpoints, then without the largest files, each named in
#      run.log.
#
# --time-limit S bounds the whole run, counted from its start (the shim's build included):
# the tests, the benchmarks, the protocols and the sweep's cells and scores each get what is
# left; a command still running when it runs out gets SIGTERM (ldtorch distill and sweep
# write a checkpoint on it; an evaluation cut so is lost and runs again next time), and a
# step that finds no time left is skipped and says so. The packing comes after S (seconds).
# Run the same command again (with --restore on a fresh machine) to continue.
#
# Usage: scripts/gpu/run.sh [--device cuda|cpu] [--bundle DIR] [--results DIR]
#          [--libtorch python|system|DIR] [--tests REGEXP|all|none] [--bench all|none]
#          [--bench-steps N] [--bench-eval-steps N] [--bench-models M]
#          [--protocol NAME[,NAME...] [--side-by-side]] [--time-limit SECONDS] [--allow-tf32]
#          [--sweep GRID [--rows LABELS] [--columns LABELS] [--sweep-jobs K] [--sweep-together K] [--ddranking ARCH [--ddranking-epochs E]]]
#          [--restore FILE] [--pack FILE [--pack-limit MIB] [--pack-parts N]]
# The CPU rehearsal, on a machine with Go and Debian's libtorch:
#   scripts/gpu/prepare.sh && scripts/gpu/run.sh --device cpu --libtorch system \
#     --bench-steps 2 --bench-eval-steps 3 --bench-models 2
set -Eeuo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
device=cuda bundle=$repo/.gpu results="" libtorch=python tests=default bench=all bench_steps=30
protocol="" side_by_side=0 time_limit=0 tf32=() bench_eval_steps=300 bench_models=20
sweep="" rows="" columns="" sweep_jobs=1 sweep_together=1 ddranking="" ddranking_epochs="" pack="" pack_limit=15 pack_parts=3 restore=""
while [ $# -gt 0 ]; do
  case "$1" in
    --device) device=$2; shift 2 ;;
    --bundle) bundle=$(cd "$2" && pwd); shift 2 ;;
    --results) results=$2; shift 2 ;;
    --libtorch) libtorch=$2; shift 2 ;;
    --tests) tests=$2; shift 2 ;;
    --bench) bench=$2; shift 2 ;;
    --bench-steps) bench_steps=$2; shift 2 ;;
    --bench-eval-steps) bench_eval_steps=$2; shift 2 ;;
    --bench-models) bench_models=$2; shift 2 ;;
    --protocol) protocol=$2; shift 2 ;;
    --side-by-side) side_by_side=1; shift ;;
    --time-limit) time_limit=$2; shift 2 ;;
    --allow-tf32) tf32=(--allow-tf32); shift ;;
    --sweep) sweep=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    --columns) columns=$2; shift 2 ;;
    --sweep-jobs) sweep_jobs=$2; shift 2 ;;
    --sweep-together) sweep_together=$2; shift 2 ;;
    --ddranking) ddranking=$2; shift 2 ;;
    --ddranking-epochs) ddranking_epochs=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    --pack-limit) pack_limit=$2; shift 2 ;;
    --pack-parts) pack_parts=$2; shift 2 ;;
    --restore) restore=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1 (see the usage at the top of $0)" >&2; exit 2 ;;
  esac
done
case "$device" in cuda|cuda:*|cpu) ;; *) echo "run.sh: --device must be cuda, cuda:N or cpu, got $device" >&2; exit 2 ;; esac
if [ -n "$sweep" ] && [ ! -f "$repo/$sweep" ] && [ ! -f "$sweep" ]; then
  echo "run.sh: --sweep $sweep: no such grid file (relative to the repository, e.g. scripts/paper/ipc-mnist.json)" >&2; exit 2
fi
if [ "$side_by_side" = 1 ] && [ -z "$protocol" ]; then
  echo "run.sh: --side-by-side goes with --protocol NAME,NAME..." >&2; exit 2
fi
case "$sweep_jobs" in ''|*[!0-9]*|0) echo "run.sh: --sweep-jobs must be a positive whole number, got $sweep_jobs" >&2; exit 2 ;; esac
case "$sweep_together" in ''|*[!0-9]*|0) echo "run.sh: --sweep-together must be a positive whole number, got $sweep_together" >&2; exit 2 ;; esac
if [ -z "$sweep" ] && { [ -n "$rows$columns$ddranking$ddranking_epochs" ] || [ "$sweep_jobs" != 1 ] || [ "$sweep_together" != 1 ]; }; then
  echo "run.sh: --rows, --columns, --sweep-jobs, --sweep-together and --ddranking go with --sweep" >&2; exit 2
fi
if [ -n "$ddranking_epochs" ] && [ -z "$ddranking" ]; then
  echo "run.sh: --ddranking-epochs goes with --ddranking ARCH" >&2; exit 2
fi
protocol_args() {
  case "$1" in
    mnist-ld) echo "--dataset mnist --method ld --base 100" ;;
    mnist-rr) echo "--dataset mnist --method rr --base 100" ;;
    cifar10-ld) echo "--dataset cifar10 --method ld --base 100" ;;
    cifar10-rr) echo "--dataset cifar10 --method rr --base 100" ;;
    cifar100-rr) echo "--dataset cifar100 --method rr --base 100 --allow-unknown-data" ;;
    *) return 1 ;;
  esac
}
protocols=()
[ -n "$protocol" ] && IFS=, read -ra protocols <<<"$protocol"
seen=","
for p in "${protocols[@]}"; do
  protocol_args "$p" >/dev/null \
    || { echo "run.sh: unknown --protocol $p (mnist-ld, mnist-rr, cifar10-ld, cifar10-rr, cifar100-rr)" >&2; exit 2; }
  # Each protocol writes RESULTS/NAME: twice would be one run (or, side by side, two at once).
  [[ "$seen" != *",$p,"* ]] || { echo "run.sh: --protocol names $p twice" >&2; exit 2; }
  seen+="$p,"
done
[[ "$time_limit" =~ ^[0-9]+$ ]] || { echo "run.sh: --time-limit must be whole seconds, got $time_limit" >&2; exit 2; }
[[ "$pack_limit" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --pack-limit must be a positive number of MiB, got $pack_limit" >&2; exit 2; }
[[ "$pack_parts" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --pack-parts must be a positive number, got $pack_parts" >&2; exit 2; }
if [ -n "$restore" ]; then
  [ -f "$restore" ] || [ -f "$restore.00" ] \
    || { echo "run.sh: --restore $restore: no such file, nor its parts $restore.00, ..." >&2; exit 2; }
  restore=$(cd "$(dirname "$restore")" && pwd)/$(basename "$restore")
fi
if [ -n "$pack" ]; then
  mkdir -p "$(dirname "$pack")" || { echo "run.sh: --pack $pack: cannot make its folder" >&2; exit 2; }
  pack=$(cd "$(dirname "$pack")" && pwd)/$(basename "$pack")
fi
started=$(date +%s)
# seconds_left prints what is left of --time-limit (counted from the start); time_is_up:
# whether a limit is set and spent.
seconds_left() { echo $((time_limit - ($(date +%s) - started))); }
time_is_up() { [ "$time_limit" -gt 0 ] && [ "$(seconds_left)" -le 0 ]; }
# limited LOG CMD... runs CMD with its output appended to LOG; under --time-limit it gets
# SIGTERM when the time left of the limit (counted from the start) runs out, and exits 124.
limited() {
  local log=$1; shift
  if [ "$time_limit" -gt 0 ]; then
    local left
    left=$(seconds_left)
    timeout --signal=TERM --kill-after=120 "$((left > 0 ? left : 1))" "$@" >>"$log" 2>&1
  else
    "$@" >>"$log" 2>&1
  fi
}
[ -f "$bundle/bin/ldtorch.xz" ] || [ -x "$bundle/bin/ldtorch" ] || { echo "run.sh: no bundle at $bundle (run scripts/gpu/prepare.sh where Go is)" >&2; exit 1; }
# prepare.sh packs the binaries xz-compressed; python3's lzma unpacks them (no xz needed).
for z in "$bundle"/bin/*.xz; do
  [ -e "$z" ] || continue
  b=${z%.xz}
  if [ ! -x "$b" ] || [ "$z" -nt "$b" ]; then
    python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' "$z" "$b" \
      || { echo "run.sh: cannot unpack $z" >&2; exit 1; }
    chmod +x "$b"
  fi
done
results=${results:-$bundle/results}
mkdir -p "$results"
results=$(cd "$results" && pwd)
# Each line says how long the run has been going: where a lease's minutes went.
log() { echo "run.sh: [$(( $(date +%s) - started ))s] $*" | tee -a "$results/run.log" >&2; }
fail() { log "FAILED: $*"; exit 1; }
# ---- 8. packing, on every exit from here on ---------------------------------------------------
pack_results() {
  local rc=$? said
  if [ -n "$pack" ]; then
    if said=$(python3 "$repo/scripts/gpu/pack.py" pack "$results" "$pack" "$pack_limit" "$pack_parts" 2>&1); then
      while IFS= read -r line; do log "$line"; done <<<"$said"
    else
      echo "$said" >&2; log "FAILED: packing $results into $pack"; rc=1
    fi
  fi
  exit "$rc"
}
trap pack_results EXIT
# Any other command that stops the run (set -e; with -E, inside functions too) names itself
# in run.log before the packing. Only the script's own shell says so: -E also hands the trap
# to command substitutions, where a failure (grep -c counting none) stops nothing.
trap 'failed_rc=$?; [ "$BASH_SUBSHELL" = 0 ] && log "FAILED: line $LINENO: $BASH_COMMAND (exit $failed_rc)"' ERR

# ---- 0. earlier results ---------------------------------------------------------------------
if [ -n "$restore" ]; then
  # The archive's run.log (the earlier run's) is restored too; this run's lines follow it.
  said=$(python3 "$repo/scripts/gpu/pack.py" restore "$restore" "$results" 2>&1) \
    || { echo "$said" >&2; fail "--restore $restore: cannot unpack it"; }
  log "$said"
fi
data=$bundle/shared/datasets
bin=$bundle/bin/ldtorch
log "$(date -u +%FT%TZ) device $device, bundle $bundle, results $results"
[ -f "$bundle/MANIFEST" ] && log "bundle: $(head -1 "$bundle/MANIFEST")"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/GPU: /' | tee -a "$results/run.log"

# ---- 1. libtorch ---------------------------------------------------------------------------
cmake_args=()
case "$libtorch" in
  python)
    py_out=$(python3 -c 'import torch, torch.utils; print(torch.__version__); print(torch.version.cuda); print(torch.utils.cmake_prefix_path)' 2>"$results/import-torch.log") \
      || { cat "$results/import-torch.log" >&2; fail "python3 cannot import torch (its error is above and in import-torch.log)"; }
    { read -r torch_version; read -r torch_cuda; read -r prefix; } <<<"$py_out"
    log "PyTorch $torch_version (CUDA $torch_cuda), CMake prefix $prefix"
    [ -d "$prefix/Torch" ] || fail "PyTorch's CMake files are not at $prefix/Torch (a Debian python3-torch has none: use --libtorch system)"
    cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix" "-DTorch_DIR=$prefix/Torch")
    if [ "$device" != cpu ] && [ "$torch_cuda" = None ]; then
      fail "this PyTorch is built without CUDA"
    fi ;;
  system) log "libtorch: the system's (find_package(Torch) defaults)" ;;
  *) [ -d "$libtorch/share/cmake/Torch" ] || fail "--libtorch $libtorch: no share/cmake/Torch in it"
     cmake_args+=("-DTorch_DIR=$libtorch/share/cmake/Torch") ;;
esac
if [ "$device" != cpu ]; then
  command -v nvcc >/dev/null || fail "nvcc is not on PATH (PyTorch's CMake files look for the CUDA toolkit)"
  log "nvcc: $(nvcc --version | tail -1)"
  # The shim compiles no CUDA code; this only spares CMake's GPU architecture detection.
  export TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0}
fi

# ---- 2. the shim ---------------------------------------------------------------------------
build=$bundle/build-shim
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S "$repo" -B "$build" "${gen[@]}" "${cmake_args[@]}" >"$results/cmake-configure.log" 2>&1 \
  || { tail -40 "$results/cmake-configure.log" >&2; fail "CMake configure (whole output in cmake-configure.log)"; }
grep -E "ldtorch:" "$results/cmake-configure.log" | tee -a "$results/run.log" >&2 || true
cmake --build "$build" >"$results/cmake-build.log" 2>&1 \
  || { tail -40 "$results/cmake-build.log" >&2; fail "shim build (whole output in cmake-build.log)"; }
shim=$build/libldtorch_shim.so.1
ldd "$shim" >"$results/ldd-shim.log" 2>&1 || fail "ldd $shim"
if grep -q "not found" "$results/ldd-shim.log"; then
  grep "not found" "$results/ldd-shim.log" >&2; fail "the shim's libraries are not all found (ldd-shim.log)"
fi
if [ "$device" != cpu ]; then
  grep -q "libtorch_cuda" "$results/ldd-shim.log" || fail "the shim does not link libtorch_cuda (ldd-shim.log): a CPU libtorch?"
fi
mkdir -p "$bundle/bin/lib"
cp -fP "$build"/libldtorch_shim.so* "$bundle/bin/lib/"
for b in "$bundle"/bin/ldtorch "$bundle"/bin/*.test; do
  out=$(ldd "$b" 2>&1) || fail "ldd $b"
  echo "$out" | grep -q "not found" && { echo "$out" >&2; fail "$b: libraries not found"; }
  echo "$out" | grep -q "libldtorch_shim.so.1 => $bundle/bin/lib/" || { echo "$out" >&2; fail "$b does not load the shim from $bundle/bin/lib"; }
done
log "shim built and in place ($(grep -c . "$results/ldd-shim.log") libraries resolved)"

# ---- 3. version ----------------------------------------------------------------------------
# A binary that cannot run beside the shim just built (a bundle packed before a change of the
# shim's ABI) fails here: say so instead of stopping without a word.
if ! "$bin" version >"$results/version.txt" 2>&1; then
  cat "$results/version.txt" >&2
  fail "ldtorch version (its output is above and in version.txt): is the bundle older than the shim? Pack it again with scripts/gpu/prepare.sh"
fi
cat "$results/version.txt"
"$bin" version --json >"$results/version.json" 2>>"$results/version.txt" || fail "ldtorch version --json (version.txt)"
if [ "$device" != cpu ] && ! grep -q '"cuda_available": *true' "$results/version.json"; then
  fail "ldtorch sees no CUDA device (version.json)"
fi

# ---- 4. tests ------------------------------------------------------------------------------
status=0
if [ "$tests" != none ]; then
  pattern=$tests
  case "$tests" in
    default) pattern='TestDevice|TestCUDA|TestFromInt64On|TestAllowTF32|TestLinalgSolveEx|TestAdamCapturable|TestTrainerCUDAGraph' ;;
    all) pattern=. ;;
  esac
  for pkg in torch nets nets/augment labeldistill/engine labeldistill/train; do
    name=${pkg//\//-} # nets/augment: bin/nets-augment.test, test-nets-augment.log
    if time_is_up; then status=1; log "tests: $pkg skipped: no time left of --time-limit $time_limit"; continue; fi
    [ -e "$bundle/bin/$name.test" ] || { log "tests: $pkg skipped: no bin/$name.test in this bundle"; continue; }
    log "tests: $pkg -test.run '$pattern' (LDTORCH_TEST_DEVICE=$device)"
    rm -f "$results/test-$name.log"
    rc=0
    (cd "$bundle/work/$pkg" && export LDTORCH_TEST_DEVICE=$device OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} &&
      limited "$results/test-$name.log" "$bundle/bin/$name.test" -test.v -test.count=1 -test.timeout=9m -test.run "$pattern") || rc=$?
    case $rc in
      0) log "tests: $pkg ok ($(grep -c '^--- PASS' "$results/test-$name.log") passed, $(grep -c -- '--- SKIP' "$results/test-$name.log") skipped)"
         # A test that skips because it cannot find its data tested nothing: the bundle is wrong.
         missing=$(grep -B1 -- '--- SKIP' "$results/test-$name.log" | grep -E '\.go:[0-9]+: .*(not found|no such file)' || true)
         if [ -n "$missing" ]; then
           status=1
           head -5 <<<"$missing" >&2
           log "tests: $pkg: tests skipped for want of their data (test-$name.log): the bundle lacks it"
         fi ;;
      *) status=1
         grep -E -- '^(--- FAIL|FAIL|panic)|_test.go:[0-9]+:' "$results/test-$name.log" | head -30 >&2
         if [ "$rc" = 124 ]; then log "tests: $pkg cut at the time limit (test-$name.log)"; else log "tests: $pkg FAILED (test-$name.log)"; fi ;;
    esac
  done
fi

# ---- 5. benchmarks -------------------------------------------------------------------------
# bench_json OUT ARGS...: one `ldtorch bench` of method $m on $ds-100 with ARGS, its JSON line
# appended to OUT, the rest to bench.log.
bench_json() {
  local out=$1; shift
  limited "$results/bench.log" bash -c 'out=$1; shift; exec "$@" >>"$out"' bench "$out" \
    "$bin" bench --device "$device" "${tf32[@]}" --method "$m" --dataset "$ds" --base 100 --warmup 3 --data-dir "$data" "$@"
}
if [ "$bench" != none ]; then
  for ds in mnist cifar10; do
    for m in ld rr; do
      if time_is_up; then status=1; log "bench: $m on $ds-100 skipped: no time left of --time-limit $time_limit"; continue; fi
      log "bench: $m on $ds-100, $bench_steps meta-steps, final evaluation batched vs sequential"
      rc=0
      evaluation=(--steps "$bench_steps" --batched-eval-steps "$bench_eval_steps" --eval-models "$bench_models")
      bench_json "$results/bench.jsonl" "${evaluation[@]}" || rc=$?
      case $rc in
        0) ;;
        124) status=1; log "bench $m $ds cut at the time limit (bench.log)" ;;
        *) status=1; tail -5 "$results/bench.log" >&2; log "bench $m $ds FAILED (bench.log)" ;;
      esac
      # LeNet's evaluation steps on a GPU are CUDA graphs; the same without them beside
      # (the JSON line's cuda_graphs_recorded is 0).
      if [ "$device" != cpu ] && [ "$ds" = mnist ]; then
        if time_is_up; then status=1; log "bench: $m on $ds-100 without CUDA graphs skipped: no time left"; continue; fi
        log "bench: $m on $ds-100 again, LDTORCH_CUDA_GRAPHS=off"
        rc=0
        LDTORCH_CUDA_GRAPHS=off bench_json "$results/bench.jsonl" "${evaluation[@]}" || rc=$?
        [ $rc = 0 ] || { status=1; log "bench: $m on $ds-100 without CUDA graphs FAILED or cut (exit $rc, bench.log)"; }
      fi
      # LeNet's steps are bound by the host's work per operator: count the operators (a run
      # of its own, since counting slows every call).
      [ "$ds" = mnist ] || continue
      if time_is_up; then status=1; log "bench: op census of $m on $ds-100 skipped: no time left"; continue; fi
      log "bench: op census of $m on $ds-100, 10 meta-steps (census.jsonl)"
      rc=0
      bench_json "$results/census.jsonl" --steps 10 --op-census || rc=$?
      [ $rc = 0 ] || { status=1; log "bench: op census of $m on $ds-100 FAILED or cut (exit $rc, bench.log)"; }
    done
  done
fi

# ---- 6. protocols ----------------------------------------------------------------------------
# run_protocol NAME runs one protocol into RESULTS/NAME; returns non-zero where it failed (a
# run stopped at the time limit has not failed: it checkpointed).
run_protocol() {
  local protocol=$1 out=$results/$1 rc=0 args cmd
  if [ -f "$out/report.json" ]; then
    log "protocol $protocol: finished earlier ($out/report.json)"; return 0
  fi
  if time_is_up; then log "protocol $protocol: skipped: no time left of --time-limit $time_limit"; return 0; fi
  # A run with checkpoints continues from the newest (with its own settings); else it starts.
  # shellcheck disable=SC2207
  args=($(protocol_args "$protocol"))
  cmd=("$bin" distill "${args[@]}" --device "$device" "${tf32[@]}" --data-dir "$data" --out "$out")
  if [ -d "$out/checkpoints" ] && ls "$out/checkpoints" | grep -q .; then
    cmd=("$bin" distill --resume "$out" --device "$device" "${tf32[@]}" --data-dir "$data" --out "$out")
    log "protocol $protocol: continuing from $out/checkpoints"
  fi
  log "protocol $protocol: ${cmd[*]}"
  limited "$results/$protocol.log" "${cmd[@]}" || rc=$?
  case $rc in
    0) log "protocol $protocol: done"; tail -15 "$results/$protocol.log" ;;
    124|130) log "protocol $protocol: stopped at the time limit by SIGTERM (ldtorch checkpoints on it); run the same command again to continue" ;;
    *) tail -20 "$results/$protocol.log" >&2; log "protocol $protocol FAILED (exit $rc, $protocol.log)"; return 1 ;;
  esac
}
if [ "$side_by_side" = 1 ] && [ "${#protocols[@]}" -gt 1 ]; then
  # One process each, all at once, so that one bounded call advances them all. Not faster:
  # their kernels take turns on the GPU (two CIFAR-10 runs' meta-steps took 1.6-2x their time
  # alone, docs/BENCHMARKS.md), and each one's wall time is not that of a run alone.
  log "protocols side by side: ${protocols[*]}"
  pids=()
  for p in "${protocols[@]}"; do run_protocol "$p" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
else
  for p in "${protocols[@]}"; do run_protocol "$p" || status=1; done
fi
# ---- 7. a sweep -----------------------------------------------------------------------------
if [ -n "$sweep" ] && time_is_up; then
  log "sweep: skipped: no time left of --time-limit $time_limit"
elif [ -n "$sweep" ]; then
  grid=$sweep
  [ -f "$grid" ] || grid=$repo/$sweep
  out=$results/sweep-$(basename "$grid" .json)
  select=()
  [ -n "$rows" ] && select+=(--rows "$rows")
  [ -n "$columns" ] && select+=(--columns "$columns")
  [ "$sweep_jobs" != 1 ] && select+=(--jobs "$sweep_jobs")
  [ "$sweep_together" != 1 ] && select+=(--together "$sweep_together")
  cmd=("$bin" sweep --grid "$grid" --out "$out" "${select[@]}" --device "$device" --data-dir "$data" -q)
  log "sweep: ${cmd[*]}"
  rc=0
  limited "$results/sweep.log" "${cmd[@]}" || rc=$?
  case $rc in
    0) log "sweep: done"; tail -20 "$out/summary.md" 2>/dev/null || true ;;
    124|130) log "sweep: stopped at the time limit (the running cell checkpointed); run the same command again to continue" ;;
    *) status=1; tail -20 "$results/sweep.log" >&2; log "sweep FAILED (exit $rc, sweep.log)" ;;
  esac
  if [ "$rc" = 0 ] && [ -n "$ddranking" ]; then
    for cell in "$out"/cells/*/; do
      cell=${cell%/}
      [ -f "$cell/report.json" ] || continue
      [ -f "$cell/evaluations/ddranking.json" ] && continue
      cmd=("$bin" evaluate --distilled "$cell" --protocol ddranking --arch "$ddranking" --device "$device" "${tf32[@]}"
        --data-dir "$data" --cache-dir "$results/ddranking-cache")
      [ -n "$ddranking_epochs" ] && cmd+=(--epochs "$ddranking_epochs")
      if time_is_up; then log "ddranking: $(basename "$cell") skipped: no time left of --time-limit $time_limit"; break; fi
      log "ddranking: ${cmd[*]}"
      rc=0
      limited "$results/ddranking.log" "${cmd[@]}" || rc=$?
      case $rc in
        0) log "ddranking: $(basename "$cell") scored ($cell/evaluations/ddranking.json)" ;;
        124|130) log "ddranking: $(basename "$cell") cut at the time limit (run again to go on from its last save)"; break ;;
        *) status=1; tail -5 "$results/ddranking.log" >&2; log "ddranking: $(basename "$cell") FAILED (exit $rc, ddranking.log)" ;;
      esac
    done
  fi
fi
log "$(date -u +%FT%TZ) finished, status $status"
exit $status
