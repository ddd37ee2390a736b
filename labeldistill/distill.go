package labeldistill

// distill.go: Distill, the outer loop of label distillation (the paper's Algorithm 1 with
// docs/ALGORITHM.md's details): meta-steps over epochs of the target set, model resets and T,
// validation every k epochs with the best labels kept, the final evaluation of M fresh
// models, and the baselines.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// Progress is what Distill reports as it goes (through WithProgress); the library itself
// never prints.
type Progress struct {
	Phase      string // "distill", "validate", "checkpoint", "resume", "test", "baseline"
	Epoch      int    // 1-based epoch in progress (distill), or the epoch validated
	Epochs     int
	Step       int // meta-steps done
	TotalSteps int
	// LabelLoss and MovingError are as of the latest read of the meta-steps' outputs, at
	// most readEvery (16) steps behind Step while distilling.
	LabelLoss   float64
	MovingError float64 // mean top-1 error (%) over the reset window
	Resets      int
	T           int
	// ValidationAccuracy is the latest validation accuracy (%), NaN before the first.
	ValidationAccuracy float64
	Message            string
	// Done and Total measure the work of the phase's evaluation models (test, baseline):
	// training steps and scoring blocks of all models together; both 0 in other phases.
	Done, Total int
}

type runOptions struct {
	progress      func(Progress)
	dataset       *Dataset
	checkpointDir string
	resumeDir     string
	keep          int
	keepSet       bool
	historyPath   string
	group         *dist.Group
}

// RunOption configures one Distill call.
type RunOption func(*runOptions)

// WithProgress receives progress reports (called on Distill's goroutine; keep it quick).
func WithProgress(f func(Progress)) RunOption { return func(o *runOptions) { o.progress = f } }

// WithDataset runs on preloaded data instead of loading cfg's dataset from disk.
func WithDataset(d *Dataset) RunOption { return func(o *runOptions) { o.dataset = d } }

// WithCheckpointDir writes checkpoints of the run's complete state into dir (created if
// needed; conventionally <out>/checkpoints): every Config.CheckpointEvery meta-steps (0:
// after every validation), at the end of the meta-loop, and when ctx is cancelled. Without
// this option (and without WithResume) no checkpoint is written. The folder is checked to
// be writable before any work starts.
func WithCheckpointDir(dir string) RunOption { return func(o *runOptions) { o.checkpointDir = dir } }

// WithResume continues the run from the newest valid checkpoint in dir (a checkpoint
// folder, or an output folder holding a "checkpoints" folder). Corrupt or truncated
// checkpoints are skipped with a warning through Progress.Message; a checkpoint written
// under another configuration (ResumeConflicts) or other data is refused with an error
// naming the differences. Unless WithCheckpointDir says otherwise, the resumed run keeps
// checkpointing into the same folder.
func WithResume(dir string) RunOption { return func(o *runOptions) { o.resumeDir = dir } }

// WithCheckpointKeep sets how many of the newest checkpoints are kept (default
// DefaultCheckpointKeep = 3; n < 1 keeps all of them).
func WithCheckpointKeep(n int) RunOption {
	return func(o *runOptions) { o.keep, o.keepSet = n, true }
}

// ValidationRecord is one early-stopping check.
type ValidationRecord struct {
	Epoch    int     `json:"epoch"`
	Step     int     `json:"step"`
	T        int     `json:"steps_T"`
	Accuracy float64 `json:"accuracy"`
	// Diverged: the validation model's parameters went non-finite; Accuracy is 0 and these
	// labels are never kept.
	Diverged bool `json:"diverged,omitempty"`
}

// BaselineResult is one baseline's outcome.
type BaselineResult struct {
	Mean             float64         `json:"mean"`
	Std              float64         `json:"std"`
	Steps            int             `json:"steps"`
	Accuracies       []float64       `json:"accuracies"`
	ValidationErrors map[int]float64 `json:"validation_errors"`
	// Diverged counts the test models whose parameters went non-finite; they are left out
	// of Accuracies, Mean and Std.
	Diverged int `json:"diverged_models,omitempty"`
}

