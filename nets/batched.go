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
// the models' leaves, so gradients still reach them). The activations live side by side
// along the channel dimension, (B, M·C, H, W) with each model's channels contiguous, so
// that
//   - a convolution is one grouped convolution (groups = M) with weights (M·out, in, k, k);
//     when all models see the same images (scoring), the first convolution is instead an
//     ordinary convolution with M·out output channels, and no input is repeated;
//   - ReLU, max/average pooling and BatchNorm act per channel and run unchanged (BatchNorm
//     on the stacked γ, β and running statistics flattened to M·C channels; the updated
//     running statistics are copied back to the models' own buffers);
//   - local response normalisation, whose window runs across channels, is applied on the
//     (B·M, C, H, W) view so that no window crosses a model boundary;
//   - after the convolutional part, (B, M·C·H·W) becomes (M, B, C·H·W) and every linear
//     layer is one batched matrix product (M, B, in)·(M, in, out) plus a bias (M, 1, out).
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
	body func(ch *torch.Chain, p, buf []*torch.Tensor, x *torch.Tensor, train bool) *torch.Tensor
}

// NewBatched returns the batched form of n for m models.
func NewBatched(n *Net, m int64) (*Batched, error) {
	if m < 1 {
		return nil, fmt.Errorf("nets: batched: need at least one model, got %d", m)
	}
	b := &Batched{Net: n, M: m}
	switch n.Arch {
	case "lenet":
		b.body = b.lenetBody()
	case "alexnet":
		b.body = b.alexBody()
	case "resnet":
		body, err := b.resnetBody()
		if err != nil {
			return nil, err
		}
		b.body = body
	default:
		return nil, fmt.Errorf("nets: batched: unsupported architecture %q", n.Arch)
	}
	return b, nil
}

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
	if b.Mode == BodyGrouped {
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
	if b.Mode != BodyGrouped {
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
	out := b.body(&c, sp, sb, x, train)
	if head {
		out = c.T(b.linear(&c, out, sp[n-2], sp[n-1]))
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

// ---- BodyGrouped layers, on stacked parameters (M, shape...) ----------------------------

// conv is a grouped convolution of x (B, M·in, H, W) — or, with a shared input x (B, in,
// H, W), an ordinary one — with stacked weights (M, out, in, k, k) and bias (M, out) or nil.
func (b *Batched) conv(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	ws := w.Shape()
	if len(ws) != 5 {
		ch.Check(fmt.Errorf("nets: batched conv weight must be 5-D, got %v", ws))
		return nil
	}
	wf := ch.T(w.Reshape(ws[0]*ws[1], ws[2], ws[3], ws[4]))
	var bf *torch.Tensor
	if bias != nil {
		bf = ch.T(bias.Reshape(-1))
	}
	if ch.Err() != nil {
		return nil
	}
	if x.Shape()[1] == ws[2] { // shared input: one ordinary convolution
		return ch.T(torch.Conv2d(x, wf, bf, o))
	}
	o.Groups = b.M
	return ch.T(torch.Conv2d(x, wf, bf, o))
}

// toRows turns (B, M·C, H, W) into (M, B, C·H·W): each model's flattened activations.
func (b *Batched) toRows(ch *torch.Chain, y *torch.Tensor) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	s := y.Shape()
	return ch.T(ch.T(y.Reshape(s[0], b.M, -1)).Transpose(0, 1))
}

// linear is x·wᵀ + bias per model: x (M, B, in), w (M, out, in), bias (M, out).
func (b *Batched) linear(ch *torch.Chain, x, w, bias *torch.Tensor) (*torch.Tensor, error) {
	if ch.Err() != nil {
		return nil, ch.Err()
	}
	y := ch.T(x.Bmm(ch.T(w.Transpose(1, 2))))
	if bias != nil {
		y = ch.T(y.Add(ch.T(bias.Unsqueeze(1))))
	}
	return y, ch.Err()
}

// lrn is local response normalisation per model on (B, M·C, H, W).
func (b *Batched) lrn(ch *torch.Chain, y *torch.Tensor) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	s := y.Shape()
	v := ch.T(y.Reshape(s[0]*b.M, s[1]/b.M, s[2], s[3]))
	v = ch.T(torch.LocalResponseNorm(v, lrnSize, lrnAlpha, lrnBeta, lrnK))
	return ch.T(v.Reshape(s[0], s[1], s[2], s[3]))
}

// ---- architectures --------------------------------------------------------------------

func (b *Batched) lenetBody() func(ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
	var pad int64
	if b.Net.InShape[1] == 28 {
		pad = 2
	}
	// The layer order of lenet.go (max-pooling before ReLU).
	return func(ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
		y := b.conv(ch, x, p[0], p[1], torch.Conv2dOpts{Padding: [2]int64{pad, pad}})
		if ch.Err() != nil {
			return nil
		}
		y = ch.T(ch.T(torch.MaxPool2x2(y)).Relu())
		y = b.conv(ch, y, p[2], p[3], torch.Conv2dOpts{})
		if ch.Err() != nil {
			return nil
		}
		y = ch.T(ch.T(torch.MaxPool2x2(y)).Relu())
		y = b.toRows(ch, y)
		y = ch.T(ch.T(b.linear(ch, y, p[4], p[5])).Relu())
		return ch.T(ch.T(b.linear(ch, y, p[6], p[7])).Relu())
	}
}

func (b *Batched) alexBody() func(ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
	pool := torch.PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}
	conv := torch.Conv2dOpts{Padding: [2]int64{2, 2}}
	return func(ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
		// The layer order of alexnet.go (the first max-pooling before ReLU).
		y := b.conv(ch, x, p[0], p[1], conv)
		y = ch.T(ch.T(torch.MaxPool2d(y, pool)).Relu())
		y = b.lrn(ch, y)
		y = b.conv(ch, y, p[2], p[3], conv)
		y = b.lrn(ch, ch.T(y.Relu()))
		y = ch.T(torch.MaxPool2d(y, pool))
		y = b.toRows(ch, y)
		y = ch.T(ch.T(b.linear(ch, y, p[4], p[5])).Relu())
		return ch.T(ch.T(b.linear(ch, y, p[6], p[7])).Relu())
	}
}

