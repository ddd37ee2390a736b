package engine

// parallel.go: data-parallel distillation over a torch/dist group. Every rank runs the
// same meta-loop from the same seed, so base batches, model initialisations and resets
// agree; the labels and the model start from rank 0 by broadcast. Each rank computes the
// outer loss on its contiguous shard of the N_o target batch; one all-reduce per
// meta-step sums the shard-size-weighted label gradients, losses and wrong-prediction
// counts, so every rank takes the same label step and sees the same error (hence the same
// reset decisions). The base batch is split too where no layer couples its rows and the
// network's base batch is worth the extra collectives (baseShard, splitsBase, below).
// Evaluation models are split across ranks and their accuracies gathered; the validation
// split is scored in parts. Only rank 0 writes files.

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"strings"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
	"github.com/ldtorch/ldtorch/torch/dist"
)

// BaseSplit says whether a data-parallel run that learns labels splits each meta-step's base
// batch over its ranks (baseShard) where the network allows it.
type BaseSplit int

const (
	// BaseSplitAuto splits it except on LeNet, whose base batch costs less than the
	// collectives a split adds (splitsBase).
	BaseSplitAuto BaseSplit = iota
	BaseSplitOn             // split it on every network that allows it
	BaseSplitOff            // every rank runs the whole base batch
)

// BaseSplitVariable is the environment variable through which the ldtorch command sets
// WithBaseSplit: auto (the default), on or off.
const BaseSplitVariable = "LDTORCH_BASE_SPLIT"

var baseSplitNames = []string{"auto", "on", "off"}

func (s BaseSplit) String() string {
	if s < 0 || int(s) >= len(baseSplitNames) {
		return fmt.Sprintf("BaseSplit(%d)", int(s))
	}
	return baseSplitNames[s]
}

// ParseBaseSplit reads a BaseSplit by its name: auto, on or off ("" is auto).
func ParseBaseSplit(name string) (BaseSplit, error) {
	if name == "" {
		return BaseSplitAuto, nil
	}
	for i, n := range baseSplitNames {
		if name == n {
			return BaseSplit(i), nil
		}
	}
	return 0, fmt.Errorf("unknown base split %q (known: %s)", name, strings.Join(baseSplitNames, ", "))
}

// rootGrace is how long a rank other than 0 goes on after its own interruption, waiting for
// rank 0 to stop the group. An interrupted run's ranks usually get the signal at once, but
// only rank 0 writes the checkpoint of the interruption, at a meta-step boundary every rank
// reaches together; a rank that stopped first would fail rank 0's collective, and the
// checkpoint would be lost. Rank 0 stops within a meta-step and aborts the group, which
// stops the others; a rank interrupted alone stops after rootGrace.
const rootGrace = 5 * time.Second

// followRoot is ctx for a rank other than 0: cancelled rootGrace after ctx is.
func followRoot(ctx context.Context) (context.Context, context.CancelFunc) {
	follow, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		time.AfterFunc(rootGrace, func() { cancel(context.Cause(ctx)) })
	})
	return follow, func() { stop(); cancel(nil) }
}

// parallel is this run's place in its group; the zero value (and nil) is a lone process.
type parallel struct {
	g          *dist.Group
	baseSplit  BaseSplit
	lastReduce time.Duration // wall time of the last meta-step's all-reduces (benchmarks; stepOn zeroes it)
}

func (p *parallel) size() int {
	if p == nil || p.g == nil {
		return 1
	}
	return p.g.Size()
}

func (p *parallel) rank() int {
	if p == nil || p.g == nil {
		return 0
	}
	return p.g.Rank()
}

// shard is this rank's contiguous part [lo, hi) of n items: sizes differ by at most one,
// the first n mod size ranks taking one more.
func (p *parallel) shard(n int) (lo, hi int) { return shardOf(n, p.rank(), p.size()) }

func shardOf(n, rank, size int) (lo, hi int) {
	q, r := n/size, n%size
	lo = rank*q + min(rank, r)
	hi = lo + q
	if rank < r {
		hi++
	}
	return lo, hi
}

