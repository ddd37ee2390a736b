package engine

// loop.go: the meta-loop, one engine whatever is learnt (the paper's Algorithm 1 with
// docs/ALGORITHM.md's details): epochs of the target set in batches of N_o, one meta-step
// per batch through the model being trained (learner.go) with the method's step (LD §4, LD
// RR §5), the reset rule and T (§6), and validation every k epochs keeping the best values
// (validate.go). What is learnt are learnables (learnable.go); progress, the history,
// checkpoints, gradient statistics and the data-parallel checks are observers (observer.go)
// the loop calls at its named points.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// loop is the state of one meta-loop.
type Loop struct {
	in         *Inputs
	learnt     []learnable
	fixed      *torch.Tensor // the base examples' one-hot true labels where nothing learns labels
	model      *learner
	method     metaMethod
	dd         *ddData // method dd's learnable (its step sizes train fresh models); nil otherwise
	rand       randomState
	tracker    *ResetTracker
	pos        Position
	order      []int         // the epoch's permutation of the target set
	pending    []pendingStep // meta-steps whose outputs are not read yet
	best       kept
	vals       []ValidationRecord
	clock      clock
	last       lastSeen
	par        *parallel
	graph      *metaGraph // the meta-step as a CUDA graph (metagraph.go); nil: eager
	graphAsked bool       // whether newMetaGraph was asked (once per run)
	observers  []Observer
	// resumed are the settings changed when the run was resumed (DiffDetails); nil for a
	// fresh run.
	resumed []string
}

// Position is a place in the meta-loop, a meta-step boundary: meta-steps done, the epoch in
// progress (1-based; Epochs+1 when done) and the batches of it done. A checkpoint is written
// at a Position, which the run resumes from.
type Position struct {
	Step, Epoch, NextBatch int
}

// randomState is the meta-loop's randomness: Go's PCG for the epochs' permutations and the
// base batches, a torch generator for model (re-)initialisations.
type randomState struct {
	pcg *rand.PCG // rng's source, kept for its state (checkpoints)
	rng *rand.Rand
	gen *torch.Generator
	// replay, when set, gives the batches instead of rng: a trace of another program's run
	// replayed through this loop (the tests' comparison with the authors' code).
	replay batchSource
}

// batchSource draws the meta-loop's batches: each epoch's order of the n target examples
// and each meta-step's k base indices out of n.
type batchSource interface {
	epochOrder(n int) []int
	baseIndices(n, k int) []int
}

func (r *randomState) epochOrder(n int) []int {
	if r.replay != nil {
		return r.replay.epochOrder(n)
	}
	return r.rng.Perm(n)
}

func (r *randomState) baseIndices(n, k int) []int {
	if r.replay != nil {
		return r.replay.baseIndices(n, k)
	}
	return r.rng.Perm(n)[:k]
}

// kept is the best validation's values: the tables fresh models train on.
type kept struct {
	images []float32 // nil: the base images themselves (no learnable changes them)
	labels []float32 // nil before the first kept validation
	lrs    []float32 // method dd's step sizes; nil otherwise
	record ValidationRecord
}

// clock is the run's time: wall time of the runs it resumes, the meta-loop's own.
type clock struct {
	start          time.Time
	priorWall      float64
	distillSeconds float64 // meta-steps alone (no validation)
}

// lastSeen is what the latest read meta-step and validation said.
type lastSeen struct {
	loss, err float64 // label loss and top-1 error (%) of the latest read meta-step
	valAcc    float64 // latest validation accuracy; NaN before the first
}

// NewRunPCG is the source of the meta-loop's Go random stream (epoch permutations and base
// batches).
func NewRunPCG(seed uint64) *rand.PCG { return rand.NewPCG(seed, 0xd15711) }

// newLoop sets up a fresh meta-loop on in: what learn makes is learnt (nil: uniform labels,
// label distillation), a fresh model, the generators at their seeds, Position (0, 1, 0).
func newLoop(in *Inputs, par *parallel, learn func(*Inputs) ([]learnable, error)) (*Loop, error) {
	l := &Loop{in: in, par: par, tracker: NewResetTracker(in.cfg.ResetWindow, in.cfg.ResetMeanOfLast)}
	l.pos = Position{0, 1, 0}
	l.last.valAcc = math.NaN()
	l.method = ldStep
	if in.rr() {
		l.method = rrStep
	}
	if learn == nil {
		learn = configLearnables
	}
	var err error
	if l.learnt, err = learn(in); err != nil {
		return nil, err
	}
	if err := l.fixLabels(); err != nil {
		l.close()
		return nil, err
	}
	if l.rand.gen, err = torch.NewGenerator(train.Seed(in.seed, "meta-model", 0)); err != nil {
		l.close()
		return nil, err
	}
	net := in.net
	if in.cfg.Method == config.MethodDD {
		net = net.XavierInit() // Wang et al.'s initialisation (§12)
	}
	if l.model, err = newLearner(net, in.rr(), in.cfg, train.AdamSpec(in.cfg.ModelLR), l.rand.gen, in.dev); err != nil {
		l.close()
		return nil, err
	}
	for _, v := range l.learnt {
		if dd, ok := v.(*ddData); ok {
			l.dd = dd
			l.method = ddMethod(dd, func() *torch.Generator { return l.rand.gen }, in.cfg.DDBackward)
		}
	}
	l.rand.pcg = NewRunPCG(in.seed)
	l.rand.rng = rand.New(l.rand.pcg)
	return l, nil
}

