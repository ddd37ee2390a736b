package engine

// together.go: several distillations in one process, their meta-loops in lockstep
// (runLockstep) and their meta-steps computed together (DistillTogether). On a GPU a
// meta-step of MNIST LD RR is hundreds of small kernels, each a host round trip; K runs
// stepped together launch the same number of kernels, each K times larger (nets.Batched's
// grouped bodies, one batched ridge solve).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// RunError is an error of one of the runs DistillTogether runs: Index is its place in
// the list (0-based).
type RunError struct {
	Index, Of int
	Err       error
}

func (e *RunError) Error() string { return fmt.Sprintf("run %d of %d: %v", e.Index+1, e.Of, e.Err) }
func (e *RunError) Unwrap() error { return e.Err }

// DistillTogether runs the distillations rs, run i under opts[i], in one process: their
// meta-loops in lockstep, each meta-step computed for all of them at once (rrStepTogether),
// then their final tests and baselines one after another. It serves LD RR runs that learn
// labels alone, one process each (no Group), fresh or resumed at one Position, and of one
// shape: device, architecture, dataset size, base examples, inner and outer batch, epochs
// and validation epochs (seeds, base seeds and every other setting may differ). Each run's
// folder, checkpoints and result are those of the run alone: with the bodies run model by
// model (mode nets.BodyPerModel, the CPU's) bit for bit, grouped (the GPU's) up to the
// kernels' summation order. An error of one run stops them all (a RunError naming it); a
// cancelled ctx checkpoints each.
func DistillTogether(ctx context.Context, rs []config.Resolved, opts []Options, mode nets.BodyMode) ([]*Result, error) {
	if len(rs) == 0 || len(rs) != len(opts) {
		return nil, fmt.Errorf("distill together: %d configurations and %d options", len(rs), len(opts))
	}
	runs := make([]*openedRun, 0, len(rs))
	defer func() {
		for _, r := range runs {
			r.close()
		}
	}()
	for i, r := range rs {
		if opts[i].Group != nil {
			return nil, &RunError{i, len(rs), errors.New("runs distilled together are one process each (no process group)")}
		}
		run, err := openRun(ctx, r, opts[i], &parallel{})
		if err != nil {
			return nil, &RunError{i, len(rs), err}
		}
		runs = append(runs, run)
	}
	ls := make([]*Loop, len(runs))
	for i, run := range runs {
		ls[i] = run.l
		if err := sameShape(ls[0], ls[i]); err != nil {
			return nil, &RunError{i, len(rs), err}
		}
	}
	if err := runLockstep(ctx, ls, func(targets [][]int) error { return metaStepTogether(ls, targets, mode) }); err != nil {
		return nil, err
	}
	results := make([]*Result, len(runs))
	for i, run := range runs {
		var err error
		if results[i], err = run.finish(ctx); err != nil {
			return nil, &RunError{i, len(rs), err}
		}
	}
	return results, nil
}

// sameShape checks that l can step in lockstep with lead (DistillTogether's conditions).
func sameShape(lead, l *Loop) error {
	c := l.in.cfg
	if c.Method != config.MethodRR || c.Learn != config.LearnLabels {
		return config.FieldErrorf("method", "distilled together: LD RR learning labels only (got method %s, learn %s)", c.Method, c.Learn)
	}
	a := lead.in.cfg
	for _, d := range []struct {
		field string
		x, y  any
	}{
		{"device", a.Device, c.Device},
		{"arch", a.Arch, c.Arch},
		{"base_examples", a.BaseExamples, c.BaseExamples},
		{"inner_batch", a.InnerBatch, c.InnerBatch},
		{"outer_batch", a.OuterBatch, c.OuterBatch},
		{"epochs", a.Epochs, c.Epochs},
		{"validate_every", a.ValidateEvery, c.ValidateEvery},
		{"target examples", lead.in.ds.TargetSet.N, l.in.ds.TargetSet.N},
		{"image shape", fmt.Sprint(lead.in.net.InShape), fmt.Sprint(l.in.net.InShape)},
		{"classes", lead.in.ds.Classes, l.in.ds.Classes},
		{"ridge_lambda", a.RidgeLambda, c.RidgeLambda},
		{"ridge_pseudo_step", a.RidgePseudoStep, c.RidgePseudoStep},
		{"threads", a.Threads, c.Threads},
		{"allow_tf32", a.AllowTF32, c.AllowTF32},
		{"position", lead.pos, l.pos},
	} {
		if d.x != d.y {
			return &ShapeError{Field: d.field, First: d.x, This: d.y}
		}
	}
	return nil
}

