package labeldistill

// bench.go: Bench, the measurement behind `ldtorch bench`: meta-steps and evaluation-model
// steps on preloaded, device-resident data, timed one by one.

import (
	"context"
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// BenchResult is one benchmark run (`ldtorch bench` prints it as one JSON line).
type BenchResult struct {
	Impl           string  `json:"impl"`
	Method         string  `json:"method"`
	Dataset        string  `json:"dataset"`
	Base           int     `json:"base"`
	InnerBatch     int     `json:"inner_batch"`
	OuterBatch     int     `json:"outer_batch"`
	Steps          int     `json:"steps"`
	MetaStepMedian float64 `json:"meta_step_median_s"`
	MetaStepP90    float64 `json:"meta_step_p90_s"`
	EvalStepMedian float64 `json:"eval_step_median_s"`
	// CPU time of the driving OS thread: with one intra-op thread it is the compute itself,
	// and unlike wall time it does not grow when other processes share the cores.
	MetaStepCPUMedian float64 `json:"meta_step_cpu_median_s"`
	EvalStepCPUMedian float64 `json:"eval_step_cpu_median_s"`
	Threads           int     `json:"threads"`
	BLAS              string  `json:"blas"`
	Device            string  `json:"device"`
	LibtorchVersion   string  `json:"libtorch_version"`
	// Data-parallel runs (WithGroup): the number of ranks and the median wall time of the
	// meta-step's one all-reduce (included in MetaStepMedian).
	Ranks            int     `json:"ranks"`
	AllReduceMedian  float64 `json:"all_reduce_median_s"`
	AllowTF32        bool    `json:"allow_tf32"`               // config.Config.AllowTF32 as applied
	HostReadsPerStep float64 `json:"host_reads_per_meta_step"` // device→host reads (torch.HostReads) per timed meta-step
}

// Bench runs warmup untimed and then steps timed meta-steps of cfg's method, and times
// evaluation-model training steps (one model, 20 steps after 3 warm-up steps).
func Bench(ctx context.Context, cfg config.Config, steps, warmup int, opts ...RunOption) (res *BenchResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("labeldistill: internal error: %v", r)
		}
	}()
	if steps < 1 || warmup < 0 {
		return nil, fmt.Errorf("bench: steps must be ≥ 1 and warmup ≥ 0, got %d and %d", steps, warmup)
	}
	runtime.LockOSThread() // libtorch's grad mode and thread settings are per OS thread
	defer runtime.UnlockOSThread()
	r, err := newBenchRun(cfg, opts)
	if err != nil {
		return nil, err
	}
	defer r.close()
	defer r.in.close()
	cfg, ds, dev := r.in.cfg, r.in.ds, r.in.dev
	nTarget := ds.TargetSet.N()
	var times, cpu, reduce []float64
	order := r.rand.rng.Perm(nTarget)
	var readsBefore uint64
	for i := 0; i < warmup+steps; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if i == warmup {
			readsBefore = torch.HostReads()
		}
		lo := (i * cfg.OuterBatch) % max(1, nTarget-cfg.OuterBatch+1)
		t0, c0 := time.Now(), threadCPU()
		if err := r.metaStep(order[lo:min(lo+cfg.OuterBatch, nTarget)]); err != nil {
			return nil, err
		}
		if err := torch.Synchronize(dev); err != nil {
			return nil, err
		}
		if i >= warmup {
			times = append(times, time.Since(t0).Seconds())
			cpu = append(cpu, threadCPU()-c0)
			reduce = append(reduce, r.par.lastReduce.Seconds())
		}
	}
	if err := r.read(); err != nil {
		return nil, err
	}
	reads := float64(torch.HostReads()-readsBefore) / float64(max(1, steps))
	evalTimes, evalCPU, err := r.benchEvalSteps(ctx, 3, 20)
	if err != nil {
		return nil, err
	}
	return &BenchResult{
		Impl: "ldtorch", Method: cfg.Method, Dataset: cfg.Dataset, Base: cfg.BaseExamples, InnerBatch: cfg.InnerBatch,
		OuterBatch: cfg.OuterBatch, Steps: steps, MetaStepMedian: quantile(times, 0.5), MetaStepP90: quantile(times, 0.9),
		EvalStepMedian: quantile(evalTimes, 0.5), MetaStepCPUMedian: quantile(cpu, 0.5),
		EvalStepCPUMedian: quantile(evalCPU, 0.5), Threads: torch.NumThreads(), BLAS: blasInUse(), Device: dev.String(),
		LibtorchVersion: torch.Version(), Ranks: r.par.size(), AllReduceMedian: quantile(reduce, 0.5),
		AllowTF32: torch.AllowTF32(), HostReadsPerStep: reads,
	}, nil
}

// newBenchRun prepares a run of cfg as Distill does and sets its meta-loop up on its
// device, without starting it.
func newBenchRun(cfg config.Config, opts []RunOption) (*loop, error) {
	var o runOptions
	for _, f := range opts {
		f(&o)
	}
	in, err := prepareRun(cfg, o)
	if err != nil {
		return nil, err
	}
	par := &parallel{g: o.group}
	l, err := newLoop(in, par, nil)
	if err != nil {
		in.close()
		return nil, err
	}
	if err := par.checkShards(in.cfg, in.ds.TargetSet.N()); err != nil {
		l.close()
		in.close()
		return nil, err
	}
	if par.size() > 1 {
		if err := par.broadcastState(l); err != nil {
			l.close()
			in.close()
			return nil, err
		}
	}
	return l, nil
}

