// optim.cc: Adam and SGD updates over caller-owned state tensors, written as PyTorch 1.13's
// single-tensor (foreach=False) torch.optim code so results match it step for step.
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <cmath>
#include <vector>

#include "internal.h"

namespace {
// adam_moments is the part of an Adam step both forms share: weight decay added to the
// gradients, then m ← β1·m + (1 − β1)·g and v ← β2·v + (1 − β2)·g², in place.
void adam_moments(const std::vector<at::Tensor> &p, std::vector<at::Tensor> g, std::vector<at::Tensor> &m,
                  std::vector<at::Tensor> &v, double beta1, double beta2, double weight_decay) {
  if (weight_decay != 0) g = at::_foreach_add(g, p, weight_decay);
  at::_foreach_mul_(m, beta1);
  at::_foreach_add_(m, g, 1 - beta1);
  at::_foreach_mul_(v, beta2);
  at::_foreach_addcmul_(v, g, g, 1 - beta2);
}
}  // namespace

extern "C" {

ldt_error ldt_adam_step(const ldt_tensor *params, const ldt_tensor *grads, const ldt_tensor *exp_avg,
                        const ldt_tensor *exp_avg_sq, int n, int64_t step, double lr, double beta1, double beta2,
                        double eps, double weight_decay) {
  LDT_TRY {
    if (step < 1) throw std::invalid_argument("adam step count must start at 1");
    if (n > 0 && (params == nullptr || grads == nullptr || exp_avg == nullptr || exp_avg_sq == nullptr))
      throw std::invalid_argument("null list");
    at::NoGradGuard no_grad;
    const double bias_correction1 = 1 - std::pow(beta1, static_cast<double>(step));
    const double bias_correction2 = 1 - std::pow(beta2, static_cast<double>(step));
    const double step_size = lr / bias_correction1;
    const double bias_correction2_sqrt = std::sqrt(bias_correction2);
    // The single-tensor update of every parameter, through libtorch's _foreach_ ops: on the
    // CPU they loop over the same per-tensor ops (bit for bit the loop they replace); on a
    // GPU they launch each step for all parameters at once, where the loop launched eight
    // kernels per parameter (a LeNet: 80 launches for arithmetic on 62k numbers).
    std::vector<at::Tensor> p, g, m, v;
    for (int i = 0; i < n; i++) {
      if (grads[i] == nullptr) continue;
      p.push_back(ldt::T(params[i]));
      g.push_back(ldt::T(grads[i]));
      m.push_back(ldt::T(exp_avg[i]));
      v.push_back(ldt::T(exp_avg_sq[i]));
    }
    if (p.empty()) return nullptr;
    adam_moments(p, g, m, v, beta1, beta2, weight_decay);
    auto denom = at::_foreach_sqrt(v);
    at::_foreach_div_(denom, bias_correction2_sqrt);
    at::_foreach_add_(denom, eps);
    at::_foreach_addcdiv_(p, m, denom, -step_size);
  }
  LDT_CATCH
}

ldt_error ldt_adam_step_capturable(const ldt_tensor *params, const ldt_tensor *grads, const ldt_tensor *exp_avg,
                                   const ldt_tensor *exp_avg_sq, int n, ldt_tensor step, double lr, double beta1,
                                   double beta2, double eps, double weight_decay) {
  LDT_TRY {
    if (n > 0 && (params == nullptr || grads == nullptr || exp_avg == nullptr || exp_avg_sq == nullptr))
      throw std::invalid_argument("null list");
    if (step == nullptr) throw std::invalid_argument("null step tensor");
    at::NoGradGuard no_grad;
    auto count = ldt::T(step);
    if (count.numel() != 1 || count.scalar_type() != at::kDouble)
      throw std::invalid_argument("the step count must be a 1-element float64 tensor");
    std::vector<at::Tensor> p, g, m, v;
    for (int i = 0; i < n; i++) {
      if (grads[i] == nullptr) throw std::invalid_argument("a capturable Adam step needs every gradient");
      p.push_back(ldt::T(params[i]));
      g.push_back(ldt::T(grads[i]));
      m.push_back(ldt::T(exp_avg[i]));
      v.push_back(ldt::T(exp_avg_sq[i]));
      if (count.device() != p.back().device())
        throw std::invalid_argument("the step count is on " + count.device().str() + ", a parameter on " +
                                    p.back().device().str());
    }
    if (p.empty()) return nullptr;
    // The bias corrections from the count on the device, in float64 as the host computes
    // them in ldt_adam_step: step_size = lr / (1 − β1^t), and √(1 − β2^t).
    count.add_(1);
    auto neg_step_size = at::pow(beta1, count).sub_(1).reciprocal_().mul_(lr);  // −lr / (1 − β1^t)
    auto bias_correction2_sqrt = at::pow(beta2, count).neg_().add_(1).sqrt_();
    adam_moments(p, g, m, v, beta1, beta2, weight_decay);
    auto denom = at::_foreach_sqrt(v);
    for (size_t i = 0; i < p.size(); i++) {
      denom[i].div_(bias_correction2_sqrt).add_(eps);
      p[i].add_(m[i].div(denom[i]).mul_(neg_step_size));
    }
  }
  LDT_CATCH
}

ldt_error ldt_sgd_step(const ldt_tensor *params, const ldt_tensor *grads, const ldt_tensor *bufs, int n,
                       int first_step, double lr, double momentum, double dampening, double weight_decay,
                       int nesterov) {
  LDT_TRY {
    if (n > 0 && (params == nullptr || grads == nullptr)) throw std::invalid_argument("null list");
    if (momentum != 0 && bufs == nullptr) throw std::invalid_argument("momentum needs buffers");
    at::NoGradGuard no_grad;
    // As in ldt_adam_step: _foreach_ ops, the same per-tensor ops on the CPU.
    std::vector<at::Tensor> p, d, buf;
    for (int i = 0; i < n; i++) {
      if (grads[i] == nullptr) continue;
      p.push_back(ldt::T(params[i]));
      d.push_back(ldt::T(grads[i]));
      if (momentum != 0) buf.push_back(ldt::T(bufs[i]));
    }
    if (p.empty()) return nullptr;
    if (weight_decay != 0) d = at::_foreach_add(d, p, weight_decay);
    if (momentum != 0) {
      if (first_step) {
        for (size_t i = 0; i < buf.size(); i++) buf[i].copy_(d[i]);  // no _foreach_copy_ in 1.13
      } else {
        at::_foreach_mul_(buf, momentum);
        at::_foreach_add_(buf, d, 1 - dampening);
      }
      d = nesterov ? at::_foreach_add(d, buf, momentum) : buf;
    }
    at::_foreach_add_(p, d, -lr);
  }
  LDT_CATCH
}

}  // extern "C"
