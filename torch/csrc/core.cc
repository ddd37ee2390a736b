// core.cc: runtime facts (ABI and libtorch versions, threads, CUDA queries), seeding,
// CPU generators and the thread-local grad mode.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <ATen/core/Generator.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>
#include <c10/util/Backtrace.h>
#include <c10/util/Logging.h>
#include <torch/csrc/api/include/torch/version.h>

#ifdef LDT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include "internal.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <dlfcn.h>
#include <string>
#if defined(__GLIBC__)
#endif

struct ldt_generator_s {
  at::Generator gen;
};

namespace {
// libtorch 1.13 captures and symbolises a C++ backtrace whenever it constructs a c10::Error
// (about 2 ms per error on the CI machine). The shim drops backtraces anyway
// (what_without_backtrace), so from the moment it is loaded they are not fetched at all: the
// one process setting loading the shim makes, and one that only spares work the shim would
// throw away. ldt_set_cpp_backtraces(1) gives libtorch's fetcher back (a program's choice:
// the ldtorch command does so under LDTORCH_CPP_BACKTRACE); nothing here reads the
// environment.
std::atomic<bool> backtraces{false};

void set_backtraces(bool on) {
  if (on) {
    c10::SetStackTraceFetcher([] { return c10::get_backtrace(/*frames_to_skip=*/1); });
  } else {
    c10::SetStackTraceFetcher([] { return std::string(); });
  }
  backtraces.store(on);
}

const bool ldt_no_backtraces = [] {
  set_backtraces(false);
  return true;
}();
}  // namespace

#define LDT_STR2(x) #x
#define LDT_STR(x) LDT_STR2(x)

