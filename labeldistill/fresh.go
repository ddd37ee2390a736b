package labeldistill

// fresh.go: fresh models trained on fixed (images, labels) and scored (docs/ALGORITHM.md §7):
// validation, the final test, the baselines' step search and test models, the studies and
// `ldtorch evaluate` all train through trainModels, one model or many (M = 1 where one is
// all there is). Training records no autograd graph beyond what each step needs.
//
// Several models are trained together (nets.Batched). Model i still draws its initial
// parameters from its own generator (seed_i) and its own minibatches from its own PCG
// stream; one step gathers every model's minibatch with one index, runs the M forward
// passes, and takes one backward pass of the sum of the models' own losses (so each model's
// gradient is its own) and one optimizer step over all their parameters (Adam and SGD are
// elementwise: M independent optimizers sharing a step count). With nets.BodyPerModel (the
// CPU default) every model runs a single model's own operations, so a model's result does
// not depend on how many are trained beside it; with nets.BodyGrouped (the GPU default) the
// bodies are grouped convolutions and batched products, the RR ridge systems one batched
// solve, and the results agree to rounding. sequential_test.go keeps a model-by-model
// trainer as the oracle both modes are checked against.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// trainer trains fresh models on one label table.
type trainer struct {
	net   *nets.Net
	rr    bool
	cfg   config.Config
	baseX *torch.Tensor // (N, C, H, W) on the device
	table *torch.Tensor // (N, classes), no grad
	batch int
	opt   optSpec
	dev   torch.Device
	// progress, when set, hears how much of an evaluation (all its models) is done, in
	// training steps and, on the batched path, scoring blocks; onStep and stepBase carry it
	// into the loops.
	progress func(done, total int)
	onStep   func(step int)
	stepBase int
	// group is how many models evaluateModelRange trains together (0: batchedMaxModels);
	// 1 trains them one after another (the bench's comparison).
	group int
}

// reportSteps sets onStep to report progress over total steps (when progress is set) and
// returns the function that unsets it.
func (tr *trainer) reportSteps(total int) func() {
	if tr.progress == nil {
		return func() {}
	}
	tr.stepBase = 0
	tr.onStep = func(step int) { tr.progress(tr.stepBase+step, total) }
	return func() { tr.onStep = nil }
}

// evalChunk is how many images are scored per block: LeNet on one CPU thread scores 1000
// images in 53 / 37 / 15.5 ms of CPU with passes of 2000 / 1000 / 500 (cache).
const evalChunk = 256

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
	cfg     config.Config
	onBlock func(block int) // when set, told of each scored block (progress)
}

