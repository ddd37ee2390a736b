// maxpool.cc: max_pool2d's CPU forward for any kernel, stride, padding and ceil mode, with
// libtorch's own backward. libtorch 1.13's CPU max_pool2d_with_indices took 27 % of an
// AlexCifarNet LD RR meta-step for its two 3×3, stride-2 pools (≈ 13 ns per output element;
// docs/BENCHMARKS.md, prediction 15). The loop here is libtorch's (aten/src/ATen/native/cpu/
// MaxPoolKernel.cpp, cpu_max_pool): the same window bounds, scan order, initial index and
// rule `val > max || isnan(val)`, so values and indices are max_pool2d's bit for bit; it
// records the indices (and tracks the winning taps) only when a graph needs them, scans a row
// of windows side by side, splits a stride-2 row into its two phases in one contiguous read, and the
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

#include "internal.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct PoolArgs {
  int64_t kh, kw, sh, sw, ph, pw;
  bool ceil;
};

bool applies(const at::Tensor &x) {
  return x.defined() && x.device().is_cpu() && x.layout() == at::kStrided && x.dim() == 4 &&
         (x.scalar_type() == at::kFloat || x.scalar_type() == at::kDouble) && x.is_contiguous();
}

// pool returns max_pool2d(x) and, when idx_out is given, its indices (int64, h·W + w in the
// plane, as max_pool2d_with_indices gives them).
at::Tensor pool(const at::Tensor &x, const PoolArgs &a, at::Tensor *idx_out) {
  const int64_t planes = x.size(0) * x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Ho = at::native::pooling_output_shape<int64_t>(H, a.kh, a.ph, a.sh, 1, a.ceil);
  const int64_t Wo = at::native::pooling_output_shape<int64_t>(W, a.kw, a.pw, a.sw, 1, a.ceil);
  at::native::pool2d_shape_check(x, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, 1, 1, x.size(1), H, W, Ho, Wo,
                                 at::MemoryFormat::Contiguous);
  auto y = at::empty({x.size(0), x.size(1), Ho, Wo}, x.options());
  at::Tensor idx;
  if (idx_out != nullptr) idx = at::empty(y.sizes(), x.options().dtype(at::kLong));
  // Each window's candidates are scanned in libtorch's order, but the loops run over the
  // taps outside and the output columns inside, so that a row of windows is independent
  // chains of selects that vectorise. The padded row is split into sw phases (column
  // sw·c + r at phase r, position c), which makes tap kw of output column ow the contiguous
  // element ow + kw/sw of phase kw%sw. Out-of-bounds columns hold −∞, which never wins (−∞ >
  // best is false, and it is not NaN) while best starts at −∞ with the first in-bounds index,
  // as in libtorch. The winner is kept as its tap number, 32 bits wide as the values are.
  const int64_t wp = std::max((Wo - 1) * a.sw + a.kw, a.pw + W);  // padded row length
  const int64_t pc = (wp + a.sw - 1) / a.sw;                       // columns per phase
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "max_pool2d_direct", [&] {
    using tap_t = typename std::conditional<sizeof(scalar_t) == 4, int32_t, int64_t>::type;
    const scalar_t *in = x.data_ptr<scalar_t>();
    scalar_t *out = y.data_ptr<scalar_t>();
    int64_t *ind = idx.defined() ? idx.data_ptr<int64_t>() : nullptr;
    at::parallel_for(0, planes, 16, [&](int64_t begin, int64_t end) {
      const scalar_t ninf = -std::numeric_limits<scalar_t>::infinity();
      std::vector<scalar_t> phases(H * a.sw * pc, ninf), best(Wo);
      std::vector<tap_t> tap(Wo);
      for (int64_t p = begin; p < end; p++) {
        const scalar_t *plane = in + p * H * W;
        for (int64_t r = 0; r < H; r++) {
          int64_t ph = 0;
          if (a.sw == 2) {
            // Both phases from one contiguous read of the row (the strided copies below
            // stalled on every load of a plane that is not in cache yet): the columns whose
            // two padded positions 2c and 2c + 1 are both in the row, then the rest.
            scalar_t *d0 = phases.data() + (r * 2) * pc, *d1 = d0 + pc;
            const scalar_t *src = plane + r * W - a.pw;
            const int64_t c0 = (a.pw + 1) / 2, c1 = std::min(pc, (W + a.pw - 1) / 2);
            for (int64_t c = c0; c < c1; c++) {
              d0[c] = src[2 * c];
              d1[c] = src[2 * c + 1];
            }
            for (int64_t q : {int64_t{0}, 2 * c1}) {
              for (const int64_t qe = q == 0 ? 2 * c0 : 2 * pc; q < qe; q++) {
                if (q - a.pw >= 0 && q - a.pw < W) (q % 2 == 0 ? d0 : d1)[q / 2] = src[q];
              }
            }
            ph = 2;
          }
          for (; ph < a.sw; ph++) {
            // Phase ph holds padded columns sw·c + ph, i.e. input columns sw·c + ph − pw.
            scalar_t *dst = phases.data() + (r * a.sw + ph) * pc;
            const scalar_t *src = plane + r * W + ph - a.pw;
            const int64_t c0 = a.pw > ph ? (a.pw - ph + a.sw - 1) / a.sw : 0;
            const int64_t c1 = std::min(pc, (W + a.pw - ph + a.sw - 1) / a.sw);
            for (int64_t c = c0; c < c1; c++) dst[c] = src[c * a.sw];
          }
        }
        for (int64_t oh = 0; oh < Ho; oh++) {
          int64_t ih0 = oh * a.sh - a.ph;
          const int64_t ih1 = std::min(ih0 + a.kh, H);
          ih0 = std::max<int64_t>(ih0, 0);
          scalar_t *bp = best.data();
          tap_t *tp = tap.data();
          for (int64_t ow = 0; ow < Wo; ow++) {
            bp[ow] = ninf;
            tp[ow] = -1;
          }
          for (int64_t ih = ih0; ih < ih1; ih++) {
            for (int64_t kw = 0; kw < a.kw; kw++) {
              const scalar_t *src = phases.data() + (ih * a.sw + kw % a.sw) * pc + kw / a.sw;
              const tap_t t = static_cast<tap_t>((ih - ih0) * a.kw + kw);
              if (ind == nullptr) {  // values only: the same winners, no taps to keep
                for (int64_t ow = 0; ow < Wo; ow++) {
                  const scalar_t v = src[ow], b = bp[ow];
                  bp[ow] = (v > b) | (v != v) ? v : b;
                }
                continue;
              }
              for (int64_t ow = 0; ow < Wo; ow++) {
                const scalar_t v = src[ow], b = bp[ow];
                const bool take = (v > b) | (v != v);
                bp[ow] = take ? v : b;
                tp[ow] = take ? t : tp[ow];
              }
            }
          }
          scalar_t *o = out + (p * Ho + oh) * Wo;
          for (int64_t ow = 0; ow < Wo; ow++) o[ow] = bp[ow];
          if (ind != nullptr) {
            int64_t *io = ind + (p * Ho + oh) * Wo;
            for (int64_t ow = 0; ow < Wo; ow++) {
              const int64_t t = tp[ow], c0 = ow * a.sw - a.pw;
              io[ow] = t < 0 ? ih0 * W + std::max<int64_t>(c0, 0) : (ih0 + t / a.kw) * W + c0 + t % a.kw;
            }
          }
        }
      }
    });
  });
  if (idx_out != nullptr) *idx_out = idx;
  return y;
}