// TogetherKey is the key under which a run of cfg (resolved) may be distilled together
// with others: runs of one key have one shape (sameShape checks it again on the loaded
// data and positions); ok is false for a run that cannot be (not LD RR learning labels).
func TogetherKey(cfg config.Config) (key string, ok bool) {
	if cfg.Method != config.MethodRR || cfg.Learn != config.LearnLabels {
		return "", false
	}
	return fmt.Sprintf("device %s, arch %s, dataset %s from %s, target set %d, validation %d, base %d, N_i %d, N_o %d, epochs %d, validate every %d, ridge %g/%g, threads %d, tf32 %v",
		cfg.Device, cfg.Arch, cfg.Dataset, cfg.Source, cfg.TargetSetSize, cfg.ValidationSize, cfg.BaseExamples, cfg.InnerBatch, cfg.OuterBatch,
		cfg.Epochs, cfg.ValidateEvery, cfg.RidgeLambda, cfg.RidgePseudoStep, cfg.Threads, cfg.AllowTF32), true
}

// ShapeError says why a run cannot step together with the first of DistillTogether's runs:
// Field ("position" for checkpoints at different meta-steps) differs.
type ShapeError struct {
	Field       string
	First, This any
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("distilled together, the runs must share their %s: the first has %v, this one %v", e.Field, e.First, e.This)
}

// metaStepTogether is metaStep for every loop of ls at once.
func metaStepTogether(ls []*Loop, targets [][]int, mode nets.BodyMode) error {
	t0 := time.Now()
	defer func() {
		for _, l := range ls { // each run's meta-loop took the steps' whole time
			l.clock.distillSeconds += time.Since(t0).Seconds()
		}
	}()
	if i, err := queueTogether(ls, targets, mode); err != nil {
		if i < 0 { // the joint computation: every run's step
			return ls[0].stepped(err)
		}
		return &RunError{i, len(ls), ls[i].stepped(err)}
	}
	for i, l := range ls {
		if err := l.stepped(nil); err != nil {
			return &RunError{i, len(ls), err}
		}
	}
	return nil
}

// queueTogether is queueStep for every loop of ls at once; on an error it says which run's
// (−1: the joint computation's).
func queueTogether(ls []*Loop, targets [][]int, mode nets.BodyMode) (int, error) {
	s := torch.NewScope()
	defer s.Close()
	steps := make([]*stepInProgress, len(ls))
	defer func() {
		for _, st := range steps {
			if st != nil {
				torch.FreeAll(st.grads)
			}
		}
	}()
	for i, l := range ls {
		ti, bi, n, total, err := l.stepIndices(targets[i])
		if err == nil {
			steps[i], err = l.beginStep(ti, bi, n, total)
		}
		if err != nil {
			return i, err
		}
	}
	outs, err := rrStepTogether(ls, steps, mode)
	if err != nil {
		return -1, err
	}
	for i, l := range ls {
		v, err := l.reading(steps[i].b, outs[i])
		if err == nil {
			err = l.seeGradients(steps[i].grads)
		}
		if err != nil {
			return i, err
		}
		l.pend(v, outs[i].batch)
	}
	return 0, nil
}

