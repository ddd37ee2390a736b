package gradvar

// gradvar.go: the label meta-gradient's variance across fresh models, LD against LD RR
// (the paper's Figure "RR-based LD reduces synthetic label meta-gradient variance"), and
// the accumulator of a run's meta-gradients over a window, whose statistics the run history
// records (Window, an observer of the meta-loop).

// gradstats.go: statistics of the label meta-gradient ∇_Ỹ L (the paper's Figure
// "RR-based LD reduces synthetic label meta-gradient variance"). An accumulator sums the
// gradients and their squares element-wise on the device, in float64, so that recording
// them costs no device→host read per step; the run reads the sums once per history line.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/labeldistill/engine"
	"github.com/ldtorch/ldtorch/labeldistill/train"
	"github.com/ldtorch/ldtorch/torch"
)

// gradAccumulator holds Σg, Σg² (float64) and the latest g on the device.
type gradAccumulator struct {
	sum, sumSq, last *torch.Tensor
	n                int
}

func newGradAccumulator(shape []int64, dev torch.Device) (*gradAccumulator, error) {
	a := &gradAccumulator{}
	var err error
	for _, p := range []**torch.Tensor{&a.sum, &a.sumSq} {
		if *p, err = torch.Zeros(shape, torch.WithDType(torch.Double), torch.OnDevice(dev)); err != nil {
			a.close()
			return nil, err
		}
		torch.Escape(*p)
	}
	if a.last, err = torch.Zeros(shape, torch.OnDevice(dev)); err != nil {
		a.close()
		return nil, err
	}
	torch.Escape(a.last)
	return a, nil
}

// add records one gradient (no read back to the host).
func (a *gradAccumulator) add(g *torch.Tensor) error {
	s := torch.NewScope()
	defer s.Close()
	return torch.NoGrad(func() error {
		var c torch.Chain
		g64 := c.T(g.ToDType(torch.Double))
		sq := c.T(g64.Square())
		if c.Err() != nil {
			return c.Err()
		}
		if err := a.sum.AddScaled_(g64, 1); err != nil {
			return err
		}
		if err := a.sumSq.AddScaled_(sq, 1); err != nil {
			return err
		}
		a.n++
		return a.last.Copy_(g)
	})
}

// lastNorm is ‖g‖₂ of the latest gradient (one read).
func (a *gradAccumulator) lastNorm() (float64, error) {
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	sq := c.T(c.T(c.T(a.last.ToDType(torch.Double)).Square()).Sum())
	if c.Err() != nil {
		return 0, c.Err()
	}
	v, err := sq.Item()
	if err != nil {
		return 0, err
	}
	return sqrtNonNeg(v), nil
}

// variance summarises the gradients added since the last reset (one read) and resets.
func (a *gradAccumulator) variance() (engine.GradVariance, error) {
	out := engine.GradVariance{Count: a.n}
	if a.n == 0 {
		return out, nil
	}
	s := torch.NewScope()
	defer s.Close()
	var c torch.Chain
	inv := 1 / float64(a.n)
	mean := c.T(a.sum.MulScalar(inv))
	meanSq := c.T(a.sumSq.MulScalar(inv))
	variance := c.T(c.T(meanSq.Sub(c.T(mean.Square()))).ClampMin(0))
	both := c.T(torch.Stack([]*torch.Tensor{c.T(variance.Mean()), c.T(meanSq.Mean())}, 0))
	if c.Err() != nil {
		return out, c.Err()
	}
	v, err := both.Float64s()
	if err != nil {
		return out, err
	}
	out.Variance, out.MeanSquare = v[0], v[1]
	if out.MeanSquare > 0 {
		out.Relative = out.Variance / out.MeanSquare
	}
	return out, a.reset()
}

func (a *gradAccumulator) reset() error {
	a.n = 0
	if err := a.sum.Zero_(); err != nil {
		return err
	}
	return a.sumSq.Zero_()
}

func (a *gradAccumulator) close() {
	if a == nil {
		return
	}
	a.sum.Free()
	a.sumSq.Free()
	a.last.Free()
}

func sqrtNonNeg(v float64) float64 {
	if v <= 0 {
		return 0
	}
	return math.Sqrt(v)
}

// Method is the label meta-gradient's variance across fresh models for one
// method (MeasureGradVariance).
type Method struct {
	Name   string `json:"name"`   // "LD" or "LD RR"
	Method string `json:"method"` // config.MethodLD or config.MethodRR
	// Variance averages the batches' across-model statistics (Count: models per batch).
	Variance engine.GradVariance   `json:"variance"`
	PerBatch []engine.GradVariance `json:"per_batch"`
}

