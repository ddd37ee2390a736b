// internal.h: helpers shared by the shim's translation units: the exception barrier,
// handle conversions and device/dtype decoding. Never included by Go.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/Tensor.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "compat.h"
#include "shim.h"

namespace torch {
namespace jit {
struct Graph;
}
}  // namespace torch

namespace ldt {

inline ldt_error make_error(const char *msg) {
  size_t n = std::strlen(msg);
  char *out = static_cast<char *>(std::malloc(n + 1));
  if (out == nullptr) return nullptr;  // out of memory: nothing better to report
  std::memcpy(out, msg, n + 1);
  return out;
}

inline at::Tensor &T(ldt_tensor h) {
  if (h == nullptr) throw std::invalid_argument("null tensor handle");
  return *reinterpret_cast<at::Tensor *>(h);
}

inline ldt_tensor H(at::Tensor t) { return reinterpret_cast<ldt_tensor>(new at::Tensor(std::move(t))); }

inline optional<at::Tensor> opt(ldt_tensor h) {
  if (h == nullptr) return ldt::nullopt;
  return T(h);
}

inline std::vector<at::Tensor> list(const ldt_tensor *p, int n) {
  if (n < 0) throw std::invalid_argument("negative list length");
  if (n > 0 && p == nullptr) throw std::invalid_argument("null tensor list");
  std::vector<at::Tensor> v;
  v.reserve(n);
  for (int i = 0; i < n; i++) v.push_back(T(p[i]));
  return v;
}

inline at::IntArrayRef ints(const int64_t *p, int n) {
  if (n < 0) throw std::invalid_argument("negative list length");
  if (n > 0 && p == nullptr) throw std::invalid_argument("null int list");
  return at::IntArrayRef(p, static_cast<size_t>(n));
}

inline at::ScalarType dtype(int d) {
  switch (d) {
    case 0: return at::kByte;
    case 1: return at::kChar;
    case 2: return at::kShort;
    case 3: return at::kInt;
    case 4: return at::kLong;
    case 5: return at::kHalf;
    case 6: return at::kFloat;
    case 7: return at::kDouble;
    case 11: return at::kBool;
    case 15: return at::kBFloat16;
    default: throw std::invalid_argument("unsupported dtype code " + std::to_string(d));
  }
}

inline at::Device device(int type, int index) {
  switch (type) {
    case 0: return at::Device(at::kCPU);
    case 1: {
      // Checked here so that a CPU-only libtorch (or a machine without a GPU) gives a short,
      // clear error instead of the dispatcher's page-long "Could not run ... 'CUDA' backend".
      if (index < 0) index = 0;
      const auto &hooks = at::detail::getCUDAHooks();
      if (!hooks.hasCUDA())
        throw std::invalid_argument("CUDA is not available (libtorch without CUDA support, or no visible GPU)");
      int n = hooks.getNumGPUs();
      if (index >= n)
        throw std::invalid_argument("CUDA device " + std::to_string(index) + " does not exist (" +
                                    std::to_string(n) + " visible)");
      return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
    }
    default: throw std::invalid_argument("unsupported device type " + std::to_string(type));
  }
}

inline at::TensorOptions options(int dt, int dev_type, int dev_index) {
  return at::TensorOptions().dtype(dtype(dt)).device(device(dev_type, dev_index));
}

inline void set_out(ldt_tensor *out, at::Tensor t) {
  if (out == nullptr) throw std::invalid_argument("null output pointer");
  *out = H(std::move(t));
}

// check_classes checks class indices y (int64) against 0..classes−1 (classes < 0: only
// ≥ 0) when y is on a GPU: the CUDA kernels of one_hot and nll_loss check them with
// device-side asserts, which leave the CUDA context unusable for the rest of the process.
// One read of (min, max) back to the host; on the CPU libtorch's own checks raise errors.
inline void check_classes(const at::Tensor &y, int64_t classes, const char *op) {
  if (!y.is_cuda() || y.numel() == 0) return;
  auto mm = at::aminmax(y);
  auto host = at::stack({std::get<0>(mm), std::get<1>(mm)}).cpu();
  int64_t lo = host[0].item<int64_t>(), hi = host[1].item<int64_t>();
  if (lo < 0 || (classes >= 0 && hi >= classes))
    throw std::invalid_argument(std::string(op) + ": class index out of range (min " + std::to_string(lo) + ", max " +
                                std::to_string(hi) + ", classes " + std::to_string(classes) + ")");
}

// rewrite_own_kernels inlines a TorchScript method's graph and moves its convolutions and
// max-pools onto the shim's own kernels (script_kernels.cc); it returns how many operators
// it replaced.
int rewrite_own_kernels(const std::shared_ptr<torch::jit::Graph> &g);

// local_response_norm is torch.nn.functional.local_response_norm's composite (nn.cc), where
// the shim's own kernels (kernels/kernels.h) do not apply.
at::Tensor local_response_norm(const at::Tensor &x, int64_t size, double alpha, double beta, double k);

}  // namespace ldt

// The exception barrier: every exported function that can fail wraps its body in
// LDT_TRY { ... } LDT_CATCH. c10::Error keeps libtorch's message without the backtrace.
// tests (TestEveryExportIsGuarded) check that each `ldt_error ldt_...` definition uses it.
#define LDT_TRY try
#define LDT_CATCH                                                          \
  catch (const c10::Error &e) {                                           \
    return ldt::make_error(e.what_without_backtrace());                   \
  }                                                                       \
  catch (const std::exception &e) {                                       \
    return ldt::make_error(e.what());                                     \
  }                                                                       \
  catch (...) {                                                           \
    return ldt::make_error("unknown C++ exception");                      \
  }                                                                       \
  return nullptr;