// Result is what a distillation run produced.
type Result struct {
	Config      config.Config
	Classes     int
	BaseShape   [4]int64  // N, C, H, W
	BaseImages  []float32 // normalised as trained
	BaseIndices []int64
	// BaseClasses are the base examples' true classes in the source's label space (the
	// target's within a dataset).
	BaseClasses    []int64
	Labels         []float32 // the kept (best-validation) labels, N×classes
	T              int       // training steps for fresh models
	Resets         []int
	MetaSteps      int
	Validations    []ValidationRecord
	BestValidation ValidationRecord
	TestAccuracies []float64
	TestMean       float64
	TestStd        float64  // population standard deviation over the M models
	TestDiverged   int      // test models whose parameters went non-finite (left out of the above)
	ResumeChanges  []string // settings changed when the run was last resumed ("epochs: 6 -> 8")
	Baselines      map[string]BaselineResult
	WallSeconds    float64
	DistillSeconds float64 // the meta-loop alone (no validation)
	SecondsPerStep float64 // DistillSeconds / MetaSteps
	TorchVersion   string
	DataSHA256     map[string]string
	DataWarnings   []string // the dataset's warnings (Dataset.Warnings)
}

// Distill learns labels for the base examples of cfg and evaluates them. It returns an
// error (never panics) for bad configuration, missing or corrupt data, non-finite values
// or cancellation through ctx. With WithCheckpointDir it checkpoints the run (also when
// ctx is cancelled, before it returns ctx's error); with WithResume it continues from a
// checkpoint and, on CPU with a fixed thread count, ends with exactly the labels and
// accuracies of an uninterrupted run.
func Distill(ctx context.Context, cfg config.Config, opts ...RunOption) (res *Result, err error) {
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
	ckptDir, resumeDir := o.checkpointDir, ""
	if o.resumeDir != "" {
		if resumeDir, err = resolveResumeDir(o.resumeDir); err != nil {
			return nil, err
		}
		if ckptDir == "" {
			ckptDir = resumeDir
		}
	}
	par := &parallel{g: o.group}
	if par.rank() != 0 {
		// only rank 0 writes; every rank reads the checkpoint it resumes from
		ckptDir, o.historyPath = "", ""
	}
	if ckptDir != "" && cfg.CheckpointEvery >= 0 {
		if err := prepareCheckpointDir(ckptDir); err != nil {
			return nil, err
		}
	}
	dev, ds, err := o.runInputs(cfg)
	if err != nil {
		return nil, err
	}
	if len(cfg.NormMean) == 0 { // an image folder's, computed from its images: recorded
		cfg.NormMean, cfg.NormStd = ds.NormMean, ds.NormStd
	}
	if o.progress != nil {
		for _, w := range ds.Warnings {
			o.progress(Progress{Phase: "data", Message: "warning: " + w})
		}
	}
	// libtorch's grad mode and OpenMP teams are per OS thread: keep this run on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	r := &run{cfg: cfg, ds: ds, dev: dev, progress: o.progress, seed: uint64(cfg.Seed), start: start,
		ckptDir: ckptDir, ckptKeep: DefaultCheckpointKeep, par: par}
	if o.keepSet {
		r.ckptKeep = o.keep
	}
	defer r.close()
	if err := r.setup(); err != nil {
		return nil, err
	}
	if ckptDir != "" || resumeDir != "" {
		r.dataDigest = dataDigest(ds)
	}
	if resumeDir != "" {
		if err := r.resume(resumeDir); err != nil {
			return nil, err
		}
	}
	if o.historyPath != "" {
		if err := r.openHistory(o.historyPath, resumeDir != ""); err != nil {
			return nil, err
		}
	}
	if err := par.checkShards(cfg, ds.TargetSet.N()); err != nil {
		return nil, err
	}
	if err := r.broadcastState(); err != nil {
		return nil, err
	}
	if err := r.distill(ctx); err != nil {
		return nil, err
	}
	if r.best == nil {
		return nil, &DivergedError{Purpose: "validation", Models: len(r.validations), Steps: r.T(), Field: "eval_lr", LR: r.cfg.EvalLR}
	}
	res = r.result()
	testStart := time.Now()
	if err := r.finalTest(ctx, res); err != nil {
		return nil, err
	}
	if err := r.recordPhase("test", "", res.TestMean, res.TestStd, time.Since(testStart)); err != nil {
		return nil, err
	}
	if res.Baselines, err = r.baselines(ctx); err != nil {
		return nil, err
	}
	res.WallSeconds = r.wallSeconds()
	return res, nil
}

