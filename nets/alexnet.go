package nets

// alexnet.go: AlexCifarNet (docs/ALGORITHM.md §2): conv 5×5 3→64 pad 2, ReLU, max-pool 3/2/1,
// LRN(4, 0.001/9, 0.75, 1); conv 5×5 64→64 pad 2, ReLU, LRN, max-pool 3/2/1 (LRN and pool
// swap order); flatten 4096; fc 384, ReLU; fc 192, ReLU; then the head fc 192→C.

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
)

// LRN settings of the authors' AlexCifarNet.
const (
	lrnSize  = 4
	lrnAlpha = 0.001 / 9
	lrnBeta  = 0.75
	lrnK     = 1
)

func newAlexCifarNet(c, h, w, classes int64) (*Net, error) {
	if h != 32 || w != 32 {
		return nil, fmt.Errorf("nets: alexnet takes 32×32 images, got %d×%d", h, w)
	}
	var body []ParamSpec
	body = append(body, convSpecs("conv1", 64, c, 5, true)...)
	body = append(body, convSpecs("conv2", 64, 64, 5, true)...)
	body = append(body, linearSpecs("fc1", 384, 4096)...)
	body = append(body, linearSpecs("fc2", 192, 384)...)
	n := &Net{Arch: "alexnet", InShape: [3]int64{c, h, w}, Classes: classes, FeatureDim: 192, Body: body}
	pool := torch.PoolOpts{Kernel: [2]int64{3, 3}, Stride: [2]int64{2, 2}, Padding: [2]int64{1, 1}}
	conv := torch.Conv2dOpts{Padding: [2]int64{2, 2}}
	n.body = func(l layers, ch *torch.Chain, p, _ []*torch.Tensor, x *torch.Tensor, _ bool) *torch.Tensor {
		// lrn(relu(pool(y))) = lrn(pool(relu(y))) exactly, less work; the ReLUs are read
		// inside the LRN's pass where no graph is recorded.
		y := l.convMaxPool(ch, x, p[0], p[1], conv, pool)
		y = l.reluLRN(ch, y)
		y = l.conv(ch, y, p[2], p[3], conv)
		y = l.reluLRN(ch, y)
		y = ch.T(torch.MaxPool2dDirect(y, pool))
		y = l.rows(ch, y)
		y = ch.T(l.linear(ch, y, p[4], p[5]).Relu())
		return ch.T(l.linear(ch, y, p[6], p[7]).Relu())
	}
	return n, nil
}