// checkShards refuses a run where some rank would get an empty part of an outer batch.
func (p *parallel) checkShards(cfg config.Config, nTarget int) error {
	n := p.size()
	if n == 1 {
		return nil
	}
	smallest := min(cfg.OuterBatch, nTarget)
	if last := nTarget % cfg.OuterBatch; last != 0 {
		smallest = min(smallest, last)
	}
	if smallest < n {
		return fmt.Errorf("%d ranks: an outer batch of %d target examples (outer_batch %d, target set %d) cannot give every rank one; use fewer ranks or another outer_batch", n, smallest, cfg.OuterBatch, nTarget)
	}
	return nil
}

// combine turns this rank's shard results into the whole batch's, on the device: grads are
// the gradients of the shard's mean loss with respect to the learnt parameters (or, with
// rowParts, this rank's base rows' part of the whole batch's gradient: baseShard), loss
// that mean (a scalar), wrong its number of wrong predictions (a scalar), n the shard size
// and total the batch size. One all-reduce (float64) carries (n/total)·grads (grads as they
// are with rowParts), (n/total)·loss and the wrong count, so the error is computed exactly
// as one process would (100·wrong/total). It returns the combined gradients and the step's
// outputs (for the whole batch). A lone process returns its inputs untouched. Nothing is
// read back to the host.
func (p *parallel) combine(grads []*torch.Tensor, loss, wrong *torch.Tensor, n, total int, rowParts bool) ([]*torch.Tensor, stepOutputs, error) {
	if p.size() == 1 {
		return grads, stepOutputs{loss: loss, wrong: wrong, batch: int64(n)}, nil // n = total alone
	}
	w := float64(n) / float64(total)
	var c torch.Chain
	parts := make([]*torch.Tensor, 0, len(grads)+2)
	for _, g := range grads {
		part := c.T(c.T(g.ToDType(torch.Double)).Reshape(-1))
		if !rowParts {
			part = c.T(part.MulScalar(w))
		}
		parts = append(parts, part)
	}
	wLoss := c.T(c.T(c.T(loss.ToDType(torch.Double)).Reshape(1)).MulScalar(w))
	count := c.T(c.T(wrong.ToDType(torch.Double)).Reshape(1))
	buf := c.T(torch.Cat(append(parts, wLoss, count), 0))
	if c.Err() != nil {
		return nil, stepOutputs{}, c.Err()
	}
	t0 := time.Now()
	if err := p.g.AllReduceSum(buf); err != nil {
		return nil, stepOutputs{}, err
	}
	p.lastReduce += time.Since(t0)
	sums := make([]*torch.Tensor, len(grads))
	var at int64
	for i, g := range grads {
		numel := g.Numel()
		sums[i] = c.T(c.T(c.T(buf.Narrow(0, at, numel)).Reshape(g.Shape()...)).ToDType(g.DType()))
		at += numel
	}
	out := stepOutputs{loss: c.T(buf.Select(0, at)), wrong: c.T(buf.Select(0, at+1)), batch: int64(total)}
	if c.Err() != nil {
		return nil, stepOutputs{}, c.Err()
	}
	return sums, out, nil
}

// observer is the data-parallel checks: at the start every rank takes rank 0's learnt
// values and model (they already agree when every rank uses the same seed; this makes it
// so by construction) after checking that the ranks are at the same Position of the run
// (a resume must find the same checkpoint everywhere); at each validation, every rank must
// hold rank 0's learnt values and validation accuracy (bit for bit: the same all-reduced
// steps from the same state), or the run stops. A lone process has none.
func (p *parallel) observer() []Observer {
	if p.size() == 1 {
		return nil
	}
	return []Observer{{Name: "data-parallel checks", Start: p.broadcastState, Validated: func(l *Loop, v ValidationRecord, _ time.Duration) error {
		return p.checkAgreement(l, v.Accuracy)
	}}}
}