// configLearnables are what the run's configuration learns (Config.Learn): the labels, the
// images, or both (the labels first, so that the history's gradient statistics stay the
// labels').
func configLearnables(in *Inputs) ([]learnable, error) {
	if in.cfg.Method == config.MethodDD {
		v, err := newRunDD(in)
		if err != nil {
			return nil, err
		}
		return []learnable{v}, nil
	}
	var out []learnable
	if in.cfg.Learn == config.LearnLabels || in.cfg.Learn == config.LearnBoth {
		y, err := newLabels(in.ds.Base.N, in.ds.Classes, in.cfg, in.dev)
		if err != nil {
			return nil, err
		}
		out = append(out, y)
	}
	if in.cfg.Learn == config.LearnImages || in.cfg.Learn == config.LearnBoth {
		x, err := newRunImages(in)
		if err != nil {
			for _, v := range out {
				v.close()
			}
			return nil, err
		}
		out = append(out, x)
	}
	if len(out) == 0 {
		return nil, config.FieldErrorf("learn", "unknown value %q (want labels, images or both)", in.cfg.Learn)
	}
	return out, nil
}

// fixLabels gives the base batch the base examples' one-hot true labels when no learnable
// gives it labels.
func (l *Loop) fixLabels() error {
	s := torch.NewScope()
	defer s.Close()
	_, y, err := l.baseBatch(nil, true)
	if err != nil || y != nil {
		return err
	}
	ds := l.in.ds
	n, classes := ds.Base.N, ds.Classes
	table := make([]float32, n*classes)
	for i, c := range ds.Base.Labels {
		if c < 0 || int(c) >= classes {
			return fmt.Errorf("base example %d has label %d outside the target's %d classes: its labels must be learnt (true labels exist only within a dataset)", i, c, classes)
		}
		table[i*classes+int(c)] = 1
	}
	var c torch.Chain
	l.fixed = c.T(toDevice(c.T(torch.FromFloat32(table, int64(n), int64(classes))), l.in.dev))
	if c.Err() != nil {
		return c.Err()
	}
	torch.Escape(l.fixed)
	return nil
}

func (l *Loop) close() {
	l.graph.close()
	l.fixed.Free()
	for _, p := range l.pending {
		p.reading.Free()
	}
	l.pending = nil
	for _, v := range l.learnt {
		v.close()
	}
	if l.model != nil {
		l.model.close()
	}
	l.rand.gen.Close()
	for _, o := range l.observers {
		if o.Close != nil {
			o.Close()
		}
	}
}

// wallSeconds is the run's wall time so far, including the runs it resumes.
func (l *Loop) wallSeconds() float64 { return l.clock.priorWall + time.Since(l.clock.start).Seconds() }

// T is the number of steps fresh models train for (§6; method dd: its unrolled steps, §12);
// at least 1.
func (l *Loop) T() int {
	if l.dd != nil {
		return l.dd.unrolled()
	}
	return max(1, l.tracker.T())
}

// stepsPerEpoch is the number of meta-steps (outer batches) of an epoch.
func (l *Loop) stepsPerEpoch() int { return StepsPerEpoch(l.in.ds.TargetSet.N, l.in.cfg.OuterBatch) }

// run runs the meta-loop from its Position to the end of the last epoch.
func (l *Loop) run(ctx context.Context) error {
	return runLockstep(ctx, []*Loop{l}, func(targets [][]int) error { return l.metaStep(targets[0]) })
}

// cancelled reads the unread meta-steps, tells the observers the loop ends with ctxErr (a
// checkpoint is written at the current Position, a meta-step boundary) and returns ctxErr.
func (l *Loop) cancelled(ctxErr error) error {
	if err := l.read(); err != nil {
		return fmt.Errorf("%w (no checkpoint on cancellation: %v)", ctxErr, err)
	}
	for _, o := range l.observers {
		if o.End != nil {
			if err := o.End(l, ctxErr); err != nil {
				return fmt.Errorf("%w (and %v)", ctxErr, err)
			}
		}
	}
	return ctxErr
}

