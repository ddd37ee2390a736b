// conv5x5.cc: direct CPU kernels for the 5×5 convolutions with few input channels: LeNet's
// (1→6 on 28×28 with padding 2, 6→16 on 14×14) and AlexCifarNet's first (3→64 on 32×32),
// where oneDNN's blocked kernels pad the 1, 3 or 6 channels to a block of 8 or 16 and spend
// most of their time on that padding and on layout reorders (docs/benchmarks/lenet-kernels.md#direct-5x5-convolutions,
// docs/benchmarks/alexcifarnet-kernels.md#the-first-convolution-direct-and-fused-with-its-pool). Stride 1, dilation 1, one group, padding 0..4, float
// and double, CPUs with AVX2 and FMA (kernels in conv5x5_avx2.cc and conv5x5_avx512.cc);
// everything else, and every other device, runs at::conv2d.
//
// Values: not libtorch's bits (its kernels add in another order), but each output element
// is one fused multiply-add chain in a fixed order (conv5x5_kernels.h), the same for AVX2
// and AVX-512, and for any number of threads (the weight gradient is summed over chunks of
// kChunk images, in order).
//
// Autograd: three custom functions, closed under differentiation, keep every order of
// derivative (label distillation differentiates through the gradient of the inner step):
//   Conv5x5(x, w), Conv5x5Bias(x, w, b) → y = conv(x, w) (+ b)
//   Conv5x5BackInput(gy, w)   → dL/dx of conv for the output gradient gy
//   Conv5x5BackWeight(x, gy)  → dL/dw of conv
// The three are bilinear, and each one's derivatives are the other two (see backward).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "conv5x5.h"
#include "common.h"
#include "maxpool.h"
#include "pool2x2.h"

namespace {

using ldt::conv5::Geom;
using ldt::conv5::K;
using ldt::conv5::Kernels;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Images per weight-gradient chunk: a fixed number, so that the order of the sum does not
// depend on the thread count. Eight LeNet images' shifted inputs and gradients (≈ 75 KB for
// the first layer) stay in the L2 cache while every tile reads them.
constexpr int64_t kChunk = 8;
// Images per forward task of at::parallel_for.
constexpr int64_t kGrain = 16;
// Images per chunk of the fused convolution and max-pool: their convolution outputs (≈ 75 KB
// for LeNet's first layer) stay in the cache until they are pooled.
constexpr int64_t kPoolChunk = 4;
// Bytes of convolution outputs per chunk of conv_maxpool_forward (at least one image): one
// image of AlexCifarNet's first layer (64 planes of 32×32 floats) stays in the L2 cache until
// it is pooled.
constexpr int64_t kMaxPoolChunkBytes = 256 << 10;

const Kernels *best_kernels() {
#if defined(LDT_CONV5_X86)
  __builtin_cpu_init();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  if (avx2 && __builtin_cpu_supports("avx512f")) return ldt::conv5::kernels_avx512();
  if (avx2) return ldt::conv5::kernels_avx2();
#endif
  return nullptr;
}

const Kernels *const detected = best_kernels();

// The kernels in use: the best the CPU runs, unless set_direct_conv (a program's call)
// changes it.
std::atomic<const Kernels *> active{detected};

template <typename T>
const ldt::conv5::Ops<T> &ops(const Kernels *k);
template <>
const ldt::conv5::Ops<float> &ops<float>(const Kernels *k) {
  return k->f;
}
template <>
const ldt::conv5::Ops<double> &ops<double>(const Kernels *k) {
  return k->d;
}

Geom make_geom(int64_t cin, int64_t cout, int64_t h, int64_t w, int64_t ph, int64_t pw, int64_t lanes) {
  Geom g;
  g.cin = cin, g.cout = cout, g.h = h, g.w = w, g.ph = ph, g.pw = pw;
  g.hp = h + 2 * ph, g.wp = w + 2 * pw;
  g.ho = g.hp - K + 1, g.wo = g.wp - K + 1;
  g.q = g.ho * g.wo;
  g.lanes = lanes;
  g.qv = (g.q + lanes - 1) / lanes;
  g.xs_len = cin * K * g.hp * g.wo + lanes;
  g.gyp_len = cout * g.qv * lanes;
  g.plane_len = g.hp * g.wp + lanes;
  return g;
}

// applies says whether the kernels compute conv2d(x, w, bias) with these settings.
bool applies(const Kernels *k, const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias, at::IntArrayRef stride,
             at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  if (k == nullptr || !x.defined() || !w.defined()) return false;
  const auto st = x.scalar_type();
  if ((st != at::kFloat && st != at::kDouble) || w.scalar_type() != st) return false;
  if (!x.device().is_cpu() || !w.device().is_cpu() || x.layout() != at::kStrided || w.layout() != at::kStrided)
    return false;
  if (x.dim() != 4 || w.dim() != 4 || w.size(2) != K || w.size(3) != K || x.size(1) != w.size(1)) return false;
  if (stride.size() != 2 || padding.size() != 2 || dilation.size() != 2) return false;
  if (stride[0] != 1 || stride[1] != 1 || dilation[0] != 1 || dilation[1] != 1 || groups != 1) return false;
  for (int i = 0; i < 2; i++)
    if (padding[i] < 0 || padding[i] > K - 1) return false;
  if (x.size(1) < 1 || w.size(0) < 1 || x.size(2) + 2 * padding[0] < K || x.size(3) + 2 * padding[1] < K) return false;
  // The few input channels the kernels are for: oneDNN's blocked kernels win with many
  // (AlexCifarNet's 64→64 runs at their peak), not with few (LeNet's 1→6 and 6→16,
  // AlexCifarNet's 3→64: docs/benchmarks/lenet-kernels.md#direct-5x5-convolutions, docs/benchmarks/alexcifarnet-kernels.md#the-first-convolution-direct-and-fused-with-its-pool).
  if (x.size(1) > 16 || w.size(0) > 64) return false;
  if (bias.defined()) {
    if (bias.scalar_type() != st || !bias.device().is_cpu() || bias.dim() != 1 || bias.size(0) != w.size(0))
      return false;
  }
  return true;
}

// conv_forward: conv(x, w) + bias (bias may be undefined) with padding (ph, pw).
at::Tensor conv_forward(const Kernels *k, const at::Tensor &input, const at::Tensor &weight, const at::Tensor &bias_in,
                   int64_t ph, int64_t pw) {
  auto x = input.contiguous(), w = weight.contiguous();
  auto bias = bias_in.defined() ? bias_in.contiguous() : bias_in;
  const int64_t n = x.size(0), lanes = 64 / static_cast<int64_t>(x.element_size());
  const Geom g = make_geom(x.size(1), w.size(0), x.size(2), x.size(3), ph, pw, lanes);
  auto y = at::empty({n, g.cout, g.ho, g.wo}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv5x5", [&] {
    const auto &o = ops<scalar_t>(k);
    const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
    const scalar_t *bp = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
    scalar_t *yp = y.data_ptr<scalar_t>();
    at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> scratch(g.xs_len + g.plane_len);
      o.fwd(&g, end - begin, xp + begin * g.cin * g.h * g.w, wp, bp, yp + begin * g.cout * g.q, scratch.data());
    });
  });
  return y;
}

