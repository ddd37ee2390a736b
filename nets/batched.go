package nets

// batched.go: M models of one architecture run as one computation, for training many
// fresh models at once (label distillation's evaluation models). Each model keeps its own
// parameter list (as InitParams returns it: leaves), so the model's gradients, optimizer
// state and results are its own; Batched runs the M forward passes and returns the
// results stacked along a leading model dimension, (M, B, ...). Two modes (BodyMode):
//
// BodyPerModel runs each model's own body on its own input, one after another inside the
// one autograd graph; what is batched is everything around it: one loss, one backward
// call, one optimizer step for all models.
//
// BodyGrouped runs the M bodies as one computation on stacked parameters (torch.Stack of
// the models' leaves, so gradients still reach them): the architecture's one body runs over
// groupedModels (layers.go), whose activations live side by side along the channel
// dimension, (B, M·C, H, W), so that a convolution is one grouped convolution, ReLU,
// pooling and BatchNorm run unchanged on the M·C channels, and each linear layer is one
// batched matrix product. BatchNorm's updated running statistics are copied back to the
// models' own buffers.
//
// In both modes each model sees the arithmetic of its own Net.Forward (up to the summation
// order inside the kernels), so M models trained with the sum of their own losses and an
// elementwise optimizer (Adam, SGD) over all their parameters follow M independent runs.

import (
	"fmt"
	"slices"

	"github.com/ldtorch/ldtorch/torch"
)

// BodyMode chooses how Batched runs the M bodies (feature extractors).
type BodyMode int

const (
	// BodyPerModel runs the models' bodies one after another. On CPU it is the faster mode
	// (measured with libtorch 1.13): each model's activations stay cache-sized, and grouped
	// convolutions on CPU are slower than the M convolutions they replace.
	BodyPerModel BodyMode = iota
	// BodyGrouped runs the M bodies as one computation: few, large kernels, meant for GPUs.
	// A TorchScript network (New("torchscript:FILE")) runs its models one by one instead,
	// as BodyPerModel: its module takes one model's tensors per call.
	BodyGrouped
)

func (m BodyMode) String() string {
	switch m {
	case BodyPerModel:
		return "per-model"
	case BodyGrouped:
		return "grouped"
	}
	return fmt.Sprintf("BodyMode(%d)", int(m))
}

// Batched is a Net evaluated for M models at once.
type Batched struct {
	Net  *Net
	M    int64
	Mode BodyMode // may be changed between calls; the results agree to rounding
}

// NewBatched returns the batched form of n for m models.
func NewBatched(n *Net, m int64) (*Batched, error) {
	if m < 1 {
		return nil, fmt.Errorf("nets: batched: need at least one model, got %d", m)
	}
	return &Batched{Net: n, M: m}, nil
}

// grouped_ reports whether the bodies run grouped: in BodyGrouped mode, except for a
// TorchScript network, whose models run one by one (BodyPerModel) in either mode.
func (b *Batched) grouped_() bool { return b.Mode == BodyGrouped && b.Net.script == nil }

// Features runs the M bodies: p[i] holds at least model i's body parameters and buf[i]
// its buffers. x is either (M, B, C, H, W), model i's own batch at x[i], or (B, C, H, W),
// one batch that every model sees. The result is (M, B, FeatureDim). In training mode
// BatchNorm uses each model's batch statistics and updates its running statistics.
func (b *Batched) Features(p, buf [][]*torch.Tensor, x *torch.Tensor, train bool) (*torch.Tensor, error) {
	return b.stacked(p, buf, x, train, false)
}

// Forward returns the logits (M, B, Classes); p[i] is model i's full parameter list
// (Body then Head).
func (b *Batched) Forward(p, buf [][]*torch.Tensor, x *torch.Tensor, train bool) (*torch.Tensor, error) {
	return b.stacked(p, buf, x, train, true)
}

// FeaturesEach is Features with the result split by model: model i's (B, FeatureDim) at
// [i]. In BodyPerModel these are exactly what model i's Net.Features returns.
func (b *Batched) FeaturesEach(p, buf [][]*torch.Tensor, x *torch.Tensor, train bool) ([]*torch.Tensor, error) {
	return b.each(p, buf, x, train, false)
}

// ForwardEach is Forward with the result split by model: model i's logits (B, Classes)
// at [i]. In BodyPerModel these are exactly what model i's Net.Forward returns.
func (b *Batched) ForwardEach(p, buf [][]*torch.Tensor, x *torch.Tensor, train bool) ([]*torch.Tensor, error) {
	return b.each(p, buf, x, train, true)
}

func (b *Batched) stacked(p, buf [][]*torch.Tensor, x *torch.Tensor, train, head bool) (*torch.Tensor, error) {
	perModelInput, err := b.check(p, buf, x, head)
	if err != nil {
		return nil, err
	}
	if b.grouped_() {
		return b.grouped(p, buf, x, perModelInput, train, head)
	}
	outs, err := b.perModel(p, buf, x, perModelInput, train, head)
	if err != nil {
		return nil, err
	}
	return torch.Stack(outs, 0)
}

