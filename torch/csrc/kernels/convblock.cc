// convblock.cc: ConvNet-3's block, avg_pool2d(relu(group_norm(conv2d(x), C)), 2), as one call.
// Its first block turns each 1×28×28 or 3×32×32 image into 128 planes of 32×32 (512 KB of
// float32) that libtorch's ops then pass over four times, each pass out of cache, and again
// in the backward; with the slow 1-channel convolution they were about half of ConvNet-3's
// forward and training step on the CPU (one thread, libtorch 1.13: docs/benchmarks/convnet.md#the-convnet-3-block-fused).
// Here the loops of simd_kernels.h do the block plane by plane in cache:
// for inputs of few channels the convolution too, one image at a time (the backward
// recomputes each plane rather than keep 512 KB per image); for the others libtorch's
// convolution, then one pass per output plane (and libtorch's convolution backward).
//
// With a graph, ConvNormReluPoolFn keeps each plane's mean and rstd and runs the loops'
// first-order backward; a backward that must itself be differentiable (LD's inner step)
// differentiates the four ATen ops instead, so every higher derivative is autograd's. On
// other devices and types it is the four ops, so CUDA runs libtorch's kernels. The loops
// agree with the four ops within rounding (the convolution's sums in another order, the
// statistics in double).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include "common.h"
#include "simd.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

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

// graphWanted says whether autograd records this call.
bool graphWanted(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, const at::Tensor &gamma,
                 const at::Tensor &beta) {
  return at::GradMode::is_enabled() && (x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad()) ||
                                        gamma.requires_grad() || beta.requires_grad());
}

// fusable says whether the loops apply: contiguous CPU float32/float64 tensors of one type
// and the shapes of a convolution with stride 1 whose output holds at least one 2×2 window;
// anything else goes to the ATen ops (for their errors too).
bool fusable(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, at::IntArrayRef pad,
             const at::Tensor &gamma, const at::Tensor &beta) {
  if (!ldt::dense_cpu_4d(x) || w.dim() != 4 || !w.is_contiguous() || w.scalar_type() != x.scalar_type() ||
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

ldt::simd::BlockGeom geometry(const at::Tensor &x, const at::Tensor &w, at::IntArrayRef pad, double eps) {
  const int64_t Ho = x.size(2) + 2 * pad[0] - w.size(2) + 1, Wo = x.size(3) + 2 * pad[1] - w.size(3) + 1;
  return ldt::simd::BlockGeom{x.size(1), x.size(2), x.size(3), w.size(2), w.size(3), pad[0], pad[1],
                              w.size(0), Ho, Wo, Ho / 2, Wo / 2, eps};
}

// convolvesItself says whether the per-image loops do the convolution (few input channels).
bool convolvesItself(const ldt::simd::BlockGeom &g) { return g.Cin <= kFusedConvChannels; }

// fused is the block by the loops. With stats (a graph is recorded) it also returns each
// output plane's mean and rstd (N, Cout, 2, float64) and, where libtorch convolves, that
// convolution's output (for the backward).
at::Tensor fused(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, at::IntArrayRef pad,
                 const at::Tensor &gamma, const at::Tensor &beta, double eps, at::Tensor *stats, at::Tensor *conv) {
  const ldt::simd::BlockGeom g = geometry(x, w, pad, eps);
  const int64_t N = x.size(0);
  auto y = at::empty({N, g.Cout, g.Hp, g.Wp}, x.options());
  at::Tensor st;
  if (stats != nullptr) st = *stats = at::empty({N, g.Cout, 2}, x.options().dtype(at::kDouble));
  double *sp = st.defined() ? st.data_ptr<double>() : nullptr;
  const ldt::simd::Kernels *k = ldt::simd_kernels();
  if (convolvesItself(g)) {
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_norm_relu_pool", [&] {
      const auto &op = block_ops(k, static_cast<const scalar_t *>(nullptr));
      const scalar_t *in = x.data_ptr<scalar_t>(), *wt = w.data_ptr<scalar_t>();
      const scalar_t *bs = b.defined() ? b.data_ptr<scalar_t>() : nullptr;
      const scalar_t *ga = gamma.data_ptr<scalar_t>(), *be = beta.data_ptr<scalar_t>();
      scalar_t *out = y.data_ptr<scalar_t>();
      at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
        std::vector<scalar_t> padded(g.Cin * (g.H + 2 * g.ph) * (g.W + 2 * g.pw)), plane(g.Ho * g.Wo), row(4 * g.Wp);
        for (int64_t n = begin; n < end; n++)
          op.image(in + n * g.Cin * g.H * g.W, wt, bs, ga, be, &g, out + n * g.Cout * g.Hp * g.Wp, padded.data(),
                   plane.data(), row.data(), sp != nullptr ? sp + n * g.Cout * 2 : nullptr);
      });
    });
    return y;
  }
  const auto c = at::conv2d(x, w, b, 1, pad).contiguous();
  if (conv != nullptr) *conv = c;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_norm_relu_pool", [&] {
    const auto &op = block_ops(k, static_cast<const scalar_t *>(nullptr));
    const scalar_t *in = c.data_ptr<scalar_t>();
    const scalar_t *ga = gamma.data_ptr<scalar_t>(), *be = beta.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    at::parallel_for(0, N * g.Cout, 16, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> row(4 * g.Wp);
      op.planes(in, ga, be, begin, end, &g, out, row.data(), sp);
    });
  });
  return y;
}

