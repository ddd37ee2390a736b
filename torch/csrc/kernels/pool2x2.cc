// pool2x2.cc: a fused CPU kernel for max_pool2d with kernel 2, stride 2, no padding, the
// only pooling LeNet uses. libtorch 1.13's CPU max_pool2d takes ≈ 17 ms (one thread) for
// the 1024×6×24×24 activations of a meta-step, ≈ 5 ns per element for a memory-bound op
// (docs/benchmarks/lenet-kernels.md#a-fused-2x2-max-pool). The kernel here reads each input element once.
//
// Exactness: values, winning positions and gradients are those of max_pool2d. Each window is
// scanned in max_pool2d's order (row-major) with its rule `v > best || isnan(v)`, so ties go
// to the first maximum and NaN propagates; the gradient goes to the recorded position, as
// max_pool2d_with_indices_backward sends it. Odd heights and widths drop the last row or
// column, as floor mode does.
//
// Autograd: three custom functions keep double backward (label distillation's inner step
// differentiates through the pooling of the base images):
//   MaxPool2x2(x)       → y, with the 0..3 winner of each window saved (uint8)
//   Scatter2x2(g, x, idx) → the gradient of MaxPool2x2/Select2x2 (g placed at the winners)
//   Select2x2(x, idx)   → x at the winners; the gradient of Scatter2x2
// Scatter and Select are linear and adjoint to each other, so each one's backward is the other.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common.h"
#include "pool2x2.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Planes per parallel task: one 24×24 plane is ≈ 2 µs of work.
constexpr int64_t kGrain = 64;

// Whether the fused kernel applies; otherwise max_pool2d does the work (CUDA, integer or
// half types, fewer than 4 dimensions, a plane smaller than one window).
bool fusable(const at::Tensor &x) {
  return x.device().is_cpu() && x.dim() == 4 && (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) &&
         x.size(2) >= 2 && x.size(3) >= 2 && x.layout() == at::kStrided;
}

// take is max_pool2d's rule for replacing the current maximum: larger, or NaN (v != v).
template <typename scalar_t>
inline bool take(scalar_t v, scalar_t best) {
  return (v > best) | (v != v);
}

// max_row pools one row of windows, branch-free so that the compiler vectorises it (on real
// activations the winner is unpredictable, and a branch per comparison cost 9× the time).
// The first element needs no comparison: against −∞ it wins unless it is −∞ itself, which
// leaves the same value and position.
template <typename scalar_t>
inline void max_row(const scalar_t *r0, const scalar_t *r1, scalar_t *o, int64_t Wo) {
  for (int64_t j = 0; j < Wo; j++) {
    const scalar_t a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
    scalar_t best = a;
    best = take(b, best) ? b : best;
    best = take(c, best) ? c : best;
    best = take(d, best) ? d : best;
    o[j] = best;
  }
}

// max_row_winners is max_row that also keeps each window's winner (0..3, row-major) in at:
// the position follows the maximum through the same selects, so it is max_pool2d's by
// construction (ties to the first, the last NaN). The winners are int32, as wide as a float,
// and pool_planes narrows them to bytes in bulk: a byte store here made GCC vectorise at 16
// lanes, more than LeNet's rows (14 and 5 windows) hold, so that only its scalar remainder ran.
// float rows of four or more windows take row4 below instead.
template <typename scalar_t>
inline void max_row_winners(const scalar_t *r0, const scalar_t *r1, scalar_t *o, int32_t *at, int64_t Wo) {
  for (int64_t j = 0; j < Wo; j++) {
    const scalar_t a = r0[2 * j], b = r0[2 * j + 1], c = r1[2 * j], d = r1[2 * j + 1];
    scalar_t best = a;
    int32_t w = 0;
    bool t = take(b, best);
    best = t ? b : best;
    w = t ? 1 : w;
    t = take(c, best);
    best = t ? c : best;
    w = t ? 2 : w;
    t = take(d, best);
    best = t ? d : best;
    w = t ? 3 : w;
    o[j] = best;
    at[j] = w;
  }
}

