// kernels.h: the shim's own CPU kernels (this folder), as C++ functions on at::Tensors. The
// binding layer (torch/csrc/*.cc) includes this header, and only this one of the folder: it
// converts handles, wraps every call in its exception barrier (LDT_TRY … LDT_CATCH) and
// exports the C API of shim.h. Nothing here knows handles, shim.h or the barrier; every
// function reports a failure by throwing (c10::Error or std::exception), and none reads the
// environment: settings come through the setters below, which programs call.
//
// What they are, and why each exists, is in docs/ARCHITECTURE.md ("Own kernels"). Each
// falls back to libtorch's op where it does not apply (other devices, dtypes and shapes, a
// CPU without AVX2 and FMA), so every function below computes what its ATen counterpart
// computes, with derivatives of every order.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstdint>

namespace ldt {
namespace kernels {

// ---- direct 5×5 convolutions (conv5x5.cc, conv5x5_avx2.cc, conv5x5_avx512.cc) ----------
// conv2d_direct is conv2d (bias undefined: none; stride, padding, dilation pairs) from the
// direct kernels where they apply: CPU, float or double, 5×5 weights, stride 1, dilation 1,
// one group, padding 0..4, at most 16 input and 64 output channels, kernels in use.
at::Tensor conv2d_direct(const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups);
// conv2d_max_pool2x2 is max_pool2x2(conv2d_direct(...)), fused where the kernels apply.
at::Tensor conv2d_max_pool2x2(const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias,
                              at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                              int64_t groups);
// conv2d_max_pool2d is max_pool2d_direct(conv2d_direct(...)) with the pool's kernel, stride,
// padding (pairs) and ceil mode, fused where the kernels apply.
at::Tensor conv2d_max_pool2d(const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias,
                             at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                             int64_t groups, at::IntArrayRef pool_kernel, at::IntArrayRef pool_stride,
                             at::IntArrayRef pool_padding, bool ceil_mode);
// direct_conv_isa names the kernels in use: "avx512", "avx2", or "" (off, or none here).
const char *direct_conv_isa();
// set_direct_conv chooses them, process-wide: "best" (the default), "off", "avx2",
// "avx512"; an ISA the CPU or build lacks, or another word, throws.
void set_direct_conv(const char *mode);

// ---- max-pools (pool2x2.cc, maxpool.cc) ------------------------------------------------
// max_pool2x2 is max_pool2d with kernel 2, stride 2 (fused for float and double on the CPU).
at::Tensor max_pool2x2(const at::Tensor &x);
// max_pool2d_direct is max_pool2d (dilation 1) with libtorch's loop, without its overheads.
at::Tensor max_pool2d_direct(const at::Tensor &x, at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, bool ceil_mode);

// ---- local response normalisation (lrn.cc) and the loops' ISA ----------------------------
// local_response_norm_direct is local_response_norm of x, or of relu(x) when relu is set,
// for contiguous 4-d float32 and float64 CPU input; an undefined tensor for other input,
// which the caller runs through the composite.
at::Tensor local_response_norm_direct(const at::Tensor &x, int64_t size, double alpha, double beta, double k,
                                      bool relu);
// simd_isa names the loops of the LRN, the max-pool and ConvNet-3's block in use: "avx2" or
// "baseline"; set_simd_isa("best" or "baseline") chooses them (both give the same bits).
const char *simd_isa();
void set_simd_isa(const char *mode);

// ---- ConvNet-3's block (convblock.cc) ------------------------------------------------------
// conv_norm_relu_pool is avg_pool2d(relu(group_norm(conv2d(x, w, bias, stride 1, padding),
// C, gamma, beta, eps)), 2×2), C = w's output channels; bias undefined: none.
at::Tensor conv_norm_relu_pool(const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias,
                               at::IntArrayRef padding, const at::Tensor &gamma, const at::Tensor &beta, double eps);

// ---- the cache of large CPU blocks (alloc.cc) ----------------------------------------------
// set_cpu_block_cache installs the cache on first use with a positive limit (never by
// itself) and sets how many bytes of freed blocks it keeps; a negative limit throws.
void set_cpu_block_cache(int64_t max_bytes);
// cpu_block_cache_stats gives the bytes kept now, blocks mapped and requests served from
// kept blocks (zeros before the cache is installed); null pointers are skipped.
void cpu_block_cache_stats(int64_t *cached_bytes, int64_t *maps, int64_t *hits);

}  // namespace kernels
}  // namespace ldt