// back_input: the gradient of conv(x, w) with respect to x (n, cin, h, w) for the output
// gradient gy, a convolution of gy with the flipped, transposed weights and padding K−1−p.
at::Tensor back_input(const Kernels *k, const at::Tensor &gy, const at::Tensor &w, int64_t ph, int64_t pw, int64_t h,
                      int64_t wd) {
  auto wt = w.flip({2, 3}).transpose(0, 1).contiguous();
  auto gx = conv_forward(k, gy, wt, at::Tensor(), K - 1 - ph, K - 1 - pw);
  TORCH_CHECK(gx.size(2) == h && gx.size(3) == wd, "conv5x5: input gradient of size ", gx.sizes(),
              " for an input of ", h, "×", wd);
  return gx;
}

// back_weight: the gradient of conv(x, w) with respect to w (cout, cin, K, K) for the output
// gradient gy (n, cout, ho, wo).
at::Tensor back_weight(const Kernels *k, const at::Tensor &input, const at::Tensor &grad, int64_t ph, int64_t pw) {
  auto x = input.contiguous(), gy = grad.contiguous();
  const int64_t n = x.size(0), lanes = 64 / static_cast<int64_t>(x.element_size());
  const Geom g = make_geom(x.size(1), gy.size(1), x.size(2), x.size(3), ph, pw, lanes);
  TORCH_CHECK(gy.dim() == 4 && gy.size(0) == n && gy.size(2) == g.ho && gy.size(3) == g.wo,
              "conv5x5: output gradient of size ", gy.sizes(), " for an output of ", g.ho, "×", g.wo);
  const int64_t chunks = (n + kChunk - 1) / kChunk, m = g.cout * g.cin * K * K;
  auto gw = at::zeros({g.cout, g.cin, K, K}, x.options());
  if (chunks == 0) return gw;
  auto partial = at::empty({chunks, m}, x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv5x5_back_weight", [&] {
    const auto &o = ops<scalar_t>(k);
    const scalar_t *xp = x.data_ptr<scalar_t>(), *gp = gy.data_ptr<scalar_t>();
    scalar_t *pp = partial.data_ptr<scalar_t>();
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> scratch(kChunk * (g.xs_len + g.gyp_len) + g.plane_len);
      for (int64_t c = begin; c < end; c++) {
        const int64_t b0 = c * kChunk, nb = std::min(kChunk, n - b0);
        o.bwd_weight(&g, nb, xp + b0 * g.cin * g.h * g.w, gp + b0 * g.cout * g.q, pp + c * m, scratch.data());
      }
    });
    // The chunks' sums, added in order.
    scalar_t *out = gw.data_ptr<scalar_t>();
    for (int64_t j = 0; j < m; j++) out[j] = pp[j];
    for (int64_t c = 1; c < chunks; c++)
      for (int64_t j = 0; j < m; j++) out[j] += pp[c * m + j];
  });
  return gw;
}