// V4 is four floats as a GCC vector (one SSE register on the baseline ISA), M4 its lanes'
// masks and winners.
typedef float V4 __attribute__((vector_size(16)));
typedef int32_t M4 __attribute__((vector_size(16)));

// windows4 computes the four windows [j, j + 4) of a row pair: their maxima into o and, when
// at is not null, their winners into at, with take's rule lane by lane (as max_row_winners).
// Two shuffles split each row's eight values into the windows' even and odd columns.
inline void windows4(const float *r0, const float *r1, int64_t j, float *o, int32_t *at) {
  const M4 even = {0, 2, 4, 6}, odd = {1, 3, 5, 7}, one = {1, 1, 1, 1};
  V4 x0, x1, y0, y1;
  __builtin_memcpy(&x0, r0 + 2 * j, sizeof(V4));
  __builtin_memcpy(&x1, r0 + 2 * j + 4, sizeof(V4));
  __builtin_memcpy(&y0, r1 + 2 * j, sizeof(V4));
  __builtin_memcpy(&y1, r1 + 2 * j + 4, sizeof(V4));
  const V4 b = __builtin_shuffle(x0, x1, odd), c = __builtin_shuffle(y0, y1, even), d = __builtin_shuffle(y0, y1, odd);
  V4 best = __builtin_shuffle(x0, x1, even);
  M4 w = {0, 0, 0, 0};
  M4 t = (b > best) | (b != b);
  best = t ? b : best;
  w = t ? one : w;
  t = (c > best) | (c != c);
  best = t ? c : best;
  w = t ? one + one : w;
  t = (d > best) | (d != d);
  best = t ? d : best;
  w = t ? one + one + one : w;
  __builtin_memcpy(o + j, &best, sizeof(V4));
  if (at != nullptr) __builtin_memcpy(at + j, &w, sizeof(M4));
}

// row4 is max_row (at null) or max_row_winners for float rows of at least four windows, four
// at a time; the last group ends at the row's end and may overlap the one before it, which
// it recomputes to the same values: no scalar remainder, whose selects GCC turns into
// branches that real activations mispredict (LeNet's rows are 14 and 5 windows wide).
inline void row4(const float *r0, const float *r1, float *o, int32_t *at, int64_t Wo) {
  for (int64_t j = 0;; j += 4) {
    if (j > Wo - 4) j = Wo - 4;
    windows4(r0, r1, j, o, at);
    if (j == Wo - 4) return;
  }
}

// The float overloads, which pool_planes<float> picks over the templates.
inline void max_row(const float *r0, const float *r1, float *o, int64_t Wo) {
  if (Wo < 4) return max_row<float>(r0, r1, o, Wo);
  row4(r0, r1, o, nullptr, Wo);
}

inline void max_row_winners(const float *r0, const float *r1, float *o, int32_t *at, int64_t Wo) {
  if (Wo < 4) return max_row_winners<float>(r0, r1, o, at, Wo);
  row4(r0, r1, o, at, Wo);
}

}  // namespace

