// lrn.cc: local_response_norm's CPU forward and backward, each one pass over an image. The
// composite of nn.cc (PyTorch's: square, pad, average pool, scale, pow, divide) makes seven
// passes over AlexCifarNet's 67 M-element activations per LRN and its backward as many again;
// with Sleef's pow they were a third of an AlexCifarNet LD meta-step (docs/BENCHMARKS.md,
// prediction 16). Here the window sums of an image's squares are formed in a buffer of
// C·H·W elements that stays in cache, in the composite's order (channel by channel, then
// divided by size), and y = x / (k + α·sum/size)^β. The backward is the closed form
//   dx_i = g_i / d_i − (2αβ/size) · x_i · Σ_{j : i ∈ window(j)} g_j·x_j / (d_j·s_j),
// s = k + α·sum/size, d = s^β. When a graph of the backward is wanted (the inner gradient
// of LD), the same formula is built from differentiable ATen ops instead, so that every
// higher derivative is autograd's.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cmath>
#include <vector>

#include "internal.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LRNArgs {
  int64_t size;
  double alpha, beta, k;
};

bool applies(const at::Tensor &x) {
  return x.defined() && x.device().is_cpu() && x.layout() == at::kStrided && x.dim() == 4 &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) && x.is_contiguous();
}

// scale fills s (C·P) with k + α·(Σ_{window(c)} x²)/size and d with s^β for one image x
// (C planes of P elements). The window of channel c is [c − size/2, c + (size−1)/2], cut at
// the edges (the composite's zero padding adds nothing).
template <typename T>
void scale(const T *x, int64_t C, int64_t P, const LRNArgs &a, T *s, T *d) {
  const T alpha = static_cast<T>(a.alpha), k = static_cast<T>(a.k), size = static_cast<T>(a.size);
  const bool b075 = a.beta == 0.75;
  const T beta = static_cast<T>(a.beta);
  for (int64_t c = 0; c < C; c++) {
    const int64_t lo = std::max<int64_t>(0, c - a.size / 2), hi = std::min<int64_t>(C - 1, c + (a.size - 1) / 2);
    T *sc = s + c * P;
    T *dc = d + c * P;
    for (int64_t p = 0; p < P; p++) sc[p] = 0;
    for (int64_t j = lo; j <= hi; j++) {
      const T *xj = x + j * P;
      for (int64_t p = 0; p < P; p++) sc[p] += xj[p] * xj[p];
    }
    for (int64_t p = 0; p < P; p++) sc[p] = sc[p] / size * alpha + k;
    // s^0.75 as √s·√√s: vectorised square roots instead of a pow per element.
    if (b075) {
      for (int64_t p = 0; p < P; p++) {
        const T r = std::sqrt(sc[p]);
        dc[p] = r * std::sqrt(r);
      }
    } else {
      for (int64_t p = 0; p < P; p++) dc[p] = std::pow(sc[p], beta);
    }
  }
}

// forward_direct is local_response_norm(x), or of relu(x) when relu is set (the ReLU read
// from the image once, in cache, instead of a pass of its own over the whole batch).
at::Tensor forward_direct(const at::Tensor &x, const LRNArgs &a, bool relu) {
  auto y = at::empty_like(x);
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "local_response_norm_direct", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> s(C * P), d(C * P), r(relu ? C * P : 0);
      for (int64_t n = begin; n < end; n++) {
        const scalar_t *xn = in + n * C * P;
        if (relu) {
          for (int64_t i = 0; i < C * P; i++) r[i] = xn[i] < 0 ? scalar_t(0) : xn[i];  // NaN stays NaN
          xn = r.data();
        }
        scalar_t *yn = out + n * C * P;
        scale(xn, C, P, a, s.data(), d.data());
        for (int64_t i = 0; i < C * P; i++) yn[i] = xn[i] / d[i];
      }
    });
  });
  return y;
}