// conv_forward_chunks: conv(x, w) + bias (bias may be undefined) in chunks of `chunk` images,
// each convolved into a buffer that pool(b0, nb, conv) reads while it is in the cache (images
// [b0, b0 + nb), cout·ho·wo outputs each), so that the full-size output is never written.
template <typename Pool>
void conv_forward_chunks(const Kernels *k, const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias,
                         int64_t ph, int64_t pw, int64_t chunk, const Pool &pool) {
  const int64_t n = x.size(0), lanes = 64 / static_cast<int64_t>(x.element_size());
  const Geom g = make_geom(x.size(1), w.size(0), x.size(2), x.size(3), ph, pw, lanes);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv5x5_forward_chunks", [&] {
    const auto &o = ops<scalar_t>(k);
    const scalar_t *xp = x.data_ptr<scalar_t>(), *wp = w.data_ptr<scalar_t>();
    const scalar_t *bp = bias.defined() ? bias.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> scratch(g.xs_len + g.plane_len), conv(chunk * g.cout * g.q);
      for (int64_t b0 = begin; b0 < end; b0 += chunk) {
        const int64_t nb = std::min(chunk, end - b0);
        o.fwd(&g, nb, xp + b0 * g.cin * g.h * g.w, wp, bp, conv.data(), scratch.data());
        pool(b0, nb, conv.data());
      }
    });
  });
}

// conv_pooled_forward: a pool of conv(x, w) + bias (ho×wo planes) through conv_forward_chunks,
// chunk images at a time, into y (N, cout, pho, pwo); pool_planes(conv, out, ind, planes, ho,
// wo) pools a chunk's planes, writing their winners (Ind) when ind is not null, as they go
// to *idx_out when it is given.
template <typename Ind, typename PoolPlanes>
at::Tensor conv_pooled_forward(const Kernels *k, const at::Tensor &input, const at::Tensor &weight,
                               const at::Tensor &bias_in, int64_t ph, int64_t pw, int64_t ho, int64_t wo, int64_t pho,
                               int64_t pwo, int64_t chunk, at::Tensor *idx_out, const PoolPlanes &pool_planes) {
  auto x = input.contiguous(), w = weight.contiguous();
  auto bias = bias_in.defined() ? bias_in.contiguous() : bias_in;
  const int64_t cout = w.size(0), pooled = cout * pho * pwo;
  auto y = at::empty({x.size(0), cout, pho, pwo}, x.options());
  at::Tensor idx;
  if (idx_out != nullptr) idx = at::empty(y.sizes(), x.options().dtype(c10::CppTypeToScalarType<Ind>::value));
  Ind *ip = idx.defined() ? idx.data_ptr<Ind>() : nullptr;
  conv_forward_chunks(k, x, w, bias, ph, pw, chunk, [&](int64_t b0, int64_t nb, auto *conv) {
    using S = std::remove_pointer_t<decltype(conv)>;
    pool_planes(conv, y.data_ptr<S>() + b0 * pooled, ip == nullptr ? nullptr : ip + b0 * pooled, nb * cout, ho, wo);
  });
  if (idx_out != nullptr) *idx_out = idx;
  return y;
}

// conv_pool_forward: max_pool2x2(conv(x, w) + bias) (pool2x2.h: MaxPool2x2's window rule),
// its winners written to *idx_out when given.
at::Tensor conv_pool_forward(const Kernels *k, const at::Tensor &input, const at::Tensor &weight,
                             const at::Tensor &bias_in, int64_t ph, int64_t pw, at::Tensor *idx_out) {
  const int64_t ho = input.size(2) + 2 * ph - K + 1, wo = input.size(3) + 2 * pw - K + 1;
  return conv_pooled_forward<uint8_t>(
      k, input, weight, bias_in, ph, pw, ho, wo, ho / 2, wo / 2, kPoolChunk, idx_out,
      [](auto *conv, auto *out, uint8_t *win, int64_t planes, int64_t h, int64_t w) {
        ldt::pool2x2::pool_planes(conv, out, win, planes, h, w);
      });
}

// conv_maxpool_forward: max_pool2d(conv(x, w) + bias, a), pooled by max_pool2d_direct's loop
// (maxpool.h), whose output size (pho, pwo) the caller has checked; the winners' indices (as
// max_pool2d_with_indices gives them) go to *idx_out when given.
at::Tensor conv_maxpool_forward(const Kernels *k, const at::Tensor &input, const at::Tensor &weight,
                                const at::Tensor &bias_in, int64_t ph, int64_t pw, const ldt::maxpool::Args &a,
                                int64_t pho, int64_t pwo, at::Tensor *idx_out) {
  const int64_t cout = weight.size(0), ho = input.size(2) + 2 * ph - K + 1, wo = input.size(3) + 2 * pw - K + 1;
  const int64_t chunk = std::max<int64_t>(1, kMaxPoolChunkBytes / (cout * ho * wo * input.element_size()));
  return conv_pooled_forward<int64_t>(
      k, input, weight, bias_in, ph, pw, ho, wo, pho, pwo, chunk, idx_out,
      [&a](auto *conv, auto *out, int64_t *ind, int64_t planes, int64_t h, int64_t w) {
        ldt::maxpool::pool_planes(conv, out, ind, planes, h, w, a);
      });
}

