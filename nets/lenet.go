package nets

// lenet.go: LeNet (docs/ALGORITHM.md §2): conv 5×5 →6 (padding 2 for 28×28 input, 0 for 32×32),
// ReLU, max-pool 2; conv 5×5 6→16, ReLU, max-pool 2; flatten 400; fc 120, ReLU; fc 84,
// ReLU; then the head fc 84→C. 61,706 parameters for MNIST.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
)

func newLeNet(c, h, w, classes int64) (*Net, error) {
	var pad int64
	switch {
	case h == 28 && w == 28:
		pad = 2
	case h == 32 && w == 32:
		pad = 0
	default:
		return nil, fmt.Errorf("nets: lenet takes 28×28 or 32×32 images, got %d×%d", h, w)
	}
	var body []ParamSpec
	body = append(body, convSpecs("conv1", 6, c, 5, true)...)
	body = append(body, convSpecs("conv2", 16, 6, 5, true)...)
	body = append(body, linearSpecs("fc1", 120, 400)...)
	body = append(body, linearSpecs("fc2", 84, 120)...)
	n := &Net{Arch: "lenet", InShape: [3]int64{c, h, w}, Classes: classes, FeatureDim: 84, Body: body}
	n.body = func(l layers, ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
		// ReLU after max-pooling: relu(maxpool(x)) = maxpool(relu(x)) exactly (ReLU is
		// monotonic), values and gradients alike, with a quarter of the ReLU work.
		// Convolution and pooling are one call: one fused kernel on the CPU (layers.go).
		y := ch.T(l.convPool(ch, x, p[0], p[1], torch.Conv2dOpts{Padding: [2]int64{pad, pad}}).Relu())
		y = ch.T(l.convPool(ch, y, p[2], p[3], torch.Conv2dOpts{}).Relu())
		y = l.rows(ch, y)
		y = ch.T(l.linear(ch, y, p[4], p[5]).Relu())
		return ch.T(l.linear(ch, y, p[6], p[7]).Relu())
	}
	return n, nil
}
