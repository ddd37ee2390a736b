package nets

// convnet.go: ConvNet-3, the default network of DC-BENCH and DD-Ranking (its PyTorch
// definition is in the package documentation, doc.go): three blocks of conv 3×3 → 128
// channels, instance normalisation (GroupNorm(128, 128) with affine γ, β), ReLU and 2×2
// average pooling, flattened into the head. One-channel inputs get padding 3 in the first
// convolution (28×28 becomes 32×32), as in the reference, so that MNIST-like and
// CIFAR-like images both end at 128·4·4 = 2048 features.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
)

const (
	convNetWidth = 128
	convNetDepth = 3
	// instanceNormEps is torch.nn.GroupNorm's default eps.
	instanceNormEps = 1e-5
)

func newConvNet(c, h, w, classes int64) (*Net, error) {
	if !(h == 28 && w == 28 || h == 32 && w == 32) {
		return nil, fmt.Errorf("nets: convnet takes 28×28 or 32×32 images, got %d×%d", h, w)
	}
	// The reference pads the first convolution by 3 for one-channel inputs, by 1 otherwise.
	firstPad := int64(1)
	if c == 1 {
		firstPad = 3
	}
	var body []ParamSpec
	in, fh, fw := c, h, w
	for d := 1; d <= convNetDepth; d++ {
		pad := int64(1)
		if d == 1 {
			pad = firstPad
		}
		body = append(body, convSpecs(fmt.Sprintf("conv%d", d), convNetWidth, in, 3, true)...)
		body = append(body,
			ParamSpec{Name: fmt.Sprintf("norm%d.weight", d), Shape: []int64{convNetWidth}, Init: InitOnes},
			ParamSpec{Name: fmt.Sprintf("norm%d.bias", d), Shape: []int64{convNetWidth}, Init: InitZeros})
		in = convNetWidth
		fh, fw = (fh+2*pad-2)/2, (fw+2*pad-2)/2 // conv 3×3 with padding pad, then pool 2×2
	}
	n := &Net{Arch: "convnet", InShape: [3]int64{c, h, w}, Classes: classes, FeatureDim: convNetWidth * fh * fw, Body: body}
	n.body = func(l layers, ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
		y := x
		for d := 0; d < convNetDepth; d++ {
			pad := int64(1)
			if d == 0 {
				pad = firstPad
			}
			q := p[4*d:]
			y = l.convNormReluPool(ch, y, q[0], q[1], q[2], q[3], [2]int64{pad, pad})
		}
		return l.rows(ch, y)
	}
	return n, nil
}

// convNormReluPool is one call (torch.ConvNormReluPool): fused loops on the CPU, the four
// ops on a GPU.
func (oneModel) convNormReluPool(ch *torch.Chain, x, w, bias, nw, nb *torch.Tensor, pad [2]int64) *torch.Tensor {
	if ch.Err() != nil {
		return nil
	}
	return ch.T(torch.ConvNormReluPool(x, w, bias, pad, nw, nb, instanceNormEps))
}

// convNormReluPool runs the grouped convolution, then the instance normalisation, which acts
// per sample and channel and so runs unchanged on the M·C channels with the stacked γ, β
// (M, C) flattened, then ReLU and the pooling, which act per channel.
func (g groupedModels) convNormReluPool(ch *torch.Chain, x, w, bias, nw, nb *torch.Tensor, pad [2]int64) *torch.Tensor {
	y := g.conv(ch, x, w, bias, torch.Conv2dOpts{Padding: pad})
	if ch.Err() != nil {
		return nil
	}
	wf, bf := ch.T(nw.Reshape(-1)), ch.T(nb.Reshape(-1))
	if ch.Err() != nil {
		return nil
	}
	y = ch.T(ch.T(torch.GroupNorm(y, y.Shape()[1], wf, bf, instanceNormEps)).Relu())
	return ch.T(torch.AvgPool2d(y, torch.PoolOpts{Kernel: [2]int64{2, 2}}))
}
