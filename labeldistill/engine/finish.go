package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

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

// result is the run's result as of the end of the meta-loop.
func (l *Loop) result() *Result {
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
			MetaSteps:       l.pos.Step,
			Validations:     l.vals,
			BestValidation:  l.best.record,
			DistillSeconds:  l.clock.distillSeconds,
			SecondsPerStep:  l.clock.distillSeconds / float64(max(1, l.pos.Step)),
			LibtorchVersion: torch.Version(),
			DataSHA256:      ds.Files,
			NetworkSHA256:   l.in.networkSHA256(),
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
func (l *Loop) testPhase(ctx context.Context, res *Result, saver *train.ModelSaver, ph PhaseLog) error {
	var took time.Duration
	if t := ph.Test(); t != nil && saver == nil {
		res.TestAccuracies, res.TestMean, res.TestStd, res.TestDiverged = slices.Clone(t.Accuracies), t.Mean, t.Std, t.Diverged
		took = secondsDuration(t.Seconds)
		l.clock.priorWall += t.Seconds
		l.note(Progress{Phase: "test", Message: fmt.Sprintf("the %d test models' accuracies are those finished before the resume (%s)",
			len(t.Accuracies)+t.Diverged, PhasesFile)})
	} else {
		r := ph.Begin(l, "test", saver == nil)
		if k := len(r.Accuracies()); k > 0 {
			l.note(Progress{Phase: "test", Message: fmt.Sprintf("%d of the %d test models were scored before the resume (%s)",
				k, l.in.cfg.EvalModels, PhasesFile)})
		}
		if err := l.finalTest(ctx, res, saver, r); err != nil {
			return err
		}
		took = r.Took()
	}
	if err := ph.TestDone(res, took); err != nil {
		l.note(Progress{Phase: "test", Message: "warning: " + err.Error()})
	}
	return l.onPhase(PhaseRecord{Name: "test", Mean: res.TestMean, Std: res.TestStd, Took: took})
}

// secondsDuration is s seconds as a time.Duration.
func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// finalTest trains M fresh models (eval_arch) for the kept T on the kept values, after
// those r holds from an earlier part, saving them through saver when it is not nil.
func (l *Loop) finalTest(ctx context.Context, res *Result, saver *train.ModelSaver, r PhaseRun) error {
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
func ToDevice(t *torch.Tensor, dev torch.Device) (*torch.Tensor, error) { return toDevice(t, dev) }

// toDevice moves t to dev, freeing the original when it was copied.
func toDevice(t *torch.Tensor, dev torch.Device) (*torch.Tensor, error) {
	if t.Device() == dev {
		return t, nil
	}
	moved, err := t.To(dev)
	t.Free()
	return moved, err
}

// finishedTest is the final test's outcome.
type FinishedTest struct {
	Accuracies []float64 `json:"accuracies"`
	Mean       float64   `json:"mean"`
	Std        float64   `json:"std"`
	Diverged   int       `json:"diverged_models,omitempty"`
	Seconds    float64   `json:"seconds"`
}

// finishedBaseline is one baseline's outcome.
type FinishedBaseline struct {
	Result  BaselineResult `json:"result"`
	Seconds float64        `json:"seconds"`
}

// testModels trains and scores the phase's M test models with tr for steps each (model i
// from Seed(seed, purpose, i)) and returns their accuracies (NaN: diverged), in model
// order: those r holds from an earlier part, then the rest, each recorded as it is scored
// when r is tracked. In a data-parallel run each rank trains its share (nothing is held or
// recorded there).
func (l *Loop) testModels(ctx context.Context, tr *train.Trainer, steps int, purpose string, r PhaseRun) ([]float64, error) {
	in := l.in
	mode := train.Mode(in.dev)
	if l.par.size() > 1 {
		return l.par.evaluateSplit(func(lo, hi int) ([]float64, error) {
			return tr.TestRange(ctx, steps, lo, hi, in.seed, purpose, in.test.x, in.test.y, mode)
		}, in.cfg.EvalModels)
	}
	if r.Tracked() {
		tr.Together = 1
		tr.Scored = func(_ int, accs []float64) error {
			r.Scored(accs)
			return nil
		}
		defer func() { tr.Scored = nil }()
	}
	done := r.Accuracies()
	rest, err := tr.TestRange(ctx, steps, len(done), in.cfg.EvalModels, in.seed, purpose, in.test.x, in.test.y, mode)
	if err != nil {
		return nil, err
	}
	return append(done, rest...), nil
}

// PhasesFile is the name, inside a checkpoint folder, of the finished phases' results
// (rundir.Phases).
const PhasesFile = "phases.json"

// PhaseLog keeps the results of the phases after the meta-loop (the final test, then each
// baseline) across a cut of the run (rundir.Phases, over phases.json); NoPhaseLog keeps
// nothing.
type PhaseLog interface {
	// Test is the final test's result as an earlier part of the run finished it, or nil;
	// Baseline likewise for baseline key.
	Test() *FinishedTest
	Baseline(key string) *FinishedBaseline
	// Begin starts phase ("test" or a baseline's key), continuing an earlier part's record
	// of it when reuse is true.
	Begin(l *Loop, phase string, reuse bool) PhaseRun
	// TestDone and BaselineDone record a finished phase.
	TestDone(res *Result, took time.Duration) error
	BaselineDone(key string, res BaselineResult, took time.Duration) error
}

// PhaseRun is one phase being trained, continued from what an earlier part of the run
// finished of it, and recorded as it goes.
type PhaseRun interface {
	// Accuracies are the finished test models' (NaN: diverged), in model order; Search is
	// a baseline's finished step search (steps 0: none).
	Accuracies() []float64
	Search() (steps int, validationErrors map[int]float64)
	// Tracked says each test model is recorded as soon as it is scored (Scored).
	Tracked() bool
	Searched(steps int, validationErrors map[int]float64)
	Scored(accs []float64)
	// Took is the phase's time, the earlier part's included.
	Took() time.Duration
}

// NoPhaseLog keeps no phase results: every phase is trained and nothing is recorded.
type NoPhaseLog struct{}

func (NoPhaseLog) Test() *FinishedTest                                      { return nil }
func (NoPhaseLog) Baseline(string) *FinishedBaseline                        { return nil }
func (NoPhaseLog) Begin(*Loop, string, bool) PhaseRun                       { return &untracked{start: time.Now()} }
func (NoPhaseLog) TestDone(*Result, time.Duration) error                    { return nil }
func (NoPhaseLog) BaselineDone(string, BaselineResult, time.Duration) error { return nil }

// untracked is a PhaseRun that records nothing.
type untracked struct{ start time.Time }

func (*untracked) Accuracies() []float64          { return nil }
func (*untracked) Search() (int, map[int]float64) { return 0, nil }
func (*untracked) Tracked() bool                  { return false }
func (*untracked) Searched(int, map[int]float64)  {}
func (*untracked) Scored([]float64)               {}
func (r *untracked) Took() time.Duration          { return time.Since(r.start) }