// rrStepTogether is rrStep for the models of ls on their batches, as one computation: the
// base and target features of every model (model by model, or grouped), the ridge solves,
// one differentiation of the summed label losses (each run's labels get their own loss's
// gradient), each run's update, then one differentiation of the summed feature losses and
// each model's Adam steps. Its outputs are in the caller's scope.
func rrStepTogether(ls []*Loop, steps []*stepInProgress, mode nets.BodyMode) ([]stepOutputs, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	k := len(ls)
	ms := make([]*learner, k)
	for i, l := range ls {
		ms[i] = l.model
	}
	cfg := ls[0].in.cfg
	zb, ws, infos, logits := make([]*torch.Tensor, k), make([]*torch.Tensor, k), make([]*torch.Tensor, k), make([]*torch.Tensor, k)
	if mode == nets.BodyGrouped && k > 1 {
		if err := groupedHeads(ms, steps, zb, ws, infos, logits, cfg); err != nil {
			return nil, err
		}
	} else {
		for i, m := range ms { // rrStep's head, model by model
			h, err := rrHead(m, steps[i].b, nil, nil)
			if err != nil {
				return nil, err
			}
			zb[i], ws[i], infos[i], logits[i] = h.zb, h.w, h.info, h.logits
		}
	}
	losses, wrongs := make([]*torch.Tensor, k), make([]*torch.Tensor, k)
	var labelParams []*torch.Tensor
	for i, st := range steps {
		losses[i] = c.T(torch.CrossEntropyInRange(logits[i], st.b.yt))
		wrongs[i] = c.T(train.WrongCount(logits[i], st.b.yt))
		labelParams = append(labelParams, st.b.params...)
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	dY, err := torch.Grad([]*torch.Tensor{c.T(sumAll(losses))}, labelParams, torch.GradOpts{RetainGraph: true})
	if err != nil {
		return nil, err
	}
	outs := make([]stepOutputs, k)
	featLosses := make([]*torch.Tensor, k)
	var inputs []*torch.Tensor
	for i, st := range steps {
		n := len(st.b.params)
		if outs[i], err = st.b.update(dY[:n], c.T(losses[i].Detach()), wrongs[i]); err != nil {
			return nil, err
		}
		dY = dY[n:]
		outs[i].info = infos[i]
		_, ybNew, err := st.b.current()
		if err != nil {
			return nil, err
		}
		featLosses[i] = c.T(torch.SoftCrossEntropy(c.T(train.RRLogits(zb[i], ws[i], ms[i].scale)), ybNew))
		if !ms[i].frozen {
			inputs = append(inputs, ms[i].params...)
		}
		inputs = append(inputs, ms[i].scale)
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	grads, err := torch.Grad([]*torch.Tensor{c.T(sumAll(featLosses))}, inputs, torch.GradOpts{})
	if err != nil {
		return nil, err
	}
	for i, m := range ms { // each model's steps, as rrFeatureStep takes them
		if !m.frozen {
			n := len(m.params)
			if err := m.opt.StepWith(grads[:n]); err != nil {
				return nil, err
			}
			grads = grads[n:]
		}
		if err := m.sOpt.StepWith(grads[:1]); err != nil {
			return nil, err
		}
		grads = grads[1:]
		if err := torch.NoGrad(func() error { return m.w.Copy_(ws[i]) }); err != nil {
			return nil, err
		}
	}
	for _, o := range outs {
		s.Keep(o.loss, o.wrong, o.info)
	}
	return outs, nil
}

// groupedHeads computes, for the models ms at once (nets.Batched, grouped bodies), each
// model's base features zb[i], head ws[i], solve status infos[i] and target logits.
func groupedHeads(ms []*learner, steps []*stepInProgress, zb, ws, infos, logits []*torch.Tensor, cfg config.Config) error {
	var c torch.Chain
	k := int64(len(ms))
	bat, err := nets.NewBatched(ms[0].net, k)
	if err != nil {
		return err
	}
	bat.Mode = nets.BodyGrouped
	params, buffers := make([][]*torch.Tensor, k), make([][]*torch.Tensor, k)
	xs, ys, xts, kept, scales := make([]*torch.Tensor, k), make([]*torch.Tensor, k), make([]*torch.Tensor, k), make([]*torch.Tensor, k), make([]*torch.Tensor, k)
	for i, m := range ms {
		params[i], buffers[i] = m.params, m.buffers
		b := steps[i].b
		xs[i], ys[i], xts[i], kept[i], scales[i] = b.x, b.y, b.xt, m.w, m.scale
	}
	z := c.T(train.WithBiasBatched(c.T(bat.Features(params, buffers, c.T(torch.Stack(xs, 0)), true))))
	if c.Err() != nil {
		return c.Err()
	}
	w, info, err := train.RRWeights(z, c.T(torch.Stack(ys, 0)), c.T(torch.Stack(kept, 0)), cfg)
	if err != nil {
		return err
	}
	var zt *torch.Tensor
	c.Check(torch.NoGrad(func() (err error) {
		var f *torch.Tensor
		if f, err = bat.Features(params, buffers, c.T(torch.Stack(xts, 0)), true); err == nil {
			zt, err = train.WithBiasBatched(f)
		}
		return err
	}))
	all := c.T(train.RRLogits(zt, w, c.T(c.T(torch.Stack(scales, 0)).Reshape(k, 1, 1))))
	for i := range ms {
		zb[i] = c.T(z.Select(0, int64(i)))
		ws[i] = c.T(w.Select(0, int64(i)))
		infos[i] = c.T(info.Select(0, int64(i)))
		logits[i] = c.T(all.Select(0, int64(i)))
	}
	return c.Err()
}

// sumAll is ts[0] + ts[1] + …
func sumAll(ts []*torch.Tensor) (*torch.Tensor, error) {
	sum := ts[0]
	for _, t := range ts[1:] {
		var err error
		if sum, err = sum.Add(t); err != nil {
			return nil, err
		}
	}
	return sum, nil
}
