package labeldistill

// distill.go: Distill, a distillation from start to end: the run's inputs, the meta-loop
// (loop.go) with its observers, the final evaluation of M fresh models on the kept values
// (docs/ALGORITHM.md §7), the baselines (§8), and the run's record.

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/checkpoint"
	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/train"
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
	// AllReduceSeconds is the wall time of the latest meta-step's all-reduce in a
	// data-parallel run (0 alone).
	AllReduceSeconds float64
}

type runOptions struct {
	progress      func(Progress)
	dataset       *Data
	checkpointDir string
	resumeDir     string
	keep          int
	keepSet       bool
	historyPath   string
	group         *dist.Group
	baseSplit     BaseSplit
	learn         func(*runData) ([]learnable, error) // nil: the labels (tests give others)
	saveModels    string
	baseFile      *data.BaseFile
}

// RunOption configures one Distill call.
type RunOption func(*runOptions)

// WithProgress receives progress reports (called on Distill's goroutine; keep it quick).
func WithProgress(f func(Progress)) RunOption { return func(o *runOptions) { o.progress = f } }

// WithData runs on preloaded data instead of loading cfg's dataset from disk.
func WithData(d *Data) RunOption { return func(o *runOptions) { o.dataset = d } }

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
// checkpoint.DefaultKeep = 3; n < 1 keeps all of them).
func WithCheckpointKeep(n int) RunOption {
	return func(o *runOptions) { o.keep, o.keepSet = n, true }
}

// WithSaveModels keeps the final test's fresh models in dir (created if needed; it must not
// already hold saved models): model-K.pt for each model K this process trains, PyTorch state
// dicts of the modules in docs/ARTIFACT.md (train.ModelSaver), and models.json with every
// model's test accuracy (written by rank 0 in a data-parallel run, whose ranks each save
// the models they train). The models and the results are those of a run without it.
func WithSaveModels(dir string) RunOption { return func(o *runOptions) { o.saveModels = dir } }

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

// Record is what a run has done: its configuration, the meta-loop's course, the
// validations, the final test and the baselines, times and provenance. A Result carries it
// with the distilled values, report.json holds it under the same keys, and each checkpoint
// records it as of its position.
type Record struct {
	Config config.Config `json:"config"`
	// T is the number of steps fresh models train for: the kept validation's T.
	T              int                `json:"steps"`
	MetaSteps      int                `json:"meta_steps"`
	Resets         []int              `json:"resets"`
	Validations    []ValidationRecord `json:"validations"`
	BestValidation ValidationRecord   `json:"best_validation"`
	TestAccuracies []float64          `json:"test_accuracies"`
	TestMean       float64            `json:"test_accuracy_mean"`
	// TestStd is the population standard deviation over the M models.
	TestStd float64 `json:"test_accuracy_std"`
	// TestDiverged counts the test models whose parameters went non-finite (left out of
	// the above).
	TestDiverged    int                       `json:"test_diverged_models,omitempty"`
	Baselines       map[string]BaselineResult `json:"baselines"`
	WallSeconds     float64                   `json:"wall_seconds"`
	DistillSeconds  float64                   `json:"distill_seconds"` // the meta-loop alone (no validation)
	SecondsPerStep  float64                   `json:"seconds_per_meta_step"`
	LibtorchVersion string                    `json:"libtorch_version"`
	DataSHA256      map[string]string         `json:"data_sha256"`
	// ResumeChanges are the settings changed when the run was last resumed ("epochs: 6 -> 8").
	ResumeChanges []string `json:"resume_changes,omitempty"`
	DataWarnings  []string `json:"data_warnings,omitempty"` // the dataset's warnings (Data.Warnings)
	// BaseOrigin is where the base examples came from and their classes (absent in reports
	// written before it was recorded).
	BaseOrigin *BaseOrigin `json:"base_origin,omitempty"`
}

// Result is what a distillation run produced: its record and the distilled data.
type Result struct {
	Record
	Classes     int
	BaseShape   [4]int64  // N, C, H, W
	BaseImages  []float32 // the images fresh models train on, normalised
	BaseIndices []int64
	// BaseClasses are the base examples' true classes in the source's label space (the
	// target's within a dataset).
	BaseClasses []int64
	Labels      []float32 // the kept (best-validation) labels, N×classes
	// StepLRs are method dd's kept step sizes, one per unrolled step (nil otherwise): fresh
	// models train on the images in their fixed order with these steps.
	StepLRs []float32
}

