// Package train trains models on fixed (images, labels) and scores them: the fresh models
// of docs/ALGORITHM.md §7 (validation, the final test, the baselines' step search and test
// models, the studies, evaluation of an artifact) through one Trainer, and what the
// meta-loop's own model shares with them (optimisers, the RR head, scoring, seeds).
//
// Fresh models trained on fixed (images, labels) and scored (docs/ALGORITHM.md §7):
// validation, the final test, the baselines' step search and test models, the studies and
// `ldtorch evaluate` all train through Trainer.TrainModels, one model or many (M = 1 where one is
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
// solve, and the results agree to rounding. labeldistill's sequential_test.go keeps a
// model-by-model trainer as the oracle both modes are checked against.
package train

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/torch"
)

// Trainer trains fresh models on one label table.
type Trainer struct {
	Net    *nets.Net
	RR     bool
	Cfg    config.Config
	Images *torch.Tensor // (N, C, H, W) on the device
	Labels *torch.Tensor // (N, classes), no grad
	Batch  int
	Opt    OptSpec
	Device torch.Device
	// Progress, when set, hears how much of an evaluation (all its models) is done, in
	// training steps and, on the batched path, scoring blocks; onStep and stepBase carry it
	// into the loops.
	Progress func(done, total int)
	onStep   func(step int)
	stepBase int
	// Together is how many models TestRange trains together (0: MaxTogether); 1 trains
	// them one after another (the bench's comparison).
	Together int
	// Trained, when set, is called by TestRange with each group of models it has trained
	// and scored, before they are freed: l's model j is model first+j (seeded
	// Seed(seed, purpose, first+j)). It must not change them (ModelSaver.Save saves them).
	Trained func(first int, l *Models) error
	// Scored, when set, is called by TestRange with each group's accuracies as soon as the
	// group is scored (after Trained): accs[j] is model first+j's, NaN when it diverged. A
	// run that checkpoints records them, so that a cut test resumes after the last group.
	Scored func(first int, accs []float64) error
	// Schedule, when set, replaces the random minibatches and Opt: method dd's fixed
	// order and learnt step sizes.
	Schedule *Schedule
}

// Schedule is a fixed training schedule (method dd, Wang et al.'s dataset distillation;
// docs/ALGORITHM.md §12): step t (1-based) trains every model on the base examples
// Batches[(t−1) mod len(Batches)], in that order, with one plain gradient step of size
// LRs[t−1]. A training takes at most len(LRs) steps.
type Schedule struct {
	Batches [][]int64
	LRs     []float64
}

// check refuses a schedule that cannot train steps steps on n base examples.
func (s *Schedule) check(steps, n int) error {
	if len(s.Batches) == 0 || steps > len(s.LRs) {
		return fmt.Errorf("schedule: %d steps asked of a schedule of %d step sizes over %d batches", steps, len(s.LRs), len(s.Batches))
	}
	size := len(s.Batches[0])
	for _, b := range s.Batches {
		if len(b) != size || size == 0 {
			return fmt.Errorf("schedule: batches of %d and %d examples (they must be equal and not empty)", size, len(b))
		}
		for _, i := range b {
			if i < 0 || int(i) >= n {
				return fmt.Errorf("schedule: base example %d of %d", i, n)
			}
		}
	}
	for i, lr := range s.LRs {
		if math.IsNaN(lr) || math.IsInf(lr, 0) || lr < 0 {
			return fmt.Errorf("schedule: step size %d is %v", i+1, lr)
		}
	}
	return nil
}

// reportSteps sets onStep to report progress over total steps (when progress is set) and
// returns the function that unsets it.
func (tr *Trainer) reportSteps(total int) func() {
	if tr.Progress == nil {
		return func() {}
	}
	tr.stepBase = 0
	tr.onStep = func(step int) { tr.Progress(tr.stepBase+step, total) }
	return func() { tr.onStep = nil }
}

