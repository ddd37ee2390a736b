package engine

// baselines.go: the baselines of docs/ALGORITHM.md §8 on the same base examples and seed: true
// one-hot labels, label smoothing, their RR versions when the method is RR, and (ldtorch)
// a teacher's soft labels. Each picks its number of training steps by validation.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// baselines runs every baseline named in the config, taking from ph those an earlier part
// of the run finished, and records each in ph.
func (l *Loop) baselines(ctx context.Context, ph PhaseLog) (map[string]BaselineResult, error) {
	out := map[string]BaselineResult{}
	in := l.in
	for _, name := range in.cfg.Baselines {
		if name == "none" {
			continue
		}
		key := name
		if in.rr() {
			key += "_rr"
		}
		res, took, err := l.baseline(ctx, name, key, ph)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", name, err)
		}
		out[key] = res
		if err := ph.BaselineDone(key, res, took); err != nil {
			l.note(Progress{Phase: "baseline", Message: "warning: " + err.Error()})
		}
		if err := l.onPhase(PhaseRecord{Name: "baseline", Baseline: key, Mean: res.Mean, Std: res.Std, Took: took}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// baseline is one baseline's result and the time it took: from an earlier part of the run
// when ph holds it, else trained.
func (l *Loop) baseline(ctx context.Context, name, key string, ph PhaseLog) (BaselineResult, time.Duration, error) {
	if b := ph.Baseline(key); b != nil {
		l.clock.priorWall += b.Seconds
		l.note(Progress{Phase: "baseline", Message: fmt.Sprintf("%s: the result finished before the resume (%s)", name, PhasesFile)})
		return b.Result, secondsDuration(b.Seconds), nil
	}
	r := ph.Begin(l, key, true)
	msg := name
	if steps, _ := r.Search(); steps > 0 {
		msg += fmt.Sprintf(": its step search (%d steps) and %d of the %d test models finished before the resume (%s)",
			steps, len(r.Accuracies()), l.in.cfg.EvalModels, PhasesFile)
	}
	l.note(Progress{Phase: "baseline", Message: msg})
	table, err := l.baselineTable(ctx, name)
	if err != nil {
		return BaselineResult{}, 0, err
	}
	res, err := l.stepSearchAndTest(ctx, name, table, r)
	table.Free()
	return res, r.Took(), err
}

// baselineTable builds the baseline's label table (N, classes) on the device.
func (l *Loop) baselineTable(ctx context.Context, name string) (*torch.Tensor, error) {
	in := l.in
	n, classes := in.ds.Base.N, in.ds.Classes
	switch name {
	case config.BaselineTrue, config.BaselineSmooth:
		eps := 0.0
		if name == config.BaselineSmooth {
			eps = in.cfg.LabelSmoothing
		}
		table := make([]float32, n*classes)
		for i, y := range in.ds.Base.Labels {
			if y < 0 || int(y) >= classes {
				return nil, fmt.Errorf("base example %d has label %d outside the target's %d classes (true labels exist only within a dataset)", i, y, classes)
			}
			for c := 0; c < classes; c++ {
				v := eps / float64(classes)
				if int64(c) == y {
					v += 1 - eps
				}
				table[i*classes+c] = float32(v)
			}
		}
		t, err := torch.FromFloat32(table, int64(n), int64(classes))
		if err != nil {
			return nil, err
		}
		return toDevice(t, in.dev)
	case config.BaselineTeacher:
		return l.teacherTable(ctx)
	}
	return nil, fmt.Errorf("unknown baseline %q", name)
}

// teacherTable trains a classifier on the whole target set with hard labels and returns its
// softmax(logits / temperature) on the base examples.
func (l *Loop) teacherTable(ctx context.Context) (*torch.Tensor, error) {
	in := l.in
	gen, err := torch.NewGenerator(train.Seed(in.seed, "teacher", 0))
	if err != nil {
		return nil, err
	}
	defer gen.Close()
	m, err := newLearner(in.net, false, in.cfg, train.AdamSpec(in.cfg.TeacherLR), gen, in.dev)
	if err != nil {
		return nil, err
	}
	defer m.close()
	rng := rand.New(rand.NewPCG(train.Seed(in.seed, "teacher-batches", 0), 0x7eac))
	n := in.ds.TargetSet.N
	for step := 1; step <= in.cfg.TeacherSteps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := func() error {
			s := torch.NewScope()
			defer s.Close()
			var c torch.Chain
			idx := c.T(sampleIndices(rng, n, min(in.cfg.TeacherBatch, n), in.dev))
			x := c.T(in.target.x.IndexSelect(0, idx))
			y := c.T(in.target.y.IndexSelect(0, idx))
			loss := c.T(torch.CrossEntropyInRange(c.T(m.net.Forward(m.params, m.buffers, x, true)), y)) // dataset labels, checked on load
			if c.Err() != nil {
				return c.Err()
			}
			return m.descend(loss)
		}()
		if err != nil {
			return nil, fmt.Errorf("teacher step %d: %w", step, err)
		}
		l.note(Progress{Phase: "baseline", Message: "teacher: its classifier", Done: step, Total: in.cfg.TeacherSteps})
	}
	var table *torch.Tensor
	err = torch.NoGrad(func() error {
		s := torch.NewScope()
		defer s.Close()
		var c torch.Chain
		logits := c.T(m.logits(in.base.x))
		table = c.T(torch.Softmax(c.T(logits.DivScalar(in.cfg.TeacherTemperature)), 1))
		s.Keep(table)
		return c.Err()
	})
	return table, err
}

// stepSearchAndTest trains one model continuously, measuring validation error after each
// step count of the grid; the best (earliest on ties) is used to train M fresh models
// whose test accuracies are reported. What r holds from an earlier part (the search, the
// first test models) is not trained again.
func (l *Loop) stepSearchAndTest(ctx context.Context, name string, table *torch.Tensor, r PhaseRun) (BaselineResult, error) {
	in := l.in
	res := BaselineResult{}
	tr := in.evalTrainer(in.net, in.base.x, table)
	if steps, errs := r.Search(); steps > 0 {
		res.Steps, res.ValidationErrors = steps, maps.Clone(errs)
	} else {
		tr.Progress = func(done, total int) {
			l.note(Progress{Phase: "baseline", Message: name + ": step search", Done: done, Total: total})
		}
		var err error
		res.Steps, res.ValidationErrors, err = tr.SearchSteps(ctx, in.cfg.BaselineSteps, train.Seed(in.seed, "baseline-search-"+name, 0),
			func(m *train.Models) (float64, error) { return l.par.validationAccuracy(ctx, m, in.validation) })
		if err != nil {
			return res, err
		}
		r.Searched(res.Steps, res.ValidationErrors)
	}
	tr.Net = in.evalNet
	tr.Progress = func(done, total int) {
		l.note(Progress{Phase: "baseline", Message: name + ": test models", Done: done, Total: total})
	}
	accs, err := l.testModels(ctx, tr, res.Steps, "baseline-test-"+name, r)
	if err != nil {
		return res, err
	}
	if accs, res.Diverged = train.KeepFinite(accs); len(accs) == 0 {
		return res, &DivergedError{Purpose: "baseline " + name, Models: in.cfg.EvalModels, Steps: res.Steps, Field: "eval_lr", LR: in.cfg.EvalLR}
	}
	res.Accuracies = accs
	res.Mean, res.Std = train.MeanStd(accs)
	return res, nil
}