// runInputs is what every run of a resolved cfg needs before it starts (Distill and the
// benchmarks alike): a usable runtime and device, the thread count applied, and the dataset
// (o.dataset, else loaded), checked against cfg.
func (o runOptions) runInputs(cfg config.Config) (torch.Device, *Dataset, error) {
	var none torch.Device
	if _, err := torch.RuntimeInfo(); err != nil {
		return none, nil, err
	}
	dev, err := torch.ParseDevice(cfg.Device)
	if err != nil {
		return none, nil, err
	}
	if dev.IsCUDA() && !torch.CUDAIsAvailable() {
		return none, nil, config.FieldErrorf("device", "%s requested but CUDA is not available in this libtorch", cfg.Device)
	}
	if err := applyThreads(cfg.Threads); err != nil {
		return none, nil, err
	}
	if err := torch.SetAllowTF32(cfg.AllowTF32); err != nil {
		return none, nil, err
	}
	ds := o.dataset
	if ds == nil {
		if ds, err = LoadDataset(cfg); err != nil {
			return none, nil, err
		}
	}
	if err := ds.check(); err != nil {
		return none, nil, err
	}
	if ds.Base.N() != cfg.BaseExamples {
		return none, nil, config.FieldErrorf("base_examples", "config asks for %d, the dataset holds %d", cfg.BaseExamples, ds.Base.N())
	}
	return dev, ds, nil
}

// resolveResumeDir returns the checkpoint folder of a --resume argument: dir itself when it
// holds checkpoints, else dir/checkpoints when that is a folder.
func resolveResumeDir(dir string) (string, error) {
	if !isDir(dir) {
		return "", resumeErrorf("%s is not a folder", dir)
	}
	if paths, err := CheckpointFiles(dir); err == nil && len(paths) == 0 {
		if sub := filepath.Join(dir, "checkpoints"); isDir(sub) {
			return sub, nil
		}
	}
	return dir, nil
}

// run is the state of one Distill call.
type run struct {
	cfg      config.Config
	ds       *Dataset
	dev      torch.Device
	progress func(Progress)
	seed     uint64
	// resumeChanges are the settings changed at the resume (DiffDetails), for the report.
	resumeChanges []string

	net, evalNet             *nets.Net
	base                     deviceSplit
	target, validation, test deviceSplit
	labels                   *Labels
	model                    *learner
	gen                      *torch.Generator
	pcg                      *rand.PCG // rng's source, kept for its state (checkpoints)
	rng                      *rand.Rand
	tracker                  *ResetTracker
	best                     []float32
	bestRecord               ValidationRecord
	validations              []ValidationRecord
	step                     int
	distillSeconds, lastLoss float64
	lastError                float64       // top-1 error (%) of the latest meta-step's target batch
	pending                  []pendingStep // meta-steps whose outputs are not read yet
	lastValAcc               float64
	history                  *historyWriter // nil: no history

	// Position in the meta-loop: epoch in progress (1-based; Epochs+1 when done), batches
	// of it done, and its permutation of the target set.
	epoch, nextBatch int
	order            []int

	start      time.Time
	priorWall  float64 // wall seconds of the runs this one resumes
	ckptDir    string  // "" = no checkpoints
	ckptKeep   int
	dataDigest string
	lastCkpt   position // of the last checkpoint written or loaded

	par *parallel // this process's place in a data-parallel group (a lone process: size 1)
}