func (p *parallel) broadcastState(l *Loop) error {
	pos := []float64{float64(l.pos.Step), float64(l.pos.Epoch), float64(l.pos.NextBatch), float64(len(l.tracker.Resets()))}
	root := append([]float64(nil), pos...)
	if err := p.g.BroadcastFloat64s(0, root); err != nil {
		return err
	}
	for i := range pos {
		if pos[i] != root[i] {
			return fmt.Errorf("rank %d is at (meta-step %v, epoch %v, batch %v, resets %v), rank 0 at (%v, %v, %v, %v): the ranks must start from the same checkpoint",
				p.rank(), pos[0], pos[1], pos[2], pos[3], root[0], root[1], root[2], root[3])
		}
	}
	ts := l.params()
	ts = append(ts, l.model.params...)
	ts = append(ts, l.model.buffers...)
	if l.model.rr {
		ts = append(ts, l.model.w, l.model.scale)
	}
	return torch.NoGrad(func() error {
		for _, t := range ts {
			if err := p.g.Broadcast(0, t); err != nil {
				return err
			}
		}
		return nil
	})
}

func (p *parallel) checkAgreement(l *Loop, acc float64) error {
	h := fnv.New64a()
	for _, t := range l.params() {
		vs, err := t.Float32s()
		if err != nil {
			return err
		}
		for _, v := range vs {
			b := math.Float32bits(v)
			h.Write([]byte{byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24)})
		}
	}
	digest := float64(h.Sum64() >> 11) // 53 bits: exact in a float64
	mine := []float64{digest, acc, float64(l.pos.Step)}
	root := append([]float64(nil), mine...)
	if err := p.g.BroadcastFloat64s(0, root); err != nil {
		return err
	}
	for i := range mine {
		if mine[i] != root[i] {
			return fmt.Errorf("rank %d diverged from rank 0 (learnt values digest, validation accuracy, step: %v against %v)", p.rank(), mine, root)
		}
	}
	return nil
}

// evaluateSplit trains models lo..hi-1 of `models` on this rank (its shard) and gathers
// every rank's accuracies, in model order, on every rank.
func (p *parallel) evaluateSplit(eval func(lo, hi int) ([]float64, error), models int) ([]float64, error) {
	lo, hi := p.shard(models)
	mine, err := eval(lo, hi)
	if err != nil {
		return nil, err
	}
	if p.size() == 1 {
		return mine, nil
	}
	all := make([]float64, models)
	copy(all[lo:hi], mine)
	if err := p.g.SumFloat64s(all); err != nil {
		return nil, err
	}
	return all, nil
}

// validationAccuracy scores the one model of m on split v. In a data-parallel run every
// rank holds the same model (trained identically) and scores only its contiguous part of
// the split; the correct counts are summed, so every rank gets the same accuracy.
func (p *parallel) validationAccuracy(ctx context.Context, m *train.Models, v deviceSplit) (float64, error) {
	x, y := v.x, v.y
	if p.size() == 1 {
		return m.Accuracy(ctx, x, y)
	}
	n := int(x.Shape()[0])
	lo, hi := p.shard(n)
	counts := []float64{0}
	if hi > lo {
		s := torch.NewScope()
		var c torch.Chain
		xs := c.T(x.Narrow(0, int64(lo), int64(hi-lo)))
		ys := c.T(y.Narrow(0, int64(lo), int64(hi-lo)))
		if c.Err() != nil {
			s.Close()
			return 0, c.Err()
		}
		acc, err := m.Accuracy(ctx, xs, ys)
		s.Close()
		if err != nil {
			return 0, err
		}
		counts[0] = math.Round(acc * float64(hi-lo) / 100)
	}
	if err := p.g.SumFloat64s(counts); err != nil {
		return 0, err
	}
	return 100 * counts[0] / float64(n), nil
}

