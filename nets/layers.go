package nets

// layers.go: the few layers whose arithmetic depends on how many models run at once. Each
// architecture's body (lenet.go, alexnet.go, resnet.go) is written once over this
// interface; Net runs it on one model's parameters (oneModel), Batched in BodyGrouped mode
// on M models' stacked parameters (groupedModels). ReLU and pooling act per channel and
// are the same call in both forms, so the bodies call torch for them directly.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
)

// layers is one form of the model-count-dependent layers. Every method records its error
// in ch and returns nil once ch holds an error.
type layers interface {
	// conv is a 2-D convolution; bias may be nil.
	conv(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor
	// convPool is conv followed by a 2×2 max-pool (torch.MaxPool2x2).
	convPool(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor
	// convMaxPool is conv followed by the max-pool p (torch.MaxPool2dDirect).
	convMaxPool(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts, p torch.PoolOpts) *torch.Tensor
	// batchNorm normalises with the affine w, b and the running statistics, updated in
	// place in training mode.
	batchNorm(ch *torch.Chain, x, w, b, mean, variance *torch.Tensor, o torch.BatchNormOpts) *torch.Tensor
	// convNormReluPool is ConvNet-3's block: conv (stride 1, padding pad), instance
	// normalisation of each sample's channels with the affine nw, nb, ReLU and 2×2 average
	// pooling.
	convNormReluPool(ch *torch.Chain, x, w, bias, nw, nb *torch.Tensor, pad [2]int64) *torch.Tensor
	// reluLRN is local response normalisation with AlexCifarNet's settings of relu(x).
	reluLRN(ch *torch.Chain, x *torch.Tensor) *torch.Tensor
	// rows turns convolutional activations into the rows linear layers take.
	rows(ch *torch.Chain, x *torch.Tensor) *torch.Tensor
	// linear is x·wᵀ + bias.
	linear(ch *torch.Chain, x, w, bias *torch.Tensor) *torch.Tensor
}

// body is an architecture's feature extractor written over layers: p holds the body's
// parameters (then possibly the head's), buf its buffers, in the order of Net.Body and
// Net.Buffers (one model's tensors, or M models' stacked along a leading dimension).
type body func(l layers, ch *torch.Chain, p, buf []*torch.Tensor, x *torch.Tensor, train bool) *torch.Tensor

// oneModel is the single-model form: activations (B, C, H, W), rows (B, features).
type oneModel struct{}

// conv runs the shim's direct kernels where they apply (LeNet's small 5×5 layers on the CPU)
// and libtorch's conv2d everywhere else (torch.Conv2dDirect).
func (oneModel) conv(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor {
	return ch.T(torch.Conv2dDirect(x, w, bias, o))
}

// convPool is one fused kernel where the direct kernels apply (torch.Conv2dMaxPool2x2).
func (oneModel) convPool(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor {
	return ch.T(torch.Conv2dMaxPool2x2(x, w, bias, o))
}

// convMaxPool is one fused pass where the direct kernels apply (torch.Conv2dMaxPool2d).
func (oneModel) convMaxPool(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts, p torch.PoolOpts) *torch.Tensor {
	return ch.T(torch.Conv2dMaxPool2d(x, w, bias, o, p))
}

func (oneModel) batchNorm(ch *torch.Chain, x, w, b, mean, variance *torch.Tensor, o torch.BatchNormOpts) *torch.Tensor {
	return ch.T(torch.BatchNorm(x, w, b, mean, variance, o))
}

func (oneModel) reluLRN(ch *torch.Chain, x *torch.Tensor) *torch.Tensor {
	return ch.T(torch.ReluLocalResponseNormDirect(x, lrnSize, lrnAlpha, lrnBeta, lrnK))
}

func (oneModel) rows(ch *torch.Chain, x *torch.Tensor) *torch.Tensor {
	return ch.T(x.Flatten(1, -1))
}

func (oneModel) linear(ch *torch.Chain, x, w, bias *torch.Tensor) *torch.Tensor {
	return ch.T(torch.Linear(x, w, bias))
}

// groupedModels is the M-model form of BodyGrouped (see batched.go): parameters stacked
// (M, shape...), activations side by side along the channels (B, M·C, H, W) with each
// model's channels contiguous, rows (M, B, features).
type groupedModels struct{ m int64 }

// conv is a grouped convolution of x (B, M·in, H, W) — or, with a shared input x (B, in,
// H, W), an ordinary one with M·out output channels — with stacked weights
// (M, out, in, k, k) and bias (M, out) or nil.
func (g groupedModels) conv(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor {
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
	if x.Shape()[1] != ws[2] { // per-model input: one group per model
		o.Groups = g.m
	}
	return ch.T(torch.Conv2d(x, wf, bf, o))
}

func (g groupedModels) convPool(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts) *torch.Tensor {
	y := g.conv(ch, x, w, bias, o)
	if ch.Err() != nil {
		return nil
	}
	return ch.T(torch.MaxPool2x2(y))
}

func (g groupedModels) convMaxPool(ch *torch.Chain, x, w, bias *torch.Tensor, o torch.Conv2dOpts, p torch.PoolOpts) *torch.Tensor {
	y := g.conv(ch, x, w, bias, o)
	if ch.Err() != nil {
		return nil
	}
	return ch.T(torch.MaxPool2dDirect(y, p))
}

// batchNorm acts per channel, so it runs unchanged on the M·C channels with the stacked
// γ, β and running statistics flattened; the flat running statistics are views, updated in
// place.
func (g groupedModels) batchNorm(ch *torch.Chain, x, w, b, mean, variance *torch.Tensor, o torch.BatchNormOpts) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	flat := func(t *torch.Tensor) *torch.Tensor { return ch.T(t.Reshape(-1)) }
	return ch.T(torch.BatchNorm(x, flat(w), flat(b), flat(mean), flat(variance), o))
}

// reluLRN's window runs across channels: it is applied on the (B·M, C, H, W) view so that no
// window crosses a model boundary.
func (g groupedModels) reluLRN(ch *torch.Chain, x *torch.Tensor) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	s := x.Shape()
	v := ch.T(x.Reshape(s[0]*g.m, s[1]/g.m, s[2], s[3]))
	v = ch.T(torch.ReluLocalResponseNormDirect(v, lrnSize, lrnAlpha, lrnBeta, lrnK))
	return ch.T(v.Reshape(s[0], s[1], s[2], s[3]))
}

// rows turns (B, M·C, H, W) into (M, B, C·H·W): each model's flattened activations.
func (g groupedModels) rows(ch *torch.Chain, x *torch.Tensor) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	s := x.Shape()
	return ch.T(ch.T(x.Reshape(s[0], g.m, -1)).Transpose(0, 1))
}

// linear is one batched matrix product per layer: x (M, B, in), w (M, out, in), bias
// (M, out).
func (g groupedModels) linear(ch *torch.Chain, x, w, bias *torch.Tensor) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	y := ch.T(x.Bmm(ch.T(w.Transpose(1, 2))))
	if bias != nil {
		y = ch.T(y.Add(ch.T(bias.Unsqueeze(1))))
	}
	return y
}
