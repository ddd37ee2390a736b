package labeldistill

// distill.go: Distill, the outer loop of label distillation (the paper's Algorithm 1 with
// ALGORITHM.md's details): meta-steps over epochs of the target set, model resets and T,
// validation every k epochs with the best labels kept, the final evaluation of M fresh
// models, and the baselines.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// Progress is what Distill reports as it goes (through WithProgress); the library itself
// never prints.
type Progress struct {
	Phase       string // "distill", "validate", "test", "baseline"
	Epoch       int    // 1-based epoch in progress (distill), or the epoch validated
	Epochs      int
	Step        int // meta-steps done
	TotalSteps  int
	LabelLoss   float64
	MovingError float64 // mean top-1 error (%) over the reset window
	Resets      int
	T           int
	// ValidationAccuracy is the latest validation accuracy (%), NaN before the first.
	ValidationAccuracy float64
	Message            string
}

type runOptions struct {
	progress func(Progress)
	dataset  *Dataset
}

// RunOption configures one Distill call.
type RunOption func(*runOptions)

// WithProgress receives progress reports (called on Distill's goroutine; keep it quick).
func WithProgress(f func(Progress)) RunOption { return func(o *runOptions) { o.progress = f } }

// WithDataset runs on preloaded data instead of loading cfg's dataset from disk.
func WithDataset(d *Dataset) RunOption { return func(o *runOptions) { o.dataset = d } }

// ValidationRecord is one early-stopping check.
type ValidationRecord struct {
	Epoch    int     `json:"epoch"`
	Step     int     `json:"step"`
	T        int     `json:"steps_T"`
	Accuracy float64 `json:"accuracy"`
}

// BaselineResult is one baseline's outcome.
type BaselineResult struct {
	Mean             float64         `json:"mean"`
	Std              float64         `json:"std"`
	Steps            int             `json:"steps"`
	Accuracies       []float64       `json:"accuracies"`
	ValidationErrors map[int]float64 `json:"validation_errors"`
}

// Result is what a distillation run produced.
type Result struct {
	Config         Config
	Classes        int
	BaseShape      [4]int64  // N, C, H, W
	BaseImages     []float32 // normalised as trained
	BaseIndices    []int64
	Labels         []float32 // the kept (best-validation) labels, N×classes
	T              int       // training steps for fresh models
	Resets         []int
	MetaSteps      int
	Validations    []ValidationRecord
	BestValidation ValidationRecord
	TestAccuracies []float64
	TestMean       float64
	TestStd        float64 // population standard deviation over the M models
	Baselines      map[string]BaselineResult
	WallSeconds    float64
	DistillSeconds float64 // the meta-loop alone (no validation)
	SecondsPerStep float64 // DistillSeconds / MetaSteps
	TorchVersion   string
	DataSHA256     map[string]string
}

// Distill learns labels for the base examples of cfg and evaluates them. It returns an
// error (never panics) for bad configuration, missing or corrupt data, non-finite values
// or cancellation through ctx.
func Distill(ctx context.Context, cfg Config, opts ...RunOption) (res *Result, err error) {
	defer func() {
		if r := recover(); r != nil {
			res, err = nil, fmt.Errorf("labeldistill: internal error: %v", r)
		}
	}()
	start := time.Now()
	var o runOptions
	for _, f := range opts {
		f(&o)
	}
	if cfg, err = cfg.Resolved(); err != nil {
		return nil, err
	}
	if _, err := torch.RuntimeInfo(); err != nil {
		return nil, err
	}
	dev, err := torch.ParseDevice(cfg.Device)
	if err != nil {
		return nil, err
	}
	if dev.IsCUDA() && !torch.CUDAIsAvailable() {
		return nil, fmt.Errorf("device: %s requested but CUDA is not available in this libtorch", cfg.Device)
	}
	if cfg.Threads > 0 {
		if err := torch.SetNumThreads(cfg.Threads); err != nil {
			return nil, err
		}
	}
	ds := o.dataset
	if ds == nil {
		if ds, err = LoadDataset(cfg); err != nil {
			return nil, err
		}
	}
	if err := ds.check(); err != nil {
		return nil, err
	}
	if ds.Base.N() != cfg.BaseExamples {
		return nil, fmt.Errorf("base_examples: config asks for %d, the dataset holds %d", cfg.BaseExamples, ds.Base.N())
	}
	// libtorch's grad mode and OpenMP teams are per OS thread: keep this run on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	r := &run{cfg: cfg, ds: ds, dev: dev, progress: o.progress, seed: uint64(cfg.Seed)}
	defer r.close()
	if err := r.setup(); err != nil {
		return nil, err
	}
	if err := r.distill(ctx); err != nil {
		return nil, err
	}
	res = r.result()
	if err := r.finalTest(ctx, res); err != nil {
		return nil, err
	}
	if res.Baselines, err = r.baselines(ctx); err != nil {
		return nil, err
	}
	res.WallSeconds = time.Since(start).Seconds()
	return res, nil
}

