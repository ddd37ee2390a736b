package torch

// ops_nn.go: convolution, pooling, normalisation, linear layers, softmax and losses.

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import "unsafe"

// Conv2dOpts are conv2d's hyper-parameters; zero values mean stride 1, padding 0,
// dilation 1, groups 1.
type Conv2dOpts struct {
	Stride, Padding, Dilation [2]int64
	Groups                    int64
}

func orOne(p [2]int64) [2]int64 {
	if p == [2]int64{} {
		return [2]int64{1, 1}
	}
	return p
}

// conv2dCall takes the handles and settings every 2-d convolution of the shim takes (Conv2d,
// Conv2dDirect, Conv2dMaxPool2x2: one signature) and calls it.
func conv2dCall(op string, x, w, bias *Tensor, o Conv2dOpts,
	call func(out *C.ldt_tensor, x, w, b C.ldt_tensor, stride, pad, dil *C.int64_t, groups C.int64_t) C.ldt_error) (*Tensor, error) {
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
	stride, dil, pad := orOne(o.Stride), orOne(o.Dilation), o.Padding
	groups := o.Groups
	if groups == 0 {
		groups = 1
	}
	var out C.ldt_tensor
	e := call(&out, hx, hw, hb, int64Ptr(stride[:]), int64Ptr(pad[:]), int64Ptr(dil[:]), C.int64_t(groups))
	return result(op, out, e)
}

// Conv2d is torch.nn.functional.conv2d; bias may be nil.
func Conv2d(x, w, bias *Tensor, o Conv2dOpts) (*Tensor, error) {
	return conv2dCall("conv2d", x, w, bias, o, func(out *C.ldt_tensor, x, w, b C.ldt_tensor, stride, pad, dil *C.int64_t, groups C.int64_t) C.ldt_error {
		return C.ldt_conv2d(out, x, w, b, stride, pad, dil, groups)
	})
}

// Conv2dDirect is Conv2d computed, where they apply, by the shim's direct kernels for small
// 5×5 layers (torch/csrc/kernels/conv5x5.cc): CPU, float32 or float64, 5×5 weights, stride 1,
// dilation 1, one group, padding 0..4, at most 16 input and 64 output channels, a CPU with AVX2
// and FMA. They keep derivatives of every order; their values are within float rounding of
// Conv2d's (a different order of the sums: see docs/benchmarks/lenet-kernels.md#direct-5x5-convolutions), the same
// on AVX2 and AVX-512 and for any thread count. Everything else, other devices included,
// runs Conv2d.
func Conv2dDirect(x, w, bias *Tensor, o Conv2dOpts) (*Tensor, error) {
	return conv2dCall("conv2d_direct", x, w, bias, o, func(out *C.ldt_tensor, x, w, b C.ldt_tensor, stride, pad, dil *C.int64_t, groups C.int64_t) C.ldt_error {
		return C.ldt_conv2d_direct(out, x, w, b, stride, pad, dil, groups)
	})
}

// Conv2dMaxPool2x2 is MaxPool2x2(Conv2dDirect(x, w, bias, o)): the same values, winners and
// derivatives of every order (the bias gradient within rounding: it is summed over the pooled
// gradient). Where the direct kernels apply it is one fused kernel that pools each chunk of
// convolution outputs while they are in the cache, and whose backward scatters each chunk's
// gradient in the cache too, so the full-size convolution output and its gradient are never
// written (LeNet's first layer: 19 MB each for 1024 images).
func Conv2dMaxPool2x2(x, w, bias *Tensor, o Conv2dOpts) (*Tensor, error) {
	return conv2dCall("conv2d_max_pool2x2", x, w, bias, o, func(out *C.ldt_tensor, x, w, b C.ldt_tensor, stride, pad, dil *C.int64_t, groups C.int64_t) C.ldt_error {
		return C.ldt_conv2d_max_pool2x2(out, x, w, b, stride, pad, dil, groups)
	})
}