// Mode is the body mode for a device: one grouped computation on a GPU, the
// models' bodies one after another on the CPU (where it is the faster; see nets.BodyMode).
func Mode(dev torch.Device) nets.BodyMode {
	if dev.IsCUDA() {
		return nets.BodyGrouped
	}
	return nets.BodyPerModel
}

// Probe asks TrainModels to call Fn after each of the steps listed in At (ascending): the
// baseline step search scores one model at several step counts of one training.
type Probe struct {
	At []int
	Fn func(step int, l *Models) error
}

// TrainModels trains len(seeds) fresh models together for steps in the given body mode:
// model i initialised from torch.NewGenerator(seeds[i]) and drawing its minibatches from
// its own PCG stream (seeds[i], 0x5eed). pr may be nil.
func (tr *Trainer) TrainModels(ctx context.Context, steps int, seeds []uint64, mode nets.BodyMode, pr *Probe) (*Models, error) {
	spec := tr.Opt
	if tr.Schedule != nil {
		if err := tr.Schedule.check(steps, int(tr.Images.Shape()[0])); err != nil {
			return nil, err
		}
		spec = OptSpec{Kind: "sgd"} // its step size is set at every step
	}
	l, err := NewModels(tr.Net, tr.RR, tr.Cfg, spec, seeds, tr.Device, tr.Images.DType(), mode)
	if err != nil {
		return nil, err
	}
	rngs := make([]*rand.Rand, len(seeds))
	for i, s := range seeds {
		rngs[i] = rand.New(rand.NewPCG(s, 0x5eed))
	}
	if err := tr.TrainFor(ctx, l, rngs, steps, pr); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// TrainFor takes steps training steps of l on the Trainer's labels, model i drawing its
// minibatches (a random permutation prefix of the base examples) from rngs[i]. On a GPU the
// steps are replayed from a CUDA graph where they can be (graph.go): the same steps, with
// l's Adam then keeping its step count on the device.
func (tr *Trainer) TrainFor(ctx context.Context, l *Models, rngs []*rand.Rand, steps int, pr *Probe) error {
	n := int(tr.Images.Shape()[0])
	batch := min(tr.Batch, n)
	idx := make([]int64, len(rngs)*batch)
	next := 0
	g := tr.newStepGraph(l, steps)
	defer g.close()
	for step := 1; step <= steps; step++ {
		// Every step: a signal is seen within one step (ctx.Err is a lock and a read).
		if err := ctx.Err(); err != nil {
			return err
		}
		if sch := tr.Schedule; sch != nil {
			b := sch.Batches[(step-1)%len(sch.Batches)]
			batch = len(b)
			idx = idx[:0]
			for range rngs {
				idx = append(idx, b...)
			}
			sgd, ok := l.Opt.(*torch.SGD)
			if !ok {
				return fmt.Errorf("training step %d: a schedule needs plain SGD", step)
			}
			if err := sgd.SetLR(sch.LRs[step-1]); err != nil {
				return fmt.Errorf("training step %d: %w", step, err)
			}
		} else {
			for i, rng := range rngs {
				for j, p := range rng.Perm(n)[:batch] {
					idx[i*batch+j] = int64(p)
				}
			}
		}
		t, err := torch.FromInt64On(tr.Device, idx, int64(len(idx)))
		if err == nil {
			if g != nil {
				err = g.step(t, int64(batch))
			} else {
				err = l.Step(tr.Images, tr.Labels, t, int64(batch))
			}
			t.Free()
		}
		if err != nil {
			return fmt.Errorf("training step %d: %w", step, err)
		}
		if tr.onStep != nil {
			tr.onStep(step)
		}
		for pr != nil && next < len(pr.At) && pr.At[next] == step {
			if err := pr.Fn(step, l); err != nil {
				return err
			}
			next++
		}
	}
	return nil
}

// Test trains `models` fresh models for steps each and returns their accuracies
// (%) on (x, y); model i starts from seed Seed(seed, purpose, i). A diverged model
// (non-finite parameters) gets NaN, which KeepFinite counts and drops.
func (tr *Trainer) Test(ctx context.Context, steps, models int, seed uint64, purpose string, x, y *torch.Tensor) ([]float64, error) {
	return tr.TestMode(ctx, steps, models, seed, purpose, x, y, Mode(tr.Device))
}

// TestMode is Test in a given body mode.
func (tr *Trainer) TestMode(ctx context.Context, steps, models int, seed uint64, purpose string, x, y *torch.Tensor, mode nets.BodyMode) ([]float64, error) {
	return tr.TestRange(ctx, steps, 0, models, seed, purpose, x, y, mode)
}

// TestRange trains and scores models lo..hi-1 (model i from Seed(seed, purpose,
// i)), together in groups of tr.Together (default MaxTogether) starting at lo. A
// data-parallel run gives each rank its own range.
func (tr *Trainer) TestRange(ctx context.Context, steps, lo, hi int, seed uint64, purpose string, x, y *torch.Tensor, mode nets.BodyMode) ([]float64, error) {
	group := MaxTogether
	if tr.Together > 0 {
		group = tr.Together
	}
	accs := make([]float64, 0, max(0, hi-lo))
	// Progress counts each group's training steps and scoring blocks.
	blocks := int((x.Shape()[0] + EvalChunk - 1) / EvalChunk)
	defer tr.reportSteps((steps + blocks) * ((max(0, hi-lo) + group - 1) / group))()
	for first := lo; first < hi; first += group {
		seeds := make([]uint64, min(group, hi-first))
		for i := range seeds {
			seeds[i] = Seed(seed, purpose, first+i)
		}
		tr.stepBase = (first - lo) / group * (steps + blocks)
		l, err := tr.TrainModels(ctx, steps, seeds, mode, nil)
		if err != nil {
			return nil, err
		}
		if tr.onStep != nil {
			l.OnBlock = func(b int) { tr.onStep(steps + b) }
		}
		a, err := l.Accuracies(ctx, x, y)
		var diverged []bool
		if err == nil {
			diverged, err = l.Diverged()
		}
		if err == nil && tr.Trained != nil {
			err = tr.Trained(first, l)
		}
		l.Close()
		if err != nil {
			return nil, err
		}
		for i, d := range diverged {
			if d {
				a[i] = math.NaN() // KeepFinite counts and drops it
			}
		}
		if tr.Scored != nil {
			if err := tr.Scored(first, a); err != nil {
				return nil, err
			}
		}
		accs = append(accs, a...)
	}
	return accs, nil
}

// TrainOne trains one fresh model (initialisation and minibatches from seed) for steps,
// calling pr (may be nil) on the way: validation and the baseline step search.
func (tr *Trainer) TrainOne(ctx context.Context, steps int, seed uint64, pr *Probe) (*Models, error) {
	return tr.TrainModels(ctx, steps, []uint64{seed}, Mode(tr.Device), pr)
}

// SearchSteps trains one model for the grid's last step count, scoring it (accuracy, %)
// after each step count of the grid, and returns the step count with the lowest
// validation error (the earliest on ties) and every count's error: the baselines' step
// search (§8) and the rr-standard study's.
func (tr *Trainer) SearchSteps(ctx context.Context, grid []int, seed uint64, accuracy func(m *Models) (float64, error)) (int, map[int]float64, error) {
	valErr := make([]float64, 0, len(grid))
	byStep := map[int]float64{}
	search := &Probe{At: grid, Fn: func(step int, m *Models) error {
		acc, err := accuracy(m)
		if err != nil {
			return err
		}
		valErr = append(valErr, 100-acc)
		byStep[step] = 100 - acc
		return nil
	}}
	unset := tr.reportSteps(grid[len(grid)-1])
	m, err := tr.TrainOne(ctx, grid[len(grid)-1], seed, search)
	unset()
	if err != nil {
		return 0, byStep, err
	}
	m.Close()
	return BestSteps(grid, valErr), byStep, nil
}
