// Package bench is the measurement behind `ldtorch bench`: meta-steps of a distillation
// timed one by one (through labeldistill.Distill, which reports every meta-step), the
// training steps of a fresh model, and the final evaluation with the models trained one
// after another against together.
package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ldtorch/ldtorch/labeldistill"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// Result is one benchmark run (`ldtorch bench` prints it as one JSON line).
type Result struct {
	Impl       string `json:"impl"`
	Method     string `json:"method"`
	Learn      string `json:"learn"`       // config.Config.Learn: labels, images or both
	MethodName string `json:"method_name"` // "LD", "LD RR", "Our DD", "Our DD RR", "DD", …
	// DDBackward is method dd's backward pass through the unrolled steps (recompute or graph).
	DDBackward     string  `json:"dd_backward,omitempty"`
	Dataset        string  `json:"dataset"`
	Base           int     `json:"base"`
	InnerBatch     int     `json:"inner_batch"`
	OuterBatch     int     `json:"outer_batch"`
	Steps          int     `json:"steps"`
	MetaStepMedian float64 `json:"meta_step_median_s"`
	MetaStepP90    float64 `json:"meta_step_p90_s"`
	MetaStepMean   float64 `json:"meta_step_mean_s"`
	EvalStepMedian float64 `json:"eval_step_median_s"`
	// CPU time of the driving OS thread: with one intra-op thread it is the compute itself,
	// and unlike wall time it does not grow when other processes share the cores.
	MetaStepCPUMedian float64 `json:"meta_step_cpu_median_s"`
	EvalStepCPUMedian float64 `json:"eval_step_cpu_median_s"`
	Threads           int     `json:"threads"`
	BLAS              string  `json:"blas"`
	Device            string  `json:"device"`
	DeviceName        string  `json:"device_name,omitempty"` // the GPU's name (torch.CUDADeviceProperties); "" on the CPU
	LibtorchVersion   string  `json:"libtorch_version"`
	// Data-parallel runs (WithGroup): the number of ranks and the median and mean wall time
	// of the meta-step's one all-reduce (included in the meta-step's), waiting for the other
	// ranks included. Against the lone half-batch process, what two ranks lose is the mean
	// (the ranks' arrival skew has a long tail, which a median hides); hence the means.
	Ranks            int     `json:"ranks"`
	AllReduceMedian  float64 `json:"all_reduce_median_s"`
	AllReduceMean    float64 `json:"all_reduce_mean_s"`
	AllowTF32        bool    `json:"allow_tf32"`               // config.Config.AllowTF32 as applied
	HostReadsPerStep float64 `json:"host_reads_per_meta_step"` // device→host reads (torch.HostReads) per timed meta-step
	// Together: the runs each timed meta-step steps (Options.Together; 1 alone): the meta-step
	// times are theirs together, a run's share is 1/Together of them.
	Together int     `json:"together"`
	OpCensus *Census `json:"op_census,omitempty"` // with Options.OpCensus
}

// Options say what Run measures.
type Options struct {
	Steps  int // timed meta-steps (≥ 1)
	Warmup int // untimed meta-steps before them
	// OpCensus also counts libtorch's operator calls in the timed meta-steps and evaluation
	// steps (torch.StartOpCensus; needs Warmup ≥ 1): the host's work per step, which bounds
	// a small network's step on a GPU. Counting slows every call a little: such a run's
	// timings are not comparable with those of a run without it.
	OpCensus bool
	// BaseSplit: how the ranks of a data-parallel run (g) share each base batch
	// (labeldistill.WithBaseSplit).
	BaseSplit labeldistill.BaseSplit
	// Together, above 1, times meta-steps of this many runs of cfg (seeds cfg.Seed, +1, …)
	// distilled together (labeldistill.DistillTogether): each timed step is all of theirs.
	Together int
}

// Census is the operator census of a run's timed steps, per step.
type Census struct {
	MetaStep StepOps `json:"meta_step"`
	EvalStep StepOps `json:"eval_step"`
}

