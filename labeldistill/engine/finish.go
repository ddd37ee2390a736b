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
func (l *Loop) testPhase(ctx context.Context, res *Result, saver *train.ModelSaver, ph *phases) error {
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
	return l.onPhase(PhaseRecord{name: "test", mean: res.TestMean, std: res.TestStd, took: took})
}

// secondsDuration is s seconds as a time.Duration.
func secondsDuration(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// finalTest trains M fresh models (eval_arch) for the kept T on the kept values, after
// those r holds from an earlier part, saving them through saver when it is not nil.
func (l *Loop) finalTest(ctx context.Context, res *Result, saver *train.ModelSaver, r *phaseTraining) error {
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