// Options say what MeasureGradVariance measures.
type Options struct {
	Methods []string // config.MethodLD, config.MethodRR
	Models  int      // fresh models per batch pair (≥ 2)
	Batches int      // fixed (base batch, target batch) pairs (≥ 1)
	// Warmup trains each fresh model this many steps on the fixed labels first (Adam on the
	// model, as during distillation; for RR also the ridge head), so that the gradient is
	// taken through models like those of a run in progress. 0: at initialisation, where
	// the meta-gradient hardly depends on the labels (the inner loss is linear in them and
	// RR's head starts at W = 0).
	Warmup int
	// Progress, when set, hears each (batch, method) measured: done of total.
	Progress func(done, total int)
}

// Measure measures, for each method, how much the label meta-gradient ∇_Ỹ L
// varies across fresh models at one fixed label state: for each of o.Batches fixed pairs
// (base batch, target batch), o.Models fresh models (the same seeds for every method),
// each trained o.Warmup steps on the labels, take one meta-step's gradient with the labels
// set to labels (N×classes, rows summing to 1; nil: uniform), and the per-element variance
// across the models is averaged over elements, then over the batches.
//
// Why across models at a fixed state: the within-run window statistics of the history
// also move with the labels and the sampled batches; fixing the labels and the batches
// leaves only the randomness of the model the meta-gradient is taken through, which is
// what RR's closed-form head is meant to tame (the paper's Figure "RR-based LD reduces
// synthetic label meta-gradient variance").
//
// It runs on one locked OS thread (torch.Guard): libtorch's grad mode and thread settings
// are per thread, and a caller's goroutine that moved between threads mid-measurement
// gave gradients that differed in their last bits from one call to the next.
func Measure(ctx context.Context, g Options, labels []float32, prepare func() (*engine.Inputs, error)) ([]Method, error) {
	return torch.Guard("gradvar", func() ([]Method, error) { return measure(ctx, g, labels, prepare) })
}

func measure(ctx context.Context, g Options, labels []float32, prepare func() (*engine.Inputs, error)) (out []Method, err error) {
	methods, models, batches := g.Methods, g.Models, g.Batches
	if err := config.CheckCount("models", int64(models), 2, config.MaxEvalModels, config.WhyGradVarModels); err != nil {
		return nil, err
	}
	if err := config.CheckCount("batches", int64(batches), 1, config.MaxGradVarBatches, "each batch pair trains every model anew"); err != nil {
		return nil, err
	}
	if err := config.CheckCount("warmup", int64(g.Warmup), 0, config.MaxTrainSteps, config.WhySteps); err != nil {
		return nil, err
	}
	in, err := prepare()
	if err != nil {
		return nil, err
	}
	defer in.Close()
	ds := in.Data()
	n, classes := ds.Base.N, ds.Classes
	if labels != nil && len(labels) != n*classes {
		return nil, fmt.Errorf("gradvar: %d label values for %d base examples × %d classes", len(labels), n, classes)
	}
	if labels == nil {
		labels = make([]float32, n*classes)
		for i := range labels {
			labels[i] = 1 / float32(classes)
		}
	}
	table, err := torch.FromFloat32(labels, int64(n), int64(classes))
	if err != nil {
		return nil, err
	}
	if table, err = engine.ToDevice(table, in.Device()); err != nil {
		return nil, err
	}
	defer table.Free()
	rng := rand.New(rand.NewPCG(train.Seed(in.Seed(), "gradvar-batches", 0), 0x9a7))
	outer := min(in.Config().OuterBatch, ds.TargetSet.N)
	for _, m := range methods {
		name := "LD"
		if m == config.MethodRR {
			name = "LD RR"
		} else if m != config.MethodLD {
			return nil, fmt.Errorf("gradvar: unknown method %q (ld or rr)", m)
		}
		out = append(out, Method{Name: name, Method: m})
	}
	for b := 0; b < batches; b++ {
		targetIdx := rng.Perm(ds.TargetSet.N)[:outer]
		baseIdx := rng.Perm(n)[:in.Config().InnerBatch]
		for k := range out {
			v, err := gradVarianceAt(in, ctx, out[k].Method, table, targetIdx, baseIdx, models, g.Warmup)
			if err != nil {
				return nil, fmt.Errorf("gradvar %s, batch %d: %w", out[k].Name, b+1, err)
			}
			out[k].PerBatch = append(out[k].PerBatch, v)
			if g.Progress != nil {
				g.Progress(b*len(out)+k+1, batches*len(out))
			}
		}
	}
	for k := range out {
		var sum engine.GradVariance
		for _, v := range out[k].PerBatch {
			sum.Variance += v.Variance / float64(batches)
			sum.MeanSquare += v.MeanSquare / float64(batches)
		}
		sum.Count = models
		if sum.MeanSquare > 0 {
			sum.Relative = sum.Variance / sum.MeanSquare
		}
		out[k].Variance = sum
	}
	return out, nil
}