// StepOps are the operator calls of one step on average: all of them, those the program or
// the backward engine asked for (top), and those that did their work themselves (leaf; on
// a GPU at most one kernel launch each), then the same per operator, most called first.
type StepOps struct {
	Calls float64   `json:"calls"`
	Top   float64   `json:"top"`
	Leaf  float64   `json:"leaf"`
	Ops   []OpCalls `json:"ops"`
}

// OpCalls is one operator's calls per step.
type OpCalls struct {
	Name  string  `json:"name"`
	Calls float64 `json:"calls"`
	Top   float64 `json:"top"`
	Leaf  float64 `json:"leaf"`
}

// opCensus is a torch operator census over a window of steps.
type opCensus struct{ running bool }

func (c *opCensus) start() error {
	err := torch.StartOpCensus()
	c.running = err == nil
	return err
}

func (c *opCensus) stop() ([]torch.OpCount, error) {
	c.running = false
	return torch.StopOpCensus()
}

// abandon ends a census whose window was not reached (a run that ended early).
func (c *opCensus) abandon() {
	if c.running {
		c.stop()
	}
}

// perStep divides a census of steps steps.
func perStep(counts []torch.OpCount, steps int) StepOps {
	n := float64(max(1, steps))
	calls, top, leaf := torch.OpTotals(counts)
	out := StepOps{Calls: float64(calls) / n, Top: float64(top) / n, Leaf: float64(leaf) / n}
	for _, c := range counts {
		out.Ops = append(out.Ops, OpCalls{Name: c.Name, Calls: float64(c.Calls) / n, Top: float64(c.Top) / n, Leaf: float64(c.Leaf) / n})
	}
	return out
}

