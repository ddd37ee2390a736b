package labeldistill

// distill.go: Distill, a distillation from start to end: the run's inputs, the meta-loop
// (loop.go) with its observers, the final evaluation of M fresh models on the kept values
// (docs/ALGORITHM.md §7), the baselines (§8), and the run's record.

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/data"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/gradvar"
	"github.com/ldtorch/ldtorch/labeldistill/rundir"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

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

// Distill learns labels for the base examples of cfg and evaluates them. It returns an
// error (never panics) for bad configuration, missing or corrupt data, non-finite values
// or cancellation through ctx. With WithCheckpointDir it checkpoints the run (also when
// ctx is cancelled, before it returns ctx's error); with WithResume it continues from a
// checkpoint and, on CPU with a fixed thread count, ends with exactly the labels and
// accuracies of an uninterrupted run.
func Distill(ctx context.Context, cfg config.Config, opts ...RunOption) (*Result, error) {
	start := time.Now()
	r, err := config.Resolve(cfg)
	if err != nil {
		return nil, err
	}
	return guarded(func() (*Result, error) { return distill(ctx, start, r, opts) })
}

// DistillResolved is Distill of a configuration the caller resolved (config.Resolve), which
// it does not resolve again.
func DistillResolved(ctx context.Context, r config.Resolved, opts ...RunOption) (*Result, error) {
	start := time.Now()
	return guarded(func() (*Result, error) { return distill(ctx, start, r, opts) })
}

func distill(ctx context.Context, start time.Time, r config.Resolved, opts []RunOption) (*Result, error) {
	return engine.Distill(ctx, r, collect(opts).engineOptions(start))
}

// collect applies opts.
func collect(opts []RunOption) runOptions {
	var o runOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// engineOptions are the engine's options of a run under o.
func (o runOptions) engineOptions(start time.Time) engine.Options {
	eo := engine.Options{Start: start, Progress: o.progress, Group: o.group, BaseSplit: o.baseSplit,
		SaveModels: o.saveModels, Dataset: o.dataset, BaseFile: o.baseFile}
	if o.checkpointDir != "" || o.resumeDir != "" || o.historyPath != "" {
		f := &rundir.Folder{CheckpointDir: o.checkpointDir, ResumeDir: o.resumeDir, Keep: o.keep, KeepSet: o.keepSet,
			HistoryPath: o.historyPath}
		if o.historyPath != "" {
			f.GradStats = &gradvar.Window{}
		}
		eo.Folder = f
	}
	return eo
}

// DistillTogether runs the distillations rs, run i under opts[i] (its own folder,
// checkpoints, history, progress), in one process with their meta-steps computed together:
// K LD RR runs that learn labels, of one shape (device, architecture, dataset size, base
// examples, inner and outer batch, epochs, validation epochs; seeds and other settings may
// differ), fresh or resumed at one meta-step. Each result is the one DistillResolved gives
// the run alone: bit for bit on the CPU (the models' bodies run one by one there), up to the
// kernels' summation order on a GPU, where the bodies run as one grouped computation and K
// runs take about the kernel launches of one. An error of one run stops all (a RunError
// names it); cancellation checkpoints each. CanDistillTogether tells which runs qualify.
func DistillTogether(ctx context.Context, rs []config.Resolved, opts [][]RunOption) ([]*Result, error) {
	start := time.Now()
	return guarded(func() ([]*Result, error) {
		if len(rs) != len(opts) {
			return nil, fmt.Errorf("distill together: %d configurations and %d option lists", len(rs), len(opts))
		}
		eos := make([]engine.Options, len(rs))
		written := map[string]int{} // a folder or file a run writes: which run
		for i := range rs {
			o := collect(opts[i])
			eos[i] = o.engineOptions(start)
			ckpt := o.checkpointDir
			if ckpt == "" {
				ckpt = o.resumeDir // a resumed run checkpoints where it resumed from
			}
			for _, path := range []string{ckpt, o.historyPath, o.saveModels} {
				if path == "" {
					continue
				}
				key := filepath.Clean(path)
				if j, ok := written[key]; ok {
					return nil, &RunError{Index: i, Of: len(rs), Err: fmt.Errorf("it would write %s, as run %d does: runs distilled together need folders of their own", path, j+1)}
				}
				written[key] = i
			}
		}
		dev, err := torch.ParseDevice(rs[0].Device)
		if err != nil {
			return nil, err
		}
		return engine.DistillTogether(ctx, rs, eos, train.Mode(dev))
	})
}

// RunError is an error of one of the runs DistillTogether ran (Index: its place, 0-based).
type RunError = engine.RunError

// ShapeError says which setting keeps a run from being distilled together with the first.
type ShapeError = engine.ShapeError

// CanDistillTogether reports the key under which a run may be distilled together with
// others (runs of equal keys have one shape), or false when it cannot be (another method,
// learnt images, several processes).
func CanDistillTogether(r config.Resolved) (key string, ok bool) { return engine.TogetherKey(r.Config) }

// WithHistory writes the run history to path (conventionally OUT/metrics.jsonl; its schema
// is rundir's HistoryRecord). A fresh run replaces the file; a resumed run cuts it back to
// its checkpoint and continues it.
func WithHistory(path string) RunOption { return func(o *runOptions) { o.historyPath = path } }

// MeasureGradVariance measures the label meta-gradient's variance across fresh models, LD
// against LD RR, at the labels given (nil: uniform): gradvar.Measure on cfg's inputs.
func MeasureGradVariance(ctx context.Context, cfg config.Config, labels []float32, g gradvar.Options, opts ...RunOption) ([]gradvar.Method, error) {
	return guarded(func() ([]gradvar.Method, error) {
		o := collect(opts)
		return gradvar.Measure(ctx, g, labels, func() (*engine.Inputs, error) {
			r, err := config.Resolve(cfg)
			if err != nil {
				return nil, err
			}
			return engine.Prepare(r, o.dataset, o.baseFile)
		})
	})
}

// guarded is torch.Guard for labeldistill's entry points.
func guarded[T any](f func() (T, error)) (T, error) { return torch.Guard("labeldistill", f) }