// newBatchedLearner initialises len(seeds) models, model i from torch.NewGenerator(seeds[i])
// exactly as newLearner would (drawn in float32, then converted for a float64 run, so it
// starts from the same values), in dtype.
func newBatchedLearner(net *nets.Net, rr bool, cfg config.Config, spec optSpec, seeds []uint64, dev torch.Device, dtype torch.DType, mode nets.BodyMode) (*batchedLearner, error) {
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

// step is one training step of every model on fixed labels (soft-CE for LD; §5 steps 1–3
// and 5 for RR): idx holds M·batch base indices, model m's at [m·batch, (m+1)·batch).
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
		// All models at once: Z (M, B, d+1), one batched solve.
		z := c.T(withBiasBatched(c.T(l.bn.Features(l.params, l.buffers, xb, true))))
		if c.Err() != nil {
			return c.Err()
		}
		w, _, err := rrWeights(z, yb, c.T(torch.Stack(l.w, 0)), l.cfg)
		c.Check(err)
		logits = c.T(rrLogits(z, w, c.T(c.T(torch.Stack(l.scale, 0)).Reshape(m, 1, 1))))
		for i := range ws {
			ws[i] = c.T(w.Select(0, int64(i)))
		}
	} else {
		// Model by model: exactly the operations of a single model's step.
		fs, err := l.bn.FeaturesEach(l.params, l.buffers, xb, true)
		if err != nil {
			return err
		}
		each := make([]*torch.Tensor, m)
		for i := range each {
			z := c.T(withBias(fs[i]))
			if c.Err() != nil {
				return c.Err()
			}
			w, _, err := rrWeights(z, c.T(yb.Select(0, int64(i))), l.w[i], l.cfg)
			c.Check(err)
			ws[i] = w
			each[i] = c.T(rrLogits(z, w, l.scale[i]))
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

// accuracy is accuracies for a one-model learner.
func (l *batchedLearner) accuracy(ctx context.Context, x, y *torch.Tensor) (float64, error) {
	if l.bn.M != 1 {
		return 0, fmt.Errorf("internal error: accuracy of a batched learner of %d models", l.bn.M)
	}
	accs, err := l.accuracies(ctx, x, y)
	if err != nil {
		return 0, err
	}
	return accs[0], nil
}

// batchedMode is the body mode for a device: one grouped computation on a GPU, the
// models' bodies one after another on the CPU (where it is the faster; see nets.BodyMode).
func batchedMode(dev torch.Device) nets.BodyMode {
	if dev.IsCUDA() {
		return nets.BodyGrouped
	}
	return nets.BodyPerModel
}

// probe asks trainModels to call fn after each of the steps listed in at (ascending): the
// baseline step search scores one model at several step counts of one training.
type probe struct {
	at []int
	fn func(step int, l *batchedLearner) error
}

// trainModels trains len(seeds) fresh models together for steps in the given body mode:
// model i initialised from torch.NewGenerator(seeds[i]) and drawing its minibatches from
// its own PCG stream (seeds[i], 0x5eed). pr may be nil.
func (tr *trainer) trainModels(ctx context.Context, steps int, seeds []uint64, mode nets.BodyMode, pr *probe) (*batchedLearner, error) {
	l, err := newBatchedLearner(tr.net, tr.rr, tr.cfg, tr.opt, seeds, tr.dev, tr.baseX.DType(), mode)
	if err != nil {
		return nil, err
	}
	rngs := make([]*rand.Rand, len(seeds))
	for i, s := range seeds {
		rngs[i] = rand.New(rand.NewPCG(s, 0x5eed))
	}
	if err := tr.trainFor(ctx, l, rngs, steps, pr); err != nil {
		l.close()
		return nil, err
	}
	return l, nil
}

// trainFor takes steps training steps of l on the trainer's labels, model i drawing its
// minibatches (a random permutation prefix of the base examples) from rngs[i].
func (tr *trainer) trainFor(ctx context.Context, l *batchedLearner, rngs []*rand.Rand, steps int, pr *probe) error {
	n := int(tr.baseX.Shape()[0])
	batch := min(tr.batch, n)
	idx := make([]int64, len(rngs)*batch)
	next := 0
	for step := 1; step <= steps; step++ {
		// Every step: a signal is seen within one step (ctx.Err is a lock and a read).
		if err := ctx.Err(); err != nil {
			return err
		}
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
			return fmt.Errorf("training step %d: %w", step, err)
		}
		if tr.onStep != nil {
			tr.onStep(step)
		}
		for pr != nil && next < len(pr.at) && pr.at[next] == step {
			if err := pr.fn(step, l); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}

// evaluateModels trains `models` fresh models for steps each and returns their accuracies
// (%) on (x, y); model i starts from seed subSeed(seed, purpose, i). A diverged model
// (non-finite parameters) gets NaN, which keepFinite counts and drops.
func (tr *trainer) evaluateModels(ctx context.Context, steps, models int, seed uint64, purpose string, x, y *torch.Tensor) ([]float64, error) {
	return tr.evaluateModelsMode(ctx, steps, models, seed, purpose, x, y, batchedMode(tr.dev))
}

// evaluateModelsMode is evaluateModels in a given body mode.
func (tr *trainer) evaluateModelsMode(ctx context.Context, steps, models int, seed uint64, purpose string, x, y *torch.Tensor, mode nets.BodyMode) ([]float64, error) {
	return tr.evaluateModelRange(ctx, steps, 0, models, seed, purpose, x, y, mode)
}

// evaluateModelRange trains and scores models lo..hi-1 (model i from subSeed(seed, purpose,
// i)), together in groups of tr.group (default batchedMaxModels) starting at lo. A
// data-parallel run gives each rank its own range.
func (tr *trainer) evaluateModelRange(ctx context.Context, steps, lo, hi int, seed uint64, purpose string, x, y *torch.Tensor, mode nets.BodyMode) ([]float64, error) {
	group := batchedMaxModels
	if tr.group > 0 {
		group = tr.group
	}
	accs := make([]float64, 0, max(0, hi-lo))
	// Progress counts each group's training steps and scoring blocks.
	blocks := int((x.Shape()[0] + evalChunk - 1) / evalChunk)
	defer tr.reportSteps((steps + blocks) * ((max(0, hi-lo) + group - 1) / group))()
	for first := lo; first < hi; first += group {
		seeds := make([]uint64, min(group, hi-first))
		for i := range seeds {
			seeds[i] = subSeed(seed, purpose, first+i)
		}
		tr.stepBase = (first - lo) / group * (steps + blocks)
		l, err := tr.trainModels(ctx, steps, seeds, mode, nil)
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

// trainOne trains one fresh model (initialisation and minibatches from seed) for steps,
// calling pr (may be nil) on the way: validation and the baseline step search.
func (tr *trainer) trainOne(ctx context.Context, steps int, seed uint64, pr *probe) (*batchedLearner, error) {
	return tr.trainModels(ctx, steps, []uint64{seed}, batchedMode(tr.dev), pr)
}

// single is the one model of a one-model batchedLearner as a learner (the meta-step's
// type), sharing its tensors and optimizers: the caller closes l, not the result.
func (l *batchedLearner) single() (*learner, error) {
	if l.bn.M != 1 {
		return nil, fmt.Errorf("internal error: single() of a batched learner of %d models", l.bn.M)
	}
	s := &learner{net: l.bn.Net, rr: l.rr, specs: l.specs, params: l.params[0], buffers: l.buffers[0], opt: l.opt, sOpt: l.sOpt, cfg: l.cfg}
	if l.rr {
		s.w, s.scale = l.w[0], l.scale[0]
	}
	return s, nil
}
