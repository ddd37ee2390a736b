package torch

// ops_image.go: group (instance) normalisation and affine grid sampling, for ConvNet-3 and
// image augmentation.

/*
#include "shim.h"
*/
import "C"

import "fmt"

// GroupNorm is torch.nn.functional.group_norm: x (N, C, ...) normalised over each group of
// C/groups channels and all positions, per sample, with the biased variance and eps, then
// scaled by weight (C) and shifted by bias (C); either may be nil. With groups = C it is
// instance normalisation (torch.nn.GroupNorm(C, C), ConvNet-3's "instancenorm"). It has
// no running statistics: training and evaluation compute the same thing.
func GroupNorm(x *Tensor, groups int64, weight, bias *Tensor, eps float64) (*Tensor, error) {
	const op = "group_norm"
	hx, err := x.handle(op)
	if err != nil {
		return nil, err
	}
	hw, err := optHandle(op, weight)
	if err != nil {
		return nil, err
	}
	hb, err := optHandle(op, bias)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_group_norm(&out, hx, C.int64_t(groups), hw, hb, C.double(eps))
	return result(op, out, e)
}

// ConvNormReluPool is ConvNet-3's block: AvgPool2d(Relu(GroupNorm(Conv2d(x, w, bias,
// padding), C, gamma, beta, eps)), 2×2 kernel), with C the output channels of w (C, Cin, kh,
// kw), stride 1; bias may be nil, gamma and beta (C) may not. On contiguous CPU float32 or
// float64 tensors it is fused: each output plane normalised, rectified and pooled while in
// cache, and for inputs of up to four channels (images) the convolution done in the same
// pass, so that the full-size convolution output is never written; its first-order
// backward is fused the same way, and a differentiable backward (CreateGraph) is the four
// ops'. Values and gradients agree with the four ops within rounding (float32: a few units
// in the last place of the values). Elsewhere (a GPU, other types) it is the four ops.
func ConvNormReluPool(x, w, bias *Tensor, padding [2]int64, gamma, beta *Tensor, eps float64) (*Tensor, error) {
	const op = "conv_norm_relu_pool"
	hx, err := x.handle(op)
	if err != nil {
		return nil, err
	}
	hw, err := w.handle(op)
	if err != nil {
		return nil, err
	}
	hb, err := optHandle(op, bias)
	if err != nil {
		return nil, err
	}
	hg, err := gamma.handle(op)
	if err != nil {
		return nil, err
	}
	hbe, err := beta.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_conv_norm_relu_pool(&out, hx, hw, hb, int64Ptr(padding[:]), hg, hbe, C.double(eps))
	return result(op, out, e)
}

// AffineGrid is torch.nn.functional.affine_grid for 2-D images: theta (N, 2, 3) maps each
// output position, in normalised coordinates (x along the width, y along the height, both in
// [−1, 1]), to the input position it samples; size is the output's (N, C, H, W). The
// result is the sampling grid (N, H, W, 2).
func AffineGrid(theta *Tensor, size []int64, alignCorners bool) (*Tensor, error) {
	const op = "affine_grid"
	h, err := theta.handle(op)
	if err != nil {
		return nil, err
	}
	if len(size) != 4 {
		return nil, errorf(op, fmt.Sprintf("size must be (N, C, H, W), got %v", size))
	}
	var out C.ldt_tensor
	e := C.ldt_affine_grid(&out, h, int64Ptr(size), C.int(len(size)), cbool(alignCorners))
	return result(op, out, e)
}

// GridMode is grid sampling's interpolation.
type GridMode int

const (
	GridBilinear GridMode = iota
	GridNearest
	GridBicubic
)

// GridPadding is what grid sampling reads outside the input.
type GridPadding int

const (
	GridZeros GridPadding = iota
	GridBorder
	GridReflection
)

// GridSampleOpts are grid_sample's options; the zero value is PyTorch's default
// (bilinear, zeros, align_corners=False).
type GridSampleOpts struct {
	Mode         GridMode
	Padding      GridPadding
	AlignCorners bool
}

// GridSample is torch.nn.functional.grid_sample for 2-D images: x (N, C, H, W) sampled at
// grid (N, Ho, Wo, 2) → (N, C, Ho, Wo). It is differentiable in x and in the grid, to first
// order only: libtorch has no derivative of grid_sampler_2d_backward, so a gradient taken
// with CreateGraph through it cannot be differentiated again (an error, not a wrong value).
func GridSample(x, grid *Tensor, o GridSampleOpts) (*Tensor, error) {
	const op = "grid_sample"
	hx, err := x.handle(op)
	if err != nil {
		return nil, err
	}
	hg, err := grid.handle(op)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_grid_sample(&out, hx, hg, C.int(o.Mode), C.int(o.Padding), cbool(o.AlignCorners))
	return result(op, out, e)
}