// kChunk is how many images (per-image loops) or 16× as many planes one backward task
// takes: each task adds its gradients into accumulators of its own, summed in task order at
// the end, so that the gradients do not depend on the number of threads.
constexpr int64_t kChunk = 8;

// taskSums adds the backward tasks' accumulators (tasks rows of width values each) in task
// order and returns them as a tensor of x's type.
at::Tensor taskSums(const std::vector<double> &acc, int64_t tasks, size_t width, const at::Tensor &x) {
  std::vector<double> sum(width, 0.0);
  for (int64_t t = 0; t < tasks; t++)
    for (size_t i = 0; i < width; i++) sum[i] += acc[t * width + i];
  return at::tensor(sum, x.options().dtype(at::kDouble)).to(x.scalar_type());
}

// backward_fused is the first-order backward of fused for gout (N, Cout, Hp, Wp): the
// gradients of x (when wanted), w, bias (when defined), γ and β.
variable_list backward_fused(const at::Tensor &x, const at::Tensor &w, const at::Tensor &b, at::IntArrayRef pad,
                             const at::Tensor &gamma, const at::Tensor &beta, double eps, const at::Tensor &stats,
                             const at::Tensor &conv, const at::Tensor &gout, bool wantX) {
  const ldt::simd::BlockGeom g = geometry(x, w, pad, eps);
  const int64_t N = x.size(0), taps = g.kh * g.kw, nw = g.Cout * g.Cin * taps;
  const ldt::simd::Kernels *k = ldt::simd_kernels();
  const double *sp = stats.data_ptr<double>();
  at::Tensor dx, dw, db, dz;
  if (convolvesItself(g)) {
    const int64_t tasks = (N + kChunk - 1) / kChunk;
    // per task: dw, db, dγ, dβ
    std::vector<double> acc(tasks * (nw + 3 * g.Cout), 0.0);
    if (wantX) dx = at::empty_like(x);
    AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_norm_relu_pool_backward", [&] {
      const auto &op = block_ops(k, static_cast<const scalar_t *>(nullptr));
      const scalar_t *in = x.data_ptr<scalar_t>(), *wt = w.data_ptr<scalar_t>();
      const scalar_t *bs = b.defined() ? b.data_ptr<scalar_t>() : nullptr;
      const scalar_t *ga = gamma.data_ptr<scalar_t>(), *be = beta.data_ptr<scalar_t>();
      const scalar_t *go = gout.data_ptr<scalar_t>();
      scalar_t *dxp = dx.defined() ? dx.data_ptr<scalar_t>() : nullptr;
      const int64_t pd = g.Cin * (g.H + 2 * g.ph) * (g.W + 2 * g.pw);
      at::parallel_for(0, tasks, 1, [&](int64_t tb, int64_t te) {
        std::vector<scalar_t> padded(pd), dpadded(wantX ? pd : 0), plane(g.Ho * g.Wo), d(g.Ho * g.Wo), g2(g.Wo);
        for (int64_t t = tb; t < te; t++) {
          double *a = acc.data() + t * (nw + 3 * g.Cout);
          for (int64_t n = t * kChunk; n < std::min(N, (t + 1) * kChunk); n++)
            op.image_backward(in + n * g.Cin * g.H * g.W, wt, bs, ga, be, sp + n * g.Cout * 2,
                              go + n * g.Cout * g.Hp * g.Wp, &g, a, a + nw, a + nw + g.Cout, a + nw + 2 * g.Cout,
                              dxp != nullptr ? dxp + n * g.Cin * g.H * g.W : nullptr, padded.data(), plane.data(),
                              d.data(), dpadded.data(), g2.data());
        }
      });
    });
    auto all = taskSums(acc, tasks, nw + 3 * g.Cout, x);
    dw = all.narrow(0, 0, nw).reshape(w.sizes());
    if (b.defined()) db = all.narrow(0, nw, g.Cout);
    return {dx, dw, db, all.narrow(0, nw + g.Cout, g.Cout), all.narrow(0, nw + 2 * g.Cout, g.Cout)};
  }
  const int64_t planes = N * g.Cout, per = 16 * kChunk, tasks = (planes + per - 1) / per;
  std::vector<double> acc(tasks * 3 * g.Cout, 0.0);  // per task: db, dγ, dβ
  dz = at::empty_like(conv);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "conv_norm_relu_pool_backward", [&] {
    const auto &op = block_ops(k, static_cast<const scalar_t *>(nullptr));
    const scalar_t *in = conv.data_ptr<scalar_t>(), *go = gout.data_ptr<scalar_t>();
    const scalar_t *ga = gamma.data_ptr<scalar_t>(), *be = beta.data_ptr<scalar_t>();
    scalar_t *dzp = dz.data_ptr<scalar_t>();
    at::parallel_for(0, tasks, 1, [&](int64_t tb, int64_t te) {
      std::vector<scalar_t> g2(g.Wo);
      for (int64_t t = tb; t < te; t++) {
        double *a = acc.data() + t * 3 * g.Cout;
        op.planes_backward(in, ga, be, sp, go, t * per, std::min(planes, (t + 1) * per), &g, dzp, a, a + g.Cout,
                           a + 2 * g.Cout, g2.data());
      }
    });
  });
  auto gb = taskSums(acc, tasks, 3 * g.Cout, x);
  // The input's and weight's gradients are libtorch's convolution backward (as in the four
  // ops); the bias's is the loops' sum of dz, which does not depend on the threads.
  auto grads = at::convolution_backward(dz, x, w, c10::nullopt, {1, 1}, pad, {1, 1}, false, {0, 0}, 1,
                                        {wantX, true, false});
  return {std::get<0>(grads), std::get<1>(grads), b.defined() ? gb.narrow(0, 0, g.Cout) : at::Tensor(),
          gb.narrow(0, g.Cout, g.Cout), gb.narrow(0, 2 * g.Cout, g.Cout)};
}