// baseShard is this rank's part of a meta-step's base batch, rows [lo, hi) of its n, in a
// data-parallel run that learns labels only. The base batch's network work is what every
// rank would otherwise compute whole and identically (LD RR: 29 % of a LeNet meta-step on
// MNIST, more for larger networks; docs/benchmarks/data-parallel.md#ld-rr-base-batch-split-over-the-ranks, docs/benchmarks/data-parallel.md#ld-base-batch-split-over-the-ranks). Split, each
// rank runs the network on its rows alone:
//
//   - LD RR (rrStep): one all-reduce gathers the feature rows, so the ridge solve, the
//     target loss and the labels' gradient see the whole batch as before; the model's step
//     differentiates the whole batch's loss on every rank, reaching θ through the rank's own
//     rows only, and a second all-reduce sums those parts of θ's gradient.
//   - LD (ldStep): each rank's rows give their part of the inner gradient g, and one
//     all-reduce sums the parts (θ′ and the model's Adam step use the sum); the target loss
//     reaches a rank's labels only through its own part of g, so its gradient with respect
//     to θ′ is summed over the ranks (a second all-reduce) and pulled back through that
//     part; each rank's label gradient is then its own rows' (rowParts), which the labels'
//     all-reduce adds up.
//
// The sums differ from one process's in their last bits (as the outer batch's already do).
// Nil where the base batch is not split: one process, learnt images (and method dd), a
// network with BatchNorm (its statistics couple the rows), fewer base examples in a batch
// than ranks, or a network whose base batch is not worth it (splitsBase: LeNet, unless
// BaseSplitOn).
type baseShard struct {
	p         *parallel
	lo, hi, n int
	// rowParts: the label gradient this rank hands to the update is its own rows' part of the
	// whole batch's (LD), not its outer shard's gradient of the whole base batch (LD RR).
	rowParts bool
}

// baseShard returns this rank's part of an N_i-row base batch of a run on net, or nil.
func (p *parallel) baseShard(cfg config.Config, net *nets.Net, innerBatch int) *baseShard {
	if p.size() == 1 || cfg.LearnsImages() || net.BatchCoupled() || innerBatch < p.size() || !p.splitsBase(net) {
		return nil
	}
	lo, hi := shardOf(innerBatch, p.rank(), p.size())
	return &baseShard{p: p, lo: lo, hi: hi, n: innerBatch, rowParts: cfg.Method == config.MethodLD}
}

// splitsBase says whether the base batch of a run on net is split (where it may be). The
// split trades half of the base batch's network work for two more collectives a meta-step,
// each a point where the ranks wait for each other. LeNet's base batch (N_i ≤ 50 small
// images for MNIST-sized data) is too little work for that: on MNIST the split made two
// ranks slower, or no faster, on three machine kinds, while it gains 10–20 % of a ConvNet-3
// or AlexCifarNet meta-step (docs/benchmarks/data-parallel.md#ld-rr-base-batch-split-over-the-ranks, docs/benchmarks/data-parallel.md#ld-base-batch-split-over-the-ranks, docs/benchmarks/data-parallel.md#lenet-base-batch-whole-on-every-rank).
func (p *parallel) splitsBase(net *nets.Net) bool {
	switch p.baseSplit {
	case BaseSplitOn:
		return true
	case BaseSplitOff:
		return false
	}
	return net.Arch != "lenet"
}

// rows is this rank's rows of a base-batch tensor (images or labels), with its graph.
func (s *baseShard) rows(t *torch.Tensor) (*torch.Tensor, error) {
	return t.Narrow(0, int64(s.lo), int64(s.hi-s.lo))
}

// share is this rank's rows' share of the base batch: a mean over them, times share, is
// their part of the whole batch's mean.
func (s *baseShard) share() float64 { return float64(s.hi-s.lo) / float64(s.n) }

// featureGather is a base batch's feature rows on their way to every rank: started by
// startFeatures, ended by finish, so that work which does not need them (LD RR's target
// features) runs while the ranks exchange.
type featureGather struct {
	s       *baseShard
	own     *torch.Tensor // this rank's rows, attached to θ
	all     *torch.Tensor // every rank's rows: this rank's and zeros, summed in place
	pending *dist.PendingSum
}