// conv_backward_chunks: the gradients with respect to x (into *gx, when given) and w (*gw) of
// conv(x, w) for an output gradient that is never written to memory whole: for each chunk of
// kChunk images, scatter(b0, nb, gy) adds the gradient of images [b0, b0 + nb) into the
// zeroed buffer gy (nb·cout·ho·wo), which is used there. The same values, summed in the same
// order, as back_input and back_weight of the whole gradient.
template <typename Scatter>
void conv_backward_chunks(const Kernels *k, const at::Tensor &x, const at::Tensor &weight, int64_t ph, int64_t pw,
                          const Scatter &scatter, at::Tensor *gx, at::Tensor *gw) {
  const int64_t n = x.size(0), lanes = 64 / static_cast<int64_t>(x.element_size());
  const Geom g = make_geom(x.size(1), weight.size(0), x.size(2), x.size(3), ph, pw, lanes);
  // The input gradient is the convolution of the output gradient (cout channels, ho×wo) with
  // the flipped, transposed weights and padding K−1−p.
  const Geom gi = make_geom(g.cout, g.cin, g.ho, g.wo, K - 1 - ph, K - 1 - pw, lanes);
  TORCH_CHECK(gi.ho == g.h && gi.wo == g.w, "conv5x5: input gradient geometry");
  const int64_t chunks = (n + kChunk - 1) / kChunk, m = g.cout * g.cin * K * K;
  at::Tensor wt, partial;
  if (gx != nullptr) {
    wt = weight.flip({2, 3}).transpose(0, 1).contiguous();
    *gx = at::empty({n, g.cin, g.h, g.w}, x.options());
  }
  if (gw != nullptr) {
    *gw = at::zeros({g.cout, g.cin, K, K}, x.options());
    if (chunks > 0) partial = at::empty({chunks, m}, x.options());
  }
  if (chunks == 0) return;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv5x5_backward_chunks", [&] {
    const auto &o = ops<scalar_t>(k);
    const scalar_t *xp = x.data_ptr<scalar_t>();
    const scalar_t *wtp = wt.defined() ? wt.data_ptr<scalar_t>() : nullptr;
    scalar_t *gxp = gx != nullptr ? gx->data_ptr<scalar_t>() : nullptr;
    scalar_t *pp = partial.defined() ? partial.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> gy(kChunk * g.cout * g.q);
      std::vector<scalar_t> scratch(std::max(kChunk * (g.xs_len + g.gyp_len) + g.plane_len, gi.xs_len + gi.plane_len));
      for (int64_t c = begin; c < end; c++) {
        const int64_t b0 = c * kChunk, nb = std::min(kChunk, n - b0);
        std::fill(gy.begin(), gy.begin() + nb * g.cout * g.q, scalar_t(0));
        scatter(b0, nb, gy.data());
        if (pp != nullptr) o.bwd_weight(&g, nb, xp + b0 * g.cin * g.h * g.w, gy.data(), pp + c * m, scratch.data());
        if (gxp != nullptr) o.fwd(&gi, nb, gy.data(), wtp, nullptr, gxp + b0 * g.cin * g.h * g.w, scratch.data());
      }
    });
    if (pp != nullptr) {
      scalar_t *out = gw->data_ptr<scalar_t>();
      for (int64_t j = 0; j < m; j++) out[j] = pp[j];
      for (int64_t c = 1; c < chunks; c++)
        for (int64_t j = 0; j < m; j++) out[j] += pp[c * m + j];
    }
  });
}

// conv_pool_backward: conv_backward_chunks of max_pool2x2(conv(x, w) + b) for the pooled
// gradient gp and the pool's winners idx.
void conv_pool_backward(const Kernels *k, const at::Tensor &input, const at::Tensor &weight, const at::Tensor &grad,
                        const at::Tensor &winners, int64_t ph, int64_t pw, at::Tensor *gx, at::Tensor *gw) {
  auto x = input.contiguous(), gp = grad.contiguous(), idx = winners.contiguous();
  const int64_t ho = x.size(2) + 2 * ph - K + 1, wo = x.size(3) + 2 * pw - K + 1, cout = weight.size(0);
  const int64_t pooled = cout * (ho / 2) * (wo / 2);
  TORCH_CHECK(gp.dim() == 4 && gp.size(0) == x.size(0) && gp.size(1) == cout && gp.size(2) == ho / 2 &&
                  gp.size(3) == wo / 2 && idx.sizes() == gp.sizes(),
              "conv5x5_pool2x2: pooled gradient of size ", gp.sizes(), " for an output of ", ho, "×", wo);
  const uint8_t *win = idx.data_ptr<uint8_t>();
  conv_backward_chunks(
      k, x, weight, ph, pw,
      [&](int64_t b0, int64_t nb, auto *gy) {
        using S = std::remove_pointer_t<decltype(gy)>;
        ldt::pool2x2::scatter_planes(gp.data_ptr<S>() + b0 * pooled, win + b0 * pooled, gy, nb * cout, ho, wo);
      },
      gx, gw);
}

// conv_maxpool_backward: conv_backward_chunks of max_pool2d(conv(x, w) + b) for the pooled
// gradient gp and the winners' indices idx (as max_pool2d_with_indices gives them).
void conv_maxpool_backward(const Kernels *k, const at::Tensor &input, const at::Tensor &weight,
                           const at::Tensor &grad, const at::Tensor &indices, int64_t ph, int64_t pw, at::Tensor *gx,
                           at::Tensor *gw) {
  auto x = input.contiguous(), gp = grad.contiguous(), idx = indices.contiguous();
  const int64_t ho = x.size(2) + 2 * ph - K + 1, wo = x.size(3) + 2 * pw - K + 1, cout = weight.size(0);
  TORCH_CHECK(gp.dim() == 4 && gp.size(0) == x.size(0) && gp.size(1) == cout && idx.sizes() == gp.sizes() &&
                  idx.scalar_type() == at::kLong,
              "conv5x5_max_pool2d: pooled gradient of size ", gp.sizes(), " for ", cout, " channels");
  const int64_t pq = gp.size(2) * gp.size(3), pooled = cout * pq;
  const int64_t *ip = idx.data_ptr<int64_t>();
  conv_backward_chunks(
      k, x, weight, ph, pw,
      [&](int64_t b0, int64_t nb, auto *gy) {
        using S = std::remove_pointer_t<decltype(gy)>;
        ldt::maxpool::scatter_planes(gp.data_ptr<S>() + b0 * pooled, ip + b0 * pooled, gy, nb * cout, pq, ho * wo);
      },
      gx, gw);
}

