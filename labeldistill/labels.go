package labeldistill

// labels.go: the learned label table Ỹ (docs/ALGORITHM.md §3): uniform start, its own Adam that
// is never reset, and the clamp-and-renormalise projection after every step.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// Labels is the N×C probability table being distilled, with its optimizer.
type Labels struct {
	Y   *torch.Tensor // (N, C) float32, requires grad; rows sum to 1
	opt *torch.Adam
	// grads, when set, records every meta-gradient Step receives (gradstats.go).
	grads *gradAccumulator
}

// NewLabels starts every entry at exactly 1/C.
func NewLabels(n, classes int, cfg config.Config, dev torch.Device) (*Labels, error) {
	y, err := torch.Full([]int64{int64(n), int64(classes)}, 1/float64(classes), torch.OnDevice(dev), torch.WithRequiresGrad())
	if err != nil {
		return nil, err
	}
	torch.Escape(y)
	opt, err := torch.NewAdam([]*torch.Tensor{y}, torch.AdamOpts{LR: cfg.LabelLR, Beta1: cfg.LabelBetas[0], Beta2: cfg.LabelBetas[1], Eps: cfg.LabelEps})
	if err != nil {
		y.Free()
		return nil, err
	}
	return &Labels{Y: y, opt: opt}, nil
}

// Step applies one Adam step with the gradient g of the label loss, then projects.
func (l *Labels) Step(g *torch.Tensor) error {
	if l.grads != nil {
		if err := l.grads.add(g); err != nil {
			return fmt.Errorf("label gradient statistics: %w", err)
		}
	}
	if err := l.opt.StepWith([]*torch.Tensor{g}); err != nil {
		return fmt.Errorf("label step: %w", err)
	}
	return ProjectRows(l.Y)
}

// Close frees the table and its optimizer state.
func (l *Labels) Close() {
	l.grads.close()
	l.opt.Close()
	l.Y.Free()
}

// ProjectRows clamps y to [0, 1] and divides each row by its sum, in place and without
// recording gradients. ldtorch: a row that clamps to all zeros (where the reference would
// divide by zero and produce NaN) is reset to the uniform distribution.
func ProjectRows(y *torch.Tensor) error {
	s := torch.NewScope()
	defer s.Close()
	return torch.NoGrad(func() error {
		shape := y.Shape()
		if len(shape) != 2 || shape[1] < 1 {
			return fmt.Errorf("project labels: want an (N, C) table, got %v", shape)
		}
		var c torch.Chain
		clamped := c.T(y.Clamp(0, 1))
		sums := c.T(clamped.SumKeepDim(1))
		zero := c.T(sums.EqScalar(0))
		uniform := c.T(torch.Full([]int64{1, 1}, 1/float64(shape[1]), torch.WithDType(y.DType()), torch.OnDevice(y.Device())))
		fixed := c.T(torch.Where(zero, uniform, clamped))
		normed := c.T(fixed.Div(c.T(fixed.SumKeepDim(1))))
		if c.Err() != nil {
			return c.Err()
		}
		return y.Copy_(normed)
	})
}