// wallSeconds is the run's wall time so far, including the runs it resumes.
func (r *run) wallSeconds() float64 { return r.priorWall + time.Since(r.start).Seconds() }

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
	if r.model, err = newLearner(r.net, r.cfg.Method == config.MethodRR, r.cfg, adamSpec(r.cfg.ModelLR), r.gen, r.dev); err != nil {
		return err
	}
	r.pcg = newRunPCG(r.seed)
	r.rng = rand.New(r.pcg)
	r.epoch, r.lastCkpt = 1, position{-1, -1, -1}
	r.tracker = NewResetTracker(r.cfg.ResetWindow, r.cfg.ResetMeanOfLast)
	r.lastValAcc = math.NaN()
	return nil
}

// newRunPCG is the source of the meta-loop's Go random stream (epoch permutations and base
// batches).
func newRunPCG(seed uint64) *rand.PCG { return rand.NewPCG(seed, 0xd15711) }

func (r *run) close() {
	for _, p := range r.pending {
		p.reading.Free()
	}
	r.pending = nil
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
	r.history.close()
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
	every := r.cfg.CheckpointEvery
	for ; r.epoch <= r.cfg.Epochs; r.epoch, r.nextBatch, r.order = r.epoch+1, 0, nil {
		epoch := r.epoch
		if r.nextBatch == 0 {
			r.order = r.rng.Perm(nTarget)
		}
		for ; r.nextBatch < perEpoch; r.nextBatch++ {
			if err := ctx.Err(); err != nil {
				return r.cancelled(err)
			}
			b := r.nextBatch
			lo, hi := b*r.cfg.OuterBatch, min((b+1)*r.cfg.OuterBatch, nTarget)
			if err := r.metaStep(r.order[lo:hi], nBase); err != nil {
				return err
			}
			if every > 0 && r.step%every == 0 && b+1 < perEpoch {
				// The checkpoint's position is after this step: the epoch's next batch.
				if err := r.writeCheckpoint("periodic", position{r.step, epoch, b + 1}); err != nil {
					return err
				}
			}
			r.report(Progress{Phase: "distill", Epoch: epoch, Epochs: r.cfg.Epochs, TotalSteps: total})
		}
		if err := r.readSteps(); err != nil {
			return err
		}
		validated := false
		if ValidationDue(epoch, r.cfg.Epochs, r.cfg.ValidateEvery) {
			if err := ctx.Err(); err != nil {
				return r.cancelled(err)
			}
			valStart := time.Now()
			if err := r.validate(ctx, epoch); err != nil {
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					return r.cancelled(err)
				}
				return err
			}
			if err := r.recordValidation(r.validations[len(r.validations)-1], time.Since(valStart)); err != nil {
				return err
			}
			validated = true
			r.report(Progress{Phase: "validate", Epoch: epoch, Epochs: r.cfg.Epochs, TotalSteps: total})
		}
		// Checkpoints at an epoch's end are taken after its validation, at the position
		// (next epoch, batch 0), before the next epoch's permutation is drawn.
		reason := ""
		switch {
		case every > 0 && r.step%every == 0:
			reason = "periodic"
		case every == 0 && validated:
			reason = "validation"
		case epoch == r.cfg.Epochs:
			reason = "final"
		}
		if reason != "" {
			if err := r.writeCheckpoint(reason, position{r.step, epoch + 1, 0}); err != nil {
				return err
			}
		}
	}
	return nil
}

// cancelled checkpoints the run at its current position (a meta-step boundary) and returns
// the cancellation error.
func (r *run) cancelled(ctxErr error) error {
	if err := r.readSteps(); err != nil {
		return fmt.Errorf("%w (no checkpoint on cancellation: %v)", ctxErr, err)
	}
	if err := r.writeCheckpoint("cancelled", r.position()); err != nil {
		return fmt.Errorf("%w (and the checkpoint on cancellation failed: %v)", ctxErr, err)
	}
	return ctxErr
}

