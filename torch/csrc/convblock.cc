// convblock.cc: ConvNet-3's block, avg_pool2d(relu(group_norm(conv2d(x), C)), 2), as one call.
// Its first block turns each 1×28×28 or 3×32×32 image into 128 planes of 32×32 (512 KB of
// float32) that libtorch's ops then pass over four times, each pass out of cache; with the
// slow 1-channel convolution they were two thirds of ConvNet-3's forward on the CPU (one
// thread, libtorch 1.13: docs/BENCHMARKS.md, prediction 43). Where no graph is recorded (a
// model scoring images, LD RR's target features) the loops of simd_kernels.h do the block
// plane by plane in cache: for inputs of few channels the convolution too, one image at a
// time; for the others libtorch's convolution, then one pass per output plane.
//
// Where a graph is wanted, and on other devices and types, it is the four ATen ops, so that
// every derivative is autograd's and CUDA runs libtorch's kernels. The fused loops agree
// with the four ops within rounding (the convolution's sums, the statistics in double).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "internal.h"
#include "simd.h"

namespace {

// kFusedConvChannels is the most input channels the per-image loop convolves itself: for
// images (1 or 3 channels) it beats oneDNN, whose kernels want many channels; the 128-channel
// layers keep libtorch's convolution.
constexpr int64_t kFusedConvChannels = 4;

const ldt::simd::BlockOps<float> &block_ops(const ldt::simd::Kernels *k, const float *) { return k->block_f; }
const ldt::simd::BlockOps<double> &block_ops(const ldt::simd::Kernels *k, const double *) { return k->block_d; }

at::Tensor composed(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, at::IntArrayRef pad,
                    const at::Tensor &gamma, const at::Tensor &beta, double eps) {
  auto y = at::conv2d(x, w, b, 1, pad);
  y = at::group_norm(y, y.size(1), gamma, beta, eps);
  return at::avg_pool2d(at::relu(y), {2, 2});
}

// fusable says whether the loops apply: no graph wanted, contiguous CPU float32/float64
// tensors of one type and the shapes of a convolution with stride 1 whose output holds at
// least one 2×2 window; anything else goes to the ATen ops (for their errors too).
bool fusable(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, at::IntArrayRef pad,
             const at::Tensor &gamma, const at::Tensor &beta) {
  const bool graph = at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad() ||
                                                    (b.defined() && b.requires_grad()) || gamma.requires_grad() ||
                                                    beta.requires_grad());
  if (graph || !ldt::dense_cpu_4d(x) || w.dim() != 4 || !w.is_contiguous() || w.scalar_type() != x.scalar_type() ||
      !w.device().is_cpu() || w.size(1) != x.size(1) || pad[0] < 0 || pad[1] < 0)
    return false;
  const int64_t C = w.size(0);
  for (const at::Tensor *t : {&gamma, &beta})
    if (!t->defined() || t->dim() != 1 || t->size(0) != C || !t->is_contiguous() || !t->device().is_cpu() ||
        t->scalar_type() != x.scalar_type())
      return false;
  if (b.defined() && (b.dim() != 1 || b.size(0) != C || !b.is_contiguous() || !b.device().is_cpu() ||
                      b.scalar_type() != x.scalar_type()))
    return false;
  const int64_t ho = x.size(2) + 2 * pad[0] - w.size(2) + 1, wo = x.size(3) + 2 * pad[1] - w.size(3) + 1;
  return C > 0 && x.size(0) > 0 && ho >= 2 && wo >= 2;
}

at::Tensor fused(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, at::IntArrayRef pad,
                 const at::Tensor &gamma, const at::Tensor &beta, double eps) {
  const int64_t N = x.size(0), Cin = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cout = w.size(0), kh = w.size(2), kw = w.size(3);
  const int64_t Ho = H + 2 * pad[0] - kh + 1, Wo = W + 2 * pad[1] - kw + 1;
  const ldt::simd::BlockGeom g{Cin, H, W, kh, kw, pad[0], pad[1], Cout, Ho, Wo, Ho / 2, Wo / 2, eps};
  auto y = at::empty({N, Cout, g.Hp, g.Wp}, x.options());
  const ldt::simd::Kernels *k = ldt::simd_kernels();
  if (Cin <= kFusedConvChannels) {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_norm_relu_pool", [&] {
      const auto &op = block_ops(k, static_cast<const scalar_t *>(nullptr));
      const scalar_t *in = x.data_ptr<scalar_t>(), *wt = w.data_ptr<scalar_t>();
      const scalar_t *bs = b.defined() ? b.data_ptr<scalar_t>() : nullptr;
      const scalar_t *ga = gamma.data_ptr<scalar_t>(), *be = beta.data_ptr<scalar_t>();
      scalar_t *out = y.data_ptr<scalar_t>();
      at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> padded(Cin * (H + 2 * pad[0]) * (W + 2 * pad[1])), plane(Ho * Wo), row(4 * g.Wp);
        for (int64_t n = begin; n < end; n++)
          op.image(in + n * Cin * H * W, wt, bs, ga, be, &g, out + n * Cout * g.Hp * g.Wp, padded.data(),
                   plane.data(), row.data());
      });
    });
    return y;
  }
  const auto c = at::conv2d(x, w, b, 1, pad).contiguous();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_norm_relu_pool", [&] {
    const auto &op = block_ops(k, static_cast<const scalar_t *>(nullptr));
    const scalar_t *in = c.data_ptr<scalar_t>();
    const scalar_t *ga = gamma.data_ptr<scalar_t>(), *be = beta.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    at::parallel_for(0, N * Cout, 16, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> row(4 * g.Wp);
      op.planes(in, ga, be, begin, end, &g, out, row.data());
    });
  });
  return y;
}

}  // namespace

extern "C" {

ldt_error ldt_conv_norm_relu_pool(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias,
                                  const int64_t *padding, ldt_tensor gamma, ldt_tensor beta, double eps) {
  LDT_TRY {
    auto &in = ldt::T(x), &wt = ldt::T(w), &ga = ldt::T(gamma), &be = ldt::T(beta);
    auto b = ldt::opt(bias);
    const at::Tensor bt = b ? *b : at::Tensor();
    const std::vector<int64_t> pad{padding[0], padding[1]};
    if (!(eps >= 0)) throw std::invalid_argument("conv_norm_relu_pool: eps must be non-negative, got " + std::to_string(eps));
    ldt::set_out(out, fusable(in, wt, bt, pad, ga, be) ? fused(in, wt, bt, pad, ga, be, eps)
                                                       : composed(in, wt, bt, pad, ga, be, eps));
  }
  LDT_CATCH
}

}  // extern "C"