// Conv2dMaxPool2d is MaxPool2dDirect(Conv2dDirect(x, w, bias, o), p): the same values,
// indices and derivatives of every order (the bias gradient within rounding: it is summed
// over the pooled gradient). Where the direct kernels apply it is one fused pass that pools
// each image's convolution outputs while they are in the cache, and whose backward scatters
// each chunk's gradient in the cache too, so the full-size convolution output and its
// gradient are never written (AlexCifarNet's first layer: 268 MB each for 1024 images);
// elsewhere it is the two calls.
func Conv2dMaxPool2d(x, w, bias *Tensor, o Conv2dOpts, p PoolOpts) (*Tensor, error) {
	k, s, pad := p.Kernel, p.stride(), p.Padding
	return conv2dCall("conv2d_max_pool2d", x, w, bias, o, func(out *C.ldt_tensor, x, w, b C.ldt_tensor, stride, padding, dil *C.int64_t, groups C.int64_t) C.ldt_error {
		return C.ldt_conv2d_max_pool2d(out, x, w, b, stride, padding, dil, groups, int64Ptr(k[:]), int64Ptr(s[:]), int64Ptr(pad[:]), cbool(p.CeilMode))
	})
}

// DirectConvISA names the kernels Conv2dDirect uses: "avx512", "avx2", or "" when they are
// off or the CPU (or build) has none.
func DirectConvISA() string { return C.GoString(C.ldt_direct_conv_isa()) }

// SetDirectConv chooses Conv2dDirect's kernels for the whole process: "best" (the default),
// "off" (Conv2d everywhere), "avx2" or "avx512"; an ISA the CPU lacks is an error. Programs
// call it (the ldtorch command from LDTORCH_DIRECT_CONV); the library never does. Graphs
// already recorded keep the kernels they were recorded with.
func SetDirectConv(mode string) error {
	cs := C.CString(mode)
	defer C.free(unsafe.Pointer(cs))
	return cerr("set_direct_conv", C.ldt_set_direct_conv(cs))
}

// PoolOpts are pooling hyper-parameters; a zero Stride means the kernel size.
type PoolOpts struct {
	Kernel, Stride, Padding [2]int64
	CeilMode                bool
	CountIncludePad         bool // avg_pool2d only
}

func (o PoolOpts) stride() [2]int64 {
	if o.Stride == [2]int64{} {
		return o.Kernel
	}
	return o.Stride
}

// MaxPool2d is torch.nn.functional.max_pool2d.
func MaxPool2d(x *Tensor, o PoolOpts) (*Tensor, error) {
	h, err := x.handle("max_pool2d")
	if err != nil {
		return nil, err
	}
	k, s, p := o.Kernel, o.stride(), o.Padding
	var out C.ldt_tensor
	e := C.ldt_max_pool2d(&out, h, int64Ptr(k[:]), int64Ptr(s[:]), int64Ptr(p[:]), cbool(o.CeilMode))
	return result("max_pool2d", out, e)
}

// MaxPool2dDirect is MaxPool2d, bit for bit (values, indices, derivatives of every order),
// with the forward computed by the shim for contiguous float32 and float64 CPU input:
// libtorch's loop (window bounds, scan order, tie and NaN rule) without its per-element
// overheads, recording the indices only when a graph needs them; the backward is libtorch's
// max_pool2d_with_indices_backward (docs/benchmarks/alexcifarnet-kernels.md#a-direct-3x3-max-pool). Other inputs run
// MaxPool2d.
func MaxPool2dDirect(x *Tensor, o PoolOpts) (*Tensor, error) {
	h, err := x.handle("max_pool2d_direct")
	if err != nil {
		return nil, err
	}
	k, s, p := o.Kernel, o.stride(), o.Padding
	var out C.ldt_tensor
	e := C.ldt_max_pool2d_direct(&out, h, int64Ptr(k[:]), int64Ptr(s[:]), int64Ptr(p[:]), cbool(o.CeilMode))
	return result("max_pool2d_direct", out, e)
}