// gradVarianceAt takes one meta-gradient per fresh model on fixed batches and labels and
// returns their statistics across the models.
func gradVarianceAt(in *engine.Inputs, ctx context.Context, method string, table *torch.Tensor, targetIdx []int, baseIdx []int, models, warmup int) (engine.GradVariance, error) {
	s := torch.NewScope()
	defer s.Close()
	cfg := in.Config()
	cfg.Method = method
	ti := make([]int64, len(targetIdx))
	for i, v := range targetIdx {
		ti[i] = int64(v)
	}
	bi := make([]int64, len(baseIdx))
	for i, v := range baseIdx {
		bi[i] = int64(v)
	}
	var c torch.Chain
	tIdx := c.T(torch.FromInt64On(in.Device(), ti, int64(len(ti))))
	targetX, targetY := in.Target()
	xt := c.T(targetX.IndexSelect(0, tIdx))
	yt := c.T(targetY.IndexSelect(0, tIdx))
	bIdx := c.T(torch.FromInt64On(in.Device(), bi, int64(len(bi))))
	if c.Err() != nil {
		return engine.GradVariance{}, c.Err()
	}
	acc, err := newGradAccumulator([]int64{int64(in.Data().Base.N), int64(in.Data().Classes)}, in.Device())
	if err != nil {
		return engine.GradVariance{}, err
	}
	defer acc.close()
	for m := 0; m < models; m++ {
		if err := ctx.Err(); err != nil {
			return engine.GradVariance{}, err
		}
		if err := oneGradient(in, ctx, cfg, table, bIdx, xt, yt, acc, m, warmup); err != nil {
			return engine.GradVariance{}, err
		}
	}
	return acc.variance()
}

// oneGradient adds the label meta-gradient of fresh model m (seeded by m alone, so every
// method sees the same initialisations) to acc.
func oneGradient(in *engine.Inputs, ctx context.Context, cfg config.Config, table, bIdx, xt, yt *torch.Tensor, acc *gradAccumulator, m, warmup int) error {
	s := torch.NewScope()
	defer s.Close()
	// Model m, warmed up on the labels through the evaluation trainer (its own minibatch
	// stream), then seen as the meta-step's learner.
	tr := &train.Trainer{Net: in.Net(), RR: cfg.Method == config.MethodRR, Cfg: cfg, Images: in.BaseImages(), Labels: table,
		Batch: cfg.InnerBatch, Opt: train.AdamSpec(cfg.ModelLR), Device: in.Device()}
	warm, err := train.NewModels(tr.Net, tr.RR, cfg, tr.Opt, []uint64{train.Seed(in.Seed(), "gradvar-model", m)}, in.Device(), in.BaseImages().DType(), train.Mode(in.Device()))
	if err != nil {
		return err
	}
	defer warm.Close()
	rng := rand.New(rand.NewPCG(train.Seed(in.Seed(), "gradvar-warmup", m), 0x3a7))
	if err := tr.TrainFor(ctx, warm, []*rand.Rand{rng}, warmup, nil); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return engine.LabelMetaGradient(in, cfg, warm, table, bIdx, xt, yt, func(g *torch.Tensor) error {
		if err := acc.add(g); err != nil {
			return fmt.Errorf("label gradient statistics: %w", err)
		}
		return nil
	})
}

// Window is the accumulator of a run's meta-gradients as an observer of its meta-loop: the
// first learnt parameter's (the labels, where they are learnt) since the last Variance
// (rundir.GradStats, for the run history).
type Window struct{ acc *gradAccumulator }

// Observer creates the accumulator when the loop starts and adds each meta-step's
// gradients.
func (w *Window) Observer() engine.Observer {
	return engine.Observer{
		Name: "gradient statistics",
		Start: func(l *engine.Loop) error {
			var err error
			w.acc, err = newGradAccumulator(l.Params()[0].Shape(), l.Device())
			return err
		},
		Gradient: func(_ *engine.Loop, grads []*torch.Tensor) error {
			if err := w.acc.add(grads[0]); err != nil {
				return fmt.Errorf("label gradient statistics: %w", err)
			}
			return nil
		},
		Close: func() { w.acc.close() },
	}
}

// LastNorm is the L2 norm of the latest meta-gradient.
func (w *Window) LastNorm() (float64, error) { return w.acc.lastNorm() }

// Variance is the statistics of the meta-gradients since the last call, which starts a new
// window.
func (w *Window) Variance() (engine.GradVariance, error) { return w.acc.variance() }
