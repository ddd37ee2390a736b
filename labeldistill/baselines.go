package labeldistill

// baselines.go: the baselines of docs/ALGORITHM.md §8 on the same base examples and seed: true
// one-hot labels, label smoothing, their RR versions when the method is RR, and (ldtorch)
// a teacher's soft labels. Each picks its number of training steps by validation.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// baselines runs every baseline named in the config.
func (r *run) baselines(ctx context.Context) (map[string]BaselineResult, error) {
	out := map[string]BaselineResult{}
	for _, name := range r.cfg.Baselines {
		if name == "none" {
			continue
		}
		r.report(Progress{Phase: "baseline", Message: name})
		start := time.Now()
		table, err := r.baselineTable(ctx, name)
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", name, err)
		}
		res, err := r.stepSearchAndTest(ctx, name, table)
		table.Free()
		if err != nil {
			return nil, fmt.Errorf("baseline %s: %w", name, err)
		}
		key := name
		if r.cfg.Method == config.MethodRR {
			key += "_rr"
		}
		out[key] = res
		if err := r.recordPhase("baseline", key, res.Mean, res.Std, time.Since(start)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// baselineTable builds the baseline's label table (N, classes) on the device.
func (r *run) baselineTable(ctx context.Context, name string) (*torch.Tensor, error) {
	n, classes := r.ds.Base.N(), r.ds.Classes
	switch name {
	case config.BaselineTrue, config.BaselineSmooth:
		eps := 0.0
		if name == config.BaselineSmooth {
			eps = r.cfg.LabelSmoothing
		}
		table := make([]float32, n*classes)
		for i, y := range r.ds.Base.Labels {
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
		return toDevice(t, r.dev)
	case config.BaselineTeacher:
		return r.teacherTable(ctx)
	}
	return nil, fmt.Errorf("unknown baseline %q", name)
}

// teacherTable trains a classifier on the whole target set with hard labels and returns its
// softmax(logits / temperature) on the base examples.
func (r *run) teacherTable(ctx context.Context) (*torch.Tensor, error) {
	gen, err := torch.NewGenerator(subSeed(r.seed, "teacher", 0))
	if err != nil {
		return nil, err
	}
	defer gen.Close()
	l, err := newLearner(r.net, false, r.cfg, adamSpec(r.cfg.TeacherLR), gen, r.dev)
	if err != nil {
		return nil, err
	}
	defer l.close()
	rng := rand.New(rand.NewPCG(subSeed(r.seed, "teacher-batches", 0), 0x7eac))
	n := r.ds.TargetSet.N()
	for step := 1; step <= r.cfg.TeacherSteps; step++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := func() error {
			s := torch.NewScope()
			defer s.Close()
			var c torch.Chain
			idx := c.T(sampleIndices(rng, n, min(r.cfg.TeacherBatch, n), r.dev))
			x := c.T(r.target.x.IndexSelect(0, idx))
			y := c.T(r.target.y.IndexSelect(0, idx))
			loss := c.T(torch.CrossEntropyInRange(c.T(l.net.Forward(l.params, l.buffers, x, true)), y)) // dataset labels, checked on load
			if c.Err() != nil {
				return c.Err()
			}
			return l.descend(loss)
		}()
		if err != nil {
			return nil, fmt.Errorf("teacher step %d: %w", step, err)
		}
		r.report(Progress{Phase: "baseline", Step: r.step, Message: "teacher: its classifier", Done: step, Total: r.cfg.TeacherSteps})
	}
	var table *torch.Tensor
	err = torch.NoGrad(func() error {
		s := torch.NewScope()
		defer s.Close()
		var c torch.Chain
		logits := c.T(l.logits(r.base.x))
		table = c.T(torch.Softmax(c.T(logits.DivScalar(r.cfg.TeacherTemperature)), 1))
		s.Keep(table)
		return c.Err()
	})
	return table, err
}

// stepSearchAndTest trains one model continuously, measuring validation error after each
// step count of the grid; the best (earliest on ties) is used to train M fresh models
// whose test accuracies are reported.
func (r *run) stepSearchAndTest(ctx context.Context, name string, table *torch.Tensor) (BaselineResult, error) {
	rr := r.cfg.Method == config.MethodRR
	grid := r.cfg.BaselineSteps
	valErr := make([]float64, 0, len(grid))
	res := BaselineResult{ValidationErrors: map[int]float64{}}
	tr := &trainer{net: r.net, rr: rr, cfg: r.cfg, baseX: r.base.x, table: table, batch: r.cfg.EvalBatch, opt: adamSpec(r.cfg.EvalLR), dev: r.dev}
	search := &probe{at: grid, fn: func(step int, l *batchedLearner) error {
		acc, err := r.validationAccuracy(ctx, l)
		if err != nil {
			return err
		}
		valErr = append(valErr, 100-acc)
		res.ValidationErrors[step] = 100 - acc
		return nil
	}}
	tr.progress = func(done, total int) {
		r.report(Progress{Phase: "baseline", Step: r.step, Message: name + ": step search", Done: done, Total: total})
	}
	unset := tr.reportSteps(grid[len(grid)-1])
	l, err := tr.trainOne(ctx, grid[len(grid)-1], subSeed(r.seed, "baseline-search-"+name, 0), search)
	unset()
	if err != nil {
		return res, err
	}
	l.close()
	res.Steps = BestSteps(grid, valErr)
	tr.net = r.evalNet
	tr.progress = func(done, total int) {
		r.report(Progress{Phase: "baseline", Step: r.step, Message: name + ": test models", Done: done, Total: total})
	}
	accs, err := r.evaluateSplit(func(lo, hi int) ([]float64, error) {
		return tr.evaluateModelRange(ctx, res.Steps, lo, hi, r.seed, "baseline-test-"+name, r.test.x, r.test.y, batchedMode(r.dev))
	}, r.cfg.EvalModels)
	if err != nil {
		return res, err
	}
	if accs, res.Diverged = keepFinite(accs); len(accs) == 0 {
		return res, &DivergedError{Purpose: "baseline " + name, Models: r.cfg.EvalModels, Steps: res.Steps, Field: "eval_lr", LR: r.cfg.EvalLR}
	}
	res.Accuracies = accs
	res.Mean, res.Std = MeanStd(accs)
	return res, nil
}