// Run runs o.Warmup untimed and then o.Steps timed meta-steps of cfg's method on ds (nil:
// cfg's data, loaded), one rank of g when g is set, and times fresh-model training steps
// (one model, 20 steps after 3 warm-up steps). The meta-steps are a distillation's first
// ones: Distill is started with validation and baselines out of reach and stopped (through
// its context) after the last timed step.
func Run(ctx context.Context, cfg config.Config, o Options, ds *labeldistill.Data, g *dist.Group) (*Result, error) {
	steps, warmup := o.Steps, o.Warmup
	if steps < 1 || warmup < 0 {
		return nil, fmt.Errorf("bench: steps must be ≥ 1 and warmup ≥ 0, got %d and %d", steps, warmup)
	}
	if o.OpCensus && warmup < 1 {
		// The census starts after a meta-step; the first one also sets the run up.
		return nil, fmt.Errorf("bench: an operator census needs at least one warm-up meta-step")
	}
	cfg, ds, dev, err := prepare(cfg, ds)
	if err != nil {
		return nil, err
	}
	// Neither a validation nor a checkpoint falls among the timed steps.
	timedCfg := cfg
	timedCfg.Epochs, timedCfg.ValidateEvery, timedCfg.CheckpointEvery = 1_000_000, 1_000_000, -1
	timedCfg.Baselines = []string{}
	var times, cpu, reduce []float64
	var readsBefore uint64
	var last, lastCPU float64
	done := 0
	var stepErr error
	var census []torch.OpCount
	var counting opCensus
	defer counting.abandon() // the run ended before its last timed step
	run, stop := context.WithCancel(ctx)
	defer stop()
	progress := func(p labeldistill.Progress) {
		if p.Phase != "distill" || stepErr != nil {
			return
		}
		if stepErr = torch.Synchronize(dev); stepErr != nil {
			stop()
			return
		}
		now, nowCPU := float64(time.Now().UnixNano())/1e9, threadCPU()
		if done >= warmup {
			times = append(times, now-last)
			cpu = append(cpu, nowCPU-lastCPU)
			reduce = append(reduce, p.AllReduceSeconds)
		}
		done++
		if done == warmup {
			readsBefore = torch.HostReads()
			if o.OpCensus {
				if stepErr = counting.start(); stepErr != nil {
					stop()
					return
				}
			}
		}
		if done == warmup+steps {
			if counting.running {
				census, stepErr = counting.stop()
			}
			stop()
			return
		}
		last, lastCPU = float64(time.Now().UnixNano())/1e9, threadCPU()
	}
	last, lastCPU = float64(time.Now().UnixNano())/1e9, threadCPU()
	opts := []labeldistill.RunOption{labeldistill.WithData(ds), labeldistill.WithProgress(progress)}
	if g != nil {
		opts = append(opts, labeldistill.WithGroup(g), labeldistill.WithBaseSplit(o.BaseSplit))
	}
	// The first progress report comes after the first meta-step: set the clock before it.
	together := max(1, o.Together)
	if together == 1 {
		_, err = labeldistill.Distill(run, timedCfg, opts...)
	} else if g != nil {
		return nil, errors.New("bench: runs distilled together are one process each: not with ranks")
	} else {
		err = distillTogether(run, timedCfg, together, opts, ds)
	}
	if stepErr != nil {
		return nil, stepErr
	}
	if g != nil && g.Rank() != 0 && done >= warmup+steps && err != nil {
		// A group stops where rank 0 stops (labeldistill.WithGroup): rank 0 ends its run
		// after its last timed step and leaves the group, and the next collective of the
		// others fails. Their timed steps are all done by then; that failure is the end.
		err = nil
	}
	if done < warmup+steps {
		if err == nil {
			err = fmt.Errorf("bench: the run ended after %d of %d meta-steps", done, warmup+steps)
		}
		return nil, err
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return nil, err
	}
	reads := float64(torch.HostReads()-readsBefore) / float64(max(1, steps))
	evalTimes, evalCPU, evalCensus, err := evalSteps(ctx, cfg, ds, dev, 3, 20, o.OpCensus)
	if err != nil {
		return nil, err
	}
	var opCensus *Census
	if o.OpCensus {
		opCensus = &Census{MetaStep: perStep(census, steps), EvalStep: perStep(evalCensus, len(evalTimes))}
	}
	// times and reduce hold every timed step (at least one: steps ≥ 1, checked above).
	stepMean, _ := train.MeanStd(times)
	reduceMean, _ := train.MeanStd(reduce)
	ranks := 1
	if g != nil {
		ranks = g.Size()
	}
	return &Result{
		Impl: "ldtorch", Method: cfg.Method, Learn: cfg.Learn, MethodName: cfg.MethodName(), DDBackward: cfg.DDBackward, Dataset: cfg.Dataset, Base: cfg.BaseExamples, InnerBatch: cfg.InnerBatch,
		OuterBatch: cfg.OuterBatch, Steps: steps, MetaStepMedian: quantile(times, 0.5), MetaStepP90: quantile(times, 0.9),
		EvalStepMedian: quantile(evalTimes, 0.5), MetaStepCPUMedian: quantile(cpu, 0.5),
		EvalStepCPUMedian: quantile(evalCPU, 0.5), Threads: torch.NumThreads(), BLAS: blasInUse(), Device: dev.String(), DeviceName: deviceName(dev),
		LibtorchVersion: torch.Version(), Ranks: ranks, AllReduceMedian: quantile(reduce, 0.5),
		AllReduceMean: reduceMean, MetaStepMean: stepMean,
		AllowTF32: torch.AllowTF32(), HostReadsPerStep: reads, OpCensus: opCensus, Together: together,
	}, nil
}

// distillTogether distils k runs of cfg (seeds cfg.Seed + i) together on ds, the first
// under opts (its progress times the joint steps).
func distillTogether(ctx context.Context, cfg config.Config, k int, opts []labeldistill.RunOption, ds *labeldistill.Data) error {
	rs := make([]config.Resolved, k)
	all := make([][]labeldistill.RunOption, k)
	for i := range rs {
		c := cfg
		c.Seed += int64(i)
		var err error
		if rs[i], err = config.Resolve(c); err != nil {
			return err
		}
		all[i] = []labeldistill.RunOption{labeldistill.WithData(ds)}
	}
	all[0] = opts
	_, err := labeldistill.DistillTogether(ctx, rs, all)
	return err
}

// deviceName is dev's GPU name, "" on the CPU or when the query fails (the timings stand
// without it).
func deviceName(dev torch.Device) string {
	if !dev.IsCUDA() {
		return ""
	}
	g, err := torch.CUDADeviceProperties(dev.Index)
	if err != nil {
		return ""
	}
	return g.Name
}

