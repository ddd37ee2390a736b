package labeldistill

// bench.go: Bench, the measurement behind `ldtorch bench`: meta-steps and evaluation-model
// steps on preloaded, device-resident data, timed one by one.

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

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
}

// Bench runs warmup untimed and then steps timed meta-steps of cfg's method, and times
// evaluation-model training steps (one model, 20 steps after 3 warm-up steps).
func Bench(ctx context.Context, cfg Config, steps, warmup int, opts ...RunOption) (res *BenchResult, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("labeldistill: internal error: %v", r)
		}
	}()
	if steps < 1 || warmup < 0 {
		return nil, fmt.Errorf("bench: steps must be ≥ 1 and warmup ≥ 0, got %d and %d", steps, warmup)
	}
	var o runOptions
	for _, f := range opts {
		f(&o)
	}
	if cfg, err = cfg.Resolved(); err != nil {
		return nil, err
	}
	dev, err := torch.ParseDevice(cfg.Device)
	if err != nil {
		return nil, err
	}
	if err := applyThreads(cfg.Threads); err != nil {
		return nil, err
	}
	ds := o.dataset
	if ds == nil {
		if ds, err = LoadDataset(cfg); err != nil {
			return nil, err
		}
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	r := &run{cfg: cfg, ds: ds, dev: dev, seed: uint64(cfg.Seed)}
	defer r.close()
	if err := r.setup(); err != nil {
		return nil, err
	}
	nTarget := ds.TargetSet.N()
	var times, cpu []float64
	order := r.rng.Perm(nTarget)
	for i := 0; i < warmup+steps; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		lo := (i * cfg.OuterBatch) % max(1, nTarget-cfg.OuterBatch+1)
		t0, c0 := time.Now(), threadCPU()
		if err := r.metaStep(order[lo:min(lo+cfg.OuterBatch, nTarget)], ds.Base.N()); err != nil {
			return nil, err
		}
		if err := torch.Synchronize(dev); err != nil {
			return nil, err
		}
		if i >= warmup {
			times = append(times, time.Since(t0).Seconds())
			cpu = append(cpu, threadCPU()-c0)
		}
	}
	evalTimes, evalCPU, err := r.benchEvalSteps(ctx, 3, 20)
	if err != nil {
		return nil, err
	}
	return &BenchResult{
		Impl: "ldtorch", Method: cfg.Method, Dataset: cfg.Dataset, Base: cfg.BaseExamples, InnerBatch: cfg.InnerBatch,
		OuterBatch: cfg.OuterBatch, Steps: steps, MetaStepMedian: quantile(times, 0.5), MetaStepP90: quantile(times, 0.9),
		EvalStepMedian: quantile(evalTimes, 0.5), MetaStepCPUMedian: quantile(cpu, 0.5),
		EvalStepCPUMedian: quantile(evalCPU, 0.5), Threads: torch.NumThreads(), BLAS: blasInUse(), Device: dev.String(),
		LibtorchVersion: torch.Version(),
	}, nil
}

// benchEvalSteps times single training steps of one fresh evaluation model.
func (r *run) benchEvalSteps(ctx context.Context, warmup, steps int) (wall, cpu []float64, err error) {
	table, err := r.labels.Y.Detach()
	if err != nil {
		return nil, nil, err
	}
	defer table.Free()
	l, err := newLearner(r.net, r.cfg.Method == MethodRR, r.cfg, adamSpec(r.cfg.EvalLR), r.gen, r.dev)
	if err != nil {
		return nil, nil, err
	}
	defer l.close()
	n := r.ds.Base.N()
	for i := 0; i < warmup+steps; i++ {
		idx, err := sampleIndices(r.rng, n, min(r.cfg.EvalBatch, n), r.dev)
		if err != nil {
			return nil, nil, err
		}
		t0, c0 := time.Now(), threadCPU()
		err = trainStep(l, r.base.x, table, idx)
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

// threadCPU is the CPU time (s) of the calling OS thread (Bench runs locked to one).
func threadCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
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