// run is the state of one Distill call.
type run struct {
	cfg      Config
	ds       *Dataset
	dev      torch.Device
	progress func(Progress)
	seed     uint64

	net, evalNet             *nets.Net
	base                     deviceSplit
	target, validation, test deviceSplit
	labels                   *Labels
	model                    *learner
	gen                      *torch.Generator
	rng                      *rand.Rand
	tracker                  *ResetTracker
	best                     []float32
	bestRecord               ValidationRecord
	validations              []ValidationRecord
	step                     int
	distillSeconds, lastLoss float64
	lastValAcc               float64
}

func (r *run) setup() error {
	var err error
	shape, classes := r.ds.Shape, int64(r.ds.Classes)
	if r.net, err = nets.New(r.cfg.Arch, shape[0], shape[1], shape[2], classes); err != nil {
		return err
	}
	if r.evalNet, err = nets.New(r.cfg.EvalArch, shape[0], shape[1], shape[2], classes); err != nil {
		return err
	}
	if r.base, err = upload(&r.ds.Base, shape, r.dev); err != nil {
		return err
	}
	if r.target, err = upload(&r.ds.TargetSet, shape, r.dev); err != nil {
		return err
	}
	if r.validation, err = upload(&r.ds.Validation, shape, r.dev); err != nil {
		return err
	}
	if r.test, err = upload(&r.ds.Test, shape, r.dev); err != nil {
		return err
	}
	if r.labels, err = NewLabels(r.ds.Base.N(), r.ds.Classes, r.cfg, r.dev); err != nil {
		return err
	}
	if r.gen, err = torch.NewGenerator(subSeed(r.seed, "meta-model", 0)); err != nil {
		return err
	}
	if r.model, err = newLearner(r.net, r.cfg.Method == MethodRR, r.cfg, adamSpec(r.cfg.ModelLR), r.gen, r.dev); err != nil {
		return err
	}
	r.rng = rand.New(rand.NewPCG(r.seed, 0xd15711))
	r.tracker = NewResetTracker(r.cfg.ResetWindow, r.cfg.ResetMeanOfLast)
	r.lastValAcc = math.NaN()
	return nil
}

func (r *run) close() {
	for _, s := range []deviceSplit{r.base, r.target, r.validation, r.test} {
		s.free()
	}
	if r.labels != nil {
		r.labels.Close()
	}
	if r.model != nil {
		r.model.close()
	}
	r.gen.Close()
}

func (r *run) report(p Progress) {
	if r.progress == nil {
		return
	}
	p.Step, p.Resets, p.T = r.step, len(r.tracker.Resets()), r.T()
	p.MovingError, p.LabelLoss, p.ValidationAccuracy = r.tracker.MovingError(), r.lastLoss, r.lastValAcc
	r.progress(p)
}

// T is the number of steps fresh models train for (§6); at least 1.
func (r *run) T() int { return max(1, r.tracker.T()) }

func (r *run) distill(ctx context.Context) error {
	nTarget := r.ds.TargetSet.N()
	perEpoch := StepsPerEpoch(nTarget, r.cfg.OuterBatch)
	total := perEpoch * r.cfg.Epochs
	nBase := r.ds.Base.N()
	for epoch := 1; epoch <= r.cfg.Epochs; epoch++ {
		order := r.rng.Perm(nTarget)
		for b := 0; b < perEpoch; b++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			lo, hi := b*r.cfg.OuterBatch, min((b+1)*r.cfg.OuterBatch, nTarget)
			if err := r.metaStep(order[lo:hi], nBase); err != nil {
				var nf *NonFiniteError
				if errors.As(err, &nf) {
					nf.Step = r.step + 1
				}
				return fmt.Errorf("meta-step %d (epoch %d): %w", r.step+1, epoch, err)
			}
			r.report(Progress{Phase: "distill", Epoch: epoch, Epochs: r.cfg.Epochs, TotalSteps: total})
		}
		if ValidationDue(epoch, r.cfg.Epochs, r.cfg.ValidateEvery) {
			if err := r.validate(ctx, epoch); err != nil {
				return err
			}
			r.report(Progress{Phase: "validate", Epoch: epoch, Epochs: r.cfg.Epochs, TotalSteps: total})
		}
	}
	return nil
}

