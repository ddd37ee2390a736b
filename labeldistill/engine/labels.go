package engine

// labels.go: the learned label table Ỹ (docs/ALGORITHM.md §3), the meta-loop's learnable
// "labels": uniform start, its own Adam that is never reset, and the clamp-and-renormalise
// projection after every step.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/labeldistill/config"
	"github.com/ldtorch/ldtorch/torch"
)

// labels is the N×C probability table being distilled, with its optimizer.
type labels struct {
	Y   *torch.Tensor // (N, C) float32, requires grad; rows sum to 1
	opt *torch.Adam
}

// newLabels starts every entry at exactly 1/C.
func newLabels(n, classes int, cfg config.Config, dev torch.Device) (*labels, error) {
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
	return &labels{Y: y, opt: opt}, nil
}

func (l *labels) name() string { return "labels" }

func (l *labels) params() []*torch.Tensor { return []*torch.Tensor{l.Y} }

// batch gives the base examples idx (nil: all) their labels: y is replaced by rows of Ỹ.
func (l *labels) batch(idx, x, _ *torch.Tensor, detach bool) (*torch.Tensor, *torch.Tensor, error) {
	y := l.Y
	if detach {
		var err error
		if y, err = y.Detach(); err != nil {
			return nil, nil, err
		}
	}
	if idx == nil {
		return x, y, nil
	}
	y, err := y.IndexSelect(0, idx)
	return x, y, err
}

// step applies one Adam step with the gradient of the label loss, then projects.
func (l *labels) step(grads []*torch.Tensor) error {
	if err := l.opt.StepWith(grads); err != nil {
		return fmt.Errorf("label step: %w", err)
	}
	return projectRows(l.Y)
}

func (l *labels) state() []namedTensor {
	return []namedTensor{{"labels", l.Y}, {"labels.exp_avg", l.opt.ExpAvg[0]}, {"labels.exp_avg_sq", l.opt.ExpAvgSq[0]}}
}

func (l *labels) optimizers() []namedAdam { return []namedAdam{{"labels", l.opt}} }

// close frees the table and its optimizer state.
func (l *labels) close() {
	l.opt.Close()
	l.Y.Free()
}

// projectRows clamps y to [0, 1] and divides each row by its sum, in place and without
// recording gradients. ldtorch: a row that clamps to all zeros (where the reference would
// divide by zero and produce NaN) is reset to the uniform distribution.
func projectRows(y *torch.Tensor) error {
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