// Distill learns labels for the base examples of cfg and evaluates them. It returns an
// error (never panics) for bad configuration, missing or corrupt data, non-finite values
// or cancellation through ctx. With WithCheckpointDir it checkpoints the run (also when
// ctx is cancelled, before it returns ctx's error); with WithResume it continues from a
// checkpoint and, on CPU with a fixed thread count, ends with exactly the labels and
// accuracies of an uninterrupted run.
func Distill(ctx context.Context, cfg config.Config, opts ...RunOption) (*Result, error) {
	return guarded(func() (*Result, error) { return distill(ctx, cfg, opts) })
}

func distill(ctx context.Context, cfg config.Config, opts []RunOption) (*Result, error) {
	start := time.Now()
	var o runOptions
	for _, f := range opts {
		f(&o)
	}
	cfg, err := cfg.Resolved()
	if err != nil {
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
	par := &parallel{g: o.group, baseSplit: o.baseSplit}
	if par.rank() != 0 {
		var cancel context.CancelFunc
		ctx, cancel = followRoot(ctx)
		defer cancel()
		// only rank 0 writes; every rank reads the checkpoint it resumes from
		ckptDir, o.historyPath = "", ""
	}
	writeCkpts := ckptDir != "" && cfg.CheckpointEvery >= 0
	if writeCkpts {
		if err := prepareCheckpointDir(ckptDir); err != nil {
			return nil, err
		}
	}
	var saver *train.ModelSaver
	if o.saveModels != "" {
		if saver, err = train.NewModelSaver(o.saveModels); err != nil {
			return nil, fmt.Errorf("save models: %w", err)
		}
	}
	in, err := prepareRun(cfg, o)
	if err != nil {
		return nil, err
	}
	defer in.close()
	if c := in.cfg; resumeDir == "" && c.BaseIndices != nil && c.BaseSelection == config.SelectBalanced {
		if err := checkBalanced(in.ds.Base.Labels, in.ds.Classes); err != nil {
			return nil, err
		}
	}
	if o.progress != nil {
		for _, w := range in.ds.Warnings {
			o.progress(Progress{Phase: "data", Message: "warning: " + w})
		}
	}
	l, err := newLoop(in, par, o.learn)
	if err != nil {
		return nil, err
	}
	defer l.close()
	l.clock.start = start
	l.observers = par.observer()
	if o.historyPath != "" {
		h := &history{path: o.historyPath, resumed: resumeDir != ""}
		if dir, err := resolveResumeDir(resumeDir); err == nil && resumeDir != "" && filepath.Base(filepath.Clean(dir)) == "checkpoints" {
			h.from = filepath.Join(filepath.Dir(filepath.Clean(dir)), HistoryFile)
		}
		l.observers = append(l.observers, h.observer())
	}
	ckpt := &checkpointer{dir: ckptDir, keep: checkpoint.DefaultKeep, last: position{-1, -1, -1}}
	resumedAt := position{-1, -1, -1}
	if o.keepSet {
		ckpt.keep = o.keep
	}
	if writeCkpts {
		l.observers = append(l.observers, ckpt.observer())
	}
	if o.progress != nil {
		l.observers = append(l.observers, progressObserver(o.progress))
	}
	if resumeDir != "" {
		if ckpt.last, ckpt.written, err = l.resume(resumeDir); err != nil {
			return nil, err
		}
		resumedAt = ckpt.last
	} else if writeCkpts {
		if err := removePhases(ckptDir); err != nil {
			return nil, err
		}
	}
	if err := par.checkShards(in.cfg, in.ds.TargetSet.N); err != nil {
		return nil, err
	}
	if err := l.run(ctx); err != nil {
		return nil, err
	}
	if l.best.labels == nil {
		return nil, &DivergedError{Purpose: "validation", Models: len(l.vals), Steps: l.T(), Field: "eval_lr", LR: in.cfg.EvalLR}
	}
	// The phases after the meta-loop are tied to the final checkpoint, when there is one;
	// those of an earlier part are reused only when this part ran no meta-step (it resumed
	// from that final checkpoint).
	var final checkpointID // none (Written "") unless the loop ended at a checkpoint
	phasesDir, reuseFrom := "", ""
	if ckpt.last == l.pos && ckpt.written != "" {
		final = checkpointID{Step: l.pos.step, Written: ckpt.written}
	}
	if writeCkpts {
		phasesDir = ckptDir
	}
	if resumeDir != "" && resumedAt == l.pos {
		reuseFrom = resumeDir
	}
	ph := l.newPhases(phasesDir, reuseFrom, final)
	res := l.result()
	if err := l.testPhase(ctx, res, saver, ph); err != nil {
		return nil, err
	}
	if res.Baselines, err = l.baselines(ctx, ph); err != nil {
		return nil, err
	}
	res.WallSeconds = l.wallSeconds()
	return res, nil
}

// result is the run's result as of the end of the meta-loop.
func (l *loop) result() *Result {
	ds := l.in.ds
	s := ds.Shape
	images, indices, classes := ds.Base.Images, ds.BaseIndices, ds.Base.Labels
	if l.best.images != nil {
		images = l.best.images
	}
	if l.dd != nil { // its images are laid out class by class, and come from no base example
		indices, classes = nil, l.dd.classes
	}
	return &Result{
		Record: Record{
			Config:          l.in.cfg,
			T:               l.best.record.T,
			Resets:          l.tracker.Resets(),
			MetaSteps:       l.pos.step,
			Validations:     l.vals,
			BestValidation:  l.best.record,
			DistillSeconds:  l.clock.distillSeconds,
			SecondsPerStep:  l.clock.distillSeconds / float64(max(1, l.pos.step)),
			LibtorchVersion: torch.Version(),
			DataSHA256:      ds.Files,
			ResumeChanges:   l.resumed,
			DataWarnings:    ds.Warnings,
			BaseOrigin:      l.in.origin,
		},
		Classes:     ds.Classes,
		BaseShape:   [4]int64{int64(ds.Base.N), s[0], s[1], s[2]},
		BaseImages:  images,
		BaseIndices: indices,
		BaseClasses: classes,
		Labels:      l.best.labels,
		StepLRs:     l.best.lrs,
	}
}

// testPhase is the final test: taken from an earlier part of the run when ph holds it and
// no test model is to be saved, else trained (finalTest). Either way it is recorded in ph
// and the history.
func (l *loop) testPhase(ctx context.Context, res *Result, saver *train.ModelSaver, ph *phases) error {
	var took time.Duration
	if t := ph.test(); t != nil && saver == nil {
		res.TestAccuracies, res.TestMean, res.TestStd, res.TestDiverged = slices.Clone(t.Accuracies), t.Mean, t.Std, t.Diverged
		took = secondsDuration(t.Seconds)
		l.clock.priorWall += t.Seconds
		l.note(Progress{Phase: "test", Message: fmt.Sprintf("the %d test models' accuracies are those finished before the resume (%s)",
			len(t.Accuracies)+t.Diverged, PhasesFile)})
	} else {
		r := ph.begin(l, "test", saver == nil, train.Mode(l.in.dev))
		if k := len(r.rec.Accuracies); k > 0 {
			l.note(Progress{Phase: "test", Message: fmt.Sprintf("%d of the %d test models were scored before the resume (%s)",
				k, l.in.cfg.EvalModels, PhasesFile)})
		}
		if err := l.finalTest(ctx, res, saver, r); err != nil {
			return err
		}
		took = r.took()
	}
	if err := ph.testDone(res, took); err != nil {
		l.note(Progress{Phase: "test", Message: "warning: " + err.Error()})
	}
	return l.onPhase(phaseRecord{name: "test", mean: res.TestMean, std: res.TestStd, took: took})
}

// secondsDuration is s seconds as a time.Duration.
func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// finalTest trains M fresh models (eval_arch) for the kept T on the kept values, after
// those r holds from an earlier part, saving them through saver when it is not nil.
func (l *loop) finalTest(ctx context.Context, res *Result, saver *train.ModelSaver, r *phaseTraining) error {
	in := l.in
	l.note(Progress{Phase: "test", Message: fmt.Sprintf("training %d models for %d steps", in.cfg.EvalModels, res.T)})
	s := torch.NewScope()
	defer s.Close()
	x, y, err := l.keptTables()
	if err != nil {
		return err
	}
	tr := l.freshTrainer(in.evalNet, x, y, l.best.lrs)
	tr.Progress = func(done, total int) { l.note(Progress{Phase: "test", Done: done, Total: total}) }
	if saver != nil {
		tr.Trained = saver.Save
	}
	accs, err := l.testModels(ctx, tr, res.T, "test", r)
	if err != nil {
		return fmt.Errorf("final evaluation: %w", err)
	}
	if saver != nil && l.par.rank() == 0 {
		if err := saver.WriteManifest(in.evalNet, in.rr(), res.T, accs); err != nil {
			return err
		}
	}
	accs, res.TestDiverged = train.KeepFinite(accs)
	if len(accs) == 0 {
		return &DivergedError{Purpose: "final test", Models: in.cfg.EvalModels, Steps: res.T, Field: "eval_lr", LR: in.cfg.EvalLR}
	}
	res.TestAccuracies = accs
	res.TestMean, res.TestStd = train.MeanStd(accs)
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
