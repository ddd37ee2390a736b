// nn.cc: the neural-network ops the nets need: convolution, pooling, batch and local
// response normalisation, linear layers, softmax and the two cross-entropies.
#include <ATen/ATen.h>

#include "internal.h"
#include "kernels/kernels.h"

namespace {

at::IntArrayRef pair(const int64_t *p) {
  if (p == nullptr) throw std::invalid_argument("null (h, w) pair");
  return at::IntArrayRef(p, 2);
}

}  // namespace

namespace ldt {

// torch.nn.functional.local_response_norm, written with the same ATen ops so values and
// gradients match PyTorch: the average of squares over a window of `size` channels.
at::Tensor local_response_norm(const at::Tensor &x, int64_t size, double alpha, double beta, double k) {
  if (x.dim() < 3)
    throw std::invalid_argument("local_response_norm expects 3 or more dimensions, got " + std::to_string(x.dim()));
  if (size < 1) throw std::invalid_argument("local_response_norm size must be positive");
  auto div = x.mul(x).unsqueeze(1);
  if (x.dim() == 3) {
    div = at::constant_pad_nd(div, {0, 0, size / 2, (size - 1) / 2});
    div = at::avg_pool2d(div, {size, 1}, {1}).squeeze(1);
  } else {
    auto sizes = x.sizes();
    div = div.view({sizes[0], 1, sizes[1], sizes[2], -1});
    div = at::constant_pad_nd(div, {0, 0, 0, 0, size / 2, (size - 1) / 2});
    div = at::avg_pool3d(div, {size, 1, 1}, {1}).squeeze(1);
    div = div.view(sizes);
  }
  div = div.mul(alpha).add(k).pow(beta);
  return x.div(div);
}

}  // namespace ldt

extern "C" {

ldt_error ldt_conv2d(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias, const int64_t *stride,
                     const int64_t *padding, const int64_t *dilation, int64_t groups) {
  LDT_TRY {
    ldt::set_out(out, at::conv2d(ldt::T(x), ldt::T(w), ldt::opt(bias), pair(stride), pair(padding), pair(dilation),
                                 groups));
  }
  LDT_CATCH
}

ldt_error ldt_max_pool2d(ldt_tensor *out, ldt_tensor x, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, int ceil_mode) {
  LDT_TRY {
    const int64_t one[2] = {1, 1};
    ldt::set_out(out, at::max_pool2d(ldt::T(x), pair(kernel), pair(stride), pair(padding), pair(one), ceil_mode != 0));
  }
  LDT_CATCH
}

ldt_error ldt_avg_pool2d(ldt_tensor *out, ldt_tensor x, const int64_t *kernel, const int64_t *stride,
                         const int64_t *padding, int ceil_mode, int count_include_pad) {
  LDT_TRY {
    ldt::set_out(out, at::avg_pool2d(ldt::T(x), pair(kernel), pair(stride), pair(padding), ceil_mode != 0,
                                     count_include_pad != 0));
  }
  LDT_CATCH
}

ldt_error ldt_adaptive_avg_pool2d(ldt_tensor *out, ldt_tensor x, const int64_t *size) {
  LDT_TRY { ldt::set_out(out, at::adaptive_avg_pool2d(ldt::T(x), pair(size))); }
  LDT_CATCH
}

ldt_error ldt_batch_norm(ldt_tensor *out, ldt_tensor x, ldt_tensor weight, ldt_tensor bias,
                         ldt_tensor running_mean, ldt_tensor running_var, int training, double momentum,
                         double eps) {
  LDT_TRY {
    auto &in = ldt::T(x);
    if (in.dim() < 2) throw std::invalid_argument("batch_norm expects at least 2 dimensions (N, C, ...)");
    if (!training && (running_mean == nullptr || running_var == nullptr))
      throw std::invalid_argument("batch_norm in evaluation mode needs running_mean and running_var");
    ldt::set_out(out, at::batch_norm(in, ldt::opt(weight), ldt::opt(bias), ldt::opt(running_mean),
                                     ldt::opt(running_var), training != 0, momentum, eps, true));
  }
  LDT_CATCH
}

ldt_error ldt_local_response_norm(ldt_tensor *out, ldt_tensor x, int64_t size, double alpha, double beta,
                                  double k) {
  LDT_TRY { ldt::set_out(out, ldt::local_response_norm(ldt::T(x), size, alpha, beta, k)); }
  LDT_CATCH
}

ldt_error ldt_local_response_norm_direct(ldt_tensor *out, ldt_tensor x, int64_t size, double alpha, double beta,
                                         double k, int relu) {
  LDT_TRY {
    auto &in = ldt::T(x);
    auto y = ldt::kernels::local_response_norm_direct(in, size, alpha, beta, k, relu != 0);
    ldt::set_out(out, y.defined() ? y : ldt::local_response_norm(relu != 0 ? at::relu(in) : in, size, alpha, beta, k));
  }
  LDT_CATCH
}

ldt_error ldt_linear(ldt_tensor *out, ldt_tensor x, ldt_tensor w, ldt_tensor bias) {
  LDT_TRY { ldt::set_out(out, at::linear(ldt::T(x), ldt::T(w), ldt::opt(bias))); }
  LDT_CATCH
}

ldt_error ldt_softmax(ldt_tensor *out, ldt_tensor x, int64_t dim) {
  LDT_TRY { ldt::set_out(out, at::softmax(ldt::T(x), dim)); }
  LDT_CATCH
}

ldt_error ldt_log_softmax(ldt_tensor *out, ldt_tensor x, int64_t dim) {
  LDT_TRY { ldt::set_out(out, at::log_softmax(ldt::T(x), dim)); }
  LDT_CATCH
}

ldt_error ldt_cross_entropy(ldt_tensor *out, ldt_tensor logits, ldt_tensor target, int check_range) {
  LDT_TRY {
    auto &z = ldt::T(logits);
    auto &y = ldt::T(target);
    if (z.dim() != 2) throw std::invalid_argument("cross_entropy expects logits of shape (B, C)");
    if (y.scalar_type() != at::kLong) throw std::invalid_argument("cross_entropy expects int64 class indices");
    if (check_range) ldt::check_classes(y, z.size(1), "cross_entropy");
    ldt::set_out(out, at::cross_entropy_loss(z, y));
  }
  LDT_CATCH
}

ldt_error ldt_soft_cross_entropy(ldt_tensor *out, ldt_tensor logits, ldt_tensor probs) {
  LDT_TRY {
    auto &z = ldt::T(logits);
    auto &p = ldt::T(probs);
    if (z.dim() != 2 || !z.sizes().equals(p.sizes()))
      throw std::invalid_argument("soft_cross_entropy expects logits and probabilities of the same shape (B, C)");
    ldt::set_out(out, p.mul(at::log_softmax(z, 1)).sum(1).mean().neg());
  }
  LDT_CATCH
}

}  // extern "C"