struct MaxPool2dDirect : public torch::autograd::Function<MaxPool2dDirect> {
  static at::Tensor forward(AutogradContext *ctx, const at::Tensor &x, int64_t kh, int64_t kw, int64_t sh, int64_t sw,
                            int64_t ph, int64_t pw, bool ceil) {
    at::Tensor idx;
    auto y = pool(x, PoolArgs{kh, kw, sh, sw, ph, pw, ceil}, &idx);
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

extern "C" {

ldt_error ldt_max_pool2d_direct(ldt_tensor *out, ldt_tensor x, const int64_t *kernel, const int64_t *stride,
                                const int64_t *padding, int ceil_mode) {
  LDT_TRY {
    if (kernel == nullptr || stride == nullptr || padding == nullptr)
      throw std::invalid_argument("null (h, w) pair");
    auto &in = ldt::T(x);
    const PoolArgs a{kernel[0], kernel[1], stride[0], stride[1], padding[0], padding[1], ceil_mode != 0};
    if (!applies(in)) {
      const int64_t one[2] = {1, 1};
      ldt::set_out(out, at::max_pool2d(in, at::IntArrayRef(kernel, 2), at::IntArrayRef(stride, 2),
                                       at::IntArrayRef(padding, 2), at::IntArrayRef(one, 2), ceil_mode != 0));
    } else if (at::GradMode::is_enabled() && in.requires_grad()) {
      ldt::set_out(out, MaxPool2dDirect::apply(in, a.kh, a.kw, a.sh, a.sw, a.ph, a.pw, a.ceil));
    } else {
      ldt::set_out(out, pool(in, a, nullptr));
    }
  }
  LDT_CATCH
}

}  // extern "C"