// pool_scatter places gp (n, c, H/2, W/2) at the winners of an (n, c, H, W) zero tensor;
// pool_select takes y (n, c, H, W) at the winners.
at::Tensor pool_scatter(const at::Tensor &grad, const at::Tensor &idx, int64_t H, int64_t W) {
  auto gp = grad.contiguous();
  auto y = at::zeros({gp.size(0), gp.size(1), H, W}, gp.options());
  const int64_t planes = gp.size(0) * gp.size(1), pq = (H / 2) * (W / 2);
  AT_DISPATCH_FLOATING_TYPES(gp.scalar_type(), "conv5x5_pool_scatter", [&] {
    const scalar_t *in = gp.data_ptr<scalar_t>();
    const uint8_t *win = idx.data_ptr<uint8_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    at::parallel_for(0, planes, 64, [&](int64_t begin, int64_t end) {
      ldt::pool2x2::scatter_planes(in + begin * pq, win + begin * pq, out + begin * H * W, end - begin, H, W);
    });
  });
  return y;
}

at::Tensor pool_select(const at::Tensor &input, const at::Tensor &idx) {
  auto y = input.contiguous();
  const int64_t H = y.size(2), W = y.size(3), planes = y.size(0) * y.size(1), pq = (H / 2) * (W / 2);
  auto out = at::empty(idx.sizes(), y.options());
  AT_DISPATCH_FLOATING_TYPES(y.scalar_type(), "conv5x5_pool_select", [&] {
    const scalar_t *in = y.data_ptr<scalar_t>();
    const uint8_t *win = idx.data_ptr<uint8_t>();
    scalar_t *o = out.data_ptr<scalar_t>();
    at::parallel_for(0, planes, 64, [&](int64_t begin, int64_t end) {
      ldt::pool2x2::select_planes(in + begin * H * W, win + begin * pq, o + begin * pq, end - begin, H, W);
    });
  });
  return out;
}

// The kernels a graph was recorded with are the ones its backward uses.
const Kernels *saved_kernels(AutogradContext *ctx) {
  return reinterpret_cast<const Kernels *>(ctx->saved_data["kernels"].toInt());
}
void save_kernels(AutogradContext *ctx, const Kernels *k) {
  ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(k);
}

struct Conv5x5BackInput;
struct Conv5x5BackWeight;