// LocalResponseNormDirect is LocalResponseNorm with the shim's one-pass forward and
// backward for contiguous 4-d float32 and float64 CPU input (torch/csrc/kernels/lrn.cc):
// values and first derivatives within float rounding of LocalResponseNorm's (not bit for bit: the
// window sums are in the same order, β = 0.75 is taken as √s·√√s), higher derivatives from
// the closed-form backward built of differentiable ops. Other inputs run LocalResponseNorm.
func LocalResponseNormDirect(x *Tensor, size int64, alpha, beta, k float64) (*Tensor, error) {
	return localResponseNormDirect(x, size, alpha, beta, k, false)
}

// ReluLocalResponseNormDirect is LocalResponseNormDirect(Relu(x)), the ReLU read in the
// LRN's own pass where no graph is recorded (one pass less over the batch), a separate op
// where one is.
func ReluLocalResponseNormDirect(x *Tensor, size int64, alpha, beta, k float64) (*Tensor, error) {
	return localResponseNormDirect(x, size, alpha, beta, k, true)
}

// SIMDLoopsISA names the ISA the loops of LocalResponseNormDirect, MaxPool2dDirect and
// ConvNormReluPool are compiled for in this process: "avx2" where the CPU has AVX2 and FMA,
// else "baseline" (both give the same bits).
func SIMDLoopsISA() string { return C.GoString(C.ldt_simd_isa()) }

// simdISA is SIMDLoopsISA; setSIMDISA chooses ("best" or "baseline"), for the tests of both.
func simdISA() string { return SIMDLoopsISA() }

func setSIMDISA(mode string) error {
	cs := C.CString(mode)
	defer C.free(unsafe.Pointer(cs))
	return cerr("set_simd_isa", C.ldt_set_simd_isa(cs))
}

func localResponseNormDirect(x *Tensor, size int64, alpha, beta, k float64, relu bool) (*Tensor, error) {
	h, err := x.handle("local_response_norm_direct")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_local_response_norm_direct(&out, h, C.int64_t(size), C.double(alpha), C.double(beta), C.double(k), cbool(relu))
	return result("local_response_norm_direct", out, e)
}

// MaxPool2x2 is MaxPool2d with a 2×2 kernel and stride 2 (no padding, floor mode): the
// same values, tie rule (the first maximum of each window wins) and gradients, double
// backward included, computed on the CPU by a fused kernel that reads each element once
// (≈ 8× faster than libtorch 1.13's max_pool2d; docs/BENCHMARKS.md). Other devices and
// dtypes run max_pool2d.
func MaxPool2x2(x *Tensor) (*Tensor, error) {
	h, err := x.handle("max_pool2x2")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_max_pool2x2(&out, h)
	return result("max_pool2x2", out, e)
}

// AvgPool2d is torch.nn.functional.avg_pool2d.
func AvgPool2d(x *Tensor, o PoolOpts) (*Tensor, error) {
	h, err := x.handle("avg_pool2d")
	if err != nil {
		return nil, err
	}
	k, s, p := o.Kernel, o.stride(), o.Padding
	var out C.ldt_tensor
	e := C.ldt_avg_pool2d(&out, h, int64Ptr(k[:]), int64Ptr(s[:]), int64Ptr(p[:]), cbool(o.CeilMode), cbool(o.CountIncludePad))
	return result("avg_pool2d", out, e)
}

// AdaptiveAvgPool2d averages to an output of size (h, w).
func AdaptiveAvgPool2d(x *Tensor, h, w int64) (*Tensor, error) {
	hx, err := x.handle("adaptive_avg_pool2d")
	if err != nil {
		return nil, err
	}
	size := [2]int64{h, w}
	var out C.ldt_tensor
	e := C.ldt_adaptive_avg_pool2d(&out, hx, int64Ptr(size[:]))
	return result("adaptive_avg_pool2d", out, e)
}

// BatchNormOpts: Training uses batch statistics and updates the running ones in place;
// evaluation uses the running statistics.
type BatchNormOpts struct {
	Training bool
	Momentum float64 // 0.1 in PyTorch
	Eps      float64 // 1e-5 in PyTorch
}

