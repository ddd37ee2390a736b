// autograd.cc: requires_grad, backward, leaf gradients and torch.autograd.grad with
// create_graph (the second-order step of label distillation).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/variable.h>

#include "internal.h"

extern "C" {

ldt_error ldt_set_requires_grad(ldt_tensor t, int requires_grad) {
  LDT_TRY {
    auto &x = ldt::T(t);
    // As Python's requires_grad_(): libtorch's C++ call would silently ignore False on a
    // non-leaf (it still requires grad through its grad_fn).
    if (!x.is_leaf() && requires_grad == 0)
      throw std::invalid_argument(
          "you can only change requires_grad flags of leaf variables; use Detach to cut a computed tensor "
          "from the graph");
    x.set_requires_grad(requires_grad != 0);
  }
  LDT_CATCH
}

ldt_error ldt_backward(ldt_tensor t, ldt_tensor grad, int retain_graph, int create_graph) {
  LDT_TRY {
    auto &x = ldt::T(t);
    at::Tensor g;
    if (grad != nullptr) g = ldt::T(grad);
    x.backward(g, ldt::optional<bool>(retain_graph != 0), create_graph != 0);
  }
  LDT_CATCH
}

ldt_error ldt_grad_get(ldt_tensor *out, ldt_tensor t) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
    const auto &g = ldt::T(t).grad();
    *out = g.defined() ? ldt::H(g) : nullptr;
  }
  LDT_CATCH
}

ldt_error ldt_grad_clear(ldt_tensor t) {
  LDT_TRY { ldt::T(t).mutable_grad().reset(); }
  LDT_CATCH
}

ldt_error ldt_autograd_grad(ldt_tensor *out, const ldt_tensor *outputs, int n_out, const ldt_tensor *grad_outputs,
                            const ldt_tensor *inputs, int n_in, int retain_graph, int create_graph,
                            int allow_unused) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output buffer");
    auto outs = ldt::list(outputs, n_out);
    auto ins = ldt::list(inputs, n_in);
    std::vector<at::Tensor> gouts(outs.size());
    if (grad_outputs != nullptr)
      for (int i = 0; i < n_out; i++)
        if (grad_outputs[i] != nullptr) gouts[i] = ldt::T(grad_outputs[i]);
    auto grads = torch::autograd::grad(outs, ins, gouts, ldt::optional<bool>(retain_graph != 0), create_graph != 0,
                                       allow_unused != 0);
    for (int i = 0; i < n_in; i++) out[i] = grads[i].defined() ? ldt::H(grads[i]) : nullptr;
  }
  LDT_CATCH
}

}  // extern "C"