// readEvery is how many meta-steps' outputs (label loss, target error, label-table sum,
// ridge status) the meta-loop reads back together, at most: each read waits for the GPU
// to finish everything queued, so reading every step would stall it once per step. The
// reset rule still sees every step's error, in order, and a reset still happens right
// after the step that calls for it (readDue), so the run is the one that reading every
// step gives, bit for bit. A non-finite loss or label table is reported, naming its step,
// at the next read, before any history line, validation or checkpoint.
const readEvery = 16

// pendingStep is a meta-step whose outputs have not been read yet.
type pendingStep struct {
	reading     *torch.Tensor // stepOutputs.vector: float64 (readingSize), owned by the run
	batch       int64
	step, epoch int
}

// readDue reports whether the unread meta-steps must be read now: readEvery of them are
// waiting; a model reset could follow the latest (the tracker cannot reset in its next
// QuietSteps() observations whatever the errors, so the step after those is read at once
// and a reset is decided, and the model re-initialised, before the next meta-step); or the
// history wants a line for it.
func (r *run) readDue() bool {
	n := len(r.pending)
	return n >= readEvery || n > r.tracker.QuietSteps() || r.historyDue(r.step)
}

// metaStep runs one meta-iteration on the target examples targetIdx and queues its outputs;
// it reads them, with the other unread steps', when readDue says so. Errors name the
// meta-step they belong to.
func (r *run) metaStep(targetIdx []int, nBase int) error {
	t0 := time.Now()
	defer func() { r.distillSeconds += time.Since(t0).Seconds() }()
	if err := r.queueStep(targetIdx, nBase); err != nil {
		var nf *NonFiniteError
		if errors.As(err, &nf) {
			nf.Step = r.step + 1
		}
		return fmt.Errorf("meta-step %d (epoch %d): %w", r.step+1, r.epoch, err)
	}
	r.step++
	if r.readDue() {
		return r.readSteps()
	}
	return nil
}