// Conv5x5 is conv(x, w); Conv5x5Bias adds the bias in the same pass. (Two functions: an
// undefined tensor cannot be an argument of a custom function in libtorch 1.13.)
struct Conv5x5 : public torch::autograd::Function<Conv5x5> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, int64_t ph, int64_t pw,
                            int64_t kernels) {
    const auto *k = reinterpret_cast<const Kernels *>(kernels);
    ctx->save_for_backward({x, w});
    save_kernels(ctx, k);
    ctx->saved_data["ph"] = ph;
    ctx->saved_data["pw"] = pw;
    return conv_forward(k, x, w, at::Tensor(), ph, pw);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

struct Conv5x5Bias : public torch::autograd::Function<Conv5x5Bias> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
                            int64_t ph, int64_t pw, int64_t kernels) {
    const auto *k = reinterpret_cast<const Kernels *>(kernels);
    ctx->save_for_backward({x, w});
    save_kernels(ctx, k);
    ctx->saved_data["ph"] = ph;
    ctx->saved_data["pw"] = pw;
    return conv_forward(k, x, w, b, ph, pw);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

struct Conv5x5BackInput : public torch::autograd::Function<Conv5x5BackInput> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &gy, const at::Tensor &w, int64_t ph, int64_t pw,
                            int64_t h, int64_t wd, int64_t kernels) {
    const auto *k = reinterpret_cast<const Kernels *>(kernels);
    ctx->save_for_backward({gy, w});
    save_kernels(ctx, k);
    ctx->saved_data["ph"] = ph;
    ctx->saved_data["pw"] = pw;
    return back_input(k, gy, w, ph, pw, h, wd);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

struct Conv5x5BackWeight : public torch::autograd::Function<Conv5x5BackWeight> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &gy, int64_t ph, int64_t pw,
                            int64_t kernels) {
    const auto *k = reinterpret_cast<const Kernels *>(kernels);
    ctx->save_for_backward({x, gy});
    save_kernels(ctx, k);
    ctx->saved_data["ph"] = ph;
    ctx->saved_data["pw"] = pw;
    return back_weight(k, x, gy, ph, pw);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

int64_t handle(const Kernels *k) { return reinterpret_cast<int64_t>(k); }

// y = conv(x, w) (+ b): dx = BackInput(gy, w), dw = BackWeight(x, gy) (, db = Σ gy).
variable_list conv_backward(AutogradContext *ctx, const at::Tensor &gy, bool bias) {
  auto saved = ctx->get_saved_variables();
  const auto &x = saved[0], &w = saved[1];
  const int64_t ph = ctx->saved_data["ph"].toInt(), pw = ctx->saved_data["pw"].toInt();
  const int64_t k = handle(saved_kernels(ctx));
  variable_list out;
  out.push_back(ctx->needs_input_grad(0) ? Conv5x5BackInput::apply(gy, w, ph, pw, x.size(2), x.size(3), k)
                                         : at::Tensor());
  out.push_back(ctx->needs_input_grad(1) ? Conv5x5BackWeight::apply(x, gy, ph, pw, k) : at::Tensor());
  if (bias) out.push_back(ctx->needs_input_grad(2) ? gy.sum({0, 2, 3}) : at::Tensor());
  out.resize(out.size() + 3);  // ph, pw, kernels
  return out;
}

variable_list Conv5x5::backward(AutogradContext *ctx, variable_list grads) {
  return conv_backward(ctx, grads[0], false);
}

variable_list Conv5x5Bias::backward(AutogradContext *ctx, variable_list grads) {
  return conv_backward(ctx, grads[0], true);
}

// gx = BackInput(gy, w) is conv's adjoint in x: for L = Σ gg·gx, dL/dgy = conv(gg, w) and
// dL/dw = BackWeight(gg, gy).
variable_list Conv5x5BackInput::backward(AutogradContext *ctx, variable_list grads) {
  auto saved = ctx->get_saved_variables();
  const auto &gy = saved[0], &w = saved[1];
  const int64_t ph = ctx->saved_data["ph"].toInt(), pw = ctx->saved_data["pw"].toInt();
  const int64_t k = handle(saved_kernels(ctx));
  const auto &gg = grads[0];
  at::Tensor dgy, dw;
  if (ctx->needs_input_grad(0)) dgy = Conv5x5::apply(gg, w, ph, pw, k);
  if (ctx->needs_input_grad(1)) dw = Conv5x5BackWeight::apply(gg, gy, ph, pw, k);
  return {dgy, dw, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
}

// gw = BackWeight(x, gy): for L = Σ gg·gw, dL/dx = BackInput(gy, gg) and dL/dgy = conv(x, gg).
variable_list Conv5x5BackWeight::backward(AutogradContext *ctx, variable_list grads) {
  auto saved = ctx->get_saved_variables();
  const auto &x = saved[0], &gy = saved[1];
  const int64_t ph = ctx->saved_data["ph"].toInt(), pw = ctx->saved_data["pw"].toInt();
  const int64_t k = handle(saved_kernels(ctx));
  const auto &gg = grads[0];
  at::Tensor dx, dgy;
  if (ctx->needs_input_grad(0)) dx = Conv5x5BackInput::apply(gy, gg, ph, pw, x.size(2), x.size(3), k);
  if (ctx->needs_input_grad(1)) dgy = Conv5x5::apply(x, gg, ph, pw, k);
  return {dx, dgy, at::Tensor(), at::Tensor(), at::Tensor()};
}

struct PoolSelect;

// PoolScatter(gp, idx) places the pooled gradient at the pool's winners; PoolSelect(y, idx)
// takes y at the winners. Both are linear and adjoint to each other, so each one's backward
// is the other (as pool2x2.cc's Scatter2x2 and Select2x2, without the pooled input).
struct PoolScatter : public torch::autograd::Function<PoolScatter> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &gp, const at::Tensor &idx, int64_t H, int64_t W) {
    ctx->save_for_backward({idx});
    ctx->saved_data["H"] = H;
    ctx->saved_data["W"] = W;
    return pool_scatter(gp, idx, H, W);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

struct PoolSelect : public torch::autograd::Function<PoolSelect> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &y, const at::Tensor &idx) {
    ctx->save_for_backward({idx});
    ctx->saved_data["H"] = y.size(2);
    ctx->saved_data["W"] = y.size(3);
    return pool_select(y, idx);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto idx = ctx->get_saved_variables()[0];
    return {PoolScatter::apply(grads[0], idx, ctx->saved_data["H"].toInt(), ctx->saved_data["W"].toInt()),
            at::Tensor()};
  }
};

variable_list PoolScatter::backward(AutogradContext *ctx, variable_list grads) {
  auto idx = ctx->get_saved_variables()[0];
  return {PoolSelect::apply(grads[0], idx), at::Tensor(), at::Tensor(), at::Tensor()};
}

// save_conv_pooled keeps what conv_pooled_backward reads.
void save_conv_pooled(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &idx,
                      const Kernels *k, int64_t ph, int64_t pw) {
  ctx->save_for_backward({x, w, idx});
  save_kernels(ctx, k);
  ctx->saved_data["ph"] = ph;
  ctx->saved_data["pw"] = pw;
}