namespace ldt {
namespace pool2x2 {

template <typename scalar_t>
void pool_planes(const scalar_t *in, scalar_t *out, uint8_t *win, int64_t planes, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  if (win == nullptr) {
    for (int64_t p = 0; p < planes; p++) {
      for (int64_t i = 0; i < Ho; i++) {
        const scalar_t *r0 = in + p * H * W + 2 * i * W;
        max_row(r0, r0 + W, out + (p * Ho + i) * Wo, Wo);
      }
    }
    return;
  }
  // The winners of consecutive rows are consecutive in win: they gather in at as int32 and
  // go to win as bytes whenever at is full.
  constexpr int64_t kAt = 1024;
  int32_t at[kAt];
  int64_t n = 0;
  const auto flush = [&] {
    for (int64_t q = 0; q < n; q++) win[q] = static_cast<uint8_t>(at[q]);
    win += n;
    n = 0;
  };
  for (int64_t p = 0; p < planes; p++) {
    for (int64_t i = 0; i < Ho; i++) {
      const scalar_t *r0 = in + p * H * W + 2 * i * W;
      scalar_t *o = out + (p * Ho + i) * Wo;
      for (int64_t j = 0; j < Wo; j += kAt) {
        const int64_t len = std::min(kAt, Wo - j);
        if (n + len > kAt) flush();
        max_row_winners(r0 + 2 * j, r0 + W + 2 * j, o + j, at + n, len);
        n += len;
      }
    }
  }
  flush();
}

template <typename scalar_t>
void select_planes(const scalar_t *in, const uint8_t *win, scalar_t *out, int64_t planes, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  for (int64_t p = 0; p < planes; p++) {
    for (int64_t i = 0; i < Ho; i++) {
      const scalar_t *r0 = in + p * H * W + 2 * i * W;
      for (int64_t j = 0; j < Wo; j++) {
        const int64_t q = (p * Ho + i) * Wo + j;
        const uint8_t k = win[q];
        out[q] = r0[(k >> 1) * W + 2 * j + (k & 1)];
      }
    }
  }
}

template <typename scalar_t>
void scatter_planes(const scalar_t *in, const uint8_t *win, scalar_t *out, int64_t planes, int64_t H, int64_t W) {
  const int64_t Ho = H / 2, Wo = W / 2;
  // One indexed store per window into the zero-filled output: branch-free. Writing the four
  // values of each window with selects compiled to branches and cost 3× more.
  for (int64_t p = 0; p < planes; p++) {
    for (int64_t i = 0; i < Ho; i++) {
      scalar_t *r0 = out + p * H * W + 2 * i * W;
      for (int64_t j = 0; j < Wo; j++) {
        const int64_t q = (p * Ho + i) * Wo + j;
        const uint8_t k = win[q];
        r0[(k >> 1) * W + 2 * j + (k & 1)] = in[q];
      }
    }
  }
}

template void pool_planes<float>(const float *, float *, uint8_t *, int64_t, int64_t, int64_t);
template void pool_planes<double>(const double *, double *, uint8_t *, int64_t, int64_t, int64_t);
template void select_planes<float>(const float *, const uint8_t *, float *, int64_t, int64_t, int64_t);
template void select_planes<double>(const double *, const uint8_t *, double *, int64_t, int64_t, int64_t);
template void scatter_planes<float>(const float *, const uint8_t *, float *, int64_t, int64_t, int64_t);
template void scatter_planes<double>(const double *, const uint8_t *, double *, int64_t, int64_t, int64_t);

}  // namespace pool2x2
}  // namespace ldt

namespace {

using ldt::pool2x2::pool_planes;
using ldt::pool2x2::scatter_planes;
using ldt::pool2x2::select_planes;

// pool computes y (N,C,H/2,W/2) and, when idx_out is given, the winner of each window.
at::Tensor pool(const at::Tensor &input, at::Tensor *idx_out) {
  auto x = input.contiguous();
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), Ho = H / 2, Wo = W / 2;
  auto y = at::empty({x.size(0), x.size(1), Ho, Wo}, x.options());
  at::Tensor idx;
  if (idx_out != nullptr) idx = at::empty({x.size(0), x.size(1), Ho, Wo}, x.options().dtype(at::kByte));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "max_pool2x2", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    uint8_t *win = idx.defined() ? idx.data_ptr<uint8_t>() : nullptr;
    at::parallel_for(0, planes, kGrain, [&](int64_t begin, int64_t end) {
      pool_planes(in + begin * H * W, out + begin * Ho * Wo, win == nullptr ? nullptr : win + begin * Ho * Wo,
                  end - begin, H, W);
    });
  });
  if (idx_out != nullptr) *idx_out = idx;
  return y;
}