// EvalBenchResult compares the two ways of running the final evaluation (docs/ALGORITHM.md §7):
// cfg.EvalModels fresh models trained for Steps steps on the base examples (with the
// uniform initial labels) and scored on the test split, one after another and batched.
type EvalBenchResult struct {
	Models int    `json:"eval_models"`
	Steps  int    `json:"eval_steps"`
	Mode   string `json:"eval_batched_mode"` // nets.BodyMode of the batched path on this device
	// Wall and driving-thread CPU seconds of the whole evaluation, scoring included, with the
	// models trained one after another ("sequential") and together ("batched").
	SequentialS   float64 `json:"eval_sequential_s"`
	BatchedS      float64 `json:"eval_batched_s"`
	SequentialCPU float64 `json:"eval_sequential_cpu_s"`
	BatchedCPU    float64 `json:"eval_batched_cpu_s"`
	Speedup       float64 `json:"eval_batched_speedup"` // sequential wall time / batched wall time
	// Largest |accuracy difference| between a model's two runs, in percentage points: the
	// paths train the same models (0 on the CPU; float rounding in grouped mode).
	MaxAccDiff float64 `json:"eval_batched_max_acc_diff"`
}

// BenchEvaluation times the final evaluation of cfg (cfg.EvalModels models, steps steps
// each) with the models trained one after another and together (in groups of
// batchedMaxModels), after one untimed warm-up with two models.
func BenchEvaluation(ctx context.Context, cfg config.Config, steps int, opts ...RunOption) (res *EvalBenchResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("labeldistill: internal error: %v", r)
		}
	}()
	if steps < 1 {
		return nil, fmt.Errorf("bench: evaluation steps must be ≥ 1, got %d", steps)
	}
	runtime.LockOSThread() // libtorch's grad mode and thread settings are per OS thread
	defer runtime.UnlockOSThread()
	l, err := newBenchRun(cfg, opts)
	if err != nil {
		return nil, err
	}
	defer l.close()
	r := l.in
	defer r.close()
	_, table, err := l.tables()
	if err != nil {
		return nil, err
	}
	tr := r.evalTrainer(r.evalNet, r.base.x, table)
	if _, err := tr.evaluateModels(ctx, min(steps, 5), 2, r.seed, "bench-warmup", r.test.x, r.test.y); err != nil {
		return nil, err
	}
	timed := func(eval func() ([]float64, error)) (accs []float64, wall, cpu float64, err error) {
		t0, c0 := time.Now(), threadCPU()
		if accs, err = eval(); err == nil {
			err = torch.Synchronize(r.dev)
		}
		return accs, time.Since(t0).Seconds(), threadCPU() - c0, err
	}
	models := r.cfg.EvalModels
	seq, seqWall, seqCPU, err := timed(func() ([]float64, error) {
		tr.group = 1
		defer func() { tr.group = 0 }()
		return tr.evaluateModels(ctx, steps, models, r.seed, "bench", r.test.x, r.test.y)
	})
	if err != nil {
		return nil, err
	}
	bat, batWall, batCPU, err := timed(func() ([]float64, error) {
		return tr.evaluateModels(ctx, steps, models, r.seed, "bench", r.test.x, r.test.y)
	})
	if err != nil {
		return nil, err
	}
	diff := 0.0
	for i := range seq {
		diff = max(diff, math.Abs(seq[i]-bat[i]))
	}
	return &EvalBenchResult{
		Models: models, Steps: steps, Mode: batchedMode(r.dev).String(), SequentialS: seqWall, BatchedS: batWall,
		SequentialCPU: seqCPU, BatchedCPU: batCPU, Speedup: seqWall / batWall, MaxAccDiff: diff,
	}, nil
}

// benchEvalSteps times single training steps of one fresh evaluation model.
func (lp *loop) benchEvalSteps(ctx context.Context, warmup, steps int) (wall, cpu []float64, err error) {
	r := lp.in
	_, table, err := lp.tables()
	if err != nil {
		return nil, nil, err
	}
	defer table.Free()
	l, err := newBatchedLearner(r.net, r.cfg.Method == config.MethodRR, r.cfg, adamSpec(r.cfg.EvalLR),
		[]uint64{subSeed(r.seed, "bench-eval", 0)}, r.dev, r.base.x.DType(), batchedMode(r.dev))
	if err != nil {
		return nil, nil, err
	}
	defer l.close()
	n := r.ds.Base.N()
	batch := min(r.cfg.EvalBatch, n)
	for i := 0; i < warmup+steps; i++ {
		idx, err := sampleIndices(lp.rand.rng, n, batch, r.dev)
		if err != nil {
			return nil, nil, err
		}
		t0, c0 := time.Now(), threadCPU()
		err = l.step(r.base.x, table, idx, int64(batch))
		if err == nil {
			err = torch.Synchronize(r.dev)
		}
		idx.Free()
		if err != nil {
			return nil, nil, err
		}
		if i >= warmup {
			wall = append(wall, time.Since(t0).Seconds())
			cpu = append(cpu, threadCPU()-c0)
		}
	}
	return wall, cpu, nil
}

// threadCPU is the CPU time (s) of the calling OS thread (Bench runs locked to one), from
// CLOCK_THREAD_CPUTIME_ID: exact to the call, where getrusage(RUSAGE_THREAD) lags by up to
// a scheduler tick (4 ms here, more than an evaluation step takes).
func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}

// quantile returns the q-quantile (nearest rank) of xs.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// blasInUse names the BLAS library mapped into this process (Linux), or "unknown".
func blasInUse() string {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(maps), "\n") {
		for _, key := range []string{"openblas", "libmkl", "libblis", "libblas.so"} {
			if i := strings.Index(line, "/"); i >= 0 && strings.Contains(line, key) {
				return line[i:]
			}
		}
	}
	return "unknown"
}
