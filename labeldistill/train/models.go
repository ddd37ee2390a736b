package train

// models.go: M models of one architecture trained together (docs/ALGORITHM.md §7). Every
// model keeps its own parameters, buffers and, for RR, its own W and s; in
// nets.BodyPerModel each model runs exactly a single model's operations, in
// nets.BodyGrouped all of them one grouped computation.

import (
	"context"
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// EvalChunk is how many images are scored per block: LeNet on one CPU thread scores 1000
// images in 53 / 37 / 15.5 ms of CPU with passes of 2000 / 1000 / 500 (cache).
const EvalChunk = 256

// MaxTogether caps how many models one batched computation holds (activation memory
// grows linearly with it); more models run as several groups. A variable for the tests.
var MaxTogether = 32

// Models is M models of one architecture trained together. Every model keeps the state a
// single model has (its own parameters, buffers, and for RR its own W and s), so that in
// nets.BodyPerModel each model's arithmetic is exactly a single model's.
type Models struct {
	Batched *nets.Batched
	RR      bool
	Specs   []nets.ParamSpec
	Params  [][]*torch.Tensor // params[i]: model i's parameters (leaves)
	flat    []*torch.Tensor   // every model's parameters, model after model
	Buffers [][]*torch.Tensor // buffers[i]: model i's BatchNorm running statistics
	Opt     Optimizer         // over flat: elementwise, so M independent optimizers
	W       []*torch.Tensor   // RR only: model i's W ((d+1)×C, no grad)
	Scale   []*torch.Tensor   // RR only: model i's s (shape (1))
	SOpt    *torch.Adam       // RR only, over scale
	Cfg     config.Config
	OnBlock func(block int) // when set, told of each scored block (progress)
	// Augment, when set, transforms each training batch (M, B, C, H, W) before the forward
	// pass (Step); nil trains on the images as they are.
	Augment func(x *torch.Tensor) (*torch.Tensor, error)
	steps   int // training steps taken (Step calls): BatchNorm's num_batches_tracked
}

// NewModels initialises len(seeds) models, model i from torch.NewGenerator(seeds[i])
// exactly as the meta-loop initialises its model (drawn in float32, then converted for a float64 run, so it
// starts from the same values), in dtype. They run in mode, except one model alone, which
// runs its own body (nets.BodyPerModel).
func NewModels(net *nets.Net, rr bool, cfg config.Config, spec OptSpec, seeds []uint64, dev torch.Device, dtype torch.DType, mode nets.BodyMode) (*Models, error) {
	bn, err := nets.NewBatched(net, int64(len(seeds)))
	if err != nil {
		return nil, err
	}
	bn.Mode = mode
	if len(seeds) == 1 {
		// One model has nothing to group with, and the grouped form costs it 30–40 % more
		// operator calls per step (its parameters stacked and unstacked, batched products):
		// on a GPU, where each call is host work, that is the cost of a step. A lone model
		// (validation, the baselines' step searches) runs its own body.
		bn.Mode = nets.BodyPerModel
	}
	l := &Models{Batched: bn, RR: rr, Cfg: cfg}
	l.Specs = net.Params()
	if rr {
		l.Specs = net.Body
	}
	fail := func(err error) (*Models, error) {
		l.Close()
		return nil, err
	}
	for _, seed := range seeds {
		gen, err := torch.NewGenerator(seed)
		if err != nil {
			return fail(err)
		}
		p, err := nets.InitParams(l.Specs, gen, dev, torch.Float)
		gen.Close()
		if err != nil {
			return fail(err)
		}
		l.Params = append(l.Params, p)
		if dtype != torch.Float {
			if err := convertParams(p, dtype); err != nil {
				return fail(err)
			}
		}
		l.flat = append(l.flat, p...)
		b, err := nets.NewBuffers(net.Buffers, dev, dtype)
		if err != nil {
			return fail(err)
		}
		l.Buffers = append(l.Buffers, b)
		if !rr {
			continue
		}
		w, err := torch.Zeros([]int64{net.FeatureDim + 1, net.Classes}, torch.WithDType(dtype), torch.OnDevice(dev))
		if err != nil {
			return fail(err)
		}
		torch.Escape(w)
		l.W = append(l.W, w)
		sc, err := torch.Full([]int64{1}, cfg.ScaleInit, torch.WithDType(dtype), torch.OnDevice(dev), torch.WithRequiresGrad())
		if err != nil {
			return fail(err)
		}
		torch.Escape(sc)
		l.Scale = append(l.Scale, sc)
	}
	if l.Opt, err = NewOptimizer(spec, cfg, l.flat); err != nil {
		return fail(err)
	}
	if rr {
		sAdam := torch.AdamOpts{LR: cfg.ScaleLR, Beta1: cfg.ModelBetas[0], Beta2: cfg.ModelBetas[1], Eps: cfg.ModelEps}
		if l.SOpt, err = torch.NewAdam(l.Scale, sAdam); err != nil {
			return fail(err)
		}
	}
	return l, nil
}

// convertParams replaces each parameter by a copy in dtype (a leaf that requires grad).
func convertParams(params []*torch.Tensor, dtype torch.DType) error {
	return torch.NoGrad(func() error {
		for i, p := range params {
			q, err := p.ToDType(dtype)
			if err != nil {
				return err
			}
			torch.Escape(q)
			if err := q.SetRequiresGrad(true); err != nil {
				q.Free()
				return err
			}
			p.Free()
			params[i] = q
		}
		return nil
	})
}

func (l *Models) Close() {
	if l.Opt != nil {
		l.Opt.Close()
	}
	if l.SOpt != nil {
		l.SOpt.Close()
	}
	for i := range l.Params {
		torch.FreeAll(l.Params[i])
	}
	for i := range l.Buffers {
		torch.FreeAll(l.Buffers[i])
	}
	torch.FreeAll(l.W)
	torch.FreeAll(l.Scale)
}

// Step is one training step of every model on fixed labels (soft-CE for LD; §5 steps 1–3
// and 5 for RR): idx holds M·batch base indices, model m's at [m·batch, (m+1)·batch).
func (l *Models) Step(baseX, table, idx *torch.Tensor, batch int64) error {
	l.steps++
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	m := l.Batched.M
	in := l.Batched.Net.InShape
	xb := c.T(c.T(baseX.IndexSelect(0, idx)).Reshape(m, batch, in[0], in[1], in[2]))
	yb := c.T(c.T(table.IndexSelect(0, idx)).Reshape(m, batch, -1))
	if l.Augment != nil && c.Err() == nil {
		xb = c.T(l.Augment(xb))
	}
	if c.Err() != nil {
		return c.Err()
	}
	if !l.RR {
		loss := c.T(batchedSoftCE(c.T(l.Batched.Forward(l.Params, l.Buffers, xb, true)), yb))
		if c.Err() != nil {
			return c.Err()
		}
		return Descend(loss, l.flat, l.Opt, nil, nil)
	}
	// RR, §5 steps 1–3 and 5 per model: W_l from the model's features, W ← (1−α)W + αW_l,
	// then soft-CE of s·Z·W; θ and s get gradients through the features and the solve.
	var logits *torch.Tensor
	ws := make([]*torch.Tensor, m)
	if l.Batched.Mode == nets.BodyGrouped {
		// All models at once: Z (M, B, d+1), one batched solve.
		z := c.T(WithBiasBatched(c.T(l.Batched.Features(l.Params, l.Buffers, xb, true))))
		if c.Err() != nil {
			return c.Err()
		}
		w, _, err := RRWeights(z, yb, c.T(torch.Stack(l.W, 0)), l.Cfg)
		c.Check(err)
		logits = c.T(RRLogits(z, w, c.T(c.T(torch.Stack(l.Scale, 0)).Reshape(m, 1, 1))))
		for i := range ws {
			ws[i] = c.T(w.Select(0, int64(i)))
		}
	} else {
		// Model by model: exactly the operations of a single model's step.
		fs, err := l.Batched.FeaturesEach(l.Params, l.Buffers, xb, true)
		if err != nil {
			return err
		}
		each := make([]*torch.Tensor, m)
		for i := range each {
			z := c.T(WithBias(fs[i]))
			if c.Err() != nil {
				return c.Err()
			}
			w, _, err := RRWeights(z, c.T(yb.Select(0, int64(i))), l.W[i], l.Cfg)
			c.Check(err)
			ws[i] = w
			each[i] = c.T(RRLogits(z, w, l.Scale[i]))
			if c.Err() != nil {
				return c.Err()
			}
		}
		logits = c.T(torch.Stack(each, 0))
	}
	featLoss := c.T(batchedSoftCE(logits, yb))
	if c.Err() != nil {
		return c.Err()
	}
	if err := Descend(featLoss, l.flat, l.Opt, l.Scale, l.SOpt); err != nil {
		return err
	}
	return torch.NoGrad(func() error {
		for i, w := range ws {
			if err := l.W[i].Copy_(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// LogitsEach scores x (B, C, H, W) with every model: model i's (B, classes) at [i]; the
// classifier's logits (LD) or Z·W with the unscaled W (RR), as the meta-loop's model scores.
func (l *Models) LogitsEach(x *torch.Tensor) ([]*torch.Tensor, error) {
	if !l.RR {
		return l.Batched.ForwardEach(l.Params, l.Buffers, x, false)
	}
	fs, err := l.Batched.FeaturesEach(l.Params, l.Buffers, x, false)
	if err != nil {
		return nil, err
	}
	out := make([]*torch.Tensor, len(fs))
	for i, f := range fs {
		var c torch.Chain
		out[i] = c.T(c.T(WithBias(f)).Mm(l.W[i]))
		if c.Err() != nil {
			return nil, c.Err()
		}
	}
	return out, nil
}

// scoreChunk is how many images one model scores per forward pass in nets.BodyPerModel.
// On CPU, passes of a few hundred images cost a third of the CPU time of EvalChunk-sized
// ones, the activations staying in cache (LeNet, one thread, libtorch 1.13: about 15 ms
// of CPU per 1000 images in passes of 500 or fewer, 37 in passes of 1000, 53 in passes of
// 2000). The predictions do not depend on the pass size.
const scoreChunk = 256

// Accuracies is the accuracy of every model: top-1 accuracy (%) on (x, y), without
// gradients. It scores blocks of EvalChunk images and combines the per-block error counts
// with accuracy's arithmetic. In nets.BodyPerModel a block is scored in sub-chunks of
// scoreChunk images per model (one model's activations alive at a time); in
// nets.BodyGrouped (a GPU) all models score the whole block in one grouped pass. The
// counts stay on the device and are read once, at the end (one synchronisation on a GPU,
// instead of one per model and sub-chunk).
func (l *Models) Accuracies(ctx context.Context, x, y *torch.Tensor) ([]float64, error) {
	m := int(l.Batched.M)
	n := x.Shape()[0]
	sub := int64(scoreChunk)
	if l.Batched.Mode == nets.BodyGrouped {
		sub = EvalChunk
	}
	var counts []int64 // block after block, m counts each
	err := torch.WithScope(func(outer *torch.Scope) error {
		return torch.NoGrad(func() error {
			var blocks []*torch.Tensor
			for start := int64(0); start < n; start += EvalChunk {
				if err := ctx.Err(); err != nil { // scoring many models takes seconds
					return err
				}
				size := min(EvalChunk, n-start)
				wrong := make([]*torch.Tensor, m) // this block's counts so far, per model
				bs := torch.NewScope()
				for off := int64(0); off < size; off += sub {
					k := min(sub, size-off)
					var c torch.Chain
					xs := c.T(x.Narrow(0, start+off, k))
					ys := c.T(y.Narrow(0, start+off, k))
					var logits []*torch.Tensor
					if c.Err() == nil {
						var err error
						logits, err = l.LogitsEach(xs)
						c.Check(err)
					}
					for i := 0; i < m && c.Err() == nil; i++ {
						w := c.T(WrongCount(logits[i], ys))
						if wrong[i] != nil {
							w = c.T(wrong[i].Add(w)) // integer counts: exact
						}
						wrong[i] = w
					}
					if c.Err() != nil {
						bs.Close()
						return c.Err()
					}
				}
				block, err := torch.Stack(wrong, 0)
				if err != nil {
					bs.Close()
					return err
				}
				bs.Keep(block)
				bs.Close()
				blocks = append(blocks, block)
				if l.OnBlock != nil { // (on a GPU: queued, not yet done)
					l.OnBlock(int(start/EvalChunk) + 1)
				}
			}
			all, err := torch.Stack(blocks, 0)
			if err != nil {
				return err
			}
			counts, err = all.Int64s()
			return err
		})
	})
	if err != nil {
		return nil, err
	}
	correct := make([]float64, m)
	for b := range len(counts) / m {
		size := min(EvalChunk, n-int64(b)*EvalChunk)
		for i := range correct {
			// accuracy's arithmetic: the block's error rate (errorPercent), then
			// size·(100 − e)/100.
			e := PercentWrong(float64(counts[b*m+i]), size)
			correct[i] += float64(size) * (100 - e) / 100
		}
	}
	accs := make([]float64, m)
	for i := range accs {
		accs[i] = 100 * correct[i] / float64(n)
	}
	return accs, nil
}

// Accuracy is Accuracies for one model.
func (l *Models) Accuracy(ctx context.Context, x, y *torch.Tensor) (float64, error) {
	if l.Batched.M != 1 {
		return 0, fmt.Errorf("internal error: Accuracy of %d models", l.Batched.M)
	}
	accs, err := l.Accuracies(ctx, x, y)
	if err != nil {
		return 0, err
	}
	return accs[0], nil
}

// AllFinite reports whether every value of ts is finite: Σ sum(t) is finite unless a value
// is NaN or infinite (or the values are so large that their sum overflows, which is a
// diverged model too).
func AllFinite(ts ...*torch.Tensor) (bool, error) {
	s := torch.NewScope()
	defer s.Close()
	var total float64
	err := torch.NoGrad(func() error {
		var acc *torch.Tensor
		for _, t := range ts {
			if t == nil {
				continue
			}
			sum, err := t.Sum()
			if err != nil {
				return err
			}
			if sum, err = sum.ToDType(torch.Double); err != nil {
				return err
			}
			if acc == nil {
				acc = sum
			} else if acc, err = acc.Add(sum); err != nil {
				return err
			}
		}
		if acc == nil {
			return nil
		}
		v, err := acc.Item()
		total = v
		return err
	})
	return finite(total), err
}

// Diverged reports for every model whether its parameters (and RR head) hold a
// non-finite value.
func (l *Models) Diverged() ([]bool, error) {
	out := make([]bool, len(l.Params))
	for i, p := range l.Params {
		ts := append([]*torch.Tensor{}, p...)
		if l.RR {
			ts = append(ts, l.W[i], l.Scale[i])
		}
		ok, err := AllFinite(ts...)
		if err != nil {
			return nil, err
		}
		out[i] = !ok
	}
	return out, nil
}