extern "C" {

int ldt_abi_version(void) { return LDT_ABI_VERSION; }

const char *ldt_torch_version(void) {
  return LDT_STR(TORCH_VERSION_MAJOR) "." LDT_STR(TORCH_VERSION_MINOR) "." LDT_STR(TORCH_VERSION_PATCH);
}

const char *ldt_build_info(void) {
  return "compiler=" __VERSION__
#ifdef LDT_WITH_CUDA
         " cuda=on"
#else
         " cuda=off"
#endif
#ifdef _OPENMP
         " openmp=on"
#else
         " openmp=off"
#endif
#ifdef LDT_BUILD_TAG
         " tag=" LDT_BUILD_TAG
#endif
      ;
}

void ldt_free_error(ldt_error e) { std::free(e); }

// OpenBLAS (pthreads build) keeps its own thread pool, sized by OPENBLAS_NUM_THREADS or the
// core count, whatever libtorch's intra-op setting is; its idle threads spin. Keep it in
// step with libtorch when the BLAS in use is OpenBLAS (found by symbol, so any BLAS links).
static void set_openblas_threads(int n) {
  using fn_t = void (*)(int);
  if (auto f = reinterpret_cast<fn_t>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) f(n);
}

const char *ldt_blas_core(void) {
  using fn_t = char *(*)();
  if (auto f = reinterpret_cast<fn_t>(dlsym(RTLD_DEFAULT, "openblas_get_corename"))) {
    const char *name = f();
    return name != nullptr ? name : "";
  }
  return "";
}

ldt_error ldt_set_num_threads(int n) {
  LDT_TRY {
    if (n < 1) throw std::invalid_argument("thread count must be at least 1, got " + std::to_string(n));
    if (n > 4096) throw std::invalid_argument("thread count must be at most 4096, got " + std::to_string(n));
    at::set_num_threads(n);
    set_openblas_threads(n);
  }
  LDT_CATCH
}

int ldt_mkldnn_state(void) {
  if (!at::hasMKLDNN()) return 0;
  return at::globalContext().userEnabledMkldnn() ? 2 : 1;
}

ldt_error ldt_set_mkldnn(int enabled) {
  LDT_TRY {
    if (enabled && !at::hasMKLDNN()) throw std::invalid_argument("this libtorch was built without oneDNN (mkldnn)");
    at::globalContext().setUserEnabledMkldnn(enabled != 0);
  }
  LDT_CATCH
}

ldt_error ldt_set_log_level(int level) {
  LDT_TRY {
    if (level < -1 || level > 3) throw std::invalid_argument("log level must be -1..3, got " + std::to_string(level));
    if (level == -1) {
      c10::initLogging();  // reads TORCH_CPP_LOG_LEVEL
    } else {
      FLAGS_caffe2_log_level = level;
      c10::UpdateLoggingLevelsFromFlags();  // glog's threshold too, where libtorch logs through glog
    }
  }
  LDT_CATCH
}

ldt_error ldt_set_cpp_backtraces(int on) {
  LDT_TRY { set_backtraces(on != 0); }
  LDT_CATCH
}

int ldt_cpp_backtraces(void) { return backtraces.load() ? 1 : 0; }

int ldt_get_num_threads(void) {
  try {
    return at::get_num_threads();
  } catch (...) {
    return -1;
  }
}

int ldt_cuda_is_available(void) {
  try {
    return at::detail::getCUDAHooks().hasCUDA() && at::detail::getCUDAHooks().getNumGPUs() > 0;
  } catch (...) {
    return 0;
  }
}

int ldt_cuda_device_count(void) {
  try {
    return at::detail::getCUDAHooks().hasCUDA() ? at::detail::getCUDAHooks().getNumGPUs() : 0;
  } catch (...) {
    return 0;
  }
}

ldt_error ldt_cuda_synchronize(int index) {
  LDT_TRY {
    if (!at::detail::getCUDAHooks().hasCUDA()) throw std::runtime_error("CUDA is not available");
    at::detail::getCUDAHooks().deviceSynchronize(index);
  }
  LDT_CATCH
}

ldt_error ldt_cuda_empty_cache(void) {
  LDT_TRY {
#ifdef LDT_WITH_CUDA
    // A CUDA build on a machine without a GPU would empty nothing and succeed: say, as
    // ldt_cuda_synchronize does, that there is no CUDA to act on.
    if (!ldt_cuda_is_available()) throw std::runtime_error("CUDA is not available");
    c10::cuda::CUDACachingAllocator::emptyCache();
#else
    throw std::runtime_error("CUDA is not available: the shim was built without CUDA support");
#endif
  }
  LDT_CATCH
}

ldt_error ldt_cuda_device_properties(int index, char **name, int64_t *total_memory, int *major, int *minor) {
  LDT_TRY {
    if (name == nullptr || total_memory == nullptr || major == nullptr || minor == nullptr)
      throw std::invalid_argument("null out-parameter");
#ifdef LDT_WITH_CUDA
    if (!ldt_cuda_is_available()) throw std::runtime_error("CUDA is not available");
    const int n = ldt_cuda_device_count();
    if (index < 0 || index >= n)
      throw std::out_of_range("CUDA device " + std::to_string(index) + " does not exist (" + std::to_string(n) +
                              " device(s))");
    const cudaDeviceProp *p = at::cuda::getDeviceProperties(index);
    *name = strdup(p->name);
    if (*name == nullptr) throw std::bad_alloc();
    *total_memory = static_cast<int64_t>(p->totalGlobalMem);
    *major = p->major;
    *minor = p->minor;
#else
    (void)index;
    throw std::runtime_error("CUDA is not available: the shim was built without CUDA support");
#endif
  }
  LDT_CATCH
}

// libtorch's own defaults differ by backend (cuBLAS TF32 off since 1.12, cuDNN TF32 on):
// both are set together so that one switch decides.
ldt_error ldt_set_allow_tf32(int allow) {
  LDT_TRY {
    at::globalContext().setAllowTF32CuBLAS(allow != 0);
    at::globalContext().setAllowTF32CuDNN(allow != 0);
  }
  LDT_CATCH
}

int ldt_get_allow_tf32(void) {
  try {
    return at::globalContext().allowTF32CuBLAS() || at::globalContext().allowTF32CuDNN();
  } catch (...) {
    return -1;
  }
}

ldt_error ldt_manual_seed(uint64_t seed) {
  LDT_TRY { at::manual_seed(seed); }
  LDT_CATCH
}

ldt_error ldt_generator_new(ldt_generator *out, uint64_t seed) {
  LDT_TRY {
    if (out == nullptr) throw std::invalid_argument("null output pointer");
    *out = new ldt_generator_s{at::make_generator<at::CPUGeneratorImpl>(seed)};
  }
  LDT_CATCH
}

void ldt_generator_free(ldt_generator g) { delete g; }

ldt_error ldt_generator_get_state(ldt_generator g, ldt_tensor *out) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null generator");
    std::lock_guard<std::mutex> lock(g->gen.mutex());
    ldt::set_out(out, g->gen.get_state());
  }
  LDT_CATCH
}

ldt_error ldt_generator_set_state(ldt_generator g, ldt_tensor state) {
  LDT_TRY {
    if (g == nullptr) throw std::invalid_argument("null generator");
    std::lock_guard<std::mutex> lock(g->gen.mutex());
    g->gen.set_state(ldt::T(state));
  }
  LDT_CATCH
}

int ldt_set_grad_enabled(int enabled) {
  bool prev = c10::GradMode::is_enabled();
  c10::GradMode::set_enabled(enabled != 0);
  return prev ? 1 : 0;
}

int ldt_is_grad_enabled(void) { return c10::GradMode::is_enabled() ? 1 : 0; }

}  // extern "C"

// Generators are needed by tensor.cc too.
namespace ldt {
ldt::optional<at::Generator> generator(ldt_generator g) {
  if (g == nullptr) return ldt::nullopt;
  return g->gen;
}
}  // namespace ldt
