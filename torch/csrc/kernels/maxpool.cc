// maxpool.cc: max_pool2d's CPU forward for any kernel, stride, padding and ceil mode, with
// libtorch's own backward. libtorch 1.13's CPU max_pool2d_with_indices took 27 % of an
// AlexCifarNet LD RR meta-step for its two 3×3, stride-2 pools (≈ 13 ns per output element;
// docs/benchmarks/alexcifarnet-kernels.md#a-direct-3x3-max-pool). The loop here is libtorch's (aten/src/ATen/native/cpu/
// MaxPoolKernel.cpp, cpu_max_pool): the same window bounds, scan order, initial index and
// rule `val > max || isnan(val)`, so values and indices are max_pool2d's bit for bit; it
// records the indices (and tracks the winning taps) only when a graph needs them, scans a row
// of windows side by side, splits a stride-2 row into its two phases in one contiguous read
// (simd_kernels.h: compiled for AVX2 too, and chosen at run time), and the
// backward is at::max_pool2d_with_indices_backward with those indices, whose own derivative
// libtorch provides: every derivative is max_pool2d's too.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/native/Pool.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <type_traits>
#include <limits>
#include <vector>

#include "common.h"
#include "maxpool.h"
#include "simd.h"

namespace {

using ldt::maxpool::Args;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// pool_ops is the max-pool loop of the element type of its (unused) second argument.
const ldt::simd::PoolOps<float, int32_t> &pool_ops(const ldt::simd::Kernels *k, const float *) { return k->pool_f; }
const ldt::simd::PoolOps<double, int64_t> &pool_ops(const ldt::simd::Kernels *k, const double *) { return k->pool_d; }

// geom is the loop's description of one pool of planes H×W into Ho×Wo (simd.h): each
// window's candidates are scanned in libtorch's order over a row split into sw phases of pc
// columns, padded with −∞.
ldt::simd::PoolGeom geom(int64_t H, int64_t W, int64_t Ho, int64_t Wo, const Args &a) {
  const int64_t wp = std::max((Wo - 1) * a.sw + a.kw, a.pw + W);  // padded row length
  const int64_t pc = (wp + a.sw - 1) / a.sw;                       // columns per phase
  return ldt::simd::PoolGeom{H, W, Ho, Wo, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, pc};
}

// pool_range runs the loop of the ISA in use over the planes [begin, end) on the calling
// thread; the winner is kept as its tap number, 32 bits wide as the values are.
template <typename scalar_t>
void pool_range(const scalar_t *in, scalar_t *out, int64_t *ind, int64_t begin, int64_t end,
                const ldt::simd::PoolGeom &g) {
  using tap_t = typename std::conditional<sizeof(scalar_t) == 4, int32_t, int64_t>::type;
  const scalar_t ninf = -std::numeric_limits<scalar_t>::infinity();
  std::vector<scalar_t> phases(g.H * g.sw * g.pc, ninf), best(g.Wo);
  std::vector<tap_t> tap(g.Wo);
  pool_ops(ldt::simd_kernels(), in).planes(in, out, ind, begin, end, &g, phases.data(), best.data(), tap.data());
}

// pool returns max_pool2d(x) and, when idx_out is given, its indices (int64, h·W + w in the
// plane, as max_pool2d_with_indices gives them).
at::Tensor pool(const at::Tensor &x, const Args &a, at::Tensor *idx_out) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = at::native::pooling_output_shape<int64_t>(H, a.kh, a.ph, a.sh, 1, a.ceil);
  const int64_t Wo = at::native::pooling_output_shape<int64_t>(W, a.kw, a.pw, a.sw, 1, a.ceil);
  at::native::pool2d_shape_check(x, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, 1, 1, x.size(1), H, W, Ho, Wo,
                                 at::MemoryFormat::Contiguous);
  auto y = at::empty({x.size(0), x.size(1), Ho, Wo}, x.options());
  at::Tensor idx;
  if (idx_out != nullptr) idx = at::empty(y.sizes(), x.options().dtype(at::kLong));
  const ldt::simd::PoolGeom g = geom(H, W, Ho, Wo, a);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "max_pool2d_direct", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    int64_t *ind = idx.defined() ? idx.data_ptr<int64_t>() : nullptr;
    at::parallel_for(0, planes, 16, [&](int64_t begin, int64_t end) { pool_range(in, out, ind, begin, end, g); });
  });
  if (idx_out != nullptr) *idx_out = idx;
  return y;
}

