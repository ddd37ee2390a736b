package labeldistill

// batched.go: the evaluation models of docs/ALGORITHM.md §7 (and the baselines' final models)
// trained together (nets.Batched) instead of one after another. Model i still draws its
// initial parameters from its own generator (seed_i) and its own minibatches from its own
// PCG stream, exactly as trainer.train would; one step gathers every model's minibatch
// with one index, runs the M forward passes, and takes one backward pass of the sum of the
// models' own losses (so each model's gradient is its own) and one optimizer step over all
// their parameters (Adam and SGD are elementwise: M independent optimizers sharing a step
// count). With nets.BodyPerModel (the CPU default) every model runs the sequential path's
// own operations, so the results are the sequential ones exactly; with nets.BodyGrouped
// (the GPU default) the bodies are grouped convolutions and batched products, the RR ridge
// systems one batched solve, and the results agree to rounding. The sequential path
// (evaluateModels) stays the reference; batched_test.go checks that the two agree.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// batchedMaxModels caps how many models one batched computation holds (activation memory
// grows linearly with it); more models run as several groups. A variable for the tests.
var batchedMaxModels = 32

// batchedLearner is M learners of one architecture trained together. Every model keeps
// the state a learner has (its own parameters, buffers, and for RR its own W and s), so
// that in nets.BodyPerModel each model's arithmetic is exactly the sequential path's.
type batchedLearner struct {
	bn      *nets.Batched
	rr      bool
	specs   []nets.ParamSpec
	params  [][]*torch.Tensor // params[i]: model i's parameters (leaves)
	flat    []*torch.Tensor   // every model's parameters, model after model
	buffers [][]*torch.Tensor // buffers[i]: model i's BatchNorm running statistics
	opt     optimizer         // over flat: elementwise, so M independent optimizers
	w       []*torch.Tensor   // RR only: model i's W ((d+1)×C, no grad)
	scale   []*torch.Tensor   // RR only: model i's s (shape (1))
	sOpt    *torch.Adam       // RR only, over scale
	cfg     Config
	onBlock func(block int) // when set, told of each scored block (progress)
}