// ConvNormReluPoolFn is the block with a graph: the loops forward (keeping the planes'
// statistics, and libtorch's convolution output where it convolves), the loops backward
// (first order); a backward that must itself be differentiable (create_graph) differentiates
// the four ops instead, so that every higher derivative is autograd's.
struct ConvNormReluPoolFn : public torch::autograd::Function<ConvNormReluPoolFn> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &w, const at::Tensor &b,
                            const at::Tensor &gamma, const at::Tensor &beta, int64_t ph, int64_t pw, double eps) {
    at::Tensor stats, conv;
    const std::vector<int64_t> pad{ph, pw};
    auto y = fused(x, w, b.numel() == 0 ? at::Tensor() : b, pad, gamma, beta, eps, &stats, &conv);
    ctx->save_for_backward({x, w, b, gamma, beta});
    ctx->saved_data["stats"] = stats;
    ctx->saved_data["conv"] = conv.defined() ? conv : at::empty({0}, x.options());
    ctx->saved_data["ph"] = ph;
    ctx->saved_data["pw"] = pw;
    ctx->saved_data["eps"] = eps;
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    const at::Tensor &x = s[0], &w = s[1], &gamma = s[3], &beta = s[4];
    const at::Tensor b = s[2].numel() == 0 ? at::Tensor() : s[2];
    const std::vector<int64_t> pad{ctx->saved_data["ph"].toInt(), ctx->saved_data["pw"].toInt()};
    const double eps = ctx->saved_data["eps"].toDouble();
    variable_list out;
    if (at::GradMode::is_enabled()) {
      std::vector<at::Tensor> inputs{x, w, gamma, beta};
      if (b.defined()) inputs.push_back(b);
      std::vector<at::Tensor> wrt;
      std::vector<size_t> slot;  // wrt[i] is inputs[slot[i]]
      for (size_t i = 0; i < inputs.size(); i++)
        if (inputs[i].requires_grad()) {
          wrt.push_back(inputs[i]);
          slot.push_back(i);
        }
      auto y = composed(x, w, b, pad, gamma, beta, eps);
      auto g = torch::autograd::grad({y}, wrt, {grads[0]}, /*retain_graph=*/true, /*create_graph=*/true,
                                     /*allow_unused=*/true);
      std::vector<at::Tensor> by(inputs.size());
      for (size_t i = 0; i < slot.size(); i++) by[slot[i]] = g[i];
      out = {by[0], by[1], b.defined() ? by[4] : at::Tensor(), by[2], by[3]};
    } else {
      auto conv = ctx->saved_data["conv"].toTensor();
      out = backward_fused(x, w, b, pad, gamma, beta, eps, ctx->saved_data["stats"].toTensor(), conv,
                           grads[0].contiguous(), ctx->needs_input_grad(0));
    }
    if (!ctx->needs_input_grad(0)) out[0] = at::Tensor();
    return {out[0], out[1], out[2], out[3], out[4], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace ldt {
namespace kernels {

at::Tensor conv_norm_relu_pool(const at::Tensor &in, const at::Tensor &wt, const at::Tensor &bt,
                               at::IntArrayRef padding, const at::Tensor &ga, const at::Tensor &be, double eps) {
  const std::vector<int64_t> pad{padding[0], padding[1]};
  if (!(eps >= 0)) throw std::invalid_argument("eps must be non-negative, got " + std::to_string(eps));
  if (!fusable(in, wt, bt, pad, ga, be)) return composed(in, wt, bt, pad, ga, be, eps);
  if (graphWanted(in, wt, bt, ga, be))
    return ConvNormReluPoolFn::apply(in, wt, bt.defined() ? bt : at::empty({0}, in.options()), ga, be, pad[0], pad[1],
                                     eps);
  return fused(in, wt, bt, pad, ga, be, eps, nullptr, nullptr);
}

}  // namespace kernels
}  // namespace ldt