func (r *run) queueStep(targetIdx []int, nBase int) error {
	s := torch.NewScope()
	defer s.Close()
	total := len(targetIdx)
	lo, hi := r.par.shard(total) // this rank's part of the outer batch (all of it alone)
	idx := make([]int64, hi-lo)
	for i, v := range targetIdx[lo:hi] {
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
	var out stepOutputs
	var err error
	if r.cfg.Method == config.MethodRR {
		out, err = rrStep(r.model, r.labels, r.base.x, bi, xt, yt, r.cfg, r.par, total)
	} else {
		out, err = ldStep(r.model, r.labels, r.base.x, bi, xt, yt, r.cfg.InnerLR, r.par, total)
	}
	if err != nil {
		return err
	}
	var sum *torch.Tensor
	c.Check(torch.NoGrad(func() (err error) {
		sum, err = r.labels.Y.Sum()
		return err
	}))
	v := c.T(out.vector(sum))
	if c.Err() != nil {
		return c.Err()
	}
	torch.Escape(v)
	r.pending = append(r.pending, pendingStep{reading: v, batch: out.batch, step: r.step + 1, epoch: r.epoch})
	return nil
}

// readSteps reads the unread meta-steps' outputs in one copy and applies them in step
// order: the checks each step used to make at once (ridge solve, finite label loss, finite
// label table), the reset rule (re-initialising the model when it calls for it: only the
// latest step can, by readDue) and the history line (due only for the latest step, by
// readDue).
func (r *run) readSteps() error {
	if len(r.pending) == 0 {
		return nil
	}
	pending := r.pending
	r.pending = nil
	defer func() {
		for _, p := range pending {
			p.reading.Free()
		}
	}()
	s := torch.NewScope()
	defer s.Close()
	vs := make([]*torch.Tensor, len(pending))
	for i, p := range pending {
		vs[i] = p.reading
	}
	all, err := torch.Cat(vs, 0)
	if err != nil {
		return err
	}
	vals, err := all.Float64s()
	if err != nil {
		return err
	}
	for i, p := range pending {
		v := vals[i*readingSize : (i+1)*readingSize]
		st, err := checkReading(v, p.batch)
		if err == nil {
			err = checkLabelSum(v[readLabelSum])
		}
		if err != nil {
			var nf *NonFiniteError
			if errors.As(err, &nf) {
				nf.Step = p.step
			}
			return fmt.Errorf("meta-step %d (epoch %d): %w", p.step, p.epoch, err)
		}
		latest := i == len(pending)-1
		r.lastLoss, r.lastError = st.LabelLoss, st.Error
		if r.tracker.Observe(st.Error) {
			if !latest {
				return fmt.Errorf("labeldistill: internal error: a model reset at meta-step %d, before the latest unread step %d", p.step, r.step)
			}
			if err := r.model.reset(r.gen); err != nil {
				return fmt.Errorf("meta-step %d (epoch %d): model reset: %w", p.step, p.epoch, err)
			}
		}
		if latest {
			if err := r.recordStep(p.epoch, st.Error); err != nil {
				return err
			}
		}
	}
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
	tr := &trainer{net: r.net, rr: r.cfg.Method == config.MethodRR, cfg: r.cfg, baseX: r.base.x, table: table, batch: r.cfg.EvalBatch, opt: adamSpec(r.cfg.EvalLR), dev: r.dev}
	T := r.T()
	l, err := tr.trainOne(ctx, T, subSeed(r.seed, "validation", epoch), nil)
	if err != nil {
		return fmt.Errorf("validation after epoch %d: %w", epoch, err)
	}
	acc, err := r.validationAccuracy(ctx, l)
	diverged := []bool{false}
	if err == nil {
		diverged, err = l.divergedEach()
	}
	l.close()
	if err != nil {
		return err
	}
	if err := r.checkAgreement(acc); err != nil {
		return err
	}
	rec := ValidationRecord{Epoch: epoch, Step: r.step, T: T, Accuracy: acc}
	if diverged[0] {
		// Its accuracy (one class predicted everywhere) says nothing about the labels.
		rec.Accuracy, rec.Diverged, acc = 0, true, math.NaN()
		r.report(Progress{Phase: "validate", Epoch: epoch, Epochs: r.cfg.Epochs,
			Message: fmt.Sprintf("warning: the validation model after epoch %d diverged (non-finite parameters after %d steps; eval_lr %g): these labels are not kept", epoch, T, r.cfg.EvalLR)})
	}
	r.validations = append(r.validations, rec)
	r.lastValAcc = acc
	if !diverged[0] && (r.best == nil || acc >= r.bestRecord.Accuracy) {
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
		BaseClasses:    r.ds.Base.Labels,
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
		ResumeChanges:  r.resumeChanges,
		DataWarnings:   r.ds.Warnings,
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
	tr := &trainer{net: r.evalNet, rr: r.cfg.Method == config.MethodRR, cfg: r.cfg, baseX: r.base.x, table: table, batch: r.cfg.EvalBatch, opt: adamSpec(r.cfg.EvalLR), dev: r.dev,
		progress: func(done, total int) { r.report(Progress{Phase: "test", Step: r.step, Done: done, Total: total}) }}
	accs, err := r.evaluateSplit(func(lo, hi int) ([]float64, error) {
		return tr.evaluateModelRange(ctx, res.T, lo, hi, r.seed, "test", r.test.x, r.test.y, batchedMode(r.dev))
	}, r.cfg.EvalModels)
	if err != nil {
		return fmt.Errorf("final evaluation: %w", err)
	}
	accs, res.TestDiverged = keepFinite(accs)
	if len(accs) == 0 {
		return &DivergedError{Purpose: "final test", Models: r.cfg.EvalModels, Steps: res.T, Field: "eval_lr", LR: r.cfg.EvalLR}
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