// select returns x at the recorded winners: (N,C,H,W) → (N,C,H/2,W/2).
at::Tensor select(const at::Tensor &input, const at::Tensor &idx) {
  auto x = input.contiguous();
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3), Ho = idx.size(2), Wo = idx.size(3);
  auto y = at::empty(idx.sizes(), x.options());
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "select2x2", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    const uint8_t *win = idx.data_ptr<uint8_t>();
    at::parallel_for(0, planes, kGrain, [&](int64_t begin, int64_t end) {
      select_planes(in + begin * H * W, win + begin * Ho * Wo, out + begin * Ho * Wo, end - begin, H, W);
    });
  });
  return y;
}

// scatter places g (N,C,H/2,W/2) at the recorded winners of an (N,C,H,W) zero tensor.
at::Tensor scatter(const at::Tensor &grad, const at::Tensor &idx, int64_t H, int64_t W) {
  auto g = grad.contiguous();
  const int64_t planes = g.size(0) * g.size(1), Ho = g.size(2), Wo = g.size(3);
  // Zero-fill (a vectorised memset), then one indexed store per window.
  auto x = at::zeros({g.size(0), g.size(1), H, W}, g.options());
  AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "scatter2x2", [&] {
    const scalar_t *in = g.data_ptr<scalar_t>();
    scalar_t *out = x.data_ptr<scalar_t>();
    const uint8_t *win = idx.data_ptr<uint8_t>();
    at::parallel_for(0, planes, kGrain, [&](int64_t begin, int64_t end) {
      scatter_planes(in + begin * Ho * Wo, win + begin * Ho * Wo, out + begin * H * W, end - begin, H, W);
    });
  });
  return x;
}

struct Scatter2x2;

struct Select2x2 : public torch::autograd::Function<Select2x2> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, const at::Tensor &idx) {
    ctx->save_for_backward({idx});
    ctx->saved_data["x"] = x;  // only for its shape and options (see Scatter2x2)
    return select(x, idx);
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads);
};

// Scatter2x2 takes the pooled input x only for its shape, as max_pool2d's backward does:
// its result then has a gradient function whenever x requires one, and its derivative
// with respect to x is zeros (PyTorch's derivative of max_pool2d_with_indices_backward),
// so gradient-of-gradient calls behave exactly as with max_pool2d.
struct Scatter2x2 : public torch::autograd::Function<Scatter2x2> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &g, const at::Tensor &x, const at::Tensor &idx) {
    ctx->save_for_backward({idx});
    ctx->saved_data["x_sizes"] = x.sizes();
    return scatter(g, idx, x.size(2), x.size(3));
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto idx = ctx->get_saved_variables()[0];
    auto sizes = ctx->saved_data["x_sizes"].toIntVector();
    auto zeros = at::zeros(sizes, grads[0].options());
    return {Select2x2::apply(grads[0], idx), zeros, at::Tensor()};
  }
};

variable_list Select2x2::backward(AutogradContext *ctx, variable_list grads) {
  auto idx = ctx->get_saved_variables()[0];
  return {Scatter2x2::apply(grads[0], ctx->saved_data["x"].toTensor(), idx), at::Tensor()};
}

struct MaxPool2x2 : public torch::autograd::Function<MaxPool2x2> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x) {
    at::Tensor idx;
    auto y = pool(x, &idx);
    ctx->save_for_backward({x, idx});
    return y;
  }
  static variable_list backward(AutogradContext *ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    return {Scatter2x2::apply(grads[0], saved[0], saved[1])};
  }
};

}  // namespace

namespace ldt {
namespace pool2x2 {

at::Tensor max_pool2x2(const at::Tensor &in) {
  if (!fusable(in)) {
    const int64_t two[2] = {2, 2};
    return at::max_pool2d(in, at::IntArrayRef(two, 2));
  }
  if (at::GradMode::is_enabled() && in.requires_grad()) return MaxPool2x2::apply(in);
  return pool(in, nullptr);
}

}  // namespace pool2x2

namespace kernels {

at::Tensor max_pool2x2(const at::Tensor &x) { return ldt::pool2x2::max_pool2x2(x); }

}  // namespace kernels
}  // namespace ldt
