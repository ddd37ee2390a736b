// lrn.cc: local_response_norm's CPU forward and backward, each one pass over an image. The
// composite of nn.cc (PyTorch's: square, pad, average pool, scale, pow, divide) makes seven
// passes over AlexCifarNet's 67 M-element activations per LRN and its backward as many again;
// with Sleef's pow they were a third of an AlexCifarNet LD meta-step (docs/benchmarks/alexcifarnet-kernels.md#a-local-response-normalisation-kernel).
// Here each image is one call of the loops of simd_kernels.h (one pass
// forward, one backward, over buffers of C·H·W elements that stay in cache). When a graph
// of the backward is wanted (the inner gradient of LD), the same closed form is built from
// differentiable ATen ops instead, so that every higher derivative is autograd's.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "common.h"
#include "simd.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using ldt::simd::LRNArgs;

// The loops in use (simd_kernels.h, for the LRN here, the max-pool of maxpool.cc and the
// ConvNet-3 block of convblock.cc): AVX2 where the CPU has it and FMA, unless
// ldt_set_simd_isa says otherwise; both give the same bits.
const ldt::simd::Kernels *best_kernels() {
  const ldt::simd::Kernels *k = ldt::simd::kernels_avx2();
#if defined(__x86_64__)
  if (k != nullptr && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return k;
#endif
  return ldt::simd::kernels_baseline();
}

std::atomic<const ldt::simd::Kernels *> active{best_kernels()};

template <typename T>
const ldt::simd::LRNOps<T> &ops(const ldt::simd::Kernels *k);
template <>
const ldt::simd::LRNOps<float> &ops<float>(const ldt::simd::Kernels *k) {
  return k->lrn_f;
}
template <>
const ldt::simd::LRNOps<double> &ops<double>(const ldt::simd::Kernels *k) {
  return k->lrn_d;
}

// forward_direct is local_response_norm(x), or of relu(x) when relu is set (the ReLU read
// from the image once, in cache, instead of a pass of its own over the whole batch).
at::Tensor forward_direct(const at::Tensor &x, const LRNArgs &a, bool relu) {
  auto y = at::empty_like(x);
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3);
  const ldt::simd::Kernels *k = active.load();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "local_response_norm_direct", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    const auto &op = ops<scalar_t>(k);
    at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> s(C * P), d(C * P), r(relu ? C * P : 0);
      for (int64_t n = begin; n < end; n++)
        op.forward(in + n * C * P, out + n * C * P, C, P, &a, relu ? 1 : 0, s.data(), d.data(), r.data());
    });
  });
  return y;
}

at::Tensor backward_direct(const at::Tensor &x, const at::Tensor &g, const LRNArgs &a) {
  auto gx = at::empty_like(x);
  const int64_t N = x.size(0), C = x.size(1), P = x.size(2) * x.size(3);
  const ldt::simd::Kernels *k = active.load();
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "local_response_norm_direct_backward", [&] {
    const scalar_t *in = x.data_ptr<scalar_t>();
    const scalar_t *gin = g.data_ptr<scalar_t>();
    scalar_t *out = gx.data_ptr<scalar_t>();
    const auto &op = ops<scalar_t>(k);
    at::parallel_for(0, N, 1, [&](int64_t begin, int64_t end) {
      std::vector<scalar_t> s(C * P), d(C * P), acc(P);
      for (int64_t n = begin; n < end; n++)
        op.backward(in + n * C * P, gin + n * C * P, out + n * C * P, C, P, &a, s.data(), d.data(), acc.data());
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

const ldt::simd::Kernels *simd_kernels() { return active.load(); }

namespace kernels {

// local_response_norm_direct is local_response_norm (nn.cc) of x, or of relu(x) when relu
// is set, with the one-pass kernels for contiguous 4-d float32 and float64 CPU input (the
// ReLU fused where no graph is recorded); an undefined tensor for other input, which the
// caller runs through the composite.
at::Tensor local_response_norm_direct(const at::Tensor &x, int64_t size, double alpha, double beta, double k,
                                      bool relu) {
  if (!ldt::dense_cpu_4d(x)) return at::Tensor();
  if (size < 1) throw std::invalid_argument("local_response_norm size must be positive");
  if (at::GradMode::is_enabled() && x.requires_grad())
    return LocalResponseNormDirect::apply(relu ? at::relu(x) : x, size, alpha, beta, k);
  return forward_direct(x, LRNArgs{size, alpha, beta, k}, relu);
}

void set_simd_isa(const char *mode) {
  if (mode == nullptr) throw std::invalid_argument("null ISA mode");
  if (std::strcmp(mode, "best") == 0) {
    active.store(best_kernels());
  } else if (std::strcmp(mode, "baseline") == 0) {
    active.store(ldt::simd::kernels_baseline());
  } else {
    throw std::invalid_argument(std::string("unknown ISA mode \"") + mode + "\" (want best or baseline)");
  }
}

const char *simd_isa() { return active.load() == ldt::simd::kernels_baseline() ? "baseline" : "avx2"; }

}  // namespace kernels
}  // namespace ldt