// startFeatures computes this rank's rows of Z = [f_θ(x), 1] for the whole base batch x
// (n rows) and starts the all-reduce that gives every rank the others' (each rank sends its
// rows and zeros elsewhere).
func (s *baseShard) startFeatures(l *learner, x *torch.Tensor) (*featureGather, error) {
	var c torch.Chain
	own := c.T(l.features(c.T(s.rows(x)), true))
	if c.Err() != nil {
		return nil, c.Err()
	}
	d := own.Shape()[1]
	all := c.T(torch.Zeros([]int64{int64(s.n), d}, torch.WithDType(own.DType()), torch.OnDevice(own.Device())))
	c.Check(torch.NoGrad(func() error {
		mine := c.T(all.Narrow(0, int64(s.lo), int64(s.hi-s.lo)))
		if c.Err() != nil {
			return c.Err()
		}
		return mine.Copy_(own)
	}))
	if c.Err() != nil {
		return nil, c.Err()
	}
	pending, err := s.p.g.StartAllReduceSum(all)
	if err != nil {
		return nil, err
	}
	return &featureGather{s: s, own: own, all: all, pending: pending}, nil
}

// finish waits for the other ranks' rows and returns Z: this rank's rows attached to θ, the
// others' without a graph. Every rank holds the same values (the received sum: a row plus
// zeros). It must be called once for every startFeatures, also on an error path.
func (f *featureGather) finish() (*torch.Tensor, error) {
	t0 := time.Now()
	if err := f.pending.Wait(); err != nil {
		return nil, err
	}
	f.s.p.lastReduce += time.Since(t0) // the wait: what the exchange cost this rank
	s, own, all := f.s, f.own, f.all
	var c torch.Chain
	// own + (received − own) is the received value exactly (a −0 row entry became +0 in
	// the sum), with own's gradient: every rank computes the same bits from here.
	mine := c.T(all.Narrow(0, int64(s.lo), int64(s.hi-s.lo)))
	attached := c.T(own.Add(c.T(mine.Sub(c.T(own.Detach())))))
	parts := []*torch.Tensor{attached}
	if s.lo > 0 {
		parts = append([]*torch.Tensor{c.T(all.Narrow(0, 0, int64(s.lo)))}, parts...)
	}
	if s.hi < s.n {
		parts = append(parts, c.T(all.Narrow(0, int64(s.hi), int64(s.n-s.hi))))
	}
	z := c.T(torch.Cat(parts, 0))
	return z, c.Err()
}

// sum adds up the ranks' parts of θ-sized tensors (a gradient), in place, in one float32
// all-reduce (with two ranks the float32 sum is the exact sum rounded once, as a float64
// sum would give).
func (s *baseShard) sum(grads []*torch.Tensor) error {
	sc := torch.NewScope()
	defer sc.Close()
	var c torch.Chain
	flat := make([]*torch.Tensor, len(grads))
	for i, g := range grads {
		flat[i] = c.T(g.Reshape(-1))
	}
	buf := c.T(torch.Cat(flat, 0))
	if c.Err() != nil {
		return c.Err()
	}
	t0 := time.Now()
	if err := s.p.g.AllReduceSum(buf); err != nil {
		return err
	}
	s.p.lastReduce += time.Since(t0)
	var at int64
	for _, g := range grads {
		n := g.Numel()
		part := c.T(c.T(buf.Narrow(0, at, n)).Reshape(g.Shape()...))
		if c.Err() != nil {
			return c.Err()
		}
		if err := torch.NoGrad(func() error { return g.Copy_(part) }); err != nil {
			return err
		}
		at += n
	}
	return nil
}

// labelGradient is LD's meta-gradient with respect to params (the labels) in a split base
// batch: the target loss reaches this rank's labels only through its rows' part of the
// inner gradient, inside fast (θ′, innerStep). loss is the mean over this rank's outer
// shard and share that shard's part of the target batch: the weighted loss's gradient with
// respect to θ′, summed over the ranks, is the whole target batch's, and pulled back
// through fast it gives this rank's rows' part of the whole label gradient (zero on every
// other row), which combine adds up as it is (rowParts).
func (s *baseShard) labelGradient(loss *torch.Tensor, fast, params []*torch.Tensor, share float64) ([]*torch.Tensor, error) {
	weighted, err := loss.MulScalar(share)
	if err != nil {
		return nil, err
	}
	outer, err := torch.Grad([]*torch.Tensor{weighted}, fast, torch.GradOpts{RetainGraph: true})
	if err != nil {
		return nil, err
	}
	if err := s.sum(outer); err != nil {
		return nil, err
	}
	return torch.Grad(fast, params, torch.GradOpts{GradOutputs: outer})
}