// conv_pooled_backward is the backward of a convolution fused with a pool (ConvPool,
// ConvMaxPool), which save x, w and the pool's winners, and recomputes nothing: with a graph
// being recorded (a gradient taken with create_graph), scatter (the pool's adjoint, a custom
// function whose own adjoint is a gather) followed by the two convolution adjoints,
// differentiable again; otherwise fused, the chunked backward that never writes the
// convolution's gradient. The bias gradient is summed over the pooled gradient. settings:
// how many of the forward's arguments follow the three tensors.
template <typename Scatter, typename Fused>
variable_list conv_pooled_backward(AutogradContext *ctx, const at::Tensor &gp, size_t settings,
                                   const Scatter &scatter, const Fused &fused) {
  auto saved = ctx->get_saved_variables();
  const auto &x = saved[0], &w = saved[1], &idx = saved[2];
  const int64_t ph = ctx->saved_data["ph"].toInt(), pw = ctx->saved_data["pw"].toInt();
  const Kernels *k = saved_kernels(ctx);
  const bool dx = ctx->needs_input_grad(0), dw = ctx->needs_input_grad(1);
  at::Tensor gx, gw, gb;
  if (at::GradMode::is_enabled()) {
    const int64_t ho = x.size(2) + 2 * ph - K + 1, wo = x.size(3) + 2 * pw - K + 1;
    auto gy = scatter(gp, idx, ho, wo);
    if (dx) gx = Conv5x5BackInput::apply(gy, w, ph, pw, x.size(2), x.size(3), handle(k));
    if (dw) gw = Conv5x5BackWeight::apply(x, gy, ph, pw, handle(k));
  } else if (dx || dw) {
    fused(k, x, w, gp, idx, ph, pw, dx ? &gx : nullptr, dw ? &gw : nullptr);
  }
  if (ctx->needs_input_grad(2)) gb = gp.sum({0, 2, 3});
  variable_list out{gx, gw, gb};
  out.resize(out.size() + settings);
  return out;
}

// ConvPool(x, w, b) = max_pool2x2(conv(x, w) + b), b an empty tensor for none; backward:
// conv_pooled_backward with PoolScatter and conv_pool_backward.
struct ConvPool : public torch::autograd::Function<ConvPool> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
                            int64_t ph, int64_t pw, int64_t kernels) {
    const auto *k = reinterpret_cast<const Kernels *>(kernels);
    at::Tensor idx;
    auto y = conv_pool_forward(k, x, w, b.numel() > 0 ? b : at::Tensor(), ph, pw, &idx);
    save_conv_pooled(ctx, x, w, idx, k, ph, pw);
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    return conv_pooled_backward(
        ctx, grads[0], 3,
        [](const at::Tensor &gp, const at::Tensor &idx, int64_t h, int64_t w) {
          return PoolScatter::apply(gp, idx, h, w);
        },
        conv_pool_backward);
  }
};

struct MaxGather;

// MaxScatter(gp, idx, H, W) adds each pooled gradient into an (H, W) plane at its winner's
// index, in output order (max_pool2d_with_indices_backward's sums); MaxGather(y, idx) takes y
// at the indices. Both are linear and adjoint to each other, so each one's backward is the
// other (as PoolScatter and PoolSelect for the 2×2 pool's winners).
struct MaxScatter : public torch::autograd::Function<MaxScatter> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &gp, const at::Tensor &idx, int64_t H, int64_t W) {
    ctx->save_for_backward({idx});
    const int64_t planes = gp.size(0) * gp.size(1);
    auto y = at::zeros({gp.size(0), gp.size(1), H, W}, gp.options());
    y.view({planes, H * W}).scatter_add_(1, idx.reshape({planes, -1}), gp.reshape({planes, -1}));
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

struct MaxGather : public torch::autograd::Function<MaxGather> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &y, const at::Tensor &idx) {
    ctx->save_for_backward({idx});
    ctx->saved_data["H"] = y.size(2);
    ctx->saved_data["W"] = y.size(3);
    const int64_t planes = y.size(0) * y.size(1);
    return y.reshape({planes, -1}).gather(1, idx.reshape({planes, -1})).view(idx.sizes());
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto idx = ctx->get_saved_variables()[0];
    return {MaxScatter::apply(grads[0], idx, ctx->saved_data["H"].toInt(), ctx->saved_data["W"].toInt()),
            at::Tensor()};
  }
};

variable_list MaxScatter::backward(AutogradContext *ctx, variable_list grads) {
  auto idx = ctx->get_saved_variables()[0];
  return {MaxGather::apply(grads[0], idx), at::Tensor(), at::Tensor(), at::Tensor()};
}

// ConvMaxPool(x, w, b) = max_pool2d(conv(x, w) + b) with the pool's settings, b an empty
// tensor for none: the pooled output and its winners' indices from conv_maxpool_forward, the
// convolution's output never kept; backward: conv_pooled_backward with MaxScatter and
// conv_maxpool_backward.
struct ConvMaxPool : public torch::autograd::Function<ConvMaxPool> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
                            int64_t ph, int64_t pw, std::vector<int64_t> pool, bool ceil, int64_t kernels) {
    const auto *k = reinterpret_cast<const Kernels *>(kernels);
    const ldt::maxpool::Args a{pool[0], pool[1], pool[2], pool[3], pool[4], pool[5], ceil};
    int64_t ho = 0, wo = 0;
    const bool fits = ldt::maxpool::fits(x.size(2) + 2 * ph - K + 1, x.size(3) + 2 * pw - K + 1, a, &ho, &wo);
    TORCH_CHECK(fits, "conv5x5_max_pool2d: the pool does not fit the convolution's output");
    at::Tensor idx;
    auto y = conv_maxpool_forward(k, x, w, b.numel() > 0 ? b : at::Tensor(), ph, pw, a, ho, wo, &idx);
    save_conv_pooled(ctx, x, w, idx, k, ph, pw);
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    return conv_pooled_backward(
        ctx, grads[0], 5,
        [](const at::Tensor &gp, const at::Tensor &idx, int64_t h, int64_t w) {
          return MaxScatter::apply(gp, idx, h, w);
        },
        conv_maxpool_backward);
  }
};