// metaStep runs one meta-iteration on the target examples targetIdx and queues its outputs;
// it reads them, with the other unread steps', when readDue says so. Errors name the
// meta-step they belong to.
func (l *Loop) metaStep(targetIdx []int) error {
	t0 := time.Now()
	defer func() { l.clock.distillSeconds += time.Since(t0).Seconds() }()
	return l.stepped(l.queueStep(targetIdx))
}

// stepped ends a meta-step that err says how it went: the error named with the meta-step
// it belongs to, or the step counted and the unread steps read when readDue says so.
func (l *Loop) stepped(err error) error {
	if err != nil {
		var nf *NonFiniteError
		if errors.As(err, &nf) {
			nf.Step = l.pos.Step + 1
		}
		return fmt.Errorf("meta-step %d (epoch %d): %w", l.pos.Step+1, l.pos.Epoch, err)
	}
	l.pos.Step++
	if l.readDue() {
		return l.read()
	}
	return nil
}

// params are every learnable's parameters, in the learnables' order.
func (l *Loop) params() []*torch.Tensor {
	var ps []*torch.Tensor
	for _, v := range l.learnt {
		ps = append(ps, v.params()...)
	}
	return ps
}

// baseBatch is the base examples idx (nil: all) with the learnt values in them.
func (l *Loop) baseBatch(idx *torch.Tensor, detach bool) (x, y *torch.Tensor, err error) {
	x, y = l.in.base.x, l.fixed
	if idx != nil {
		if x, err = x.IndexSelect(0, idx); err != nil {
			return nil, nil, err
		}
		if y != nil {
			if y, err = y.IndexSelect(0, idx); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, v := range l.learnt {
		if x, y, err = v.batch(idx, x, y, detach); err != nil {
			return nil, nil, err
		}
	}
	return x, y, nil
}

// update is a meta-step's metaBatch.update: the meta-gradients combined over the ranks,
// and each learnable stepped with its part. It returns the combined gradients too, for the
// observers (seeGradients, after the step: they only read them).
func (l *Loop) update(grads []*torch.Tensor, loss, wrong *torch.Tensor, n, total int, rowParts bool) ([]*torch.Tensor, stepOutputs, error) {
	all, out, err := l.par.combine(grads, loss, wrong, n, total, rowParts)
	if err != nil {
		return nil, stepOutputs{}, err
	}
	rest := all
	for _, v := range l.learnt {
		k := len(v.params())
		if err := v.step(rest[:k]); err != nil {
			return nil, stepOutputs{}, err
		}
		rest = rest[k:]
	}
	return all, out, nil
}

// seeGradients shows a meta-step's combined meta-gradients to the observers.
func (l *Loop) seeGradients(grads []*torch.Tensor) error {
	for _, o := range l.observers {
		if o.Gradient != nil {
			if err := o.Gradient(l, grads); err != nil {
				return o.wrap(err)
			}
		}
	}
	return nil
}

// queueStep takes one meta-step on the target examples targetIdx and queues its reading
// (its outputs, the learnt values' sums and the state guards, read later with other steps').
// The base batch is drawn here, on the host, and both index sets are uploaded; the step
// itself (stepOn) runs eagerly, or on a GPU replayed from a CUDA graph (metagraph.go).
func (l *Loop) queueStep(targetIdx []int) error {
	s := torch.NewScope()
	defer s.Close()
	ti, bi, n, total, err := l.stepIndices(targetIdx)
	if err != nil {
		return err
	}
	if !l.graphAsked {
		l.graph, l.graphAsked = l.newMetaGraph(), true
	}
	var v *torch.Tensor
	var batch int64
	if l.graph != nil {
		v, batch, err = l.graph.step(l, ti, bi, n, total)
	} else {
		var grads []*torch.Tensor
		v, grads, batch, err = l.stepOn(ti, bi, n, total)
		if err == nil {
			err = l.seeGradients(grads)
			torch.FreeAll(grads)
		}
	}
	if err != nil {
		return err
	}
	l.pend(v, batch)
	return nil
}

// stepIndices are a meta-step's indices on the device: this rank's n of the total target
// examples targetIdx, and the base batch, drawn here on the host.
func (l *Loop) stepIndices(targetIdx []int) (ti, bi *torch.Tensor, n, total int, err error) {
	total = len(targetIdx)
	lo, hi := l.par.shard(total) // this rank's part of the outer batch (all of it alone)
	idx := make([]int64, hi-lo)
	for i, v := range targetIdx[lo:hi] {
		idx[i] = int64(v)
	}
	var c torch.Chain
	ti = c.T(indexTensor(idx, l.in.dev))
	bi = c.T(indexTensor(int64s(l.rand.baseIndices(l.in.ds.Base.N, l.in.cfg.InnerBatch)), l.in.dev))
	return ti, bi, hi - lo, total, c.Err()
}

// pend queues a meta-step's reading v (taken out of the caller's scope) to be read later
// with other steps'.
func (l *Loop) pend(v *torch.Tensor, batch int64) {
	torch.Escape(v)
	l.pending = append(l.pending, pendingStep{reading: v, batch: batch, step: l.pos.Step + 1, epoch: l.pos.Epoch})
}

// stepOn is one meta-step on the target examples ti (this rank's n of total) and the base
// examples bi, both on the device: the method's step, its update of the learnables, then
// the reading vector. It returns the reading (in the caller's scope), the combined
// meta-gradients (for the observers, which it does not call; owned by no scope: the caller
// frees them) and the target batch size the reading's counts refer to. Its work is on the
// device alone.
func (l *Loop) stepOn(ti, bi *torch.Tensor, n, total int) (reading *torch.Tensor, grads []*torch.Tensor, batch int64, err error) {
	s := torch.NewScope()
	defer s.Close()
	st, err := l.beginStep(ti, bi, n, total)
	if err != nil {
		return nil, nil, 0, err
	}
	out, err := l.method(l.model, st.b)
	if err == nil {
		reading, err = l.reading(st.b, out)
	}
	if err != nil {
		torch.FreeAll(st.grads)
		return nil, nil, 0, err
	}
	s.Keep(reading)
	return reading, st.grads, out.batch, nil
}

// stepInProgress is a meta-step's batch, and the combined meta-gradients its update
// leaves (owned by no scope).
type stepInProgress struct {
	b     metaBatch
	grads []*torch.Tensor
}

// beginStep is what the method's step works on: the target and base batches of ti and bi
// (in the caller's scope), the update that combines and applies the meta-gradients, and
// the model's settings for this step.
func (l *Loop) beginStep(ti, bi *torch.Tensor, n, total int) (*stepInProgress, error) {
	var c torch.Chain
	st := &stepInProgress{b: metaBatch{params: l.params(), total: total, idx: bi}}
	b := &st.b
	b.xt = c.T(l.in.target.x.IndexSelect(0, ti))
	b.yt = c.T(l.in.target.y.IndexSelect(0, ti))
	if c.Err() != nil {
		return nil, c.Err()
	}
	var err error
	if b.x, b.y, err = l.baseBatch(b.idx, false); err != nil {
		return nil, err
	}
	b.shard = l.par.baseShard(l.in.cfg, l.model.net, int(bi.Shape()[0]))
	rowParts := b.shard != nil && b.shard.rowParts
	b.update = func(gs []*torch.Tensor, loss, wrong *torch.Tensor) (stepOutputs, error) {
		grads, out, err := l.update(gs, loss, wrong, n, total, rowParts)
		torch.Escape(grads...) // out of the method's scope: the caller frees them
		st.grads = grads
		return out, err
	}
	b.current = func() (*torch.Tensor, *torch.Tensor, error) { return l.baseBatch(b.idx, true) }
	if l.par != nil {
		l.par.lastReduce = 0
	}
	l.model.frozen = l.modelFrozen()
	l.model.stepsOnUpdated = l.in.cfg.Compat == config.CompatAuthors && l.in.cfg.Learn == config.LearnImages && l.in.cfg.Method == config.MethodLD
	return st, nil
}

// reading is a meta-step's reading vector, in the caller's scope: the method's outputs,
// the learnt values' sums and the state guards.
func (l *Loop) reading(b metaBatch, out stepOutputs) (*torch.Tensor, error) {
	var c torch.Chain
	var sums []*torch.Tensor
	c.Check(torch.NoGrad(func() error {
		for _, p := range b.params {
			sums = append(sums, c.T(p.Sum()))
		}
		return c.Err()
	}))
	if c.Err() != nil {
		return nil, c.Err()
	}
	guards, err := l.guardValues(l.stateGuards()) // the rest of the state (divergence.go)
	if err != nil {
		return nil, err
	}
	return out.vector(append(sums, guards...))
}

// modelFrozen reports whether the model skips its own step in the next meta-step
// (Config.ModelTraining).
func (l *Loop) modelFrozen() bool {
	switch l.in.cfg.ModelTraining {
	case config.ModelTrainNever:
		return true
	case config.ModelTrainAfterReset:
		return len(l.tracker.Resets()) == 0
	}
	return false
}

// note tells the observers a message (warnings, checkpoints written, resumes).
func (l *Loop) note(p Progress) {
	for _, o := range l.observers {
		if o.Note != nil {
			o.Note(l, p)
		}
	}
}
