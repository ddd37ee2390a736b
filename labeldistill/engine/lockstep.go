package engine

// lockstep.go: the one driver of the meta-loop (Loop.run is the lockstep of one loop;
// DistillTogether steps several): epochs of target batches, one meta-step of every loop per
// batch, then each loop's reads, validation and epoch-end hooks.

import (
	"context"
	"errors"
	"time"
)

// runLockstep runs the meta-loops ls from their Position to the end of the last epoch; ls
// share their shape (epochs, meta-steps per epoch, validation epochs) and Position. step
// takes one meta-step of every loop, loop i on its own target examples targets[i]; each
// loop's observers, reads, validations and resets are its own.
func runLockstep(ctx context.Context, ls []*Loop, step func(targets [][]int) error) error {
	lead := ls[0]
	cfg := lead.in.cfg
	perEpoch := lead.stepsPerEpoch()
	for _, l := range ls {
		if err := l.onStart(); err != nil {
			return err
		}
	}
	targets := make([][]int, len(ls))
	for ; lead.pos.Epoch <= cfg.Epochs; nextEpoch(ls) {
		epoch := lead.pos.Epoch
		for _, l := range ls {
			if l.pos.NextBatch == 0 {
				l.order = l.rand.epochOrder(l.in.ds.TargetSet.N)
			}
		}
		for lead.pos.NextBatch < perEpoch {
			if err := ctx.Err(); err != nil {
				return cancelledAll(ls, err)
			}
			b := lead.pos.NextBatch
			for i, l := range ls {
				lo, hi := b*cfg.OuterBatch, min((b+1)*cfg.OuterBatch, l.in.ds.TargetSet.N)
				targets[i] = l.order[lo:hi]
			}
			if err := step(targets); err != nil {
				return err
			}
			for _, l := range ls {
				l.pos.NextBatch++
				if err := l.onStepped(); err != nil {
					return err
				}
			}
		}
		for _, l := range ls {
			if err := l.read(); err != nil {
				return err
			}
		}
		validated := false
		if ValidationDue(epoch, cfg.Epochs, cfg.ValidateEvery) {
			for _, l := range ls {
				if err := ctx.Err(); err != nil {
					return cancelledAll(ls, err)
				}
				start := time.Now()
				if err := l.validate(ctx, epoch); err != nil {
					if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
						return cancelledAll(ls, err)
					}
					return err
				}
				if err := l.onValidated(l.vals[len(l.vals)-1], time.Since(start)); err != nil {
					return err
				}
			}
			validated = true
		}
		for _, l := range ls {
			if err := l.onEpochEnd(epoch, validated); err != nil {
				return err
			}
		}
	}
	return nil
}

func nextEpoch(ls []*Loop) {
	for _, l := range ls {
		l.pos.Epoch, l.pos.NextBatch, l.order = l.pos.Epoch+1, 0, nil
	}
}

// cancelledAll ends every loop of ls on ctxErr (each checkpoints at its Position).
func cancelledAll(ls []*Loop, ctxErr error) error {
	var first error
	for _, l := range ls {
		if err := l.cancelled(ctxErr); err != ctxErr && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	return ctxErr
}
