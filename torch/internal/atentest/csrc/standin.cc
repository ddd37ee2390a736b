// standin.cc: see standin.h. Every function catches everything: a failure is a NULL or
// negative result for the test to report, never an exception across the C boundary.
#include "standin.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>  // at::NoGradGuard: ATen.h stopped including it in 2.x

#include <atomic>

#include <dlfcn.h>

namespace {

std::atomic<int64_t> deleted{0};

void *make(at::Tensor t) {
  return new at::Tensor(std::move(t));
}

at::Tensor &ref(void *t) { return *static_cast<at::Tensor *>(t); }

struct Polymorphic {
  virtual ~Polymorphic() = default;
  virtual int f() const { return 1; }
};
Polymorphic polymorphic;
const void *not_a_tensor[2] = {&polymorphic, nullptr};
const void *zeroed[2] = {nullptr, nullptr};

}  // namespace

extern "C" {

void *standin_arange(int64_t n, int cuda) {
  try {
    if (cuda && !at::hasCUDA()) return nullptr;
    return make(at::arange(n, at::TensorOptions().dtype(at::kFloat).device(cuda ? at::kCUDA : at::kCPU)));
  } catch (...) {
    return nullptr;
  }
}

void *standin_undefined(void) {
  try {
    return make(at::Tensor());
  } catch (...) {
    return nullptr;
  }
}

void *standin_sparse(void) {
  try {
    return make(at::eye(2).to_sparse());
  } catch (...) {
    return nullptr;
  }
}

void standin_delete(void *t) {
  if (t == nullptr) return;
  delete static_cast<at::Tensor *>(t);
  deleted++;
}

int64_t standin_deleted(void) { return deleted.load(); }

int64_t standin_use_count(void *t) { return t == nullptr ? -1 : static_cast<int64_t>(ref(t).use_count()); }

int standin_set(void *t, int64_t i, double v) {
  try {
    at::NoGradGuard no_grad;
    ref(t).view({-1})[i].fill_(v);
    return 0;
  } catch (...) {
    return -1;
  }
}

double standin_get(void *t, int64_t i) {
  try {
    return ref(t).view({-1})[i].item<double>();
  } catch (...) {
    return -1e300;
  }
}

int standin_same_data(void *a, void *b) {
  try {
    return ref(a).data_ptr() == ref(b).data_ptr();
  } catch (...) {
    return -1;
  }
}

int standin_is_cuda(void *t) { return ref(t).is_cuda() ? 1 : 0; }

int standin_set_requires_grad(void *t, int on) {
  try {
    ref(t).set_requires_grad(on != 0);
    return 0;
  } catch (...) {
    return -1;
  }
}

int standin_requires_grad(void *t) { return ref(t).requires_grad() ? 1 : 0; }

void *standin_mul(void *t, double s) {
  try {
    return make(ref(t) * s);
  } catch (...) {
    return nullptr;
  }
}

int standin_backward_sum(void *t) {
  try {
    ref(t).sum().backward();
    return 0;
  } catch (...) {
    return -1;
  }
}

void *standin_grad(void *t) {
  try {
    const at::Tensor &g = ref(t).grad();
    return g.defined() ? make(g) : nullptr;
  } catch (...) {
    return nullptr;
  }
}

void *standin_zeroed(void) { return const_cast<void **>(zeroed); }

void *standin_not_a_tensor(void) { return const_cast<void **>(not_a_tensor); }

int standin_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL) != nullptr ? 0 : -1; }

}  // extern "C"
