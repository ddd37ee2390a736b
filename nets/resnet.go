package nets

// resnet.go: the authors' CIFAR "ResNet-18" (docs/ALGORITHM.md §2; used for test-time
// architecture transfer): conv1 3×3 (no bias) + BN + ReLU, three stages of 16/32/64
// channels with two post-activation BasicBlocks each, 1×1 stride-2 conv + BN shortcuts,
// global average pooling → 64 features, then the head fc 64→C. Convolutions start from
// N(0, √(2/(k·k·out))), BN from γ = 1, β = 0. ldtorch: BN uses running statistics at
// evaluation (train = false).

import (
	"fmt"

	"github.com/ldtorch/ldtorch/torch"
)

const (
	bnMomentum = 0.1
	bnEps      = 1e-5
)

type resBlock struct {
	conv1, bn1, conv2, bn2 int // parameter indices
	short, shortBN         int // -1 without a projection shortcut
	buf1, buf2, shortBuf   int // buffer indices (running mean; variance follows)
	stride                 int64
}

func newCifarResNet(c, h, w, classes int64) (*Net, error) {
	if h < 8 || w < 8 {
		return nil, fmt.Errorf("nets: resnet needs images of at least 8×8, got %d×%d", h, w)
	}
	var body []ParamSpec
	var bufs []BufferSpec
	conv := func(name string, out, in, k int64) int {
		body = append(body, ParamSpec{Name: name + ".weight", Shape: []int64{out, in, k, k}, Init: InitNormalConv, FanIn: k * k * out})
		return len(body) - 1
	}
	bn := func(name string, ch int64) (param, buf int) {
		body = append(body,
			ParamSpec{Name: name + ".weight", Shape: []int64{ch}, Init: InitOnes},
			ParamSpec{Name: name + ".bias", Shape: []int64{ch}, Init: InitZeros})
		bufs = append(bufs,
			BufferSpec{Name: name + ".running_mean", Shape: []int64{ch}, Fill: 0},
			BufferSpec{Name: name + ".running_var", Shape: []int64{ch}, Fill: 1})
		return len(body) - 2, len(bufs) - 2
	}
	stem := conv("conv1", 16, c, 3)
	stemBN, stemBuf := bn("bn1", 16)
	var blocks []resBlock
	in := int64(16)
	for s, width := range []int64{16, 32, 64} {
		for b := 0; b < 2; b++ {
			name := fmt.Sprintf("layer%d.%d", s+1, b)
			stride := int64(1)
			if s > 0 && b == 0 {
				stride = 2
			}
			blk := resBlock{stride: stride, short: -1, shortBN: -1, shortBuf: -1}
			blk.conv1 = conv(name+".conv1", width, in, 3)
			blk.bn1, blk.buf1 = bn(name+".bn1", width)
			blk.conv2 = conv(name+".conv2", width, width, 3)
			blk.bn2, blk.buf2 = bn(name+".bn2", width)
			if stride != 1 || in != width {
				blk.short = conv(name+".shortcut.0", width, in, 1)
				blk.shortBN, blk.shortBuf = bn(name+".shortcut.1", width)
			}
			blocks = append(blocks, blk)
			in = width
		}
	}
	n := &Net{Arch: "resnet", InShape: [3]int64{c, h, w}, Classes: classes, FeatureDim: 64, Body: body, Buffers: bufs}
	n.body = func(l layers, ch *torch.Chain, p, buf []*torch.Tensor, x *torch.Tensor, train bool) *torch.Tensor {
		bnOpts := torch.BatchNormOpts{Training: train, Momentum: bnMomentum, Eps: bnEps}
		norm := func(y *torch.Tensor, pi, bi int) *torch.Tensor {
			return l.batchNorm(ch, y, p[pi], p[pi+1], buf[bi], buf[bi+1], bnOpts)
		}
		conv3 := func(y *torch.Tensor, pi int, stride int64) *torch.Tensor {
			return l.conv(ch, y, p[pi], nil, torch.Conv2dOpts{Stride: [2]int64{stride, stride}, Padding: [2]int64{1, 1}})
		}
		y := ch.T(norm(conv3(x, stem, 1), stemBN, stemBuf).Relu())
		for _, b := range blocks {
			out := ch.T(norm(conv3(y, b.conv1, b.stride), b.bn1, b.buf1).Relu())
			out = norm(conv3(out, b.conv2, 1), b.bn2, b.buf2)
			short := y
			if b.short >= 0 {
				s := l.conv(ch, y, p[b.short], nil, torch.Conv2dOpts{Stride: [2]int64{b.stride, b.stride}})
				short = norm(s, b.shortBN, b.shortBuf)
			}
			y = ch.T(ch.T(out.Add(short)).Relu())
		}
		// Global average pooling: the authors' 8×8 average pool on 32×32 inputs.
		y = ch.T(torch.AdaptiveAvgPool2d(y, 1, 1))
		return l.rows(ch, y)
	}
	return n, nil
}