at::Tensor backward_direct(const at::Tensor &x, const at::Tensor &g, const LRNArgs &a) {
  auto gx = at::empty_like(x);
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "local_response_norm_direct_backward", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    const scalar_t *gin = g.data_ptr<scalar_t>();
    scalar_t *out = gx.data_ptr<scalar_t>();
    const scalar_t coef = static_cast<scalar_t>(2 * a.alpha * a.beta / static_cast<double>(a.size));
    at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> s(C * P), d(C * P), acc(P);
      for (int64_t n = begin; n < end; n++) {
        const scalar_t *xn = in + n * C * P, *gn = gin + n * C * P;
        scalar_t *on = out + n * C * P;
        scale(xn, C, P, a, s.data(), d.data());
        // t_j = g_j·x_j/(d_j·s_j), kept in s; d becomes 1/d.
        for (int64_t i = 0; i < C * P; i++) {
          const scalar_t inv = 1 / d[i];
          s[i] = gn[i] * xn[i] * inv / s[i];
          d[i] = inv;
        }
        // Channel i takes t over [i − (size−1)/2, i + size/2]: the channels whose window holds i.
        for (int64_t c = 0; c < C; c++) {
          const int64_t lo = std::max<int64_t>(0, c - (a.size - 1) / 2), hi = std::min<int64_t>(C - 1, c + a.size / 2);
          for (int64_t p = 0; p < P; p++) acc[p] = 0;
          for (int64_t j = lo; j <= hi; j++) {
            const scalar_t *tj = s.data() + j * P;
            for (int64_t p = 0; p < P; p++) acc[p] += tj[p];
          }
          const scalar_t *xc = xn + c * P, *gc = gn + c * P, *ic = d.data() + c * P;
          scalar_t *oc = on + c * P;
          for (int64_t p = 0; p < P; p++) oc[p] = gc[p] * ic[p] - coef * xc[p] * acc[p];
        }
      }
    });
  });
  return gx;
}

// windowSum is Σ over channels [c − before, c + after] of t (N, C, H, W), from
// differentiable ops: the graph path of the backward.
at::Tensor windowSum(const at::Tensor &t, int64_t before, int64_t after) {
  const int64_t size = before + after + 1;
  auto v = at::constant_pad_nd(t.unsqueeze(1), {0, 0, 0, 0, before, after});
  return at::avg_pool3d(v, {size, 1, 1}, {1}).squeeze(1).mul(static_cast<double>(size));
}

at::Tensor backward_graph(const at::Tensor &x, const at::Tensor &g, const LRNArgs &a) {
  auto s = windowSum(x.mul(x), a.size / 2, (a.size - 1) / 2).div(static_cast<double>(a.size)).mul(a.alpha).add(a.k);
  auto d = s.pow(a.beta);
  auto t = g.mul(x).div(d.mul(s));
  return g.div(d).sub(x.mul(windowSum(t, (a.size - 1) / 2, a.size / 2)).mul(2 * a.alpha * a.beta / a.size));
}

struct LocalResponseNormDirect : public torch::autograd::Function<LocalResponseNormDirect> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t size, double alpha, double beta,
                            double k) {
    ctx->save_for_backward({x});
    ctx->saved_data["size"] = size;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["k"] = k;
    return forward_direct(x, LRNArgs{size, alpha, beta, k}, false);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto x = ctx->get_saved_variables()[0];
    const LRNArgs a{ctx->saved_data["size"].toInt(), ctx->saved_data["alpha"].toDouble(),
                    ctx->saved_data["beta"].toDouble(), ctx->saved_data["k"].toDouble()};
    at::Tensor gx;
    if (at::GradMode::is_enabled()) {
      gx = backward_graph(x, grads[0], a);
    } else {
      gx = backward_direct(x, grads[0].contiguous(), a);
    }
    return {gx, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

namespace ldt {

// local_response_norm_direct is local_response_norm (nn.cc) of x, or of relu(x) when relu
// is set, with the one-pass kernels for contiguous 4-d float32 and float64 CPU input (the
// ReLU fused where no graph is recorded); an undefined tensor for other input, which the
// caller runs through the composite.
at::Tensor local_response_norm_direct(const at::Tensor &x, int64_t size, double alpha, double beta, double k,
                                      bool relu) {
  if (!applies(x)) return at::Tensor();
  if (size < 1) throw std::invalid_argument("local_response_norm size must be positive");
  if (at::GradMode::is_enabled() && x.requires_grad())
    return LocalResponseNormDirect::apply(relu ? at::relu(x) : x, size, alpha, beta, k);
  return forward_direct(x, LRNArgs{size, alpha, beta, k}, relu);
}

}  // namespace ldt