// newBatchedLearner initialises len(seeds) models, model i from torch.NewGenerator(seeds[i])
// exactly as newLearner would (drawn in float32, then converted for a float64 run, so it
// starts from the same values), in dtype.
func newBatchedLearner(net *nets.Net, rr bool, cfg Config, spec optSpec, seeds []uint64, dev torch.Device, dtype torch.DType, mode nets.BodyMode) (*batchedLearner, error) {
	bn, err := nets.NewBatched(net, int64(len(seeds)))
	if err != nil {
		return nil, err
	}
	bn.Mode = mode
	l := &batchedLearner{bn: bn, rr: rr, cfg: cfg}
	l.specs = net.Params()
	if rr {
		l.specs = net.Body
	}
	fail := func(err error) (*batchedLearner, error) {
		l.close()
		return nil, err
	}
	for _, seed := range seeds {
		gen, err := torch.NewGenerator(seed)
		if err != nil {
			return fail(err)
		}
		p, err := nets.InitParams(l.specs, gen, dev, torch.Float)
		gen.Close()
		if err != nil {
			return fail(err)
		}
		l.params = append(l.params, p)
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
		l.buffers = append(l.buffers, b)
		if !rr {
			continue
		}
		w, err := torch.Zeros([]int64{net.FeatureDim + 1, net.Classes}, torch.WithDType(dtype), torch.OnDevice(dev))
		if err != nil {
			return fail(err)
		}
		torch.Escape(w)
		l.w = append(l.w, w)
		sc, err := torch.Full([]int64{1}, cfg.ScaleInit, torch.WithDType(dtype), torch.OnDevice(dev), torch.WithRequiresGrad())
		if err != nil {
			return fail(err)
		}
		torch.Escape(sc)
		l.scale = append(l.scale, sc)
	}
	if l.opt, err = newOptimizer(spec, cfg, l.flat); err != nil {
		return fail(err)
	}
	if rr {
		sAdam := torch.AdamOpts{LR: cfg.ScaleLR, Beta1: cfg.ModelBetas[0], Beta2: cfg.ModelBetas[1], Eps: cfg.ModelEps}
		if l.sOpt, err = torch.NewAdam(l.scale, sAdam); err != nil {
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

func (l *batchedLearner) close() {
	if l.opt != nil {
		l.opt.Close()
	}
	if l.sOpt != nil {
		l.sOpt.Close()
	}
	for i := range l.params {
		torch.FreeAll(l.params[i])
	}
	for i := range l.buffers {
		torch.FreeAll(l.buffers[i])
	}
	torch.FreeAll(l.w)
	torch.FreeAll(l.scale)
}

// batchedSoftCE is Σ_m mean_b Σ_c −p[m,b,c] log softmax(z[m,b,:])_c for logits and
// probabilities (M, B, C): the sum of the models' own soft cross-entropies, so model m's
// gradient is that of its own loss.
func batchedSoftCE(logits, probs *torch.Tensor) (*torch.Tensor, error) {
	var c torch.Chain
	ls := c.T(torch.LogSoftmax(logits, 2))
	out := c.T(c.T(c.T(c.T(c.T(probs.Mul(ls)).Sum(2)).Mean(1)).Sum()).Neg())
	return out, c.Err()
}

// withBiasBatched appends a column of ones to features (M, B, d): Z = [f, 1].
func withBiasBatched(f *torch.Tensor) (*torch.Tensor, error) {
	s := f.Shape()
	ones, err := torch.Ones([]int64{s[0], s[1], 1}, torch.WithDType(f.DType()), torch.OnDevice(f.Device()))
	if err != nil {
		return nil, err
	}
	return torch.Cat([]*torch.Tensor{f, ones}, 2)
}

// ridgeWeightsBatched is RidgeWeights per model: W_m = Z_mᵀ (Z_m Z_mᵀ + λI)⁻¹ Y_m for Z
// (M, n, d+1) and Y (M, n, C), one batched n×n solve.
func ridgeWeightsBatched(z, y *torch.Tensor, lambda float64) (*torch.Tensor, error) {
	var c torch.Chain
	zt := c.T(z.Transpose(1, 2))
	n := z.Shape()[1]
	eye := c.T(torch.Eye(n, torch.WithDType(z.DType()), torch.OnDevice(z.Device())))
	a := c.T(c.T(z.Bmm(zt)).Add(c.T(eye.MulScalar(lambda))))
	if c.Err() != nil {
		return nil, c.Err()
	}
	// Unchecked, as trainStep's solve: a failed solve shows as a diverged model.
	sol, _, err := torch.LinalgSolveEx(a, y)
	if err != nil {
		return nil, err
	}
	w := c.T(zt.Bmm(sol))
	return w, c.Err()
}

// step is one trainStep for every model: idx holds M·batch base indices, model m's at
// [m·batch, (m+1)·batch).
func (l *batchedLearner) step(baseX, table, idx *torch.Tensor, batch int64) error {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	m := l.bn.M
	in := l.bn.Net.InShape
	xb := c.T(c.T(baseX.IndexSelect(0, idx)).Reshape(m, batch, in[0], in[1], in[2]))
	yb := c.T(c.T(table.IndexSelect(0, idx)).Reshape(m, batch, -1))
	if c.Err() != nil {
		return c.Err()
	}
	if !l.rr {
		loss := c.T(batchedSoftCE(c.T(l.bn.Forward(l.params, l.buffers, xb, true)), yb))
		if c.Err() != nil {
			return c.Err()
		}
		return descend(loss, l.flat, l.opt, nil, nil)
	}
	// RR, §5 steps 1–3 and 5 per model: W_l from the model's features, W ← (1−α)W + αW_l,
	// then soft-CE of s·Z·W; θ and s get gradients through the features and the solve.
	var logits *torch.Tensor
	ws := make([]*torch.Tensor, m)
	if l.bn.Mode == nets.BodyGrouped {
		z := c.T(withBiasBatched(c.T(l.bn.Features(l.params, l.buffers, xb, true))))
		wl := c.T(ridgeWeightsBatched(z, yb, l.cfg.RidgeLambda))
		w := c.T(pseudoStep(c.T(torch.Stack(l.w, 0)), wl, l.cfg.RidgePseudoStep))
		sc := c.T(c.T(torch.Stack(l.scale, 0)).Reshape(m, 1, 1))
		logits = c.T(c.T(z.Bmm(w)).Mul(sc))
		for i := range ws {
			ws[i] = c.T(w.Select(0, int64(i)))
		}
	} else {
		// The sequential path's own operations, model by model.
		fs, err := l.bn.FeaturesEach(l.params, l.buffers, xb, true)
		if err != nil {
			return err
		}
		each := make([]*torch.Tensor, m)
		for i := range each {
			z := c.T(withBias(fs[i]))
			wl, _, err := ridgeWeightsUnchecked(z, c.T(yb.Select(0, int64(i))), l.cfg.RidgeLambda) // as trainStep
			c.Check(err)
			ws[i] = c.T(pseudoStep(l.w[i], wl, l.cfg.RidgePseudoStep))
			each[i] = c.T(c.T(z.Mm(ws[i])).Mul(l.scale[i]))
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
	if err := descend(featLoss, l.flat, l.opt, l.scale, l.sOpt); err != nil {
		return err
	}
	return torch.NoGrad(func() error {
		for i, w := range ws {
			if err := l.w[i].Copy_(w); err != nil {
				return err
			}
		}
		return nil
	})
}

// logitsEach scores x (B, C, H, W) with every model: model i's (B, classes) at [i]; the
// classifier's logits (LD) or Z·W with the unscaled W (RR), as learner.logits.
func (l *batchedLearner) logitsEach(x *torch.Tensor) ([]*torch.Tensor, error) {
	if !l.rr {
		return l.bn.ForwardEach(l.params, l.buffers, x, false)
	}
	fs, err := l.bn.FeaturesEach(l.params, l.buffers, x, false)
	if err != nil {
		return nil, err
	}
	out := make([]*torch.Tensor, len(fs))
	for i, f := range fs {
		var c torch.Chain
		out[i] = c.T(c.T(withBias(f)).Mm(l.w[i]))
		if c.Err() != nil {
			return nil, c.Err()
		}
	}
	return out, nil
}

// scoreChunk is how many images one model scores per forward pass in nets.BodyPerModel.
// On CPU, passes of a few hundred images cost a third of the CPU time of evalChunk-sized
// ones, the activations staying in cache (LeNet, one thread, libtorch 1.13: about 15 ms
// of CPU per 1000 images in passes of 500 or fewer, 37 in passes of 1000, 53 in passes of
// 2000). The predictions do not depend on the pass size.
const scoreChunk = 256

// accuracies is accuracy for every model: top-1 accuracy (%) on (x, y), without
// gradients. It scores blocks of evalChunk images and combines the per-block error counts
// with accuracy's arithmetic. In nets.BodyPerModel a block is scored in sub-chunks of
// scoreChunk images per model (one model's activations alive at a time); in
// nets.BodyGrouped (a GPU) all models score the whole block in one grouped pass. The
// counts stay on the device and are read once, at the end (one synchronisation on a GPU,
// instead of one per model and sub-chunk).
func (l *batchedLearner) accuracies(ctx context.Context, x, y *torch.Tensor) ([]float64, error) {
	m := int(l.bn.M)
	n := x.Shape()[0]
	sub := int64(scoreChunk)
	if l.bn.Mode == nets.BodyGrouped {
		sub = evalChunk
	}
	var counts []int64 // block after block, m counts each
	err := torch.WithScope(func(outer *torch.Scope) error {
		return torch.NoGrad(func() error {
			var blocks []*torch.Tensor
			for start := int64(0); start < n; start += evalChunk {
				if err := ctx.Err(); err != nil { // scoring many models takes seconds
					return err
				}
				size := min(evalChunk, n-start)
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
						logits, err = l.logitsEach(xs)
						c.Check(err)
					}
					for i := 0; i < m && c.Err() == nil; i++ {
						w := c.T(wrongCount(logits[i], ys))
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
				if l.onBlock != nil { // (on a GPU: queued, not yet done)
					l.onBlock(int(start/evalChunk) + 1)
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
		size := min(evalChunk, n-int64(b)*evalChunk)
		for i := range correct {
			// accuracy's arithmetic: the block's error rate (errorPercent), then
			// size·(100 − e)/100.
			e := percentWrong(float64(counts[b*m+i]), size)
			correct[i] += float64(size) * (100 - e) / 100
		}
	}
	accs := make([]float64, m)
	for i := range accs {
		accs[i] = 100 * correct[i] / float64(n)
	}
	return accs, nil
}

// batchedMode is the body mode for a device: one grouped computation on a GPU, the
// models' bodies one after another on the CPU (where it is the faster; see nets.BodyMode).
func batchedMode(dev torch.Device) nets.BodyMode {
	if dev.IsCUDA() {
		return nets.BodyGrouped
	}
	return nets.BodyPerModel
}

// trainBatchedMode trains len(seeds) fresh models together for steps in the given body
// mode, model i from seed seeds[i] (initialisation and minibatches as
// trainer.train(ctx, steps, seeds[i], ...)).
func (tr *trainer) trainBatchedMode(ctx context.Context, steps int, seeds []uint64, mode nets.BodyMode) (*batchedLearner, error) {
	l, err := newBatchedLearner(tr.net, tr.rr, tr.cfg, tr.opt, seeds, tr.dev, tr.baseX.DType(), mode)
	if err != nil {
		return nil, err
	}
	rngs := make([]*rand.Rand, len(seeds))
	for i, s := range seeds {
		rngs[i] = rand.New(rand.NewPCG(s, 0x5eed))
	}
	n := int(tr.baseX.Shape()[0])
	batch := min(tr.batch, n)
	idx := make([]int64, len(seeds)*batch)
	for step := 1; step <= steps; step++ {
		// Every step: a signal is seen within one step (ctx.Err is a lock and a read).
		if err := ctx.Err(); err != nil {
			l.close()
			return nil, err
		}
		// Model i's indices: sampleIndices(rngs[i], n, batch) of the sequential path.
		for i, rng := range rngs {
			for j, p := range rng.Perm(n)[:batch] {
				idx[i*batch+j] = int64(p)
			}
		}
		t, err := indexTensor(idx, tr.dev)
		if err == nil {
			err = l.step(tr.baseX, tr.table, t, int64(batch))
			t.Free()
		}
		if err != nil {
			l.close()
			return nil, fmt.Errorf("training step %d: %w", step, err)
		}
		if tr.onStep != nil {
			tr.onStep(step)
		}
	}
	return l, nil
}

// evaluateModelsBatched is evaluateModels with the models trained together (in groups of
// at most batchedMaxModels): the same seeds (model i from subSeed(seed, purpose, i)), the
// same minibatches, and per model the same results up to floating-point rounding. It
// falls back to the sequential path for a network nets.Batched does not support.
func (tr *trainer) evaluateModelsBatched(ctx context.Context, steps, models int, seed uint64, purpose string, x, y *torch.Tensor) ([]float64, error) {
	return tr.evaluateModelsBatchedMode(ctx, steps, models, seed, purpose, x, y, batchedMode(tr.dev))
}

// evaluateModelsBatchedMode is evaluateModelsBatched in a given body mode.
func (tr *trainer) evaluateModelsBatchedMode(ctx context.Context, steps, models int, seed uint64, purpose string, x, y *torch.Tensor, mode nets.BodyMode) ([]float64, error) {
	return tr.evaluateModelRange(ctx, steps, 0, models, seed, purpose, x, y, mode)
}

// evaluateModelRange trains and scores models lo..hi-1 (model i from subSeed(seed, purpose,
// i)), batched in groups of at most batchedMaxModels starting at lo. A data-parallel run
// gives each rank its own range.
func (tr *trainer) evaluateModelRange(ctx context.Context, steps, lo, hi int, seed uint64, purpose string, x, y *torch.Tensor, mode nets.BodyMode) ([]float64, error) {
	if _, err := nets.NewBatched(tr.net, 1); err != nil {
		return tr.evaluateModelsFrom(ctx, steps, lo, hi, seed, purpose, x, y)
	}
	accs := make([]float64, 0, max(0, hi-lo))
	// Progress counts each group's training steps and scoring blocks.
	blocks := int((x.Shape()[0] + evalChunk - 1) / evalChunk)
	defer tr.reportSteps((steps + blocks) * ((max(0, hi-lo) + batchedMaxModels - 1) / batchedMaxModels))()
	for first := lo; first < hi; first += batchedMaxModels {
		seeds := make([]uint64, min(batchedMaxModels, hi-first))
		for i := range seeds {
			seeds[i] = subSeed(seed, purpose, first+i)
		}
		tr.stepBase = (first - lo) / batchedMaxModels * (steps + blocks)
		l, err := tr.trainBatchedMode(ctx, steps, seeds, mode)
		if err != nil {
			return nil, err
		}
		if tr.onStep != nil {
			l.onBlock = func(b int) { tr.onStep(steps + b) }
		}
		a, err := l.accuracies(ctx, x, y)
		var diverged []bool
		if err == nil {
			diverged, err = l.divergedEach()
		}
		l.close()
		if err != nil {
			return nil, err
		}
		for i, d := range diverged {
			if d {
				a[i] = math.NaN() // keepFinite counts and drops it
			}
		}
		accs = append(accs, a...)
	}
	return accs, nil
}