// evalSteps times single training steps of one fresh model of cfg's evaluation recipe on
// ds's base images with uniform labels: Adam on random minibatches of eval_batch, or for
// method dd its own recipe's plain gradient steps on blocks of N/dd_steps images from
// Wang et al.'s initialisation. With census, the timed steps' operator calls are counted.
func evalSteps(ctx context.Context, cfg config.Config, ds *labeldistill.Data, dev torch.Device, warmup, steps int, census bool) (wall, cpu []float64, ops []torch.OpCount, err error) {
	type timings struct {
		wall, cpu []float64
		ops       []torch.OpCount
	}
	t, err := torch.Guard("bench", func() (timings, error) {
		var out timings
		s := torch.NewScope()
		defer s.Close()
		in, err := inputs(cfg, ds, dev)
		if err != nil {
			return out, err
		}
		defer in.net.Close()
		net, spec, batch := in.net, train.AdamSpec(cfg.EvalLR), min(cfg.EvalBatch, ds.Base.N)
		if cfg.Method == config.MethodDD {
			net, spec, batch = net.XavierInit(), train.OptSpec{Kind: "sgd", LR: cfg.DDStepLRInit}, ds.Base.N/max(1, cfg.DDSteps)
		}
		m, err := train.NewModels(net, cfg.Method == config.MethodRR, cfg, spec,
			[]uint64{train.Seed(uint64(cfg.Seed), "bench-eval", 0)}, dev, in.images.DType(), train.Mode(dev))
		if err != nil {
			return out, err
		}
		defer m.Close()
		n := ds.Base.N
		rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0xbe7c4))
		var counting opCensus
		defer counting.abandon()
		for i := 0; i < warmup+steps; i++ {
			if err := ctx.Err(); err != nil {
				return out, err
			}
			if census && i == warmup {
				if err := counting.start(); err != nil {
					return out, err
				}
			}
			perm := rng.Perm(n)[:batch]
			idxs := make([]int64, batch)
			for j, p := range perm {
				idxs[j] = int64(p)
			}
			idx, err := torch.FromInt64On(dev, idxs, int64(batch))
			if err != nil {
				return out, err
			}
			t0, c0 := time.Now(), threadCPU()
			err = m.Step(in.images, in.labels, idx, int64(batch))
			if err == nil {
				err = torch.Synchronize(dev)
			}
			idx.Free()
			if err != nil {
				return out, err
			}
			if i >= warmup {
				out.wall = append(out.wall, time.Since(t0).Seconds())
				out.cpu = append(out.cpu, threadCPU()-c0)
			}
		}
		if counting.running {
			if out.ops, err = counting.stop(); err != nil {
				return out, err
			}
		}
		return out, nil
	})
	return t.wall, t.cpu, t.ops, err
}

// evalInputs is what fresh models of a benchmark train and are tested on.
type evalInputs struct {
	net                  *nets.Net
	images, labels       *torch.Tensor // the base images, uniform labels
	testImages, testLabs *torch.Tensor
}

// inputs puts ds's base images, uniform labels and test split on dev, in the caller's scope
// (the caller closes the network).
func inputs(cfg config.Config, ds *labeldistill.Data, dev torch.Device) (*evalInputs, error) {
	s := ds.Shape
	net, err := nets.New(cfg.EvalArch, s[0], s[1], s[2], int64(ds.Classes))
	if err != nil {
		return nil, err
	}
	in := &evalInputs{net: net}
	if in.images, _, err = engine.SplitTensors(&ds.Base, s, dev); err != nil {
		net.Close()
		return nil, err
	}
	if in.testImages, in.testLabs, err = engine.SplitTensors(&ds.Test, s, dev); err != nil {
		net.Close()
		return nil, err
	}
	uniform := make([]float32, ds.Base.N*ds.Classes)
	for i := range uniform {
		uniform[i] = 1 / float32(ds.Classes)
	}
	if in.labels, err = torch.FromFloat32(uniform, int64(ds.Base.N), int64(ds.Classes)); err != nil {
		return nil, err
	}
	if dev != torch.CPU {
		if in.labels, err = in.labels.To(dev); err != nil {
			return nil, err
		}
	}
	return in, nil
}

