// pool2x2.h: the fused 2×2 max-pool's plane loops (pool2x2.cc), for the kernels that pool
// their own outputs (conv5x5.cc): one copy of the window rule, so that a fused convolution
// and pooling gives MaxPool2x2's bits.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace ldt {
namespace pool2x2 {

// pool_planes pools planes (H, W) of in into out (H/2, W/2): max_pool2d's values, and in win
// (when not null) the 0..3 winner of each window, row-major, ties to the first, NaN wins.
template <typename scalar_t>
void pool_planes(const scalar_t *in, scalar_t *out, uint8_t *win, int64_t planes, int64_t H, int64_t W);
// select_planes writes in's value at each window's winner into out (H/2, W/2).
template <typename scalar_t>
void select_planes(const scalar_t *in, const uint8_t *win, scalar_t *out, int64_t planes, int64_t H, int64_t W);
// scatter_planes writes in (H/2, W/2) at the winners of out (H, W), which must be zero.
template <typename scalar_t>
void scatter_planes(const scalar_t *in, const uint8_t *win, scalar_t *out, int64_t planes, int64_t H, int64_t W);

// max_pool2x2 is ldt_max_pool2x2: the fused pool where it applies, max_pool2d elsewhere.
at::Tensor max_pool2x2(const at::Tensor &x);

}  // namespace pool2x2
}  // namespace ldt