// resnetBody rebuilds the block layout of newCifarResNet from the parameter and buffer
// names, so the two cannot drift apart silently (a missing name is an error).
func (b *Batched) resnetBody() (func(ch *torch.Chain, p, buf []*torch.Tensor, x *torch.Tensor, train bool) *torch.Tensor, error) {
	n := b.Net
	pi := map[string]int{}
	for i, s := range n.Body {
		pi[s.Name] = i
	}
	bi := map[string]int{}
	for i, s := range n.Buffers {
		bi[s.Name] = i
	}
	var missing []string
	param := func(name string) int {
		i, ok := pi[name]
		if !ok {
			missing = append(missing, name)
		}
		return i
	}
	buffer := func(name string) int {
		i, ok := bi[name]
		if !ok {
			missing = append(missing, name)
		}
		return i
	}
	stem, stemBN, stemBuf := param("conv1.weight"), param("bn1.weight"), buffer("bn1.running_mean")
	var blocks []resBlock
	for s := 1; s <= 3; s++ {
		for k := 0; k < 2; k++ {
			name := fmt.Sprintf("layer%d.%d", s, k)
			blk := resBlock{stride: 1, short: -1, shortBN: -1, shortBuf: -1}
			if s > 1 && k == 0 {
				blk.stride = 2
			}
			blk.conv1, blk.bn1, blk.buf1 = param(name+".conv1.weight"), param(name+".bn1.weight"), buffer(name+".bn1.running_mean")
			blk.conv2, blk.bn2, blk.buf2 = param(name+".conv2.weight"), param(name+".bn2.weight"), buffer(name+".bn2.running_mean")
			if _, ok := pi[name+".shortcut.0.weight"]; ok {
				blk.short, blk.shortBN = param(name+".shortcut.0.weight"), param(name+".shortcut.1.weight")
				blk.shortBuf = buffer(name + ".shortcut.1.running_mean")
			}
			blocks = append(blocks, blk)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("nets: batched resnet: unexpected layout, missing %v", missing)
	}
	return func(ch *torch.Chain, p, buf []*torch.Tensor, x *torch.Tensor, train bool) *torch.Tensor {
		bnOpts := torch.BatchNormOpts{Training: train, Momentum: bnMomentum, Eps: bnEps}
		flat := func(t *torch.Tensor) *torch.Tensor { return ch.T(t.Reshape(-1)) }
		norm := func(y *torch.Tensor, pi, bi int) *torch.Tensor {
			if ch.Err() != nil {
				return nil
			}
			// Views of the stacked tensors: the running statistics are updated in place.
			return ch.T(torch.BatchNorm(y, flat(p[pi]), flat(p[pi+1]), flat(buf[bi]), flat(buf[bi+1]), bnOpts))
		}
		conv3 := func(y *torch.Tensor, pi int, stride int64) *torch.Tensor {
			if ch.Err() != nil {
				return nil
			}
			return b.conv(ch, y, p[pi], nil, torch.Conv2dOpts{Stride: [2]int64{stride, stride}, Padding: [2]int64{1, 1}})
		}
		relu := func(y *torch.Tensor) *torch.Tensor {
			if ch.Err() != nil {
				return nil
			}
			return ch.T(y.Relu())
		}
		y := relu(norm(conv3(x, stem, 1), stemBN, stemBuf))
		for _, blk := range blocks {
			out := relu(norm(conv3(y, blk.conv1, blk.stride), blk.bn1, blk.buf1))
			out = norm(conv3(out, blk.conv2, 1), blk.bn2, blk.buf2)
			short := y
			if blk.short >= 0 && ch.Err() == nil {
				s := b.conv(ch, y, p[blk.short], nil, torch.Conv2dOpts{Stride: [2]int64{blk.stride, blk.stride}})
				short = norm(s, blk.shortBN, blk.shortBuf)
			}
			if ch.Err() != nil {
				return nil
			}
			y = relu(ch.T(out.Add(short)))
		}
		if ch.Err() != nil {
			return nil
		}
		y = ch.T(torch.AdaptiveAvgPool2d(y, 1, 1))
		return b.toRows(ch, y)
	}, nil
}
