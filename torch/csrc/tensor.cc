// tensor.cc: tensor lifetime, queries, creation (from Go memory, constants, random) and
// copies back to Go memory, dtype and device moves.
#include <ATen/ATen.h>

#include "internal.h"

namespace ldt {
optional<at::Generator> generator(ldt_generator g);  // core.cc
}

extern "C" {

void ldt_tensor_free(ldt_tensor t) { delete reinterpret_cast<at::Tensor *>(t); }

int ldt_tensor_defined(ldt_tensor t) { return t != nullptr && ldt::T(t).defined(); }

int ldt_tensor_dim(ldt_tensor t) { return t == nullptr ? 0 : static_cast<int>(ldt::T(t).dim()); }

void ldt_tensor_shape(ldt_tensor t, int64_t *out) {
  if (t == nullptr || out == nullptr) return;
  auto s = ldt::T(t).sizes();
  for (size_t i = 0; i < s.size(); i++) out[i] = s[i];
}

int64_t ldt_tensor_numel(ldt_tensor t) { return t == nullptr ? 0 : ldt::T(t).numel(); }

int ldt_tensor_dtype(ldt_tensor t) {
  return t == nullptr ? -1 : static_cast<int>(ldt::T(t).scalar_type());
}

void ldt_tensor_device(ldt_tensor t, int *type, int *index) {
  if (t == nullptr) return;
  auto d = ldt::T(t).device();
  *type = d.is_cuda() ? 1 : 0;
  *index = d.has_index() ? d.index() : 0;
}

int ldt_tensor_requires_grad(ldt_tensor t) { return t != nullptr && ldt::T(t).requires_grad(); }

int ldt_tensor_is_leaf(ldt_tensor t) { return t != nullptr && ldt::T(t).is_leaf(); }

ldt_error ldt_tensor_alias(ldt_tensor *out, ldt_tensor t) {
  LDT_TRY { ldt::set_out(out, ldt::T(t)); }
  LDT_CATCH
}

ldt_error ldt_from_data(ldt_tensor *out, const void *data, int dtype, const int64_t *shape, int ndim,
                        int dev_type, int dev_index) {
  LDT_TRY {
    auto sizes = ldt::ints(shape, ndim);
    auto dev = ldt::device(dev_type, dev_index);
    // For a GPU the data is staged in page-locked memory and copied without blocking the
    // host: the copy is queued on the current stream, ahead of the kernels that read it,
    // and libtorch's caching host allocator keeps the staging block until it completes.
    auto cpu = at::empty(sizes, at::TensorOptions().dtype(ldt::dtype(dtype)).pinned_memory(dev.is_cuda()));
    size_t bytes = static_cast<size_t>(cpu.numel()) * cpu.element_size();
    if (bytes > 0) {
      if (data == nullptr) throw std::invalid_argument("null data pointer");
      std::memcpy(cpu.data_ptr(), data, bytes);  // copy: a tensor never aliases Go memory
    }
    ldt::set_out(out, dev.is_cpu() ? cpu : cpu.to(dev, /*non_blocking=*/true));
  }
  LDT_CATCH
}

ldt_error ldt_copy_to(ldt_tensor t, void *dst, int dtype, int64_t numel) {
  LDT_TRY {
    auto src = ldt::T(t).detach().to(at::kCPU, ldt::dtype(dtype)).contiguous();
    if (src.numel() != numel)
      throw std::invalid_argument("destination holds " + std::to_string(numel) + " elements, tensor has " +
                                  std::to_string(src.numel()));
    size_t bytes = static_cast<size_t>(numel) * src.element_size();
    if (bytes > 0) {
      if (dst == nullptr) throw std::invalid_argument("null destination");
      std::memcpy(dst, src.data_ptr(), bytes);
    }
  }
  LDT_CATCH
}

ldt_error ldt_item(ldt_tensor t, double *out) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
    *out = ldt::T(t).item<double>();
  }
  LDT_CATCH
}

ldt_error ldt_full(ldt_tensor *out, const int64_t *shape, int ndim, double value, int dtype, int dev_type,
                   int dev_index) {
  LDT_TRY { ldt::set_out(out, at::full(ldt::ints(shape, ndim), value, ldt::options(dtype, dev_type, dev_index))); }
  LDT_CATCH
}

ldt_error ldt_eye(ldt_tensor *out, int64_t n, int dtype, int dev_type, int dev_index) {
  LDT_TRY { ldt::set_out(out, at::eye(n, ldt::options(dtype, dev_type, dev_index))); }
  LDT_CATCH
}

ldt_error ldt_arange(ldt_tensor *out, double start, double end, double step, int dtype, int dev_type,
                     int dev_index) {
  LDT_TRY { ldt::set_out(out, at::arange(start, end, step, ldt::options(dtype, dev_type, dev_index))); }
  LDT_CATCH
}

ldt_error ldt_rand(ldt_tensor *out, int kind, const int64_t *shape, int ndim, ldt_generator g, int dtype,
                   int dev_type, int dev_index) {
  LDT_TRY {
    auto sizes = ldt::ints(shape, ndim);
    auto cpu_opts = at::TensorOptions().dtype(ldt::dtype(dtype));
    at::Tensor r;
    switch (kind) {
      case 0: r = at::rand(sizes, ldt::generator(g), cpu_opts); break;
      case 1: r = at::randn(sizes, ldt::generator(g), cpu_opts); break;
      default: throw std::invalid_argument("unknown random kind " + std::to_string(kind));
    }
    auto dev = ldt::device(dev_type, dev_index);
    ldt::set_out(out, dev.is_cpu() ? r : r.to(dev));
  }
  LDT_CATCH
}

ldt_error ldt_randperm(ldt_tensor *out, int64_t n, ldt_generator g, int dev_type, int dev_index) {
  LDT_TRY {
    auto r = at::randperm(n, ldt::generator(g), at::TensorOptions().dtype(at::kLong));
    auto dev = ldt::device(dev_type, dev_index);
    ldt::set_out(out, dev.is_cpu() ? r : r.to(dev));
  }
  LDT_CATCH
}

ldt_error ldt_to(ldt_tensor *out, ldt_tensor t, int dtype, int dev_type, int dev_index) {
  LDT_TRY {
    auto &x = ldt::T(t);
    auto dt = dtype < 0 ? x.scalar_type() : ldt::dtype(dtype);
    auto dev = dev_type < 0 ? x.device() : ldt::device(dev_type, dev_index);
    ldt::set_out(out, x.to(dev, dt));
  }
  LDT_CATCH
}

ldt_error ldt_clone(ldt_tensor *out, ldt_tensor t) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).clone()); }
  LDT_CATCH
}

ldt_error ldt_detach(ldt_tensor *out, ldt_tensor t) {
  LDT_TRY { ldt::set_out(out, ldt::T(t).detach()); }
  LDT_CATCH
}

}  // extern "C"
