package engine

// validate.go: the meta-loop's validation phase (docs/ALGORITHM.md §7): every k epochs a
// fresh model trains for T steps on the current values and the best are kept; the kept
// tables a fresh model trains on, and the fresh-model trainer of the run's recipe.

import (
	"context"
	"fmt"
	"math"

	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// tables are the current base images and labels with the learnt values in them, detached:
// what a fresh model trains on.
func (l *Loop) tables() (x, y *torch.Tensor, err error) { return l.baseBatch(nil, true) }

// validate trains one fresh model for T steps on the current values and keeps them if its
// validation accuracy is the best so far (ties: the later values win).
func (l *Loop) validate(ctx context.Context, epoch int) error {
	s := torch.NewScope()
	defer s.Close()
	x, y, err := l.tables()
	if err != nil {
		return err
	}
	T := l.T()
	var lrs []float32
	if l.dd != nil {
		if lrs, err = l.dd.stepSizes(); err != nil {
			return err
		}
	}
	m, err := l.freshTrainer(l.in.net, x, y, lrs).TrainOne(ctx, T, train.Seed(l.in.seed, "validation", epoch), nil)
	if err != nil {
		return fmt.Errorf("validation after epoch %d: %w", epoch, err)
	}
	acc, err := l.par.validationAccuracy(ctx, m, l.in.validation)
	diverged := []bool{false}
	if err == nil {
		diverged, err = m.Diverged()
	}
	m.Close()
	if err != nil {
		return err
	}
	rec := ValidationRecord{Epoch: epoch, Step: l.pos.Step, T: T, Accuracy: acc}
	if diverged[0] {
		// Its accuracy (one class predicted everywhere) says nothing about the values.
		rec.Accuracy, rec.Diverged, acc = 0, true, math.NaN()
		l.note(Progress{Phase: "validate", Epoch: epoch, Epochs: l.in.cfg.Epochs,
			Message: fmt.Sprintf("warning: the validation model after epoch %d diverged (non-finite parameters after %d steps; eval_lr %g): these labels are not kept", epoch, T, l.in.cfg.EvalLR)})
	}
	l.vals = append(l.vals, rec)
	l.last.valAcc = acc
	if !diverged[0] && (l.best.labels == nil || acc >= l.best.record.Accuracy) {
		if l.best.labels, err = y.Float32s(); err != nil {
			return err
		}
		l.best.images, l.best.lrs = nil, lrs
		if x != l.in.base.x {
			if l.best.images, err = x.Float32s(); err != nil {
				return err
			}
		}
		l.best.record = rec
	}
	return nil
}

// freshTrainer trains fresh models of net on (x, y) with the run's recipe: Adam on random
// minibatches, or method dd's: Wang et al.'s initialisation and the schedule with the step
// sizes lrs.
func (l *Loop) freshTrainer(net *nets.Net, x, y *torch.Tensor, lrs []float32) *train.Trainer {
	if l.dd == nil {
		return l.in.evalTrainer(net, x, y)
	}
	tr := l.in.evalTrainer(net.XavierInit(), x, y)
	tr.Schedule = l.dd.schedule(lrs)
	return tr
}

// keptTables are the kept values as tensors on the device (the final test's and a
// result's): the best images (or the base images) and the best labels.
func (l *Loop) keptTables() (x, y *torch.Tensor, err error) {
	in := l.in
	s := in.ds.Shape
	n := int64(in.ds.Base.N)
	x = in.base.x
	if l.best.images != nil {
		if x, err = torch.FromFloat32(l.best.images, n, s[0], s[1], s[2]); err != nil {
			return nil, nil, err
		}
		if x, err = toDevice(x, in.dev); err != nil {
			return nil, nil, err
		}
	}
	if y, err = torch.FromFloat32(l.best.labels, n, int64(in.ds.Classes)); err != nil {
		return nil, nil, err
	}
	y, err = toDevice(y, in.dev)
	return x, y, err
}
