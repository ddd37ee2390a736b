package engine

// sequential_test.go: the test oracle of package train. A single-model trainer written on its
// own (the learner of the meta-step, a step of its own, scoring chunk by chunk), against
// which Trainer.TrainModels and Trainer.Test are checked: bit for bit in nets.BodyPerModel, to
// rounding in nets.BodyGrouped. It is the path validation and the baselines took before
// every fresh model went through trainModels.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// trainStepSequential is one step of a single model trained on fixed labels: a soft-CE step
// (LD) or §5 steps 1–3 and 5 (RR).
func trainStepSequential(l *learner, baseX, table, idx *torch.Tensor) error {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	xb := c.T(baseX.IndexSelect(0, idx))
	yb := c.T(table.IndexSelect(0, idx))
	if c.Err() != nil {
		return c.Err()
	}
	if !l.rr {
		loss := c.T(torch.SoftCrossEntropy(c.T(l.net.Forward(l.params, l.buffers, xb, true)), yb))
		if c.Err() != nil {
			return c.Err()
		}
		return l.descend(loss)
	}
	zb := c.T(l.features(xb, true))
	if c.Err() != nil {
		return c.Err()
	}
	// Unchecked: a failed solve leaves non-finite weights, which the divergence check
	// after training reports; checking here would read back to the host every step.
	wl, _, err := train.RidgeSolve(zb, yb, l.cfg.RidgeLambda)
	if err != nil {
		return err
	}
	w := c.T(train.PseudoStep(l.w, wl, l.cfg.RidgePseudoStep))
	return rrFeatureStep(l, zb, w, yb, nil, &c)
}

// trainSequential returns a new model trained for steps from a fresh initialisation drawn with seed.
// It calls probe (if not nil) after the steps listed in probeAt (ascending), and onStep (if
// not nil) after every step.
func trainSequential(ctx context.Context, tr *train.Trainer, steps int, seed uint64, probeAt []int, probe func(step int, l *learner) error, onStep func(step int)) (*learner, error) {
	gen, err := torch.NewGenerator(seed)
	if err != nil {
		return nil, err
	}
	defer gen.Close()
	l, err := newLearner(tr.Net, tr.RR, tr.Cfg, tr.Opt, gen, tr.Device)
	if err != nil {
		return nil, err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	n := int(tr.Images.Shape()[0])
	batch := min(tr.Batch, n)
	next := 0
	for step := 1; step <= steps; step++ {
		// Every step: a signal is seen within one step (ctx.Err is a lock and a read).
		if err := ctx.Err(); err != nil {
			l.close()
			return nil, err
		}
		idx, err := sampleIndices(rng, n, batch, tr.Device)
		if err == nil {
			err = trainStepSequential(l, tr.Images, tr.Labels, idx)
			idx.Free()
		}
		if err != nil {
			l.close()
			return nil, fmt.Errorf("training step %d: %w", step, err)
		}
		if onStep != nil {
			onStep(step)
		}
		for next < len(probeAt) && probeAt[next] == step {
			if err := probe(step, l); err != nil {
				l.close()
				return nil, err
			}
			next++
		}
	}
	return l, nil
}

// accuracySequential is the top-1 accuracy (%) of l on (x, y), scored in chunks without gradients.
func accuracySequential(l *learner, x, y *torch.Tensor) (float64, error) {
	n := x.Shape()[0]
	var counts []int64
	err := torch.WithScope(func(outer *torch.Scope) error {
		return torch.NoGrad(func() error {
			// Each chunk's wrong count stays on the device; all are read at once at the end
			// (one synchronisation on a GPU instead of one per chunk).
			var wrong []*torch.Tensor
			for start := int64(0); start < n; start += train.EvalChunk {
				s := torch.NewScope()
				var c torch.Chain
				size := min(train.EvalChunk, n-start)
				xs := c.T(x.Narrow(0, start, size))
				ys := c.T(y.Narrow(0, start, size))
				logits := c.T(l.logits(xs))
				w := c.T(train.WrongCount(logits, ys))
				if c.Err() != nil {
					s.Close()
					return c.Err()
				}
				s.Keep(w)
				s.Close()
				wrong = append(wrong, w)
			}
			all, err := torch.Stack(wrong, 0)
			if err != nil {
				return err
			}
			counts, err = all.Int64s()
			return err
		})
	})
	if err != nil {
		return 0, err
	}
	var correct float64
	for i, w := range counts {
		size := min(train.EvalChunk, n-int64(i)*train.EvalChunk)
		e := train.PercentWrong(float64(w), size) // the chunk's error rate, as errorPercent gives it
		correct += float64(size) * (100 - e) / 100
	}
	return 100 * correct / float64(n), nil
}

// evaluateModelsSequential trains `models` fresh models one after another for steps each
// and returns their accuracies (%) on (x, y). Model i starts from seed train.Seed(seed,
// purpose, i); a diverged model gets NaN.
func evaluateModelsSequential(ctx context.Context, tr *train.Trainer, steps, models int, seed uint64, purpose string, x, y *torch.Tensor) ([]float64, error) {
	accs := make([]float64, 0, models)
	for i := 0; i < models; i++ {
		var onStep func(int)
		if tr.Progress != nil {
			base := i * steps
			onStep = func(step int) { tr.Progress(base+step, steps*models) }
		}
		l, err := trainSequential(ctx, tr, steps, train.Seed(seed, purpose, i), nil, nil, onStep)
		if err != nil {
			return nil, err
		}
		acc, err := accuracySequential(l, x, y)
		var diverged bool
		if err == nil {
			diverged, err = l.diverged()
		}
		l.close()
		if err != nil {
			return nil, err
		}
		if diverged {
			acc = math.NaN()
		}
		accs = append(accs, acc)
	}
	return accs, nil
}

// diverged reports whether the model's parameters (and RR head) hold a non-finite value.
func (l *learner) diverged() (bool, error) {
	ok, err := train.AllFinite(append(append([]*torch.Tensor{}, l.params...), l.w, l.scale)...)
	return !ok, err
}
