package train

// epochs.go: fresh models trained for whole epochs: SGD with momentum and weight decay, a
// step learning-rate schedule, optional augmentation, and a validation every few epochs
// that keeps each model's best parameters. It is the recipe of the DD-Ranking benchmark's
// evaluator (artifact.EvaluateProtocol); the paper's recipe (Trainer) trains for T steps
// with Adam instead.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/nets"
	"github.com/ldtorch/ldtorch/nets/augment"
	"github.com/ldtorch/ldtorch/torch"
)

// StepLR is torch.optim.lr_scheduler.StepLR stepped once per epoch: epoch e (counted from
// 0) trains at LR·Gamma^⌊e/StepSize⌋, computed as StepLR does (the rate multiplied by
// Gamma at each decay).
type StepLR struct {
	LR       float64
	StepSize int // epochs between decays
	Gamma    float64
}

// At is the learning rate of epoch e (0-based).
func (s StepLR) At(epoch int) float64 {
	lr := s.LR
	if s.StepSize <= 0 {
		return lr
	}
	for k := 1; k <= epoch/s.StepSize; k++ {
		lr *= s.Gamma
	}
	return lr
}

// EpochRecipe is how EpochTrainer trains: Epochs passes over the training set in shuffled
// batches of Batch (the last one partial), SGD with Momentum and WeightDecay at the
// learning rate Schedule gives each epoch, each batch augmented by Augment (nil: none),
// and the models scored on the validation split after every ValidateEvery epochs and
// after the last.
type EpochRecipe struct {
	Epochs        int
	Batch         int
	Schedule      StepLR
	Momentum      float64
	WeightDecay   float64
	ValidateEvery int
	Augment       *augment.DSA
}

// Check reports the recipe's first problem.
func (r EpochRecipe) Check() error {
	switch {
	case r.Epochs < 1:
		return fmt.Errorf("epochs must be at least 1, got %d", r.Epochs)
	case r.Batch < 1:
		return fmt.Errorf("batch must be at least 1, got %d", r.Batch)
	case !finite(r.Schedule.LR) || r.Schedule.LR <= 0:
		return fmt.Errorf("learning rate must be a positive number, got %v", r.Schedule.LR)
	case r.Schedule.StepSize < 0 || (r.Schedule.StepSize > 0 && (!finite(r.Schedule.Gamma) || r.Schedule.Gamma <= 0)):
		return fmt.Errorf("schedule: step size must be ≥ 0 and gamma positive, got %d and %v", r.Schedule.StepSize, r.Schedule.Gamma)
	case math.IsNaN(r.Momentum) || r.Momentum < 0 || r.Momentum >= 1:
		return fmt.Errorf("momentum must be in [0, 1), got %v", r.Momentum)
	case !finite(r.WeightDecay) || r.WeightDecay < 0:
		return fmt.Errorf("weight decay must be ≥ 0, got %v", r.WeightDecay)
	case r.ValidateEvery < 1:
		return fmt.Errorf("validate-every must be at least 1, got %d", r.ValidateEvery)
	}
	return nil
}

// Checks lists the epochs (1-based) after which the models are validated: every
// ValidateEvery-th and the last.
func (r EpochRecipe) Checks() []int {
	var out []int
	for e := 1; e <= r.Epochs; e++ {
		if e%r.ValidateEvery == 0 || e == r.Epochs {
			out = append(out, e)
		}
	}
	return out
}

// EpochTrainer trains fresh classifiers (a linear head; no RR) on fixed images and soft
// labels with an EpochRecipe.
type EpochTrainer struct {
	Net    *nets.Net
	Cfg    config.Config // NewModels' settings (unused by SGD); the zero value is fine
	Images *torch.Tensor // (N, C, H, W) on the device
	Labels *torch.Tensor // (N, classes) probability rows, no grad
	// PerModel: Images and Labels hold one training set per model, one after another
	// (model i's n = N/M rows at [i·n, (i+1)·n)); otherwise every model trains on all N.
	PerModel bool
	Recipe   EpochRecipe
	Device   torch.Device
	// Progress, when set, hears the epochs done of the recipe's.
	Progress func(done, total int)
	// Checkpoint, when set, makes the training resumable: Train saves its whole state there
	// from time to time and, when it finds a checkpoint of the same training, goes on from it.
	Checkpoint *EpochCheckpoint
}