// BatchNorm is torch.nn.functional.batch_norm with explicit running statistics (buffers
// passed in and updated in place, never hidden in a module). Any of weight, bias,
// runningMean, runningVar may be nil (the last two only in training mode).
func BatchNorm(x, weight, bias, runningMean, runningVar *Tensor, o BatchNormOpts) (*Tensor, error) {
	const op = "batch_norm"
	hx, err := x.handle(op)
	if err != nil {
		return nil, err
	}
	var hs [4]C.ldt_tensor
	for i, t := range []*Tensor{weight, bias, runningMean, runningVar} {
		if hs[i], err = optHandle(op, t); err != nil {
			return nil, err
		}
	}
	var out C.ldt_tensor
	e := C.ldt_batch_norm(&out, hx, hs[0], hs[1], hs[2], hs[3], cbool(o.Training), C.double(o.Momentum), C.double(o.Eps))
	return result(op, out, e)
}

// LocalResponseNorm is torch.nn.functional.local_response_norm.
func LocalResponseNorm(x *Tensor, size int64, alpha, beta, k float64) (*Tensor, error) {
	h, err := x.handle("local_response_norm")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_local_response_norm(&out, h, C.int64_t(size), C.double(alpha), C.double(beta), C.double(k))
	return result("local_response_norm", out, e)
}

// Linear is x·wᵀ + b; bias may be nil.
func Linear(x, w, bias *Tensor) (*Tensor, error) {
	hx, err := x.handle("linear")
	if err != nil {
		return nil, err
	}
	hw, err := w.handle("linear")
	if err != nil {
		return nil, err
	}
	hb, err := optHandle("linear", bias)
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_linear(&out, hx, hw, hb)
	return result("linear", out, e)
}

// Softmax along dim.
func Softmax(x *Tensor, dim int64) (*Tensor, error) {
	h, err := x.handle("softmax")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_softmax(&out, h, C.int64_t(dim))
	return result("softmax", out, e)
}

// LogSoftmax along dim.
func LogSoftmax(x *Tensor, dim int64) (*Tensor, error) {
	h, err := x.handle("log_softmax")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_log_softmax(&out, h, C.int64_t(dim))
	return result("log_softmax", out, e)
}

// CrossEntropy is the mean cross-entropy of logits (B, C) against int64 classes (B). On a
// GPU the classes are checked to be in range first (one read back to the host).
func CrossEntropy(logits, target *Tensor) (*Tensor, error) {
	return crossEntropy(logits, target, true)
}

// CrossEntropyInRange is CrossEntropy for class indices the caller knows to be in range
// (checked once, when they were made): on a GPU it skips CrossEntropy's range check, a
// read back to the host. An index out of range there is a device-side assert that leaves
// the CUDA context unusable; on the CPU it is still an error.
func CrossEntropyInRange(logits, target *Tensor) (*Tensor, error) {
	return crossEntropy(logits, target, false)
}

func crossEntropy(logits, target *Tensor, check bool) (*Tensor, error) {
	hz, err := logits.handle("cross_entropy")
	if err != nil {
		return nil, err
	}
	hy, err := target.handle("cross_entropy")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_cross_entropy(&out, hz, hy, cbool(check))
	return result("cross_entropy", out, e)
}

// SoftCrossEntropy is the mean over rows of Σ_c −p_c log softmax(logits)_c for a
// probability table p of the same shape (B, C) as the logits.
func SoftCrossEntropy(logits, probs *Tensor) (*Tensor, error) {
	hz, err := logits.handle("soft_cross_entropy")
	if err != nil {
		return nil, err
	}
	hp, err := probs.handle("soft_cross_entropy")
	if err != nil {
		return nil, err
	}
	var out C.ldt_tensor
	e := C.ldt_soft_cross_entropy(&out, hz, hp)
	return result("soft_cross_entropy", out, e)
}
