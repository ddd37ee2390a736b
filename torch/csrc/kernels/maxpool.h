// maxpool.h: max_pool2d_direct's loop (maxpool.cc) for the kernels that pool their own
// outputs (conv5x5.cc's convolution fused with a max-pool): one copy of the loop, so that
// the fused op gives MaxPool2dDirect's bits.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace ldt {
namespace maxpool {

// Args are max_pool2d's settings (dilation 1).
struct Args {
  int64_t kh, kw, sh, sw, ph, pw;
  bool ceil;
};

// fits says whether max_pool2d accepts these settings for planes H×W (where it would throw,
// it is false) and gives its output size.
bool fits(int64_t H, int64_t W, const Args &a, int64_t *Ho, int64_t *Wo);

// pool_planes writes max_pool2d's values of the planes (H, W) of in into out (Ho, Wo from
// fits) and, when ind is not null, max_pool2d_with_indices' indices (h·W + w in the plane),
// bit for bit, on the calling thread.
template <typename scalar_t>
void pool_planes(const scalar_t *in, scalar_t *out, int64_t *ind, int64_t planes, int64_t H, int64_t W,
                 const Args &a);

// scatter_planes adds each of the pooled gradients gp (Ho·Wo a plane) into out (H·W a plane,
// zero on entry) at its index, in output order: max_pool2d_with_indices_backward's sums.
template <typename scalar_t>
void scatter_planes(const scalar_t *gp, const int64_t *ind, scalar_t *out, int64_t planes, int64_t pooled,
                    int64_t plane);

// max_pool2d_direct is ldt_max_pool2d_direct.
at::Tensor max_pool2d_direct(const at::Tensor &x, const Args &a);

}  // namespace maxpool
}  // namespace ldt