// EpochResult is what EpochTrainer.Train leaves: the models at their best validation.
type EpochResult struct {
	// Models holds model i's parameters from the check with its highest validation
	// accuracy (the earliest on ties); the caller closes it.
	Models *Models
	// Validation is model i's best validation accuracy (%), NaN when the model diverged
	// (non-finite parameters) before its first check; Epoch the epoch of that check.
	Validation []float64
	Epoch      []int
	// Diverged: model i's parameters went non-finite at some check (its best parameters
	// before that are kept).
	Diverged []bool
	// Checks are the epochs validated (EpochRecipe.Checks); Curve[k][i] is model i's
	// validation accuracy (%) after epoch Checks[k].
	Checks []int
	Curve  [][]float64
	// ResumedAt is the number of epochs taken from a checkpoint (0: trained from the start);
	// Seconds the wall time of the training, over every part of a resumed one.
	ResumedAt int
	Seconds   float64
}

// Train trains len(seeds) models together: model i is initialised from
// torch.NewGenerator(seeds[i]), shuffles the training set each epoch with its own PCG
// stream (seeds[i], 0x5eed) and draws its augmentation from its own generator
// (Seed(seeds[i], "augment", 0)). After each check of the recipe every model is scored on
// (vx, vy); a model's parameters are kept when its accuracy beats its best so far.
func (et *EpochTrainer) Train(ctx context.Context, seeds []uint64, vx, vy *torch.Tensor) (*EpochResult, error) {
	r := et.Recipe
	if err := r.Check(); err != nil {
		return nil, err
	}
	if len(seeds) == 0 {
		return nil, fmt.Errorf("train: no models to train")
	}
	spec := OptSpec{Kind: "sgd", LR: r.Schedule.At(0), Momentum: r.Momentum, WeightDecay: r.WeightDecay}
	l, err := NewModels(et.Net, false, et.Cfg, spec, seeds, et.Device, et.Images.DType(), Mode(et.Device))
	if err != nil {
		return nil, err
	}
	m := len(seeds)
	res := &EpochResult{Models: l, Validation: make([]float64, m), Epoch: make([]int, m), Diverged: make([]bool, m), Checks: r.Checks()}
	best := make([][]*torch.Tensor, m)
	defer func() {
		for _, b := range best {
			torch.FreeAll(b)
		}
	}()
	fail := func(err error) (*EpochResult, error) {
		l.Close()
		return nil, err
	}
	for i := range res.Validation {
		res.Validation[i] = math.NaN()
	}
	st := &epochState{res: res, best: best, pcgs: make([]*rand.PCG, m)}
	rngs := make([]*rand.Rand, m)
	for i, s := range seeds {
		st.pcgs[i] = rand.NewPCG(s, 0x5eed)
		rngs[i] = rand.New(st.pcgs[i])
	}
	if r.Augment != nil {
		st.gens = make([]*torch.Generator, m)
		defer func() {
			for _, g := range st.gens {
				if g != nil {
					g.Close()
				}
			}
		}()
		for i, s := range seeds {
			if st.gens[i], err = torch.NewGenerator(Seed(s, "augment", 0)); err != nil {
				return fail(err)
			}
		}
		l.Augment = augmentEach(*r.Augment, st.gens)
	}

	n := int(et.Images.Shape()[0])
	if et.PerModel {
		if n%m != 0 {
			return fail(fmt.Errorf("train: %d images do not split into %d equal training sets", n, m))
		}
		n /= m
	}
	batch := min(r.Batch, n)
	checks := res.Checks
	started := time.Now()
	if ck := et.Checkpoint; ck != nil {
		// A checkpoint of another training, or one that does not read back whole, is not
		// resumed from: the training starts over and replaces it.
		if err := st.restore(et, seeds, ck); err != nil {
			return fail(err)
		}
	}
	lastSave := time.Now()
	perms := make([][]int, m)
	for epoch := st.epochs; epoch < r.Epochs; epoch++ {
		if err := l.Opt.SetLR(r.Schedule.At(epoch)); err != nil {
			return fail(err)
		}
		for i, rng := range rngs {
			perms[i] = rng.Perm(n)
		}
		for start := 0; start < n; start += batch {
			if err := ctx.Err(); err != nil {
				return fail(err)
			}
			size := min(batch, n-start)
			idx := make([]int64, 0, m*size)
			for i, p := range perms {
				off := 0
				if et.PerModel {
					off = i * n
				}
				for _, j := range p[start : start+size] {
					idx = append(idx, int64(off+j))
				}
			}
			t, err := torch.FromInt64On(et.Device, idx, int64(len(idx)))
			if err == nil {
				err = l.Step(et.Images, et.Labels, t, int64(size))
				t.Free()
			}
			if err != nil {
				return fail(fmt.Errorf("epoch %d: %w", epoch+1, err))
			}
		}
		if et.Progress != nil {
			et.Progress(epoch+1, r.Epochs)
		}
		if st.next < len(checks) && checks[st.next] == epoch+1 {
			st.next++
			if err := res.check(ctx, best, epoch+1, vx, vy); err != nil {
				return fail(err)
			}
		}
		st.epochs = epoch + 1
		if ck := et.Checkpoint; ck != nil && st.epochs < r.Epochs && time.Since(lastSave) >= ck.Every {
			if err := st.save(et, seeds, ck, st.seconds+time.Since(started).Seconds()); err != nil {
				return fail(err)
			}
			lastSave = time.Now()
		}
	}
	res.Seconds = st.seconds + time.Since(started).Seconds()
	// Restore each model's best parameters.
	err = torch.NoGrad(func() error {
		for i, b := range best {
			for j, t := range b {
				if err := l.Params[i][j].Copy_(t); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return fail(err)
	}
	return res, nil
}

// check scores every model on (vx, vy) after epoch and keeps the parameters of those that
// improved (strictly) on their best.
func (res *EpochResult) check(ctx context.Context, best [][]*torch.Tensor, epoch int, vx, vy *torch.Tensor) error {
	l := res.Models
	accs, err := l.Accuracies(ctx, vx, vy)
	if err != nil {
		return err
	}
	diverged, err := l.Diverged()
	if err != nil {
		return err
	}
	res.Curve = append(res.Curve, accs)
	for i, a := range accs {
		if diverged[i] {
			res.Diverged[i] = true
		}
		if res.Diverged[i] || (!math.IsNaN(res.Validation[i]) && a <= res.Validation[i]) {
			continue
		}
		res.Validation[i], res.Epoch[i] = a, epoch
		torch.FreeAll(best[i])
		best[i] = nil
		err := torch.NoGrad(func() error {
			for _, p := range l.Params[i] {
				c, err := p.Clone()
				if err != nil {
					return err
				}
				torch.Escape(c)
				best[i] = append(best[i], c)
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// augmentEach augments a stack of M batches (M, B, C, H, W), batch i with a draw from
// gens[i], so that a model's augmentation does not depend on the models beside it.
func augmentEach(d augment.DSA, gens []*torch.Generator) func(x *torch.Tensor) (*torch.Tensor, error) {
	return func(x *torch.Tensor) (*torch.Tensor, error) {
		s := x.Shape()
		if len(s) != 5 || s[0] != int64(len(gens)) {
			return nil, fmt.Errorf("train: augment: want (%d, B, C, H, W) images, got %v", len(gens), s)
		}
		outs := make([]*torch.Tensor, len(gens))
		for i, g := range gens {
			xi, err := x.Select(0, int64(i))
			if err != nil {
				return nil, err
			}
			dr, err := d.Draw(g, xi.Shape())
			if err != nil {
				return nil, err
			}
			if outs[i], err = dr.Apply(xi); err != nil {
				return nil, err
			}
		}
		return torch.Stack(outs, 0)
	}
}