func (b *Batched) each(p, buf [][]*torch.Tensor, x *torch.Tensor, train, head bool) ([]*torch.Tensor, error) {
	perModelInput, err := b.check(p, buf, x, head)
	if err != nil {
		return nil, err
	}
	if !b.grouped_() {
		return b.perModel(p, buf, x, perModelInput, train, head)
	}
	out, err := b.grouped(p, buf, x, perModelInput, train, head)
	if err != nil {
		return nil, err
	}
	outs := make([]*torch.Tensor, b.M)
	for m := range outs {
		if outs[m], err = out.Select(0, int64(m)); err != nil {
			return nil, err
		}
	}
	return outs, nil
}

// check validates the models' parameter lists (the body's, or all of them with the head),
// buffers and input, and reports whether the input is per model.
func (b *Batched) check(p, buf [][]*torch.Tensor, x *torch.Tensor, head bool) (bool, error) {
	net := b.Net
	if int64(len(p)) != b.M || int64(len(buf)) != b.M {
		return false, fmt.Errorf("nets: batched %s for %d models got %d parameter lists and %d buffer lists", net.Arch, b.M, len(p), len(buf))
	}
	specs := net.Params()
	n := len(net.Body)
	if head {
		n = len(specs)
	}
	for i := range p {
		if len(p[i]) < n || head && len(p[i]) != n {
			return false, fmt.Errorf("nets: batched %s: model %d needs %d parameters, got %d", net.Arch, i, n, len(p[i]))
		}
		for j := 0; j < n; j++ {
			if !slices.Equal(p[i][j].Shape(), specs[j].Shape) {
				return false, fmt.Errorf("nets: batched %s: model %d: %s must have shape %v, got %v", net.Arch, i, specs[j].Name, specs[j].Shape, p[i][j].Shape())
			}
		}
		if len(buf[i]) != len(net.Buffers) {
			return false, fmt.Errorf("nets: batched %s: model %d needs %d buffers, got %d", net.Arch, i, len(net.Buffers), len(buf[i]))
		}
		for j, s := range net.Buffers {
			if !slices.Equal(buf[i][j].Shape(), s.Shape) {
				return false, fmt.Errorf("nets: batched %s: model %d: %s must have shape %v, got %v", net.Arch, i, s.Name, s.Shape, buf[i][j].Shape())
			}
		}
	}
	s := x.Shape()
	in := net.InShape
	shared := len(s) == 4 && s[1] == in[0] && s[2] == in[1] && s[3] == in[2]
	perModel := len(s) == 5 && s[0] == b.M && s[2] == in[0] && s[3] == in[1] && s[4] == in[2]
	if !shared && !perModel {
		return false, fmt.Errorf("nets: batched %s expects input (%d, B, %d, %d, %d) or (B, %d, %d, %d), got %v",
			net.Arch, b.M, in[0], in[1], in[2], in[0], in[1], in[2], s)
	}
	return perModel, nil
}

// perModel is BodyPerModel: model m's own Net on x[m] (or on the shared x). Each model
// runs in a scope of its own that keeps only its output, so without gradients (scoring)
// only one model's activations are alive at a time.
func (b *Batched) perModel(p, buf [][]*torch.Tensor, x *torch.Tensor, perModelInput, train, head bool) ([]*torch.Tensor, error) {
	outs := make([]*torch.Tensor, b.M)
	for m := int64(0); m < b.M; m++ {
		s := torch.NewScope()
		xm := x
		var err error
		if perModelInput {
			xm, err = x.Select(0, m)
		}
		if err == nil {
			if head {
				outs[m], err = b.Net.Forward(p[m], buf[m], xm, train)
			} else {
				outs[m], err = b.Net.Features(p[m], buf[m], xm, train)
			}
		}
		if err != nil {
			s.Close()
			return nil, err
		}
		s.Keep(outs[m])
		s.Close()
	}
	return outs, nil
}

// grouped is BodyGrouped.
func (b *Batched) grouped(p, buf [][]*torch.Tensor, x *torch.Tensor, perModelInput, train, head bool) (*torch.Tensor, error) {
	n := len(b.Net.Body)
	if head {
		n += 2
	}
	var c torch.Chain
	sp := make([]*torch.Tensor, n)
	col := make([]*torch.Tensor, b.M)
	for j := range sp {
		for m := range col {
			col[m] = p[m][j]
		}
		sp[j] = c.T(torch.Stack(col, 0))
	}
	sb := make([]*torch.Tensor, len(b.Net.Buffers))
	c.Check(torch.NoGrad(func() error {
		var cc torch.Chain
		for j := range sb {
			for m := range col {
				col[m] = buf[m][j]
			}
			sb[j] = cc.T(torch.Stack(col, 0))
		}
		return cc.Err()
	}))
	if perModelInput && c.Err() == nil {
		// (M, B, C, H, W) → (B, M, C, H, W) → (B, M·C, H, W).
		s := x.Shape()
		x = c.T(c.T(x.Permute(1, 0, 2, 3, 4)).Reshape(s[1], s[0]*s[2], s[3], s[4]))
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	g := groupedModels{m: b.M}
	out := b.Net.body(g, &c, sp, sb, x, train)
	if head {
		out = g.linear(&c, out, sp[n-2], sp[n-1])
	}
	if c.Err() != nil {
		return nil, c.Err()
	}
	if train && len(sb) > 0 {
		// BatchNorm updated the stacked copies: copy the running statistics back.
		err := torch.NoGrad(func() error {
			for j := range sb {
				for m := int64(0); m < b.M; m++ {
					s, err := sb[j].Select(0, m)
					if err == nil {
						err = buf[m][j].Copy_(s)
					}
					if err != nil {
						return err
					}
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