// EvaluationResult compares the two ways of running the final evaluation (docs/ALGORITHM.md §7):
// cfg.EvalModels fresh models trained for Steps steps on the base examples (with the
// uniform initial labels) and scored on the test split, one after another and batched.
type EvaluationResult struct {
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
	// CUDA graphs over both evaluations (train.CUDAGraphStatus): trainings recorded as a
	// graph, steps replayed, and the error of a capture that failed (LDTORCH_CUDA_GRAPHS=off
	// times them without).
	GraphsRecorded int64  `json:"cuda_graphs_recorded"`
	GraphReplays   int64  `json:"cuda_graph_replays"`
	GraphError     string `json:"cuda_graph_error,omitempty"`
}

// Evaluation times the final evaluation of cfg (cfg.EvalModels models, steps steps each,
// uniform labels on ds's base images, scored on its test split) with the models trained one
// after another and together (in groups of train.MaxTogether), after one untimed warm-up
// with two models.
func Evaluation(ctx context.Context, cfg config.Config, steps int, ds *labeldistill.Data) (*EvaluationResult, error) {
	if steps < 1 {
		return nil, fmt.Errorf("bench: evaluation steps must be ≥ 1, got %d", steps)
	}
	cfg, ds, dev, err := prepare(cfg, ds)
	if err != nil {
		return nil, err
	}
	return torch.Guard("bench", func() (*EvaluationResult, error) {
		s := torch.NewScope()
		defer s.Close()
		in, err := inputs(cfg, ds, dev)
		if err != nil {
			return nil, err
		}
		defer in.net.Close()
		seed := uint64(cfg.Seed)
		tr := &train.Trainer{Net: in.net, RR: cfg.Method == config.MethodRR, Cfg: cfg, Images: in.images, Labels: in.labels,
			Batch: cfg.EvalBatch, Opt: train.AdamSpec(cfg.EvalLR), Device: dev}
		if _, err := tr.Test(ctx, min(steps, 5), 2, seed, "bench-warmup", in.testImages, in.testLabs); err != nil {
			return nil, err
		}
		timed := func(eval func() ([]float64, error)) (accs []float64, wall, cpu float64, err error) {
			t0, c0 := time.Now(), threadCPU()
			if accs, err = eval(); err == nil {
				err = torch.Synchronize(dev)
			}
			return accs, time.Since(t0).Seconds(), threadCPU() - c0, err
		}
		models := cfg.EvalModels
		c0, r0, _ := train.CUDAGraphStatus()
		seq, seqWall, seqCPU, err := timed(func() ([]float64, error) {
			tr.Together = 1
			defer func() { tr.Together = 0 }()
			return tr.Test(ctx, steps, models, seed, "bench", in.testImages, in.testLabs)
		})
		if err != nil {
			return nil, err
		}
		bat, batWall, batCPU, err := timed(func() ([]float64, error) {
			return tr.Test(ctx, steps, models, seed, "bench", in.testImages, in.testLabs)
		})
		if err != nil {
			return nil, err
		}
		diff := 0.0
		for i := range seq {
			diff = max(diff, math.Abs(seq[i]-bat[i]))
		}
		c1, r1, failed := train.CUDAGraphStatus()
		res := &EvaluationResult{
			Models: models, Steps: steps, Mode: train.Mode(dev).String(), SequentialS: seqWall, BatchedS: batWall,
			SequentialCPU: seqCPU, BatchedCPU: batCPU, Speedup: seqWall / batWall, MaxAccDiff: diff,
			GraphsRecorded: c1 - c0, GraphReplays: r1 - r0,
		}
		if failed != nil {
			res.GraphError = failed.Error()
		}
		return res, nil
	})
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

// prepare resolves cfg, loads its data when ds is nil, and parses its device.
func prepare(cfg config.Config, ds *labeldistill.Data) (config.Config, *labeldistill.Data, torch.Device, error) {
	cfg, err := cfg.Resolved()
	if err != nil {
		return cfg, nil, torch.Device{}, err
	}
	if ds == nil {
		if ds, err = labeldistill.LoadData(cfg); err != nil {
			return cfg, nil, torch.Device{}, err
		}
	}
	dev, err := torch.ParseDevice(cfg.Device)
	return cfg, ds, dev, err
}
