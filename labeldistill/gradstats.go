package labeldistill

// gradstats.go: statistics of the label meta-gradient ∇_Ỹ L (the paper's Figure
// "RR-based LD reduces synthetic label meta-gradient variance"). An accumulator sums the
// gradients and their squares element-wise on the device, in float64, so that recording
// them costs no device→host read per step; the run reads the sums once per history line.

import (
	"math"

	"github.com/ldtorch/ldtorch/torch"
)

// GradVariance summarises the label meta-gradients g_1..g_n of a window (n meta-steps, or n
// fresh models at one label state): per element (i, c) the population variance
// v_ic = mean(g²) − mean(g)², then averaged over the N×C elements.
type GradVariance struct {
	Count int `json:"count"` // gradients in the window
	// Variance is the mean over elements of the per-element variance.
	Variance float64 `json:"variance"`
	// MeanSquare is the mean over elements of mean(g²): Variance's scale. Their ratio,
	// Relative, is scale-free (0: every gradient equal; 1: pure noise around zero).
	MeanSquare float64 `json:"mean_square"`
	Relative   float64 `json:"relative"`
}

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
func (a *gradAccumulator) variance() (GradVariance, error) {
	out := GradVariance{Count: a.n}
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