// direct_conv is ldt_conv2d_direct.
at::Tensor direct_conv(const at::Tensor &in, const at::Tensor &wt, const at::Tensor &bt, at::IntArrayRef st,
                       at::IntArrayRef pad, at::IntArrayRef dil, int64_t groups) {
  const Kernels *k = active.load(std::memory_order_relaxed);
  if (!applies(k, in, wt, bt, st, pad, dil, groups)) {
    return at::conv2d(in, wt, bt.defined() ? ldt::optional<at::Tensor>(bt) : ldt::nullopt, st, pad, dil, groups);
  }
  if (at::GradMode::is_enabled() && (in.requires_grad() || wt.requires_grad() || (bt.defined() && bt.requires_grad())))
    return bt.defined() ? Conv5x5Bias::apply(in, wt, bt, pad[0], pad[1], handle(k))
                        : Conv5x5::apply(in, wt, pad[0], pad[1], handle(k));
  return conv_forward(k, in, wt, bt, pad[0], pad[1]);
}

}  // namespace

namespace ldt {
namespace kernels {

at::Tensor conv2d_direct(const at::Tensor &x, const at::Tensor &w, const at::Tensor &bias, at::IntArrayRef stride,
                         at::IntArrayRef padding, at::IntArrayRef dilation, int64_t groups) {
  return direct_conv(x, w, bias, stride, padding, dilation, groups);
}

at::Tensor conv2d_max_pool2x2(const at::Tensor &in, const at::Tensor &wt, const at::Tensor &bt, at::IntArrayRef st,
                              at::IntArrayRef pad, at::IntArrayRef dil, int64_t groups) {
  const Kernels *k = active.load(std::memory_order_relaxed);
  // The fused kernel needs an output of at least one 2×2 window.
  const bool fused = applies(k, in, wt, bt, st, pad, dil, groups) && in.size(2) + 2 * pad[0] - K + 1 >= 2 &&
                     in.size(3) + 2 * pad[1] - K + 1 >= 2;
  if (!fused) return ldt::pool2x2::max_pool2x2(direct_conv(in, wt, bt, st, pad, dil, groups));
  if (at::GradMode::is_enabled() && (in.requires_grad() || wt.requires_grad() || (bt.defined() && bt.requires_grad())))
    return ConvPool::apply(in, wt, bt.defined() ? bt : at::empty({0}, in.options()), pad[0], pad[1], handle(k));
  return conv_pool_forward(k, in, wt, bt, pad[0], pad[1], nullptr);
}

at::Tensor conv2d_max_pool2d(const at::Tensor &in, const at::Tensor &wt, const at::Tensor &bt, at::IntArrayRef st,
                             at::IntArrayRef pad, at::IntArrayRef dil, int64_t groups, at::IntArrayRef pk,
                             at::IntArrayRef ps, at::IntArrayRef pp, bool ceil_mode) {
  const Kernels *k = active.load(std::memory_order_relaxed);
  const ldt::maxpool::Args a{pk[0], pk[1], ps[0], ps[1], pp[0], pp[1], ceil_mode};
  // Settings max_pool2d rejects go to it, for its error.
  int64_t ho = 0, wo = 0;
  const bool fused = applies(k, in, wt, bt, st, pad, dil, groups) &&
                     ldt::maxpool::fits(in.size(2) + 2 * pad[0] - K + 1, in.size(3) + 2 * pad[1] - K + 1, a, &ho, &wo);
  if (!fused) return ldt::maxpool::max_pool2d_direct(direct_conv(in, wt, bt, st, pad, dil, groups), a);
  if (at::GradMode::is_enabled() &&
      (in.requires_grad() || wt.requires_grad() || (bt.defined() && bt.requires_grad()))) {
    const std::vector<int64_t> pool{a.kh, a.kw, a.sh, a.sw, a.ph, a.pw};
    return ConvMaxPool::apply(in, wt, bt.defined() ? bt : at::empty({0}, in.options()), pad[0], pad[1], pool, a.ceil,
                              handle(k));
  }
  return conv_maxpool_forward(k, in, wt, bt, pad[0], pad[1], a, ho, wo, nullptr);
}

const char *direct_conv_isa() {
  const Kernels *k = active.load();
  return k == nullptr ? "" : k->isa;
}

void set_direct_conv(const char *mode) {
  if (mode == nullptr) throw std::invalid_argument("null mode");
  const Kernels *k = nullptr;
  if (std::strcmp(mode, "off") == 0) {
    k = nullptr;
  } else if (std::strcmp(mode, "best") == 0) {
    if (detected == nullptr) throw std::invalid_argument("direct convolution: this CPU or build has no kernels");
    k = detected;
  } else if (std::strcmp(mode, "avx2") == 0 || std::strcmp(mode, "avx512") == 0) {
#if defined(LDT_CONV5_X86)
    const bool want512 = mode[3] == '5';
    if (detected == nullptr || (want512 && std::strcmp(detected->isa, "avx512") != 0))
      throw std::invalid_argument(std::string("direct convolution: this CPU has no ") + mode);
    k = want512 ? ldt::conv5::kernels_avx512() : ldt::conv5::kernels_avx2();
#else
    throw std::invalid_argument(std::string("direct convolution: built without ") + mode + " kernels");
#endif
  } else {
    throw std::invalid_argument(std::string("direct convolution: unknown mode \"") + mode +
                                "\" (off, best, avx2, avx512)");
  }
  active.store(k);
}

}  // namespace kernels
}  // namespace ldt