func (r *run) metaStep(targetIdx []int, nBase int) error {
	t0 := time.Now()
	s := torch.NewScope()
	defer s.Close()
	idx := make([]int64, len(targetIdx))
	for i, v := range targetIdx {
		idx[i] = int64(v)
	}
	var c torch.Chain
	ti := c.T(indexTensor(idx, r.dev))
	xt := c.T(r.target.x.IndexSelect(0, ti))
	yt := c.T(r.target.y.IndexSelect(0, ti))
	bi := c.T(sampleIndices(r.rng, nBase, r.cfg.InnerBatch, r.dev))
	if c.Err() != nil {
		return c.Err()
	}
	var st stepStats
	var err error
	if r.cfg.Method == MethodRR {
		st, err = rrStep(r.model, r.labels, r.base.x, bi, xt, yt, r.cfg)
	} else {
		st, err = ldStep(r.model, r.labels, r.base.x, bi, xt, yt, r.cfg.InnerLR)
	}
	if err != nil {
		return err
	}
	r.step++
	r.lastLoss = st.LabelLoss
	if r.tracker.Observe(st.Error) {
		if err := r.model.reset(r.gen); err != nil {
			return fmt.Errorf("model reset: %w", err)
		}
	}
	r.distillSeconds += time.Since(t0).Seconds()
	return nil
}

// validate trains one fresh model for T steps with the current labels and keeps the labels
// if its validation accuracy is the best so far (ties: the later labels win).
func (r *run) validate(ctx context.Context, epoch int) error {
	table, err := r.labels.Y.Detach()
	if err != nil {
		return err
	}
	defer table.Free()
	tr := &trainer{net: r.net, rr: r.cfg.Method == MethodRR, cfg: r.cfg, baseX: r.base.x, table: table, batch: r.cfg.EvalBatch, opt: adamSpec(r.cfg.EvalLR), dev: r.dev}
	T := r.T()
	l, err := tr.train(ctx, T, subSeed(r.seed, "validation", epoch), nil, nil)
	if err != nil {
		return fmt.Errorf("validation after epoch %d: %w", epoch, err)
	}
	acc, err := accuracy(l, r.validation.x, r.validation.y)
	l.close()
	if err != nil {
		return err
	}
	rec := ValidationRecord{Epoch: epoch, Step: r.step, T: T, Accuracy: acc}
	r.validations = append(r.validations, rec)
	r.lastValAcc = acc
	if r.best == nil || acc >= r.bestRecord.Accuracy {
		if r.best, err = table.Float32s(); err != nil {
			return err
		}
		r.bestRecord = rec
	}
	return nil
}

func (r *run) result() *Result {
	s := r.ds.Shape
	return &Result{
		Config:         r.cfg,
		Classes:        r.ds.Classes,
		BaseShape:      [4]int64{int64(r.ds.Base.N()), s[0], s[1], s[2]},
		BaseImages:     r.ds.Base.Images,
		BaseIndices:    r.ds.BaseIndices,
		Labels:         r.best,
		T:              r.bestRecord.T,
		Resets:         r.tracker.Resets(),
		MetaSteps:      r.step,
		Validations:    r.validations,
		BestValidation: r.bestRecord,
		DistillSeconds: r.distillSeconds,
		SecondsPerStep: r.distillSeconds / float64(max(1, r.step)),
		TorchVersion:   torch.Version(),
		DataSHA256:     r.ds.Files,
	}
}

// finalTest trains M fresh models (eval_arch) for the kept T with the kept labels.
func (r *run) finalTest(ctx context.Context, res *Result) error {
	r.report(Progress{Phase: "test", Message: fmt.Sprintf("training %d models for %d steps", r.cfg.EvalModels, res.T)})
	table, err := torch.FromFloat32(res.Labels, int64(r.ds.Base.N()), int64(r.ds.Classes))
	if err != nil {
		return err
	}
	if table, err = toDevice(table, r.dev); err != nil {
		return err
	}
	defer table.Free()
	tr := &trainer{net: r.evalNet, rr: r.cfg.Method == MethodRR, cfg: r.cfg, baseX: r.base.x, table: table, batch: r.cfg.EvalBatch, opt: adamSpec(r.cfg.EvalLR), dev: r.dev}
	accs, err := tr.evaluateModels(ctx, res.T, r.cfg.EvalModels, r.seed, "test", r.test.x, r.test.y)
	if err != nil {
		return fmt.Errorf("final evaluation: %w", err)
	}
	res.TestAccuracies = accs
	res.TestMean, res.TestStd = MeanStd(accs)
	return nil
}

// toDevice moves t to dev, freeing the original when it was copied.
func toDevice(t *torch.Tensor, dev torch.Device) (*torch.Tensor, error) {
	if t.Device() == dev {
		return t, nil
	}
	moved, err := t.To(dev)
	t.Free()
	return moved, err
}