struct MaxPool2dDirect : public torch::autograd::Function<MaxPool2dDirect> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                            int64_t ph, int64_t pw, bool ceil) {
    at::Tensor idx;
    auto y = pool(x, Args{kh, kw, sh, sw, ph, pw, ceil}, &idx);
    ctx->save_for_backward({x, idx});
    ctx->saved_data["k"] = std::vector<int64_t>{kh, kw};
    ctx->saved_data["s"] = std::vector<int64_t>{sh, sw};
    ctx->saved_data["p"] = std::vector<int64_t>{ph, pw};
    ctx->saved_data["ceil"] = ceil;
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const int64_t one[2] = {1, 1};
    auto gx = at::max_pool2d_with_indices_backward(
        grads[0], saved[0], ctx->saved_data["k"].toIntVector(), ctx->saved_data["s"].toIntVector(),
        ctx->saved_data["p"].toIntVector(), at::IntArrayRef(one, 2), ctx->saved_data["ceil"].toBool(), saved[1]);
    return {gx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace ldt {
namespace maxpool {

bool fits(int64_t H, int64_t W, const Args &a, int64_t *Ho, int64_t *Wo) {
  // pool2d_shape_check's conditions, as booleans.
  if (a.kh <= 0 || a.kw <= 0 || a.sh <= 0 || a.sw <= 0 || a.ph < 0 || a.pw < 0) return false;
  if (a.ph > a.kh / 2 || a.pw > a.kw / 2 || H < 1 || W < 1) return false;
  *Ho = at::native::pooling_output_shape<int64_t>(H, a.kh, a.ph, a.sh, 1, a.ceil);
  *Wo = at::native::pooling_output_shape<int64_t>(W, a.kw, a.pw, a.sw, 1, a.ceil);
  return *Ho >= 1 && *Wo >= 1;
}

template <typename scalar_t>
void pool_planes(const scalar_t *in, scalar_t *out, int64_t *ind, int64_t planes, int64_t H, int64_t W,
                 const Args &a) {
  int64_t Ho = 0, Wo = 0;
  if (!fits(H, W, a, &Ho, &Wo)) throw std::invalid_argument("max_pool2d: settings that do not fit the planes");
  pool_range(in, out, ind, 0, planes, geom(H, W, Ho, Wo, a));
}
template void pool_planes<float>(const float *, float *, int64_t *, int64_t, int64_t, int64_t, const Args &);
template void pool_planes<double>(const double *, double *, int64_t *, int64_t, int64_t, int64_t, const Args &);

template <typename scalar_t>
void scatter_planes(const scalar_t *gp, const int64_t *ind, scalar_t *out, int64_t planes, int64_t pooled,
                    int64_t plane) {
  for (int64_t p = 0; p < planes; p++) {
    const scalar_t *g = gp + p * pooled;
    const int64_t *i = ind + p * pooled;
    scalar_t *o = out + p * plane;
    for (int64_t j = 0; j < pooled; j++) o[i[j]] += g[j];
  }
}
template void scatter_planes<float>(const float *, const int64_t *, float *, int64_t, int64_t, int64_t);
template void scatter_planes<double>(const double *, const int64_t *, double *, int64_t, int64_t, int64_t);

at::Tensor max_pool2d_direct(const at::Tensor &in, const Args &a) {
  const int64_t k[2] = {a.kh, a.kw}, s[2] = {a.sh, a.sw}, p[2] = {a.ph, a.pw}, one[2] = {1, 1};
  if (!ldt::dense_cpu_4d(in))
    return at::max_pool2d(in, at::IntArrayRef(k, 2), at::IntArrayRef(s, 2), at::IntArrayRef(p, 2),
                          at::IntArrayRef(one, 2), a.ceil);
  if (at::GradMode::is_enabled() && in.requires_grad())
    return MaxPool2dDirect::apply(in, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.ceil);
  return pool(in, a, nullptr);
}

}  // namespace maxpool

namespace kernels {

at::Tensor max_pool2d_direct(const at::Tensor &x, at::IntArrayRef kernel, at::IntArrayRef stride,
                             at::IntArrayRef padding, bool ceil_mode) {
  const Args a{kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], ceil_mode};
  return ldt::maxpool::max_pool2d_direct(x, a);
}

}  // namespace kernels
}  // namespace ldt
